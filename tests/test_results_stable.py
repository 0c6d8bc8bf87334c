"""`make results` on the committed records is stable: the README's generated blocks come out
byte-identical run after run, and no machine's float summation order can move a printed
rounding (every statistic is snapped before it is formatted)."""

from __future__ import annotations

import json
import shutil

import numpy as np

from core.params import ROOT
from evals import claims as cl
from evals.stats import paired_bootstrap, t_interval
from flows import report as rep


def test_make_results_twice_on_the_committed_records_gives_identical_bytes(tmp_path) -> None:
    """Against a copy of README.md (whatever its prose is today): the first pass may rewrite the
    blocks, the second must leave every byte as the first wrote it."""
    readme = tmp_path / "README.md"
    shutil.copy(ROOT / "README.md", readme)
    rep.write_readme(readme, ROOT / "data")
    first = readme.read_bytes()
    rep.write_readme(readme, ROOT / "data")
    assert readme.read_bytes() == first
    assert rep.CLAIMS_BEGIN.encode() in first and rep.README_BEGIN.encode() in first


def test_float_noise_of_another_machine_cannot_move_a_printed_rounding() -> None:
    """The committed nocheat interval ended exactly on +0.0125, so a recomputation on another CPU
    printed +0.012 or +0.013 by luck; perturb the inputs by the size of summation-order noise and
    every returned number, and so every printed one, stays the same."""
    rng = np.random.default_rng(0)
    t = rng.integers(0, 9, (3, 200)) / 8           # pass@1 over 8 samples: multiples of 1/8
    c = rng.integers(0, 9, (3, 200)) / 8
    noise = rng.normal(0, 1e-15, t.shape)
    assert paired_bootstrap(t, c) == paired_bootstrap(t + noise, c)
    assert t_interval([0.1, 0.2, 0.3], [0.0, 0.05, 0.1]) == t_interval([0.1 + 1e-16, 0.2, 0.3], [0.0, 0.05, 0.1])
    for exact in (0.0125, -0.0125, 0.8475, 0.0005):
        printed = {rep._signed(exact + e) for e in (-3e-16, 0.0, 3e-16)}
        assert len(printed) == 1, (exact, printed)


def test_the_verdicts_are_the_same_run_after_run() -> None:
    runs = rep.with_studies(rep.collect(ROOT / "data"), ROOT / "data").runs
    first = cl.claims_json(*cl.verdicts(runs))
    assert first == cl.claims_json(*cl.verdicts(runs))


def test_make_results_on_the_committed_records_leaves_the_readme_and_docs_unchanged(tmp_path) -> None:
    """The committed README.md and docs/speed.md are exactly what `make results` writes from the
    committed records: no generated number was edited by hand or left stale."""
    from benchmarks import tables

    readme = tmp_path / "README.md"
    shutil.copy(ROOT / "README.md", readme)
    rep.write_readme(readme, ROOT / "data")
    assert readme.read_text(encoding="utf-8") == (ROOT / "README.md").read_text(encoding="utf-8"), (
        "README.md differs from `make results` on the committed records: run `make results`")
    for page_path in tables.PAGES:
        page = page_path.read_text(encoding="utf-8")
        assert tables.render(page) == page, f"{page_path.name} is stale: run `make results`"


def test_the_gpu_record_shows_each_logged_runs_result_lines_and_where_a_log_was_cut(tmp_path) -> None:
    """docs/gpu.md's record: the command, the device's software, every PASS/FAIL/SKIP/MEASURE
    line of the log (progress bars dropped), and the last line of a log its timeout ended."""
    from benchmarks import tables

    (tmp_path / "a.log").write_text("noise\rPASS bf16: GPU X\nLoading\nFAIL rlvr: trains: OOM\n"
                                    "12:00:01 still loading\n")
    (tmp_path / "v.txt").write_text("3.12.3 2.11.0 5.23.0\n")
    (tmp_path / "runs.json").write_text(json.dumps([{"log": "a.log", "date": "d", "command": "c",
                                                     "software": "v.txt"}]))
    block = tables.gpu_runs_block(tmp_path)
    assert "`c` (d; python 3.12.3, torch 2.11.0, transformers 5.23.0;" in block
    assert "PASS bf16: GPU X\nFAIL rlvr: trains: OOM\n(the log ends here) 12:00:01 still loading" in block
    assert "noise" not in block and "Loading" not in block
    assert tables.gpu_runs_block(tmp_path / "none").startswith("_Nothing has run on a GPU yet")


