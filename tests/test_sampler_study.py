"""benchmarks/sampler_study.py: its switch really sends the lab's models to `generate`, and its
table says what the two calls' stage times say."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from benchmarks.sampler_study import results_table, switch_off, table
from benchmarks.tables import sampler_study_block
from core.params import ROOT
from tests.test_sampler import tiny_llama


def _load(path: Path):
    spec = importlib.util.spec_from_file_location("sampler_copy", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_switching_off_the_committed_sampler_sends_a_model_it_runs_to_generate(tmp_path) -> None:
    (tmp_path / "models").mkdir()
    shutil.copy(ROOT / "models" / "sampler.py", tmp_path / "models" / "sampler.py")
    model = tiny_llama()
    assert _load(tmp_path / "models" / "sampler.py").supports(model)
    switch_off(tmp_path)
    off = _load(tmp_path / "models" / "sampler.py")
    assert not off.supports(model)
    # lab_generate looks supports up when called, so it takes generate's path too
    assert off.lab_generate.__globals__["supports"] is off.supports


def _times(train: float, evaluate: float, wall: float, base: str = "run") -> dict:
    return {"wall_seconds": wall, "stages": {
        "prepare": {"action": "run", "seconds": 4.0},
        "build_base": {"action": "skip", "seconds": 0.5},
        "train@rlvr-0": {"action": "run", "seconds": train},
        "train@rlme-0": {"action": "run", "seconds": train / 2},
        "evaluate@rlvr-0": {"action": "run", "seconds": evaluate},
        "evaluate@rlme-0": {"action": "run", "seconds": evaluate},
        "evaluate_base": {"action": base, "seconds": evaluate if base == "run" else 1.0}}}


def _record(gen: dict, lab: dict) -> dict:
    return {"command": "python -m flows.pipeline --force --quick", "commit": "abcdef0",
            "began": "2026-12-02T01:10:00Z", "machine": {"cpu": "x86_64", "cores": 2, "vector": "AVX2"},
            "arms": {"generate": gen, "lab": lab},
            "results": [{"run": "rlme/seed0", "items_identical": True, "metrics_differing": {}},
                        {"run": "rlvr/seed0", "items_identical": False,
                         "metrics_differing": {"arith/pass@1": [0.86, 0.87], "arith/n": [200, 200]}}]}


def test_the_table_gives_each_stage_and_each_kind_its_ratio() -> None:
    record = _record(_times(300.0, 60.0, 700.0), _times(150.0, 40.0, 400.0))
    rows = table(record).splitlines()
    assert rows.index("| `train@rlvr-0` | 300 | 150 | 2.00x |") < rows.index("| `evaluate@rlme-0` | 60 | 40 | 1.50x |")
    assert "| **all train stages** | 450 | 225 | 2.00x |" in rows
    assert "| `evaluate_base` | 60 | 40 | 1.50x |" in rows
    assert "| **all evaluate stages** | 180 | 120 | 1.50x |" in rows  # the base's evaluation with them
    assert "| **the call's wall time** | 700 | 400 | 1.75x |" in rows
    assert not any("prepare" in r or "build_base" in r or "one call only" in r for r in rows)
    assert results_table(record).splitlines()[2:] == [
        "| `rlme/seed0` | yes | none |", "| `rlvr/seed0` | no | arith/pass@1 0.860 → 0.870 |"]
    block = sampler_study_block(record)
    assert block.startswith(table(record)) and "at `abcdef0` (2026-12-02)" in block
    assert "x86_64 (AVX2), 2 cores" in block


def test_a_stage_up_to_date_in_one_call_is_left_out_of_the_sums_and_named() -> None:
    """Where the sampler is switched off the base's evaluation (its code changed) runs again; as
    committed it is up to date: its seconds are no comparison, so they are named, not summed."""
    record = _record(_times(300.0, 60.0, 700.0), _times(150.0, 40.0, 400.0, base="skip"))
    rows = table(record).splitlines()
    assert not any(r.startswith("| `evaluate_base`") for r in rows)
    assert "| **all evaluate stages** | 120 | 80 | 1.50x |" in rows
    assert rows[-1] == ("Ran in one call only (in its wall time, not in the sums): "
                        "`evaluate_base` with `generate`, 60 s.")
