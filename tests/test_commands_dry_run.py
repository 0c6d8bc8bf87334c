"""`python -m flows.pipeline --dry-run` tells the truth about cost.

On a fresh clone (no checkpoints on the disk, no DVC remote to pull them from) the dry run once
said "cost: nothing to run" while `make run` then trained for an hour: the claims' plan counted
the recorded runs as done. Now it asks DVC what each stage needs, as the run will, lists what
would be trained again and why, and estimates the time from the committed stage times
(flows/pipeline_plan.py). Here on a real fresh clone of a small DVC project with recorded times.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from core.params import ROOT
from flows.pipeline_plan import dry_run_text, plan_text, what_runs
from tasks import stages as st

DVC = str(Path(sys.executable).parent / "dvc")

DVC_YAML = """\
stages:
  prepare:
    cmd: mkdir -p data && echo p > data/prepared.txt
    outs: [data/prepared.txt]
  train:
    matrix:
      method: [a, b]
      seed: [0]
    cmd: mkdir -p ck/${item.method} && echo w > ck/${item.method}/final.bin
      && echo 3 > ck/${item.method}/run.json
    deps: [data/prepared.txt]
    outs:
      - ck/${item.method}/final.bin
      - ck/${item.method}/run.json:
          cache: false
  evaluate:
    matrix:
      method: [a, b]
      seed: [0]
    cmd: mkdir -p ev/${item.method} && cat ck/${item.method}/final.bin > ev/${item.method}/metrics.json
    deps:
      - ck/${item.method}/final.bin
    outs:
      - ev/${item.method}/metrics.json:
          cache: false
  report:
    cmd: cat ev/a/metrics.json ev/b/metrics.json > report.txt
    deps: [ev/a/metrics.json, ev/b/metrics.json]
    outs:
      - report.txt:
          cache: false
"""
# What the committed record says each stage took (reports/times/quick.json): train@b-0 has no
# time of its own, so it costs what another training took.
RECORDED = {"prepare": 12.0, "train@a-0": 1200.0, "evaluate@a-0": 120.0, "evaluate@b-0": 100.0,
            "report": 6.0}


def _sh(cmd: list[str], cwd: Path) -> str:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, env=st.stage_env())
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory) -> Path:
    """A DVC project whose every stage ran and was committed, then cloned: the clone has git's
    files (dvc.lock, the `cache: false` results, the recorded times) and none of DVC's cache."""
    origin = tmp_path_factory.mktemp("origin")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    _sh(["git", "init", "-q"], origin)
    _sh([DVC, "init", "-q"], origin)
    (origin / "dvc.yaml").write_text(DVC_YAML)
    _sh([DVC, "repro", "-q"], origin)
    times = origin / "reports" / "times" / "quick.json"
    times.parent.mkdir(parents=True)
    times.write_text(json.dumps({"wall_seconds": 1500.0, "stages": {
        s: {"start_s": 0.0, "seconds": t, "action": "run"} for s, t in RECORDED.items()}}))
    _sh(["git", "add", "-A"], origin)
    _sh([*git, "commit", "-qm", "record"], origin)
    clone = tmp_path_factory.mktemp("clone") / "repo"
    _sh(["git", "clone", "-q", str(origin), str(clone)], origin)
    assert (clone / "dvc.lock").exists() and not (clone / "ck" / "a" / "final.bin").exists()
    return clone


def test_a_fresh_clone_lists_the_trainings_and_their_time(fresh_clone) -> None:
    graph = st.stage_graph(fresh_clone)
    order = _dag_order(graph)
    text = dry_run_text(graph, order, 2, root=fresh_clone)
    lines = text.splitlines()
    assert "nothing to run" not in text
    assert lines[0].startswith(f"dry run: {len(order)} stages; {len(order)} run, 0 may run, 0 up to date")
    assert "no DVC remote here" in lines[0]
    missing = next(line for line in lines if "an output is not on this disk" in line)
    for stage in ("prepare", "train@a-0", "train@b-0"):
        assert stage in missing, missing
    assert "ck/a/final.bin" in missing
    after = next(line for line in lines if "a stage it reads runs first" in line)
    assert "evaluate@a-0 (train@a-0)" in after and "evaluate@b-0 (train@b-0)" in after, after
    # Two stages at once: prepare 12 s, both trainings 1200 s side by side (b's from a's),
    # both evaluations (120 s the longer), the report 6 s: 1338 s, 22 min; 2638 s, 44 min, of stage time.
    assert lines[-1].startswith("  time: about 22 min here at 2 stage(s) at once; 44 min of stage time"), lines[-1]
    assert "reports/times/" in lines[-1]


def test_one_stage_at_a_time_takes_the_sum(fresh_clone) -> None:
    graph = st.stage_graph(fresh_clone)
    text = dry_run_text(graph, _dag_order(graph), 1, root=fresh_clone)
    assert "time: about 44 min here at 1 stage(s) at once" in text, text


def test_with_the_checkpoints_back_only_what_changed_runs(fresh_clone, tmp_path) -> None:
    """The same clone once the outputs are rebuilt (as `dvc repro` leaves it): nothing runs."""
    work = tmp_path / "again"
    _sh(["git", "clone", "-q", str(fresh_clone), str(work)], tmp_path)
    _sh([DVC, "repro", "-q"], work)
    graph = st.stage_graph(work)
    text = dry_run_text(graph, _dag_order(graph), 2, root=work)
    assert text.splitlines()[-1] == "  time: none, every stage is up to date", text


def _dag_order(graph: dict[str, set[str]]) -> list[str]:
    from flows.pipeline_schedule import select

    return select(graph)


def test_what_runs_tells_missing_from_changed_from_after() -> None:
    g = {"prepare": set(), "train@a-0": {"prepare"}, "evaluate@a-0": {"train@a-0"}}
    none: dict = {"deps": {}, "outs": {}, "other": []}
    changes = {"prepare": {**none, "deps": {"params.yaml: data.n": "modified"}},
               "train@a-0": none, "evaluate@a-0": none}
    runs = what_runs(g, list(g), changes, {})
    assert runs["prepare"] == ("changed", "params.yaml: data.n: modified")
    assert runs["train@a-0"] == ("may", "prepare")  # prepare may rebuild what it had
    assert runs["evaluate@a-0"] == ("may", "train@a-0")  # and so may what reads it, no more


def test_the_plans_cost_never_says_nothing_to_run() -> None:
    """The plan's cost counts the seeds not yet recorded; where each has a record it says so."""
    text = plan_text("", {"rlvr": 3}, {"rlvr-2": {"method": "rlvr", "seed": 2}}, "nothing to run")
    assert "nothing to run" not in text and "none beyond the recorded runs" in text


def test_the_command_prints_what_runs_and_how_long_before_the_plan() -> None:
    """`python -m flows.pipeline --dry-run --quick` here: DVC's answer and a time first, then
    nothing said of the quick run's cost as "nothing to run", and nothing written."""
    before = (ROOT / "params.yaml").read_bytes(), (ROOT / "dvc.lock").read_bytes()
    r = subprocess.run([sys.executable, "-m", "flows.pipeline", "--dry-run", "--quick"], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert lines[0].startswith("dry run: ") and "(DVC's status against dvc.lock" in lines[0], r.stdout
    assert any(line.startswith("  time: ") for line in lines), r.stdout
    assert "nothing to run" not in r.stdout
    assert ((ROOT / "params.yaml").read_bytes(), (ROOT / "dvc.lock").read_bytes()) == before
