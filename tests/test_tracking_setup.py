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
    arith = next(line for line in text.splitlines() if line.startswith("- [arith"))
    assert "2 runs (rlme, rlvr)" in arith and "heldout/arith/pass_at_1" in arith
    assert ids[("rlvr", 0)] in arith and ids[("rlme", 0)] in arith
    assert ids[("rlvrr", 1)] in text and "heldout/facts/coverage" in text
    client = mlflow.MlflowClient()
    exp = client.get_experiment_by_name("compare")
    assert unquote(exp.tags["mlflow.note.content"]) == text
    assert unquote(client.get_run(parent).data.tags["mlflow.note.content"]) == text
