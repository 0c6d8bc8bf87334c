"""Several stages opening a fresh MLflow store at once (two trainings, a Prefect work pool)."""

import os
import subprocess
import sys

from core.params import ROOT


def test_concurrent_first_setup_creates_the_store_once(tmp_path):
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
           "MLFLOW_EXPERIMENT_NAME": "race", "MLFLOW_DISABLE_TELEMETRY": "true"}
    code = ("import mlflow; from tasks import tracking; tracking.setup(); "
            "print(mlflow.get_experiment_by_name('race').experiment_id)")
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(4)]
    results = [(p.wait(timeout=300), p.stdout.read().strip(), p.stderr.read()) for p in procs]
    for rc, _, err in results:
        assert rc == 0, err[-2000:]
    assert len({out for _, out, _ in results}) == 1  # one experiment, seen by all four


def test_saved_comparison_links_the_newest_run_of_every_method_and_seed(tmp_path, monkeypatch):
    """The pipeline's saved comparison: per task, one MLflow chart link with the newest training
    run of each (method, seed) overlaid, in the experiment's description and the parent's note."""
    from urllib.parse import unquote

    import mlflow

    from tasks import tracking

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "compare")
    tracking.setup()
    ids = {}
    for method, task, seed in [("rlvr", "arith", 0), ("rlvr", "arith", 0), ("rlme", "arith", 0),
                               ("rlvrr", "facts", 1)]:
        with mlflow.start_run(tags={"stage": "train", "reward_method": method, "task": task,
                                    "seed": str(seed)}) as run:
            ids[(method, seed)] = run.info.run_id  # the second rlvr run replaces the first
    with mlflow.start_run(tags={"stage": "evaluate", "reward_method": "base", "task": "arith"}):
        pass
    parent = tracking.start_parent("pipeline", {"stage": "pipeline"})
    text = unquote(tracking.save_comparison(parent))
    arith = next(line for line in text.splitlines() if line.startswith("- [default study, arith"))
    assert "2 runs (rlme, rlvr)" in arith and "heldout/arith/pass_at_1" in arith
    assert ids[("rlvr", 0)] in arith and ids[("rlme", 0)] in arith
    assert ids[("rlvrr", 1)] in text and "heldout/facts/coverage" in text
    client = mlflow.MlflowClient()
    exp = client.get_experiment_by_name("compare")
    assert unquote(exp.tags["mlflow.note.content"]) == text
    assert unquote(client.get_run(parent).data.tags["mlflow.note.content"]) == text


def _store(tmp_path, monkeypatch, name: str):
    import mlflow

    from tasks import tracking

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", name)
    tracking.setup()
    return mlflow, tracking


def test_a_preset_study_run_never_replaces_the_default_run_in_the_comparison(tmp_path, monkeypatch):
    """`make studies` trains rlme seed 0 again on another base (preset hint_copier): the default
    study's chart keeps its own rlme run, and the preset's run gets a chart of its own."""
    from urllib.parse import unquote

    mlflow, tracking = _store(tmp_path, monkeypatch, "studies")
    ids = {}
    for preset in ("default", "hint_copier"):  # the preset's run is the newer one
        with tracking.run("rlme-seed0", {"stage": "train", "reward_method": "rlme", "task": "arith",
                                         "seed": "0", "preset": preset}) as run:
            ids[preset] = run.info.run_id
    text = unquote(tracking.save_comparison())
    lines = text.splitlines()
    default = next(line for line in lines if line.startswith("- [default study, arith"))
    other = next(line for line in lines if line.startswith("- [hint_copier study, arith"))
    assert ids["default"] in default and ids["hint_copier"] not in default
    assert ids["hint_copier"] in other and ids["default"] not in other
    assert lines.index(default) < lines.index(other)  # the default study first
    # The runs table tells them apart by name too.
    client = mlflow.MlflowClient()
    assert client.get_run(ids["default"]).info.run_name == "rlme-seed0"
    assert client.get_run(ids["hint_copier"]).info.run_name == "hint_copier/rlme-seed0"


def test_the_ui_link_finds_the_experiment_by_name_not_id(tmp_path, monkeypatch):
    """Another experiment created first takes id 1: the link must still open the lab's."""
    import subprocess
    import sys

    mlflow, tracking = _store(tmp_path, monkeypatch, "first")  # takes the first id
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "lab")
    url = tracking.experiment_url()
    lab = mlflow.get_experiment_by_name("lab").experiment_id
    first = mlflow.get_experiment_by_name("first").experiment_id
    assert lab != first
    assert url == f"http://127.0.0.1:5000/#/experiments/{lab}?workflowType=machine_learning"
    # `make mlflow-ui` prints it through the module's CLI.
    out = subprocess.run([sys.executable, "-m", "tasks.tracking", "--url"], cwd=ROOT, text=True,
                         capture_output=True, env={**os.environ}, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == url


def test_training_progress_reads_the_running_runs_step_and_total(tmp_path, monkeypatch):
    """The pipeline's progress line: a running training's newest logged step of its max_steps
    (transformers logs `max_steps` as a param), per (study, method, seed)."""
    mlflow, tracking = _store(tmp_path, monkeypatch, "progress")
    assert tracking.training_progress("rlme", 0) is None  # nothing running
    with tracking.run("rlme-seed0", {"stage": "train", "reward_method": "rlme", "seed": "0",
                                     "preset": "default"}):
        mlflow.log_param("max_steps", 150)
        assert tracking.training_progress("rlme", 0) is None  # no step logged yet
        for step in (5, 10, 40):
            mlflow.log_metrics({"reward": 0.1 * step, "loss": 0.0}, step=step)
        assert tracking.training_progress("rlme", 0) == (40, 150)
        assert tracking.training_progress("rlme", 0, "hint_copier") is None  # another study
        assert tracking.training_progress("rlme", 1) is None
    assert tracking.training_progress("rlme", 0) is None  # finished: no longer running
