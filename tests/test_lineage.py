"""One base per comparison (evals/lineage.py): the report's tables and the claims never pool runs
from different bases or stale runs, and say which they left out on the first screen."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import yaml

from evals import claims as cl
from evals.lineage import Lineages, dir_md5, file_md5
from flows import report as rep
from flows.report_collect import aggregate, collect, current

KEY = "arith/pass@1"
NEW, OLD = "a" * 32 + ".dir", "b" * 32 + ".dir"


def write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


def study(root: Path, bases: dict[tuple[str, int], str], current: str = NEW) -> Path:
    """A study folder: runs with metrics, and a dvc.lock whose build_base wrote `current` and whose
    train@ stages started from `bases[(method, seed)]` (its evaluate@ stages record the files)."""
    data = root / "data"
    stages = {"build_base": {"outs": [{"path": "data/base_model", "md5": current}]},
              "evaluate_base": {"deps": [{"path": "data/base_model", "md5": current}]}}
    write(data / "eval" / "base" / "metrics.json", {KEY: 0.4})
    rng = np.random.default_rng(0)
    for (method, seed), base in bases.items():
        metrics = data / "eval" / method / f"seed{seed}" / "metrics.json"
        write(metrics, {KEY: float(0.5 + 0.01 * seed + (0.2 if method == "t" else 0.0)
                                   + rng.normal(0, 0.001))})
        stages[f"train@{method}-{seed}"] = {"deps": [{"path": "data/base_model", "md5": base}]}
        stages[f"evaluate@{method}-{seed}"] = {
            "outs": [{"path": f"data/eval/{method}/seed{seed}/metrics.json", "md5": file_md5(metrics)}]}
    (root / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": stages}))
    return data


def test_a_run_trained_from_an_older_base_is_left_out_of_tables_and_claims(tmp_path) -> None:
    """After a fresh `make run` rebuilt the base and retrained seed 0 only, seeds 1-2 stand on the
    old base: DVC's lock says so, and nothing pools them with seed 0."""
    bases = {(m, s): (NEW if s == 0 else OLD) for m in ("t", "c") for s in range(3)}
    data = study(tmp_path, bases)
    found = collect(data)
    assert found.runs["t"][1].stale.startswith("trained from base bbbbbbbb, the study's base is now aaaaaaaa")
    assert found.runs["t"][0].base == f"md5:{NEW}" and not found.runs["t"][0].stale
    fresh = current(found)
    assert sorted(fresh.runs["t"]) == [0] and len(fresh.left_out) == 4
    assert aggregate(fresh)["t"][KEY]["n"] == 1  # the table's mean is seed 0's alone
    claim = cl.Claim("x", "000", "Fig. 0", "t beats c", (("t", "c"),), KEY, "greater", min_effect=0.05)
    [v], notes = cl.verdicts(found.runs, [claim])
    assert v.verdict == cl.INCONCLUSIVE and v.reason == (
        "arm t: 1 seed of the 3 pilot seeds; arm c: 1 seed of the 3 pilot seeds")
    assert "t/seed1: left out, trained from base bbbbbbbb" in notes[0]
    # The report says so on its first screen and in summary.md.
    rep.build(tmp_path / "reports", data)
    page = (tmp_path / "reports" / "index.html").read_text()
    head = page.partition("<section id='result'>")[0]
    assert "id='stale'" in head and "4 stale runs left out" in head and "trained from base bbbbbbbb" in head
    summary = (tmp_path / "reports" / "summary.md").read_text()
    assert "**4 stale runs left out** of every table and claim" in summary.split("## Methods compared")[0]
    assert json.loads((tmp_path / "reports" / "metrics.json").read_text())["t"][KEY]["n"] == 1


def test_the_readme_tables_leave_stale_runs_out_and_say_so(tmp_path) -> None:
    bases = {(m, s): (OLD if (m, s) == ("t", 2) else NEW) for m in ("t", "c") for s in range(3)}
    data = study(tmp_path, bases)
    found = collect(data)
    fresh = current(found)
    text = rep.results_markdown(aggregate(fresh), fresh, data, left_out=fresh.left_out)
    assert text.startswith("> **1 stale run left out** of every table and claim")
    row = next(line for line in text.splitlines() if line.startswith("| `t`"))
    assert "| 2 |" in row  # two seeds, not three


def test_a_comparison_across_different_bases_is_refused(tmp_path) -> None:
    """Arms of two studies on two bases: never one interval."""
    a = study(tmp_path / "studies" / "a", {("t", s): NEW for s in range(3)}, current=NEW)
    study(tmp_path / "studies" / "b", {("c", s): OLD for s in range(3)}, current=OLD)
    runs = rep.with_studies(collect(tmp_path / "data"), tmp_path / "data").runs
    assert runs["a/t"][0].base != runs["b/c"][0].base and a.exists()
    claim = cl.Claim("x", "000", "Fig. 0", "s", (("a/t", "b/c"),), KEY, "greater", min_effect=0.05)
    [v], _ = cl.verdicts(runs, [claim])
    assert v.verdict == cl.INCONCLUSIVE and "stand on different bases" in v.reason
    assert v.comparisons[0].difference is None