def test_a_measure_its_timeout_ended_shows_the_steps_trl_logged(tmp_path) -> None:
    """A `--measure` run cut short prints no MEASURE line: its record shows each step TRL logged
    (step time, completion length, tokens) instead of the whole logged dict; a smoke's steps stay
    out, and a line that only looks like a step log is shown as it is."""
    from benchmarks import tables

    step = "{'loss': '0', 'num_tokens': '3.3e+05', 'completions/mean_length': '512', 'step_time': '108.1'}"
    (tmp_path / "m.log").write_text(f"PASS bf16: GPU X\n12:00:05 {step}\nloading\n12:01:00 {step}\n")
    (tmp_path / "s.log").write_text(f"{step}\nPASS rlvr: finite loss\n{{'loss': broken}}\n")
    (tmp_path / "runs.json").write_text(json.dumps([
        {"log": "m.log", "date": "d", "command": "gpu_smoke.sh --measure 2"},
        {"log": "s.log", "date": "d", "command": "gpu_smoke.sh"}]))
    block = tables.gpu_runs_block(tmp_path)
    short = "TRL step: step_time 108.1, completions/mean_length 512, num_tokens 3.3e+05"
    assert f"PASS bf16: GPU X\n12:00:05 {short}\n(the log ends here) 12:01:00 {short}\n```" in block
    smoke = block.split("`gpu_smoke.sh`")[1]
    assert "TRL step" not in smoke and "(the log ends here) {'loss': broken}" in smoke
    assert tables.trl_step_line("12:00:00 {'loss': '0'}") is None  # no step time: not a step


def test_the_study_times_table_counts_what_each_study_ran_and_adds_its_plans_call(tmp_path) -> None:
    """docs/speed.md's study costs: stages that ran (not those up to date), the base build, the
    trainings' mean, and the wall time of the pilot's call plus the plan's."""
    from benchmarks import tables

    rec = tmp_path / "kd.seed1"
    rec.mkdir()
    (rec / "study.json").write_text(json.dumps({"commit": "abcdef0123", "finished": True}))
    stage = {"start_s": 0.0, "action": "run"}
    (rec / "times.json").write_text(json.dumps({"wall_seconds": 3000, "machine": {"cores": 2}, "stages": {
        "prepare": {**stage, "seconds": 3.0, "action": "skip"}, "build_base": {**stage, "seconds": 1500.0},
        "train@a-0": {**stage, "seconds": 300.0}, "evaluate@a-0": {**stage, "seconds": 60.0}}}))
    (rec / "times.plan.json").write_text(json.dumps({"wall_seconds": 600, "machine": {"cores": 2},
                                                     "stages": {"train_extra@a-1": {**stage, "seconds": 420.0}}}))
    table = tables.study_times_table(tmp_path)
    assert "| `kd.seed1` | `abcdef0` | 2 | 4 of 5 | 25 min | 2, 6.0 min each | 60 min | 2 |" in table
    assert tables.study_times_table(tmp_path / "none").startswith("_No study has recorded")

    # A study resumed in a second call (its base built in the first): both calls are counted.
    second = {"wall_seconds": 1200, "machine": {"cores": 2}, "stages": {
        "build_base": {**stage, "seconds": 1.0, "action": "skip"}, "train@a-2": {**stage, "seconds": 900.0}}}
    (rec / "times.calls.json").write_text(json.dumps([
        {"commit": "0000000", "times": json.loads((rec / "times.json").read_text()),
         "plan": json.loads((rec / "times.plan.json").read_text())},
        {"commit": "abcdef0123", "times": second, "plan": None}]))
    table = tables.study_times_table(tmp_path)
    assert "| `kd.seed1` | `abcdef0` | 3 | 5 of 6 | 25 min | 3, 9.0 min each | 80 min | 2 |" in table

    # A third call restores a training from DVC's run-cache: a checkout, not a training run.
    third = {"wall_seconds": 60, "machine": {"cores": 2}, "stages": {
        "train@a-2": {**stage, "seconds": 5.0, "action": "restore"}}}
    calls = json.loads((rec / "times.calls.json").read_text())
    (rec / "times.calls.json").write_text(json.dumps(calls + [{"commit": "abcdef0123", "times": third, "plan": None}]))
    table = tables.study_times_table(tmp_path)
    assert "| `kd.seed1` | `abcdef0` | 4 | 5 of 6 | 25 min | 3, 9.0 min each | 81 min | 2 |" in table

    # A call stopped after its base (a precondition read from the base alone failed): no
    # training ran, and the table says so without a mean of nothing.
    (rec / "times.calls.json").write_text(json.dumps([{"commit": "abcdef0123", "plan": None, "times": {
        "wall_seconds": 1800, "machine": {"cores": 2}, "stages": {
            "build_base": {**stage, "seconds": 1500.0}, "evaluate_base": {**stage, "seconds": 60.0}}}}]))
    table = tables.study_times_table(tmp_path)
    assert "| `kd.seed1` | `abcdef0` | 1 | 2 of 2 | 25 min | 0 | 30 min | 2 |" in table
