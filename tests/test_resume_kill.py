"""A training stage killed with SIGKILL mid-run resumes from its newest complete checkpoint.

In a temporary git clone on the micro preset (8 GRPO steps, a checkpoint every 2): start
`python -m flows.train`, `kill -9` its process group once checkpoint-4 is complete, check that
nothing half-written is left for DVC or `evaluate` to trust, re-run the same command, and check
that it resumed (at most one checkpoint interval lost) and finished with sane outputs. Then
`dvc repro` of the finished stage should adopt the result without training past `max_steps`.
"""

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_orchestration import BIN, make_clone, sh

pytestmark = pytest.mark.slow

STEPS, SAVE_EVERY, KILL_AT = 8, 2, 4


def _complete_checkpoints(out: Path) -> list[int]:
    """Steps of the checkpoints a resume may use (models.grpo.last_checkpoint's rule)."""
    return sorted(int(p.parent.name.split("-")[1]) for p in out.glob("checkpoint-*/checkpoint_complete.json"))


def _resumed_step(log: str) -> int:
    assert "resuming from " in log, log[-3000:]
    return int(log.split("resuming from ")[-1].split("checkpoint-")[1].split()[0])


def _leftover_temp_files(root: Path) -> list[Path]:
    """core.io's `.<name>.<hex>.tmp` and transformers' staging folders, anywhere under data/."""
    return [p for p in root.rglob("*") if p.name.endswith(".tmp") or p.name.startswith("tmp-checkpoint")]


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """A clone with 8 GRPO steps, a checkpoint every 2, and every stage up to build_base run."""
    d = tmp_path_factory.mktemp("resume") / "repo"
    env = make_clone(d, grpo={"max_steps": STEPS, "save_steps": SAVE_EVERY, "heldout_every": 4})
    sh([str(BIN / "dvc"), "repro", "build_base", "synthesize"], d, env)
    return d, env


def test_kill_minus_9_then_rerun_resumes(repo, tmp_path):
    d, env = repo
    out = d / "data" / "checkpoints" / "rlvr" / "seed0"
    plots = d / "data" / "plots" / "rlvr" / "seed0"
    cmd = [sys.executable, "-m", "flows.train", "--method", "rlvr", "--seed", "0"]

    first_log = tmp_path / "first.log"
    with first_log.open("w") as f:
        proc = subprocess.Popen(cmd, cwd=d, env=env, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.time() + 600
        while KILL_AT not in _complete_checkpoints(out) and proc.poll() is None and time.time() < deadline:
            time.sleep(0.1)
        assert proc.poll() is None, f"training ended before the kill:\n{first_log.read_text()[-3000:]}"
        assert KILL_AT in _complete_checkpoints(out), "no checkpoint-4 within 600 s"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the whole group, as a dying runner would
        proc.wait()
    assert proc.returncode == -signal.SIGKILL

    # Nothing half-written is trusted: no final outputs, no temp files, a usable checkpoint.
    done = _complete_checkpoints(out)
    assert KILL_AT <= done[-1] < STEPS, f"killed too late to test a resume: {done}"
    run_json = out / "run.json"
    assert not run_json.exists() or isinstance(json.loads(run_json.read_text()), dict)
    assert not (out / "final").exists() and not (plots / "train.json").exists()
    assert not _leftover_temp_files(d / "data")
    newest = out / f"checkpoint-{done[-1]}"
    for name in ("trainer_state.json", "model.safetensors", "optimizer.pt", "scheduler.pt"):
        assert (newest / name).exists(), f"{newest} lacks {name}"
    assert list(newest.glob("rng_state*.pth")), f"{newest} lacks the RNG state"

    # The same command again: resumes from the newest complete checkpoint and finishes.
    r = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True, timeout=900, check=False)
    log = r.stdout + r.stderr
    assert r.returncode == 0, log[-3000:]
    resumed = _resumed_step(log)
    assert resumed == done[-1] and resumed >= KILL_AT - SAVE_EVERY  # at most one interval lost
    last = out / f"checkpoint-{STEPS}"
    state = json.loads((last / "trainer_state.json").read_text())
    assert state["global_step"] == STEPS
    assert (last / "optimizer.pt").exists() and list(last.glob("rng_state*.pth"))
    assert (out / "final" / "model.safetensors").exists()

    summary = json.loads(run_json.read_text())
    assert summary["steps"] == STEPS and math.isfinite(summary["final_reward"])
    # The held-out history is whole too: the evaluations before the kill came with the checkpoint.
    assert [h["step"] for h in summary["heldout"]] == list(range(0, STEPS + 1, 4))
    for record in summary["heldout"]:
        assert all(math.isfinite(v) for k, v in record.items()
                   if not k.startswith("train/") and isinstance(v, (int, float))), record
    # So is the test split's curve, the collapse label's (saved with the held-out state).
    test_curve = json.loads((plots / "test.json").read_text())
    assert [h["step"] for h in test_curve] == list(range(0, STEPS + 1, 4))
    # The curve is whole (restored from the checkpoint's log history) ...
    curve = json.loads((plots / "train.json").read_text())
    assert [c["step"] for c in curve] == list(range(1, STEPS + 1))
    # ... while the resumed process trained only the steps after the checkpoint, logging them into
    # the killed attempt's MLflow run (one run per method and seed), after that attempt's steps.
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=env["MLFLOW_TRACKING_URI"])
    trained = [m.step for m in sorted(client.get_metric_history(summary["run_id"], "reward"),
                                      key=lambda m: m.timestamp)]
    assert trained[-(STEPS - resumed):] == list(range(resumed + 1, STEPS + 1)), trained
    before = trained[:-(STEPS - resumed)]  # what the killed attempt had flushed before the kill
    assert before and before == sorted(set(before)) and before[-1] <= STEPS, trained
    exp = client.get_experiment_by_name("nolabel-rl-lab")
    assert len(client.search_runs([exp.experiment_id], "tags.reward_method = 'rlvr'")) == 1
    assert not _leftover_temp_files(d / "data")

    status = sh([str(BIN / "dvc"), "status"], d, env)
    assert "train@rlvr-0" in status, status  # it never ran under DVC: listed as changed


def test_dvc_repro_of_a_finished_run_adds_no_step(repo):
    """`dvc repro` of a stage whose training finished outside DVC only adopts the result."""
    d, env = repo
    out = d / "data" / "checkpoints" / "rlvr" / "seed0"
    if not (out / "run.json").exists():  # run alone, without the test above
        sh([sys.executable, "-m", "flows.train", "--method", "rlvr", "--seed", "0"], d, env)
    r = subprocess.run([str(BIN / "dvc"), "repro", "train@rlvr-0"], cwd=d, env=env,
                       capture_output=True, text=True, timeout=900, check=False)
    log = r.stdout + r.stderr
    assert r.returncode == 0, log[-3000:]
    assert f"already trained to step {STEPS}" in log, log[-3000:]
    summary = json.loads((out / "run.json").read_text())
    assert summary["steps"] == STEPS
    # DVC deleted best/ and run.json before the command: both come back whole, with the held-out
    # history of the original run (kept with the checkpoint), not an empty one.
    assert [h["step"] for h in summary["heldout"]] == list(range(0, STEPS + 1, 4))
    assert (out / "best" / "model.safetensors").exists() and summary["best_checkpoint"]
    assert _complete_checkpoints(out)[-1] == STEPS
    status = sh([str(BIN / "dvc"), "status", "train@rlvr-0"], d, env)
    assert "up to date" in status.lower() or status.strip() == "", status