def test_a_metrics_file_the_lock_does_not_record_is_stale(tmp_path) -> None:
    data = study(tmp_path, {("t", 0): NEW})
    write(data / "eval" / "t" / "seed0" / "metrics.json", {KEY: 0.99})  # rewritten by hand
    assert collect(data).runs["t"][0].stale == "its metrics.json is not the file dvc.lock records"


def test_without_a_lock_run_json_names_the_base_and_no_record_is_its_folders_group(tmp_path) -> None:
    data = tmp_path / "data"
    (data / "base_model").mkdir(parents=True)
    (data / "base_model" / "model.bin").write_bytes(b"weights")
    here = dir_md5(data / "base_model")
    for seed, base in ((0, here), (1, OLD)):
        write(data / "eval" / "t" / f"seed{seed}" / "metrics.json", {KEY: 0.5})
        write(data / "checkpoints" / "t" / f"seed{seed}" / "run.json", {"base_model_md5": base})
    write(data / "eval" / "u" / "seed0" / "metrics.json", {KEY: 0.5})  # predates the record
    runs = collect(data).runs
    assert (runs["t"][0].base, runs["t"][0].stale) == (f"md5:{here}", "")
    assert runs["t"][1].stale.startswith("trained from base bbbbbbbb")
    assert Lineages(tmp_path / "none" / "data").of("u", 0).base == "unrecorded:data"


def test_dir_md5_is_dvcs_directory_hash(tmp_path) -> None:
    from dvc_data.hashfile.hash_info import HashInfo
    from dvc_data.hashfile.meta import Meta
    from dvc_data.hashfile.tree import Tree

    (tmp_path / "sub").mkdir()
    (tmp_path / "a.json").write_text("{}")
    (tmp_path / "sub" / "b.bin").write_bytes(b"\x00\x01")
    tree = Tree()
    for rel in ("a.json", "sub/b.bin"):
        tree.add(tuple(rel.split("/")), Meta(), HashInfo("md5", file_md5(tmp_path / rel)))
    tree.digest()
    assert dir_md5(tmp_path) == tree.hash_info.value


def test_a_planned_extra_seed_has_its_lineage_read_from_its_own_stage(tmp_path) -> None:
    """A seed the claims' plan added runs as `train_extra@<m>-<s>` (params extra_runs): its base
    is read from that stage's lock entry like any other, and an extra seed trained from an older
    base is stale, never pooled with the pilot. (Before, an extra seed had no lock entry to read
    and counted as unrecorded.)"""
    bases = {(m, s): NEW for m in ("t", "c") for s in range(3)}
    data = study(tmp_path, bases)
    lock = yaml.safe_load((tmp_path / "dvc.lock").read_text())
    for m in ("t", "c"):
        metrics = data / "eval" / m / "seed3" / "metrics.json"
        write(metrics, {KEY: 0.6})
        lock["stages"][f"train_extra@{m}-3"] = {
            "deps": [{"path": "data/base_model", "md5": OLD if m == "t" else NEW}]}
        lock["stages"][f"evaluate_extra@{m}-3"] = {
            "outs": [{"path": f"data/eval/{m}/seed3/metrics.json", "md5": file_md5(metrics)}]}
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(lock))
    runs = collect(data).runs
    assert runs["c"][3].base == f"md5:{NEW}" and not runs["c"][3].stale
    assert runs["t"][3].stale.startswith("trained from base bbbbbbbb")
    assert sorted(current(collect(data)).runs["t"]) == [0, 1, 2]


def test_read_lock_sees_an_edited_lock_and_shrugs_off_a_broken_one(tmp_path) -> None:
    """Parses are shared by content (evals/lineage.py `read_lock`): an edited lock is read anew,
    a malformed or missing one reads as no stages."""
    from evals.lineage import read_lock

    lock = tmp_path / "dvc.lock"
    lock.write_text("schema: '2.0'\nstages:\n  a: {cmd: x}\n", encoding="utf-8")
    assert read_lock(lock) == {"a": {"cmd": "x"}}
    lock.write_text("schema: '2.0'\nstages:\n  b: {cmd: y}\n", encoding="utf-8")
    assert read_lock(lock) == {"b": {"cmd": "y"}}
    lock.write_text("stages: [unclosed\n", encoding="utf-8")
    assert read_lock(lock) == {}
    lock.write_text("stages: [a, b]\n", encoding="utf-8")
    assert read_lock(lock) == {}
    assert read_lock(tmp_path / "missing.lock") == {}
