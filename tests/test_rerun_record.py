"""benchmarks/rerun_record.py: a run trained again at HEAD compared with its record (the pipeline
itself is not run here: the comparison on two checkouts' files, and the command line)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.rerun_record import compare, table
from core.params import ROOT


def _run(root: Path, pass1: float, items: list[int], rewards: list[float]) -> None:
    ev = root / "data" / "eval" / "rlvr" / "seed0"
    ev.mkdir(parents=True)
    (ev / "metrics.json").write_text(json.dumps({"arith/pass@1": pass1, "arith/n": 200,
                                                 "eval_seconds": 40.0 + pass1}))
    (ev / "items.json").write_text(json.dumps({"arith": {"ids": [1, 2], "metrics": {"c": items}}}))
    plots = root / "data" / "plots" / "rlvr" / "seed0"
    plots.mkdir(parents=True)
    (plots / "train.json").write_text(json.dumps([{"step": 5 * i, "reward": r} for i, r in enumerate(rewards)]))


def test_an_identical_rerun_and_a_different_one(tmp_path) -> None:
    rec, same, other = tmp_path / "rec", tmp_path / "same", tmp_path / "other"
    _run(rec, 0.85, [1, 0], [0.4, 0.5])
    _run(same, 0.85 + 1e-9, [1, 0], [0.4, 0.5 + 1e-8])   # float order only; its wall time differs
    _run(other, 0.80, [0, 0], [0.4, 0.6])

    r = compare(rec, same, "rlvr", 0)
    assert r["found"] and r["items_identical"] and r["metrics_differing"] == {}
    assert r["curve_rows"]["train"] == [2, 2] and r["curve_max_abs_diff"]["train:reward"] < 1e-7
    assert r["matches"]

    r = compare(rec, other, "rlvr", 0)
    assert not r["items_identical"] and r["tasks_differing"] == ["arith"]
    assert r["metrics_differing"] == {"arith/pass@1": [0.85, 0.80]}
    assert abs(r["curve_max_abs_diff"]["train:reward"] - 0.1) < 1e-9 and not r["matches"]
    assert "no: arith" in table({"commit": "abc1234", "runs": [r]})

    # A run the rerun did not produce is not "identical".
    r = compare(rec, tmp_path / "empty", "rlvr", 0)
    assert not r["found"] and not r["items_identical"]


def test_the_command_refuses_a_malformed_run_name() -> None:
    p = subprocess.run([sys.executable, "-m", "benchmarks.rerun_record", "rlvr-0"], cwd=ROOT,
                       capture_output=True, text=True)
    assert p.returncode == 2 and "expected <method>/seed<S>" in p.stderr


def test_the_worked_examples_of_the_module_pass() -> None:
    """benchmarks/ is outside the doctest paths of pyproject.toml; its examples still run."""
    import doctest

    import benchmarks.rerun_record as module
    import flows.revalidate as home

    for m in (module, home):
        result = doctest.testmod(m)
        assert result.attempted > 0 and result.failed == 0, m.__name__
