"""A study on one screen (flows/compare.py): mean ± sd or every seed, never wider than 120
columns, on a records tree in tmp_path and on the committed records."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from core.params import ROOT
from flows import compare
from flows.report_collect import Collected

# pass@1 of each (method, seed) in the fixture; gamma has no seed 2.
SCORES = {("alpha", 0): 0.5, ("alpha", 1): 0.6, ("alpha", 2): 0.75,
          ("beta", 0): 0.2, ("beta", 1): 0.3, ("beta", 2): 0.1, ("gamma", 0): 0.9, ("gamma", 1): 0.8}


def _write(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value), encoding="utf-8")


def fake_study(data: Path, scores=SCORES, extra: dict | None = None) -> Path:
    """eval/ and plots/ like data/: each run's metrics.json, headline.json and held-out curve."""
    _write(data / "eval" / "base" / "metrics.json", {"arith/pass@1": 0.25, "arith/n": 200})
    for (method, seed), score in scores.items():
        metrics = {"arith/pass@1": score, "arith_cf/cheat_rate": score / 10, "arith/n": 200,
                   **(extra or {})}
        _write(data / "eval" / method / f"seed{seed}" / "metrics.json", metrics)
        _write(data / "eval" / method / f"seed{seed}" / "headline.json",
               {"arith/pass@1": score, "arith_cf/cheat_rate": score / 10})
        _write(data / "plots" / method / f"seed{seed}" / "heldout.json",
               [{"step": 0, "arith/pass@1": 0.25}, {"step": 25, "arith/pass@1": score}])
    return data


@pytest.fixture
def root(tmp_path) -> Path:
    fake_study(tmp_path / "data")
    (tmp_path / "params.yaml").write_text("methods: [beta, alpha, gamma]\n")
    return tmp_path


def _row(lines: list[str], method: str) -> list[str]:
    """The cells of `method`'s row (cells are 2 spaces apart; `mean ± sd` holds single spaces)."""
    line, = [s for s in lines if s.split(" ", 1)[0] == method]
    return [c.strip() for c in line.split("  ") if c.strip()]


def test_the_mean_and_sd_are_the_records_over_seeds(root):
    lines = compare.render("default", root)
    assert max(map(len, lines)) <= compare.WIDTH
    header = _row(lines, "method")
    assert header == ["method", "n", "arith/pass@1", "arith_cf/cheat_rate"]  # headline.json's keys
    for method in ("alpha", "beta", "gamma"):
        vals = [v for (m, _), v in SCORES.items() if m == method]
        want = f"{statistics.fmean(vals):.3f} ± {statistics.pstdev(vals):.3f}"
        assert _row(lines, method)[:3] == [method, str(len(vals)), want], method
    assert _row(lines, "base")[:3] == ["base", "1", "0.250"]  # one evaluation: no sd
    assert _row(lines, "base")[3] == compare.BLANK            # the base has no cheat rate
    # Methods in params.yaml's order, the base first.
    table = lines[next(i for i, s in enumerate(lines) if s.startswith("method ")):]
    assert [s.split(" ", 1)[0] for s in table] == ["method", "base", "beta", "alpha", "gamma"]


def test_seeds_mode_prints_every_seed_of_each_method(root):
    lines = compare.render("default", root, by_seed=True, metrics=["arith/pass@1"])
    assert "arith/pass@1, by seed:" in lines
    assert _row(lines, "method") == ["method", "s0", "s1", "s2", "mean ± sd"]
    assert _row(lines, "alpha")[:4] == ["alpha", "0.500", "0.600", "0.750"]
    assert _row(lines, "gamma")[:4] == ["gamma", "0.900", "0.800", compare.BLANK]
    assert _row(lines, "gamma")[4] == f"{0.85:.3f} ± {0.05:.3f}"
    assert _row(lines, "base") == ["base", *[compare.BLANK] * 3, "0.250"]


def test_metric_patterns_pick_metrics_and_an_unknown_one_is_named(root):
    lines = compare.render("default", root, metrics=["arith/*"])
    assert _row(lines, "method") == ["method", "n", "arith/n", "arith/pass@1"]
    assert _row(lines, "alpha")[2] == "200 ± 0"  # a count, as an integer
    with pytest.raises(LookupError, match=r"no metric 'arith/pass@2' in the study's evaluations \(they have: arith"):
        compare.render("default", root, metrics=["arith/pass@2"])


