"""Orchestration as users run it, on the micro preset in a temporary git clone of the working tree:
`dvc repro` end to end, MLflow run contents, selective re-runs, and the Prefect pipeline flow.
`make_clone` is shared with test_resume_kill.py (kill -9 of a training stage, then resume)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from core.params import ROOT

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
COPY_IGNORE = shutil.ignore_patterns(".venv", ".git", "data", "mlflow", "reports", ".prefect", ".studies",
                                     "__pycache__", ".pytest_cache", "*.egg-info")


def sh(cmd, cwd, env=None, timeout=900):
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                       shell=isinstance(cmd, str))
    assert r.returncode == 0, f"{cmd} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def make_clone(dest: Path, grpo: dict | None = None, top: dict | None = None) -> dict:
    """The working tree copied into a fresh git repo at `dest`, with `preset: ci` set in its
    params.yaml, `grpo` merged over `presets.ci.grpo` and `top` over the top-level keys (default:
    one seed, `seeds: [0]`, the seven methods of `pipeline.quick`, one further draw of the base);
    returns the environment
    to run it in."""
    shutil.copytree(ROOT, dest, ignore=COPY_IGNORE)
    (dest / "mlflow").mkdir()
    (dest / "data").mkdir(exist_ok=True)
    (dest / "data" / ".gitignore").write_text((ROOT / "data" / ".gitignore").read_text())
    # prepare's dependency on the local-data folder (dvc.yaml), which git keeps by its README
    shutil.copytree(ROOT / "data" / "external", dest / "data" / "external")
    params = (dest / "params.yaml").read_text().replace("\npreset: null\n", "\npreset: ci\n")
    assert "\npreset: ci\n" in params, "params.yaml no longer has a top-level `preset: null`"
    raw = yaml.safe_load(params)
    raw["presets"]["ci"]["grpo"].update(grpo or {})
    # One seed of the seven methods (`pipeline.quick`): the study's other arms are variants of
    # the same families, whose code paths these seven already run.
    # One further draw of the base (its stage runs; the study's four would lengthen CI).
    raw.update({"seeds": [0], "methods": raw["pipeline"]["quick"]["methods"], "base_draws": [1],
                **(top or {})})
    params = yaml.safe_dump(raw, sort_keys=False)
    (dest / "params.yaml").write_text(params)
    (dest / "dvc.lock").unlink(missing_ok=True)
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", DVC_NO_ANALYTICS="1",
               MLFLOW_TRACKING_URI=f"sqlite:///{dest / 'mlflow' / 'mlflow.db'}",
               GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t",
               # The temporary Prefect server's sqlite store is written by every stage task of the
               # 7-method pipeline; its 10 s default lock wait gave "database is locked" on 2 cores.
               PREFECT_SERVER_ANALYTICS_ENABLED="false",  # see flows/__init__.py
               PREFECT_SERVER_DATABASE_TIMEOUT="60",
               PREFECT_SERVER_DATABASE_CONNECTION_TIMEOUT="60")
    env.pop("LAB_PRESET", None)
    sh("git init -q && git add -A && git commit -qm init", dest, env)
    # The stages must import the clone's code, not the editable install's: otherwise they would
    # write into the working tree's data/.
    root = sh([sys.executable, "-c", "from core.params import ROOT; print(ROOT)"], dest, env)
    assert Path(root.strip()) == dest.resolve(), root
    return env


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """`make_clone` with every stage reproduced."""
    d = tmp_path_factory.mktemp("clone") / "repo"
    env = make_clone(d)
    sh([str(BIN / "dvc"), "repro"], d, env)
    return d, env


def test_dvc_repro_end_to_end(clone):
    d, env = clone
    # The base's further draw (`base_draws: [1]`, make_clone) is evaluated by its own stage.
    for name in ("base", "base/draw1", "rlvr/seed0", "random/seed0"):
        m = json.loads((d / "data" / "eval" / name / "metrics.json").read_text())
        assert 0.0 <= m["arith/pass@1"] <= 1.0 and m["arith/n"] == 8
    assert (d / "data" / "checkpoints" / "rlvr" / "seed0" / "final" / "config.json").exists()
    assert (d / "reports" / "index.html").exists() and (d / "reports" / "summary.md").exists()
    assert "| rlvr |" in (d / "reports" / "summary.md").read_text()
    status = sh([str(BIN / "dvc"), "status"], d, env)
    assert "up to date" in status.lower() or status.strip() == "", status
    metrics = sh([str(BIN / "dvc"), "metrics", "show", "--json"], d, env)
    assert "arith/pass@1" in metrics
    sh([str(BIN / "dvc"), "metrics", "diff"], d, env)
    sh([str(BIN / "dvc"), "plots", "show", "-o", "plots_out"], d, env)
    page = (d / "plots_out" / "index.html").read_text()
    assert "train.json" in page and "heldout.json" in page


def test_a_new_local_data_file_makes_prepare_stale(clone):
    """docs/own_data.md: prepare depends on data/external/, so a file dropped or replaced there is
    what the next `dvc repro` runs first; taking it away leaves nothing stale."""
    d, env = clone
    dropped = d / "data" / "external" / "gsm8k_test.jsonl"
    dropped.write_text('{"question": "1+1?", "answer": "#### 2"}\n')
    try:
        status = json.loads(sh([str(BIN / "dvc"), "status", "--json"], d, env))
        assert set(status) == {"prepare"}, status
        assert {"changed deps": {"data/external": "modified"}} in status["prepare"], status
    finally:
        dropped.unlink()
    assert json.loads(sh([str(BIN / "dvc"), "status", "--json"], d, env)) == {}


def test_mlflow_runs_have_tags_curves_and_weights(clone):
    from mlflow.tracking import MlflowClient

    d, _ = clone
    client = MlflowClient(tracking_uri=f"sqlite:///{d / 'mlflow' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("nolabel-rl-lab")
    runs = client.search_runs([exp.experiment_id], "tags.stage = 'train'")
    by_method = {r.data.tags["reward_method"]: r for r in runs}
    assert set(by_method) == set(yaml.safe_load((d / "params.yaml").read_text())["methods"])
    run = by_method["rlvr"]
    assert run.data.tags["reward_version"] == "1" and run.data.tags["git_commit"] != "unknown"
    assert len(run.data.tags["data_hash"]) == 16
    assert run.data.params["lab.grpo.max_steps"] == "2"
    history = client.get_metric_history(run.info.run_id, "reward")
    assert [m.step for m in history] == [1, 2]
    assert client.get_metric_history(run.info.run_id, "heldout/arith/pass_at_1")  # MLflow names cannot hold "@"
    assert "test/arith/pass_at_1" in run.data.metrics  # the evaluate stage logged into the same run
    arts = [a.path for a in client.list_artifacts(run.info.run_id, "final_model")]
    assert "final_model/model.safetensors" in arts
    # The report stage saved the comparison: one chart link per task, every train run on it.
    note = exp.tags.get("mlflow.note.content", "")
    assert "heldout%2Farith%2Fpass_at_1" in note and by_method["rlme"].info.run_id in note


@pytest.mark.long  # re-evaluates every method twice: make test-slow, not CI
def test_changing_the_test_budget_reevaluates_without_retraining(clone):
    d, env = clone
    text = (d / "params.yaml").read_text()
    raw = yaml.safe_load(text)
    # The top-level `eval.k` is overridden by the ci preset: editing it changes nothing that runs,
    # and only `configure` notices.
    raw["eval"]["k"] = 5
    (d / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    try:
        assert _ran(sh([str(BIN / "dvc"), "repro"], d, env)) == {"configure"}
        raw["eval"]["benchmarks"] = ["arith"]  # not overridden by the preset: the tests change
        (d / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
        out = sh([str(BIN / "dvc"), "repro"], d, env)
        assert _ran(out) == {"configure", "evaluate_base", "report",
                             *(f"evaluate@{m}-0" for m in raw["methods"])}, out
        assert "Stage 'train@rlvr-0' didn't change" in out
    finally:
        sh("git checkout -- params.yaml", d, env)
        sh([str(BIN / "dvc"), "repro"], d, env)  # back to the committed params for later tests


def test_prefect_pipeline_flow_runs_stages_in_order(clone):
    """The Prefect `pipeline` flow (ephemeral API) drives the same stages through DVC."""
    d, env = clone
    times = d / "times.json"
    code = ("from flows.pipeline import pipeline; import json; "
            f"print('RESULT', json.dumps(sorted(pipeline(force=False, extend=False, "
            f"times_file='{times}').keys())))")
    out = sh([sys.executable, "-c", code], d, dict(env, PREFECT_HOME=str(d / ".prefect")))
    stages = json.loads(out.split("RESULT", 1)[1].strip().splitlines()[0])
    # Every stage's wall time and what it did are recorded (here: all up to date).
    recorded = json.loads(times.read_text())
    assert sorted(recorded["stages"]) == stages and recorded["wall_seconds"] > 0
    assert {v["action"] for v in recorded["stages"].values()} == {"skip"}
    assert all(v["seconds"] >= 0 for v in recorded["stages"].values())
    methods = yaml.safe_load((d / "params.yaml").read_text())["methods"]
    draws = [f"evaluate_base_draw@{x}" for x in yaml.safe_load((d / "params.yaml").read_text())["base_draws"]]
    assert stages == sorted(["prepare", "synthesize", "build_base", "configure", "evaluate_base", "premises",
                             *draws, "report", *(f"{s}@{m}-0" for m in methods for s in ("train", "evaluate"))])
    # The invocation is a finished MLflow parent run tagged with its Prefect flow run; the
    # experiment opens on the runs table (not MLflow 3's GenAI pages).
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{d / 'mlflow' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("nolabel-rl-lab")
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    (parent,) = client.search_runs([exp.experiment_id], "tags.stage = 'pipeline'")
    assert parent.info.status == "FINISHED" and len(parent.data.tags["prefect_flow_run_id"]) == 36
    assert parent.data.metrics["stages_up_to_date"] == len(stages)


def test_a_study_resumed_on_another_disk_keeps_its_recorded_runs(clone, tmp_path):
    """The workspace on a fresh disk: its records (dvc.lock, the `cache: false` files) but no DVC
    cache and no checkpoints. With `keep_recorded` (every `--study` call) the pipeline keeps each
    run whose record stands instead of training it again; the rest of the DAG is rebuilt."""
    d, env = clone
    moved = tmp_path / "moved"
    shutil.copytree(d, moved, ignore=shutil.ignore_patterns("cache", "mlflow", ".prefect", "final",
                                                            "best", "checkpoint-*"))
    (moved / "mlflow").mkdir()
    lock = (moved / "dvc.lock").read_text()
    times = moved / "times.json"
    code = ("from flows.pipeline import pipeline; "
            f"pipeline(extend=False, keep_recorded=True, times_file='{times}')")
    sh([sys.executable, "-c", code], moved, dict(env, PREFECT_HOME=str(moved / ".prefect"),
                                                 MLFLOW_TRACKING_URI=f"sqlite:///{moved / 'mlflow' / 'm.db'}"))
    actions = {s: v["action"] for s, v in json.loads(times.read_text())["stages"].items()}
    # The trainings and their evaluations (the base's draws are the base's evaluation, rebuilt).
    runs = {s: a for s, a in actions.items() if "@" in s and not s.startswith("evaluate_base")}
    assert runs and set(runs.values()) == {"recorded"}, actions
    assert not list((moved / "data" / "checkpoints").glob("*/seed*/final"))  # nothing trained
    assert json.loads(times.read_text())["finished"] is True
    new_lock = yaml.safe_load((moved / "dvc.lock").read_text())["stages"]
    assert {s: new_lock[s] for s in runs} == {s: yaml.safe_load(lock)["stages"][s] for s in runs}


def test_prefect_failing_stage_fails_the_flow_and_stops_downstream(clone, tmp_path):
    d, env = clone
    broken = tmp_path / "broken"
    shutil.copytree(d, broken, ignore=shutil.ignore_patterns("data", "mlflow", "reports"))
    shutil.copytree(d / "data" / "external", broken / "data" / "external")
    (broken / "mlflow").mkdir()
    flows_prepare = broken / "flows" / "prepare.py"
    flows_prepare.write_text(flows_prepare.read_text().replace(
        "    counts = generate_world(params.world, out_dir)",
        "    raise RuntimeError('disk on fire')"))
    code = ("from flows.pipeline import pipeline\n"
            "from prefect.states import State\n"
            "s = pipeline(retries=1, extend=False, return_state=True)\n"
            "print('STATE', s.type.value, s.message)\n")
    e = dict(env, PREFECT_HOME=str(broken / ".prefect"),
             MLFLOW_TRACKING_URI=f"sqlite:///{broken / 'mlflow' / 'mlflow.db'}")
    r = subprocess.run([sys.executable, "-c", code], cwd=broken, env=e, capture_output=True,
                       text=True, timeout=600)
    log = r.stdout + r.stderr
    assert "STATE FAILED" in log, log[-3000:]
    assert "stage prepare failed" in log and "disk on fire" in log
    assert log.count("prepare: python -m flows.prepare") >= 2  # the first try and one retry
    assert not (broken / "data" / "base_model").exists()

    # A user error (exit 2: fix your input) is not retried, and the CLI says in one line which
    # stage failed and why.
    flows_prepare.write_text(flows_prepare.read_text().replace(
        "    raise RuntimeError('disk on fire')",
        "    from core.io import DataError\n"
        "    raise DataError('data/raw.jsonl line 3: no question field')"))
    r = subprocess.run([sys.executable, "-m", "flows.pipeline", "--stages", "prepare"], cwd=broken,
                       env=e, capture_output=True, text=True, timeout=600)
    log = r.stdout + r.stderr
    assert r.returncode == 2, log[-3000:]
    # One `error:` line (Prefect's temporary server may log its shutdown after it).
    assert [line for line in r.stderr.splitlines() if line.startswith("error:")] == [
        "error: stage prepare failed (exit 2): data/raw.jsonl line 3: no question field"], log[-3000:]
    assert log.count("prepare: python -m flows.prepare") == 1, log[-3000:]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(url: str, timeout: float = 150.0) -> None:
    import time
    import urllib.request

    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=3) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(2)
    raise TimeoutError(f"{url} not healthy after {timeout}s")


def test_prefect_server_deployment_run(clone, tmp_path):
    """As a user: start the local server, register deployments and a worker with the project's
    scripts, then `prefect deployment run 'pipeline/on-demand' --watch` finishes Completed."""
    d, env = clone
    port = _free_port()
    e = dict(env, PREFECT_HOME=str(tmp_path / "prefect-home"), PREFECT_PORT=str(port),
             PREFECT_API_URL=f"http://127.0.0.1:{port}/api",
             PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS="5")
    logs = tmp_path / "logs"
    logs.mkdir()
    server = subprocess.Popen([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1",
                               "--port", str(port)], cwd=d, env=e,
                              stdout=(logs / "server.log").open("w"), stderr=subprocess.STDOUT)
    worker = None
    try:
        _wait_healthy(f"http://127.0.0.1:{port}/api/health")
        worker = subprocess.Popen(["bash", str(d / "scripts" / "prefect_deploy.sh")], cwd=d, env=e,
                                  stdout=(logs / "worker.log").open("w"), stderr=subprocess.STDOUT)
        out = ""
        for _ in range(60):  # the script registers deployments before starting the worker
            r = subprocess.run([str(BIN / "prefect"), "deployment", "ls"], cwd=d, env=e,
                               capture_output=True, text=True, timeout=60)
            out = r.stdout
            if all(name in out for name in ("pipeline/nightly", "pipeline/on-demand", "train/train",
                                            "study/preset")):
                break
            import time
            time.sleep(3)
        assert "pipeline/nightly" in out, out + (logs / "worker.log").read_text()[-2000:]
        assert "study/preset" in out, out  # a preset's own study (flows.pipeline.study)
        # The pilot only (the claims' plan would add seeds and rewrite the clone's params.yaml,
        # which the tests after this one read): the deployment machinery is what is tested here.
        run = sh([str(BIN / "prefect"), "deployment", "run", "pipeline/on-demand", "--param",
                  "extend=false", "--watch", "--watch-timeout", "600"], d, e, timeout=700)
        assert "Completed" in run, run + (logs / "worker.log").read_text()[-3000:]
        schedule = sh([str(BIN / "prefect"), "deployment", "inspect", "pipeline/nightly"], d, e)
        assert "0 2 * * *" in schedule
        # A schedule must fire, not just exist: with SQLAlchemy 2.1 under Prefect 3.8 the server's
        # scheduler service raised "Can't evaluate bulk DML statement" every loop and never
        # created a run (pyproject.toml bounds it). A 10 s interval on the on-demand deployment:
        # the scheduler (loop shortened for the test) creates runs, the worker runs one to the end.
        # Its scheduled runs are the pilot only, like the run above: a whole study's runs would
        # train the seeds its plan adds, minutes each, and rewrite params.yaml's extra_runs.
        _set_deployment_parameters(d, e, "pipeline/on-demand", {"extend": False})
        sh([str(BIN / "prefect"), "deployment", "schedule", "create", "pipeline/on-demand",
            "--interval", "10"], d, e)
        states: list[str] = []
        for _ in range(60):
            states = _auto_scheduled_states(d, e)
            if "COMPLETED" in states:
                break
            import time
            time.sleep(5)
        server_log = (logs / "server.log").read_text()
        assert "Can't evaluate bulk DML" not in server_log
        assert "COMPLETED" in states, f"{states}\n{server_log[-2000:]}"
    finally:
        for p in (worker, server):
            if p is not None:
                p.terminate()
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
        # Should a run still write params.yaml (a whole study's plan writes extra_runs), the tests
        # after this one must not inherit it.
        sh("git checkout -- params.yaml", d, env)


def _set_deployment_parameters(d: Path, env: dict, name: str, parameters: dict) -> None:
    """The default parameters of a registered deployment (what its scheduled runs get)."""
    code = ("import asyncio, json\n"
            "from prefect.client.orchestration import get_client\n"
            "from prefect.client.schemas.actions import DeploymentUpdate\n"
            "async def main():\n"
            "    async with get_client() as c:\n"
            f"        dep = await c.read_deployment_by_name({name!r})\n"
            "        await c.update_deployment(dep.id, DeploymentUpdate(parameters=json.loads("
            f"{json.dumps(parameters)!r})))\n"
            "asyncio.run(main())\n")
    sh([sys.executable, "-c", code], d, env)


def _auto_scheduled_states(d: Path, env: dict) -> list[str]:
    """State types of the flow runs Prefect's scheduler created (tag `auto-scheduled`)."""
    code = ("import asyncio\n"
            "from prefect.client.orchestration import get_client\n"
            "async def main():\n"
            "    async with get_client() as c:\n"
            "        for r in await c.read_flow_runs():\n"
            "            if 'auto-scheduled' in r.tags:\n"
            "                print(r.state_type.value if r.state_type else 'NONE')\n"
            "asyncio.run(main())\n")
    return sh([sys.executable, "-c", code], d, env).split()


