"""The stage runner's subprocess handling (no Prefect server needed)."""

import sys
import time

from flows.pipeline import stage_order
from tasks.stages import run_command


def test_streams_output_and_returns_exit_code(tmp_path):
    lines = []
    rc, tail, timed_out = run_command([sys.executable, "-c", "print('a'); print('b'); raise SystemExit(3)"],
                                      tmp_path, lines.append)
    assert (rc, lines, tail, timed_out) == (3, ["a", "b"], ["a", "b"], False)


def test_timeout_kills_the_whole_process_group(tmp_path):
    # The child spawns a grandchild; both must die at the timeout, not after 30 s.
    code = ("import subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); "
            "print('started', flush=True); time.sleep(30)")
    start = time.time()
    rc, tail, timed_out = run_command([sys.executable, "-c", code], tmp_path, lambda _: None, timeout_s=1.5)
    assert timed_out and rc != 0 and tail == ["started"]
    assert time.time() - start < 10


def test_stage_order_follows_the_dag():
    order = stage_order(["rlvr", "random"], [0, 1])
    assert order[:4] == ["prepare", "synthesize", "build_base", "evaluate_base"]
    assert order.index("train@rlvr-1") < order.index("evaluate@rlvr-1") < order.index("report")
    assert order[-1] == "report" and len(order) == 4 + 2 * 2 * 2 + 1