def test_many_wide_columns_are_cut_into_blocks_that_repeat_the_method(tmp_path):
    wide = {f"bench/a_rather_long_metric_name_number_{i:02d}": 0.1 * i for i in range(12)}
    fake_study(tmp_path / "data", extra=wide)
    lines = compare.render("default", tmp_path, metrics=["bench/*"])
    assert max(map(len, lines)) <= compare.WIDTH
    headers = [s for s in lines if s.startswith("method")]
    assert len(headers) >= 4  # 12 columns of 41 characters: at most 2 a block
    shown = {c for h in headers for c in h.split()[2:]}
    assert shown == set(wide)  # every metric in some block, none twice
    assert sum(len(h.split()) - 2 for h in headers) == len(wide)


def test_a_recorded_study_is_read_from_its_record_and_an_unknown_one_is_named(root):
    study = root / "studies" / "other"
    fake_study(study / "data", {("alpha", 0): 0.4, ("alpha", 1): 0.6})
    _write(study / "study.json", {"preset": "other", "methods": ["alpha"], "seeds": [0, 1]})
    lines = compare.render("other", root)
    assert lines[0].startswith("study other (") and "studies/other/data/)" in " ".join(lines[:2])
    assert _row(lines, "alpha")[:3] == ["alpha", "2", "0.500 ± 0.100"]
    assert not any(s.startswith("beta") for s in lines)
    with pytest.raises(LookupError, match=r"^no recorded study nope \(recorded: default, other\)$"):
        compare.render("nope", root)
    (root / "studies" / "empty" / "data").mkdir(parents=True)
    _write(root / "studies" / "empty" / "study.json", {"methods": []})
    with pytest.raises(FileNotFoundError, match="study empty: no evaluation under .*empty/data/eval"):
        compare.render("empty", root)


def test_stale_runs_are_named_once_per_method_and_reason():
    c = Collected({}, [], ["m/seed0: trained from base ab", "m/seed2: trained from base ab",
                           "n/seed1: no base recorded"])
    assert compare.left_out(c) == ["m/seed0, seed2: trained from base ab", "n/seed1: no base recorded"]


def test_the_dvc_plots_section_has_a_legend_entry_per_method_and_seed(root):
    text = compare.dvc_plots(root)
    plots = yaml.safe_load(text)["plots"]
    (plot_id, props), = plots[0].items()
    assert plot_id == "heldout_arith_pass@1" and len(plots) == 1
    assert (props["x"], props["template"]) == ("step", "overlay")
    files = list(props["y"])
    assert set(props["y"].values()) == {"arith/pass@1"}
    assert len(files) == len(SCORES) and all((root / f).is_file() for f in files)
    # DVC names each line by its file less the files' common folder (dvc/render/converter/vega.py).
    common = len(os.path.commonpath(files))
    legends = [f[common:].strip("/") for f in files]
    assert legends[:2] == ["beta/seed0/heldout.json", "beta/seed1/heldout.json"]
    assert len(set(legends)) == len(files)


@pytest.mark.parametrize("by_seed", [False, True])
def test_no_line_is_wider_than_120_on_the_committed_records(by_seed):
    from flows.mlflow_records import studies

    names = [name for name, data, _ in studies(ROOT) if (data / "eval").is_dir()]
    assert "default" in names and len(names) > 1
    for name in names:
        lines = compare.render(name, ROOT, by_seed=by_seed)
        assert lines and max(map(len, lines)) <= 120, name
    every = compare.render("default", ROOT, by_seed=by_seed, metrics=["*"])
    assert max(map(len, every)) <= 120 and len(every) > 20


def test_the_command_line_prints_the_table_and_one_line_errors():
    def run(*args):
        return subprocess.run([sys.executable, "-m", "flows.compare", *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)

    ok = run("--metric", "arith/pass@1")
    assert ok.returncode == 0 and ok.stdout.splitlines()[2].split()[:3] == ["method", "n", "arith/pass@1"]
    for args, says in ((["--study", "no_such_study"], "error: no recorded study no_such_study (recorded: default"),
                       (["--metric", "no/such"], "error: no metric 'no/such'")):
        r = run(*args)
        assert r.returncode == 2 and r.stdout == "", args
        assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith(says), r.stderr