def _ran(out: str) -> set[str]:
    return {line.split("'")[1] for line in out.splitlines() if line.startswith("Running stage")}


def _stale(d: Path, env: dict) -> set[str]:
    """Re-derive every run's settings and code digest (`dvc repro -s configure`, seconds), then the
    stages whose inputs changed: what the next `dvc repro` would run first (`dvc status`)."""
    sh([str(BIN / "dvc"), "repro", "-s", "configure"], d, env)
    status = json.loads(sh([str(BIN / "dvc"), "status", "--json"], d, env) or "{}")
    return set(status)


def test_an_rlme_edit_reruns_only_the_rlme_family(clone):
    """Per-method invalidation: an RLME setting, then RLME's reward code, make only the RLME
    stages stale; a shared module makes every method that imports it stale. Read from `dvc
    status` after `configure` re-derives the digests: re-running the stages themselves (DVC's
    own behaviour, which test_changing_the_test_budget exercises) took 14 minutes of CI."""
    d, env = clone
    methods = yaml.safe_load((d / "params.yaml").read_text())["methods"]
    try:
        raw = yaml.safe_load((d / "params.yaml").read_text())
        raw["reward"]["rlme"]["template"] = raw["reward"]["rlme"]["template"].replace(
            "Question:", "Q:")
        (d / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
        # RLME's template is both its reward prompt and its self-evaluation probe's.
        assert _stale(d, env) == {"train@rlme-0", "evaluate@rlme-0"}
        sh("git checkout -- params.yaml", d, env)
        assert _stale(d, env) == set()

        meta_eval = d / "rewards" / "meta_eval.py"
        # A statement, not a comment: the digest is over the normalised source, where a comment
        # changes nothing (tests/test_codedeps.py).
        meta_eval.write_text(meta_eval.read_text() + "\n_AN_EDIT = 1\n")
        assert _stale(d, env) == {"train@rlme-0"}  # the evaluation does not import it

        verifiable = d / "rewards" / "verifiable.py"
        verifiable.write_text(verifiable.read_text() + "\n_AN_EDIT = 1\n")
        # The base's evaluation, its draws and its premises read the same evaluation settings.
        draws = {f"evaluate_base_draw@{x}" for x in yaml.safe_load((d / "params.yaml").read_text())["base_draws"]}
        assert _stale(d, env) == {"evaluate_base", "premises", *draws,
                                  *(f"{s}@{m}-0" for m in methods for s in ("train", "evaluate"))}
    finally:
        sh("git checkout -- params.yaml rewards", d, env)
        assert _stale(d, env) == set()


@pytest.mark.long  # re-evaluates every method twice: make test-slow, not CI
def test_dvc_experiments_compare_on_the_results(clone):
    """`dvc exp run -S key=value` works (DVC rewrites params.yaml without its comments and quotes,
    and the params still load), `dvc exp show` shows the experiment's metrics (no `!`), and
    `dvc metrics show` is one row per evaluation with the results' columns only."""
    d, env = clone
    dvc = str(BIN / "dvc")
    try:
        sh([dvc, "exp", "run", "-n", "arith-only", "-S", "eval.benchmarks=[arith]"], d, env)
        sh([sys.executable, "-c", "from core.params import load; load()"], d, env)
        shown = json.loads(sh([dvc, "exp", "show", "--json"], d, env))
        exps = [e for rev in shown for e in (rev.get("experiments") or [])]
        assert exps, shown
        exp = exps[0]["revs"][0]
        assert exp["name"] == "arith-only"
        metrics = exp["data"]["metrics"]
        # The DVC metric of a run is its narrow headline file (evals/registry.py `headline`).
        run = metrics["data/eval/rlvr/seed0/headline.json"]
        assert "error" not in run and 0.0 <= run["data"]["arith/pass@1"] <= 1.0
        assert "arith_cf/cheat_rate" not in run["data"]  # the experiment's own evaluation
        table = json.loads(sh([dvc, "exp", "show", "--json", "--drop", ".*", "--keep",
                               "Experiment|data/eval/rlvr/seed0/headline.json:.*"], d, env))
        head = [e for rev in table for e in (rev.get("experiments") or [])][0]["revs"][0]
        assert 0.0 <= head["data"]["metrics"]["data/eval/rlvr/seed0/headline.json"]["data"][
            "arith/pass@1"] <= 1.0
        rows = sh([dvc, "metrics", "show"], d, env).splitlines()
        assert not any(r.startswith(("reports/", "benchmarks/", "data/base_model_info"))
                       for r in rows)
        assert {r.split()[0] for r in rows[1:] if r.strip()} >= {
            "data/eval/base/headline.json", "data/eval/rlvr/seed0/headline.json"}
        assert len(rows[0].split()) < 100, rows[0]
    finally:
        sh("git checkout -- params.yaml", d, env)
        sh([dvc, "repro"], d, env)
