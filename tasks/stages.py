"""Prefect tasks that run DVC stages: the pipeline's unit of retry, timeout and failure report.

Each task shells out to `dvc repro -s <stage>` so DVC stays the single owner of the DAG, cache and
lock, and a stage killed by its timeout is a child process that really dies (Prefect cannot
interrupt a thread). The stage's output is streamed into the task log, so the Prefect UI shows it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections import deque
from pathlib import Path

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact

from core.params import ROOT


class StageFailed(RuntimeError):
    """A DVC stage exited non-zero; the message carries its last log lines."""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    env.setdefault("DVC_NO_ANALYTICS", "1")
    return env


def dvc_executable() -> str:
    local = Path(sys.executable).parent / "dvc"
    return str(local) if local.exists() else (shutil.which("dvc") or "dvc")


def stage_outputs(stage: str) -> dict:
    """Small records a stage leaves behind (metrics, collapse verdict) for the flow's result."""
    kind, _, item = stage.partition("@")
    method, _, seed = item.rpartition("-")
    if kind == "evaluate_base":
        f = ROOT / "data" / "eval" / "base" / "metrics.json"
    elif kind == "evaluate":
        f = ROOT / "data" / "eval" / method / f"seed{seed}" / "metrics.json"
    elif kind == "train":
        f = ROOT / "data" / "checkpoints" / method / f"seed{seed}" / "run.json"
    elif kind == "build_base":
        f = ROOT / "data" / "base_model_info.json"
    else:
        return {}
    if not f.exists():
        return {}
    record = json.loads(f.read_text())
    return {k: v for k, v in record.items() if k != "heldout"}


def run_command(cmd: list[str], cwd, log, timeout_s: float | None = None) -> tuple[int, list[str], bool]:
    """Run `cmd`, streaming its output lines to `log`; kill it after `timeout_s` seconds.

    Returns (exit code, last lines, timed out). The kill is ours because Prefect's own task
    timeout cannot interrupt a thread blocked on a child process (STACK_NOTES).
    """
    tail: deque[str] = deque(maxlen=15)
    with subprocess.Popen(cmd, cwd=cwd, env=_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, start_new_session=True) as proc:
        timer = threading.Timer(timeout_s, lambda: os.killpg(proc.pid, signal.SIGKILL)) \
            if timeout_s else None
        if timer:
            timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                line = line.rstrip()
                if line:
                    tail.append(line)
                    log(line)
            rc = proc.wait()
        finally:
            timed_out = bool(timer) and not timer.is_alive() and proc.returncode == -signal.SIGKILL
            if timer:
                timer.cancel()
    return rc, list(tail), timed_out


@task(name="dvc-stage", task_run_name="{stage}", retries=1, retry_delay_seconds=5)
def run_stage(stage: str, cwd: str | None = None, force: bool = False,
              timeout_s: float | None = None) -> dict:
    """Run one DVC stage; raise StageFailed with its last log lines if it fails or times out."""
    logger = get_run_logger()
    cmd = [dvc_executable(), "repro", "-s", stage] + (["--force"] if force else [])
    logger.info("running %s", " ".join(cmd))
    rc, tail, timed_out = run_command(cmd, cwd or ROOT, logger.info, timeout_s)
    if timed_out:
        msg = f"stage {stage} timed out after {timeout_s:g} s and was killed"
        logger.error(msg)
        raise StageFailed(msg)
    if rc != 0:
        msg = f"stage {stage} failed (exit {rc}): " + " | ".join(tail[-5:])
        logger.error(msg)
        raise StageFailed(msg)
    record = stage_outputs(stage) if cwd is None else {}
    if record:
        rows = "\n".join(f"| {k} | {v} |" for k, v in record.items())
        create_markdown_artifact(markdown=f"### {stage}\n| key | value |\n|---|---|\n{rows}\n",
                                 key=stage.replace("@", "-").replace("_", "-"),
                                 description=f"outputs of {stage}")
    return record
