"""The `report` stage (flows/report.py) on a synthetic data folder: tables per benchmark with
mean ± std over seeds, overlaid curves with collapse markers, and no crash on missing files."""

from __future__ import annotations

import configparser
import json
import math
import re
import subprocess
import sys
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from core.params import PARAMS_FILE, ROOT, load, validate
from evals.claims import CLAIMS, TEST_ITEMS
from evals.stats import t_interval
from flows import report as rep
from flows import report_rank as rank

# method -> seed -> metrics.json (None: no evaluation for that run)
METRICS = {
    "rlvr": {0: {"arith/pass@1": 0.4, "arith/pass@k": 0.6, "arith/n": 200, "arith_cf/cheat_rate": 0.05,
                 "eval_seconds": 3.0},
             1: {"arith/pass@1": 0.6, "arith/pass@k": 0.8, "arith/n": 200, "arith_cf/cheat_rate": 0.03,
                 "eval_seconds": 4.0}},
    "random": {0: {"arith/pass@1": 0.1, "arith/pass@k": 0.2, "arith/n": 200, "arith_cf/cheat_rate": 0.04}},
    "rlvrr_direct": {0: {"facts/coverage": 0.7, "facts/style_adherence": 0.5, "facts/n": 100}},
    "rlme_long": {0: {"arith/pass@1": 0.3, "pairs/outcome_acc": 0.55}},
}
BASE = {"arith/pass@1": 0.2, "arith/pass@k": 0.5, "arith/n": 200, "arith_cf/cheat_rate": 0.04,
        "facts/coverage": 0.3, "pairs/outcome_acc": 0.5}
EVENTS = {("rlme_long", 0): [{"kind": "reward_hacking", "step": 20,
                              "message": "held-out fell 0.15 below its best while reward held"}],
          ("rlvr", 1): [{"kind": "entropy", "step": 30, "message": "entropy below 0.05"}]}


def write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


def make_data(root: Path, metrics=METRICS, base=BASE, events=EVENTS, steps=(0, 10, 20, 30, 40)) -> Path:
    """A data/ folder as train + evaluate leave it: eval/, plots/, checkpoints/<m>/seed<S>/run.json."""
    data = root / "data"
    write(data / "eval" / "base" / "metrics.json", base)
    for method, seeds in metrics.items():
        for seed, m in seeds.items():
            run = f"{method}/seed{seed}"
            if m is not None:
                write(data / "eval" / run / "metrics.json", m)
            k = len(method) + seed
            write(data / "plots" / run / "train.json",
                  [{"step": s, "reward": 0.1 + 0.01 * s + 0.01 * k, "reward_std": 0.3,
                    "entropy": 0.5 - 0.005 * s, "completion_length": 40 - s / 10} for s in steps if s])
            write(data / "plots" / run / "heldout.json",
                  [{"step": s, "arith/pass@1": 0.2 + 0.005 * s * (1 if k % 2 else -1) + 0.01 * k,
                    "arith/n": 10, "train/reward": None if s == 0 else 0.2} for s in steps])
            write(data / "checkpoints" / run / "run.json",
                  {"method": method, "seed": seed, "collapse_events": events.get((method, seed), [])})
    return data


class Tables(HTMLParser):
    """Tables of the page as {caption: [[cells]]}, the caption being the preceding h2/h3 text."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.heading, self._in_heading, self._rows, self._cell = "", False, None, None

    def handle_starttag(self, tag, attrs):
        if tag in ("h2", "h3"):
            self.heading, self._in_heading = "", True
        elif tag == "table":
            self._rows = []
        elif tag == "tr" and self._rows is not None:
            self._rows.append([])
        elif tag in ("td", "th") and self._rows is not None:
            self._cell = ""

    def handle_endtag(self, tag):
        if tag in ("h2", "h3"):
            self._in_heading = False
        elif tag == "table":
            self.tables[self.heading] = self._rows
            self._rows = None
        elif tag in ("td", "th") and self._cell is not None:
            self._rows[-1].append(self._cell.strip())
            self._cell = None

    def handle_data(self, data):
        if self._in_heading:
            self.heading += data
        if self._cell is not None:
            self._cell += data


def parse_tables(page: str) -> dict[str, list[list[str]]]:
    p = Tables()
    p.feed(page)
    return p.tables


def as_dicts(rows: list[list[str]]) -> dict[str, dict[str, str]]:
    header = rows[0]
    return {r[0]: dict(zip(header, r)) for r in rows[1:]}


@pytest.fixture()
def built(tmp_path):
    data = make_data(tmp_path)
    out = tmp_path / "reports"
    agg = rep.build(out, data, order=["rlvr", "random"])
    return out, agg, (out / "index.html").read_text()


def test_one_table_per_benchmark_with_a_row_per_method(built) -> None:
    out, agg, page = built
    tables = parse_tables(page)
    assert {"arith", "arith_cf", "facts", "pairs", "other"} <= set(tables)
    arith = as_dicts(tables["arith"])
    assert list(arith) == ["base", "rlvr", "random", "rlme_long"]  # base, params order, then by name
    assert arith["rlvr"]["seeds"] == "2" and arith["rlvr"]["pass@1"] == "0.500 ± 0.100"
    assert arith["random"]["pass@1"] == "0.100" and arith["base"]["seeds"] == "1"
    assert arith["rlvr"]["n"] == "200"  # a count identical over seeds shows no spread
    assert arith["rlme_long"]["pass@k"] == "—"  # a metric that run lacks
    assert list(tables["arith"][0][:4]) == ["method", "seeds", "pass@1", "pass@k"]
    assert list(as_dicts(tables["facts"])) == ["base", "rlvrr_direct"]
    assert list(as_dicts(tables["pairs"])) == ["base", "rlme_long"]
    assert agg["rlvr"]["arith/pass@1"] == {"mean": 0.5, "std": pytest.approx(0.1), "n": 2}
    assert json.loads((out / "metrics.json").read_text())["rlvr"]["arith/pass@1"]["n"] == 2


def test_summary_markdown_keeps_the_headline_table(built) -> None:
    out, _, _ = built
    summary = (out / "summary.md").read_text()
    lines = summary.splitlines()
    # The answer first, as the page's first screen gives it: a sentence per task, then the methods
    # grouped by what they read; then the headline table of every method.
    assert lines[2] == "## Which reward can you trust without labels?"
    assert lines[4].startswith("- arith (pass@1, 200 test items, 3 methods × 1–2 seeds): only label-free random")
    assert "| method | reads | task | headline (mean ± std) | vs base | seeds | collapsed | alarms |" in lines
    table = lines.index("## Methods compared")
    assert lines[table + 2].startswith("| method | arith/pass@1 |")
    assert lines.index("## The papers' claims") > table  # then the science opens with the claims table
    for method in ("base", "rlvr", "random", "rlvrr_direct", "rlme_long"):
        assert f"| {method} |" in summary
    assert "## Collapse events" in summary and "reward_hacking" in summary


def page_specs(page: str) -> list[dict]:
    """The Vega-Lite specs embedded in the page (flows/charts.py), in page order."""
    found = re.findall(r"<script type='application/json' class='vl-spec'>(.*?)</script>", page, flags=re.DOTALL)
    return [json.loads(s) for s in found]


def chart_titles(page: str) -> tuple[list[dict], list[str]]:
    """The curve charts' specs and titles (the per-seed charts under the tables have no title)."""
    specs = [s for s in page_specs(page) if "title" in s]
    return specs, [s["title"] for s in specs]


def spec_runs(spec: dict) -> list[tuple[str, int]]:
    """(method, seed) of every line a chart draws."""
    return [(r["method"], r["seed"]) for r in spec["data"]["values"]]


def spec_events(spec: dict) -> list[dict]:
    """The collapse events a chart marks (its dashed rules)."""
    return [r for layer in spec.get("layer", []) if layer["mark"]["type"] == "rule" and "data" in layer
            for r in layer["data"]["values"] if "kind" in r]


def test_curves_overlay_every_method_with_collapse_markers(built) -> None:
    _, _, page = built
    specs, titles = chart_titles(page)
    # The headline held-out curve first (every method of the task overlaid), then each method's
    # reward on its own axis (rewards are on incompatible scales), then the overlaid diagnostics.
    assert titles[0] == "held-out arith/pass@1 (arith)"
    rewards = [t for t in titles if t.endswith(": train reward")]
    assert rewards == [f"{m}: train reward" for m in ("rlvr", "random", "rlme_long", "rlvrr_direct")]
    assert "train: reward" not in titles and "train: reward_std" not in titles
    after = titles[titles.index(rewards[-1]) + 1:]
    assert after[:2] == ["train: entropy", "train: completion_length"]
    assert "held-out: arith/pass@1" not in titles  # drawn once, as the headline curve
    assert not any(t.startswith("held-out: train/") or t.endswith("/n") for t in titles)
    reward = specs[titles.index("rlvr: train reward")]
    assert spec_runs(reward) == [("rlvr", 0), ("rlvr", 1)]  # one method, one line per seed
    entropy = specs[titles.index("train: entropy")]
    # every trained method (base has no curve) on the same chart; rlvr once per seed
    runs = spec_runs(entropy)
    assert len(runs) == 5 and len({m for m, _ in runs}) == 4
    markers = spec_events(entropy)
    assert sorted(e["kind"] for e in markers) == ["entropy", "reward_hacking"]
    assert any("rlme_long seed 0: reward_hacking collapse at step 20" in e["tip"] for e in markers)
    assert [e["step"] for e in markers if e["kind"] == "entropy"] == [30]
    legend = re.findall(r"<label><input type='checkbox' checked data-method='([^']+)'>", page)
    assert legend == ["rlvr", "random", "rlme_long", "rlvrr_direct"]
    collapse = as_dicts(parse_tables(page)["Collapse events"])
    assert collapse["rlvr"]["step"] == "30" and collapse["rlme_long"]["kind"] == "reward_hacking"


def without_bundle(page: str) -> str:
    """The page less the inlined Vega scripts (library code: its words are not the report's)."""
    return re.sub(r"<script>/\* vega[\w-]* [\w.-]+ \*/.*?</script>", "", page, flags=re.DOTALL)


def test_the_page_is_self_contained(built) -> None:
    _, _, page = built
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert "<link" not in page and "@import" not in page
    # The charts draw with the Vega bundle inlined, not fetched.
    assert not re.search(r"<script[^>]*\bsrc\s*=", page) and "cdn.jsdelivr" not in page
    assert [m for m in ("vega", "vega-lite", "vega-embed") if f"<script>/* {m} " in page] == [
        "vega", "vega-lite", "vega-embed"]


def test_missing_files_are_noted_not_fatal(tmp_path) -> None:
    metrics = {"rlvr": {0: METRICS["rlvr"][0]}, "random": {0: None}, "late": {0: None}}
    data = make_data(tmp_path, metrics=metrics, events={})
    import shutil

    shutil.rmtree(data / "plots" / "rlvr")                         # evaluated, no curves
    (data / "checkpoints" / "rlvr" / "seed0" / "run.json").unlink()  # and no run.json
    shutil.rmtree(data / "plots" / "late")                         # only a checkpoint folder left
    (data / "checkpoints" / "late" / "seed0" / "run.json").unlink()
    (data / "eval" / "base" / "metrics.json").write_text("{not json")  # a truncated file
    out = tmp_path / "reports"
    agg = rep.build(out, data)
    page = (out / "index.html").read_text()
    assert list(agg) == ["rlvr"]
    notes = "\n".join(re.findall(r"<li>(.*?)</li>", page))
    assert "random/seed0: curves but no evaluation" in notes
    assert "rlvr/seed0: evaluated but no curves" in notes
    assert "late/seed0: nothing to report yet" in notes
    assert "base/metrics.json: unreadable" in notes
    specs, titles = chart_titles(page)
    assert "random: train reward" in titles  # random's curves are drawn
    # each method's only seed is drawn solid
    assert all(r["first"] for s, t in zip(specs, titles) if t.startswith("train: ") for r in s["data"]["values"])


def test_a_test_curve_that_does_not_start_at_the_base_is_left_out_and_noted(tmp_path) -> None:
    """A run resumed before the test curve was checkpointed kept only the points after the resume:
    its first point is not the base, so the label's course and a rise-then-fall would read a wrong
    start. The reader leaves such a curve out (the label falls back to the test endpoints) and says
    so; a whole curve is kept."""
    data = make_data(tmp_path, metrics={"rlvr": {0: METRICS["rlvr"][0], 1: METRICS["rlvr"][0]}},
                     events={})
    whole = [{"step": s, "arith/pass@1": 0.3 + 0.001 * s} for s in (0, 25, 50, 75)]
    write(data / "plots" / "rlvr" / "seed0" / "test.json", whole)
    write(data / "plots" / "rlvr" / "seed1" / "test.json", whole[2:])
    collected = rep.collect(data)
    assert collected.runs["rlvr"][0].test == whole
    assert collected.runs["rlvr"][1].test == []
    assert [n for n in collected.notes if "test curve" in n] == [
        "rlvr/seed1: test curve starts at step 50, not at the base (a resumed run); left out"]


def test_an_empty_data_folder_gives_an_empty_report(tmp_path) -> None:
    out = tmp_path / "reports"
    assert rep.build(out, tmp_path / "nothing-here") == {}
    page = (out / "index.html").read_text()
    assert "No evaluations found" in page and "No training curves found" in page
    assert (out / "summary.md").read_text().startswith("# Reward methods compared")


def test_hostile_values_are_skipped_and_escaped(tmp_path) -> None:
    metrics = {"rlvr": {0: {"arith/pass@1": float("nan"), "arith/pass@k": "high", "arith/n": True,
                            "arith_cf/cheat_rate": float("inf"), "facts/coverage": 0.5}}}
    events = {("rlvr", 0): [{"kind": "<script>alert(1)</script>", "step": 10, "message": "<b>x</b>"},
                            {"kind": "length", "step": "soon"}, "not an event"]}
    data = make_data(tmp_path, metrics=metrics, events=events)
    write(data / "plots" / "rlvr" / "seed0" / "heldout.json",
          [{"step": 0, "arith/pass@1": float("nan")}, {"step": 10, "arith/pass@1": 0.2}, "junk", 5])
    write(data / "eval" / "weird<name>" / "seed0" / "metrics.json", {"arith/pass@1": 0.1})
    out = tmp_path / "reports"
    agg = rep.build(out, data)
    assert set(agg["rlvr"]) == {"facts/coverage"}  # NaN, inf, strings and booleans are not metrics
    page = (out / "index.html").read_text()
    assert "<script>alert" not in page and "&lt;script&gt;" in page and "<b>x</b>" not in page
    assert "weird&lt;name&gt;" in page and "weird<name>" not in page
    assert not re.search(r"\b(nan|inf|infinity)\b", without_bundle(page), flags=re.IGNORECASE)
    assert math.isfinite(agg["weird<name>"]["arith/pass@1"]["mean"])


def test_report_without_mlflow_uses_the_given_folders(tmp_path) -> None:
    data = make_data(tmp_path)
    agg = rep.report(load(preset="ci"), tmp_path / "out", data, track=False)
    assert (tmp_path / "out" / "index.html").exists() and "rlvr" in agg


def test_figure_draws_only_the_named_methods_as_a_vega_lite_spec(tmp_path) -> None:
    collected = rep.collect(make_data(tmp_path))
    spec = rep.figure(collected, "heldout:arith/pass@1", ["rlvr", "rlme_long"])
    assert spec["$schema"].endswith("/vega-lite/v5.json") and spec["title"] == "held-out: arith/pass@1"
    assert sorted(spec_runs(spec)) == [("rlme_long", 0), ("rlvr", 0), ("rlvr", 1)]
    assert sorted(e["kind"] for e in spec_events(spec)) == ["entropy", "reward_hacking"]  # both methods'
    line = next(layer for layer in spec["layer"] if layer["mark"]["type"] == "line")
    assert line["encoding"]["color"]["legend"] is not None  # a standalone figure carries its legend
    assert "random" not in json.dumps(spec) and "rlvrr_direct" not in json.dumps(spec)
    with pytest.raises(LookupError, match="nope"):
        rep.figure(collected, "heldout:arith/pass@1", ["rlvr", "nope"])
    with pytest.raises(ValueError, match="expected train:<key>"):
        rep.figure(collected, "arith/pass@1", ["rlvr"])
    with pytest.raises(LookupError, match="no heldout values"):
        rep.figure(collected, "heldout:facts/coverage", ["rlvr"])


def readme_rows(text: str) -> list[str]:
    """The results table's rows (group rows `**<group>**` and method rows), its cells joined by |."""
    return ["|".join(c.strip() for c in line.strip("|").split("|"))
            for line in text.splitlines() if line.startswith(("| `", "| **"))]


def test_the_readme_results_table_is_generated_from_the_metrics_files(tmp_path) -> None:
    """The README's results: the methods grouped by what they read (docs/methods/label_use.json:
    label-free first, the label readers' best the ceiling, a variant as its family when the family
    reads alike, else not measured), each group ranked and its best ★, the lab's collapse label and
    the detector's alarms side by side, the floor once under the table."""
    data = make_data(tmp_path)
    write(data / "runs" / "rlvrr_direct" / "train.json", {"grpo": {"task": "facts"}})
    readme = tmp_path / "README.md"
    readme.write_text(f"# Lab\n\nintro\n\n{rep.README_BEGIN}\nstale numbers\n{rep.README_END}\n\nrest\n")
    collected = rep.collect(data, ["rlvr", "random"])
    rep.update_readme(readme, rep.results_markdown(rep.aggregate(collected), collected, data))
    text = readme.read_text()
    assert text.startswith("# Lab\n\nintro\n\n") and text.endswith(f"{rep.README_END}\n\nrest\n")
    assert "stale numbers" not in text
    assert "| method | reads | task | headline (mean ± std) | vs base | seeds | collapsed | alarms |" in text
    assert readme_rows(text) == [
        "**label-free**|||||||",
        "`random` ★|nothing|arith|0.100|−0.100|1|1 of 1|1 of 1",
        "**reads references**|||||||",
        "`rlvrr_direct` ★|references (as rlvrr)|facts|0.700|+0.400|1|—|—",
        "**reads labels**|||||||",
        "`rlvr` ★ ceiling|answer|arith|0.500 ± 0.100|+0.300|2|0 of 2|1 of 2",
        # rlme's family holds a member that reads the answer (rlme_gt10): a variant is not guessed
        "**not measured**|||||||",
        "`rlme_long` ★|not measured|arith|0.300|+0.100|1|0 of 1|0 of 1"]
    assert "Headline metric and floor (the base, before training): arith pass@1 0.200; facts coverage 0.300." in text
    # The collapse label is named once, with the detector's measured rates beside it.
    assert text.count("test-split label") == 1
    assert "it misses 0 of 1 collapsed runs (0) and false-alarms on 1 of 3 healthy runs (0.33)" in text
    rep.update_readme(readme, "again")  # idempotent: the markers stay, once each
    assert readme.read_text().count(rep.README_BEGIN) == 1 and "again" in readme.read_text()
    readme.write_text("no markers")
    with pytest.raises(LookupError, match="no results section"):
        rep.update_readme(readme, "x")
    with pytest.raises(LookupError, match="no claims section"):
        rep.update_readme(readme, "x", rep.CLAIMS_BEGIN, rep.CLAIMS_END)
    with pytest.raises(LookupError, match="no make run section"):
        rep.update_readme(readme, "x", rep.RUN_BEGIN, rep.RUN_END)


def test_the_readme_claims_block_is_the_reports_verdict_table_and_alarm_rates(tmp_path) -> None:
    data = make_data(tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text(f"a\n{rep.CLAIMS_BEGIN}\nold verdicts\n{rep.CLAIMS_END}\nb\n")
    collected = rep.collect(data, ["rlvr", "random"])
    rep.update_readme(readme, rep.claims_readme(rep.with_studies(collected, data)),
                      rep.CLAIMS_BEGIN, rep.CLAIMS_END)
    text = readme.read_text()
    assert "old verdicts" not in text and text.startswith("a\n") and text.endswith("b\n")
    # One line per declared claim, each with its verdict; the README stays a front page (the full
    # table is the report's and reports/claims.json's) and counts collapse once, in its results.
    for claim in CLAIMS:
        assert f"| `{claim.id}` |" in text
    assert sum(text.count(f"**{v}**") for v in ("inconclusive", "reproduced", "not reproduced",
                                                 "not tested")) == len(CLAIMS)
    assert "collapse label" not in text and "healthy" not in text
    assert len(text.encode()) < 4 * 1024
    # What is still needed: the count of pipeline calls, their commands in the report's summary.
    found, _ = rep.verdicts(rep.with_studies(collected, data).runs)
    calls = len(rep.runs_needed(found))
    assert calls and (f"{calls} pipeline calls, each in [reports/summary.md]"
                      "(reports/summary.md#the-papers-claims)." in text)


# ------------------------------------------------------------------------------ the answer first

NOW = datetime(2025, 3, 4, 5, 6, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _default_preset(monkeypatch):
    """`load()` reads LAB_PRESET: these tests mean params.yaml's own preset (none)."""
    monkeypatch.delenv("LAB_PRESET", raising=False)


def sections(page: str) -> list[str]:
    return re.findall(r"<section id='([^']+)'>", page)


def first_table(page: str) -> str:
    return re.search(r"<table.*?</table>", page, flags=re.DOTALL).group(0)


def test_the_report_opens_with_the_headline_table_and_the_best_marked(tmp_path) -> None:
    data = make_data(tmp_path)
    write(data / "runs" / "rlvrr_direct" / "train.json", {"grpo": {"task": "facts"}})
    out = tmp_path / "reports"
    rep.build(out, data, order=["rlvr", "random"], now=NOW)
    page = (out / "index.html").read_text()
    assert sections(page) == ["result", "claims", "curves", "benchmarks", "collapse", "alarms", "urlvr", "leak",
                              "diagnostics", "records"]
    head, _, _ = page.partition("<section id='curves'>")
    assert "<figure class='vl'" not in head  # no curve before the answer (only the per-seed dots)
    # The answer first ("which reward can you trust without labels"), then the science section
    # opens with the papers' claims.
    assert "<h2>Which reward can you trust without labels?</h2>" in page
    assert "id='headline-arith'" in first_table(page)
    assert "<table class='claims text'>" in first_table(page.partition("<section id='claims'>")[2])
    # The arith table: the methods grouped by what they read (label-free first, then the label
    # readers, whose best is the ceiling, then a variant whose label use is not measured, the base
    # last: the floor), each group ranked by pass@1, its best starred.
    table = first_table(page.partition("<section id='result'>")[2])
    assert re.findall(r"data-group='([^']+)'", table) == ["label-free", "reads labels", "not measured", "base"]
    assert re.findall(r"data-method='([^']+)'", table) == ["random", "rlvr", "rlme_long", "base"]
    rows = parse_tables(table)[""]
    assert rows[0] == ["method", "reads", "pass@1 (mean ± std)", "vs base", "vs group's best [95% interval]",
                       "seeds", "collapsed (test-split label)", "detector alarms"]
    ranked = {r[0]: dict(zip(rows[0], r)) for r in rows[1:] if len(r) > 1}
    assert ranked["random"]["pass@1 (mean ± std)"] == "★ 0.100" and ranked["random"]["reads"] == "nothing"
    assert ranked["rlvr"]["pass@1 (mean ± std)"] == "★ 0.500 ± 0.100" and ranked["rlvr"]["reads"] == "answer"
    assert re.search(r"<tr class='best' data-method='random'>", table)  # the label-free best
    assert re.search(r"<tr class='ceiling' data-method='rlvr'>", table)
    assert ranked["rlvr"]["vs group's best [95% interval]"] == "ceiling"
    assert ranked["base"]["vs group's best [95% interval]"] == "floor"
    # One run against two is below the claims' minimum seeds (no per-item scores here: 5 per arm):
    # untested, neither tied nor separated, and the tooltip says why.
    assert ranked["random"]["vs group's best [95% interval]"] == "vs ceiling untested (< 5 seeds)"
    assert "needs 5 seeds per arm (random 1, rlvr 2)" in table
    assert ranked["rlvr"]["vs base"] == "+0.300" and ranked["random"]["vs base"] == "−0.100"
    assert "min–max 0.400–0.600: seed 0: 0.4 · seed 1: 0.6" in table  # every seed, in the tooltip
    assert ranked["rlvr"]["seeds"] == "2" and ranked["base"]["seeds"] == "1"
    # The lab's collapse label (random fell below the base on the test split), the detector's
    # alarms beside it (flows/alarms.py replays models/collapse.py on the curves).
    assert (ranked["random"]["collapsed (test-split label)"], ranked["random"]["detector alarms"]) == ("1 of 1",
                                                                                                      "1 of 1")
    assert (ranked["rlvr"]["collapsed (test-split label)"], ranked["rlvr"]["detector alarms"]) == ("0 of 2",
                                                                                                  "1 of 2")
    assert "seed 0 @ step 30" in table
    key = re.findall(r"<p class='key'>(.*?)</p>", page)
    assert "the claims&#x27; test (t-interval on per-seed means, items folded in, 95%" in key[0]
    assert "cannot separate from it: the interval of the difference contains 0" in key[0]
    assert "the test-split label" in key[1] and "false-alarms on 1 of 3 healthy runs (0.33)" in key[1]
    # facts: the variant trained on facts (its resolved settings say so), read as its family
    facts = parse_tables(page)["facts: coverage"]
    assert [r[:3] for r in facts if len(r) > 1][1:] == [["rlvrr_direct", "references (as rlvrr)", "★ 0.700"],
                                                         ["base", "", "0.300"]]
    answer = re.search(r"<ul class='answer'>(.*?)</ul>", page, flags=re.DOTALL).group(1)
    assert ("only label-free <b>random</b> 0.100, −0.100 over the floor (the base, 0.200); the ceiling rlvr "
            "0.500 ± 0.100 (reads labels), untested" in answer)
    assert "collapsed (test-split label): random 1 of 1" in answer
    assert "no label-free method trained on it; best rlvrr_direct (reads references) 0.700" in answer
    # Nothing stale or outdated here: no bookkeeping line; its section says so.
    assert "id='records-line'" not in page and "None: every run is current." in page


def test_a_tie_is_where_the_claims_test_cannot_separate_the_two(tmp_path) -> None:
    """≈ means the claims' own test (evals/stats.py) cannot tell a method from its group's best,
    not that the means lie within the sum of two standard deviations: b is 0.08 below a with
    sds of 0.05 (inside the old rule) and five seeds each, which Welch's interval separates; c
    is 0.01 below, which it cannot; d has too few seeds to test."""
    spread = (-0.06, -0.03, 0.0, 0.03, 0.06)
    metrics = {"a": {s: {"arith/pass@1": 0.60 + d} for s, d in enumerate(spread)},
               "b": {s: {"arith/pass@1": 0.52 + d} for s, d in enumerate(spread)},
               "c": {s: {"arith/pass@1": 0.59 + d} for s, d in enumerate(spread)},
               "d": {0: {"arith/pass@1": 0.10}}}
    data = make_data(tmp_path, metrics=metrics, events={})
    collected = rep.collect(data)
    uses = {m: rank.Use(rank.LABEL_FREE) for m in metrics}
    res, = rep.headline(collected, rep.aggregate(collected), data, uses=uses)
    assert res.best == {rank.LABEL_FREE: "a"} and res.ties == {rank.LABEL_FREE: ["c"]}
    b, c, d = (res.row(m).test for m in "bcd")
    assert b.separated and b.high < 0 and b.test == rank.WELCH
    assert (b.difference, b.low, b.high) == t_interval([0.52 + x for x in spread], [0.60 + x for x in spread])
    assert c.tied and not d.tested and "needs 5 seeds per arm (d 1, a 5)" in d.reason
    cells = {r[0]: r for r in parse_tables(rep.headline_html(res, {m: i for i, m in enumerate(metrics)}))[""]
             if len(r) > 1}
    assert cells["c"][2].startswith("≈ ") and not cells["b"][2].startswith("≈") and cells["a"][2].startswith("★")
    # Per-item scores in every run: the claims' per-item test, from 3 seeds per arm.
    for m, seeds in metrics.items():
        for s, row in seeds.items():
            ids = [f"i{k}" for k in range(20)]
            values = [row["arith/pass@1"] + (0.01 if k % 2 else -0.01) for k in range(20)]
            write(data / "eval" / m / f"seed{s}" / "items.json",
                  {"arith": {"ids": ids, "metrics": {"pass@1": values}}})
    collected = rep.collect(data)
    res, = rep.headline(collected, rep.aggregate(collected), data, uses=uses)
    assert res.row("b").test.test == TEST_ITEMS and res.row("b").test.separated
    assert res.row("d").test.reason.startswith("untested: the claims' t-interval on per-seed means, items "
                                               "folded in needs 3 seeds per arm (d 1, a 5)")


def test_the_answer_counts_seeds_as_a_range_and_the_collapse_column_wraps(tmp_path) -> None:
    """Seen on the report of record: "10 methods × 10 seeds" when one method had ten and most three,
    and a collapse cell of three events that pushed its own header off the first screen."""
    data = make_data(tmp_path)  # arith: rlvr two seeds, random and rlme_long one each
    write(data / "runs" / "rlvrr_direct" / "train.json", {"grpo": {"task": "facts"}})
    collected = rep.collect(data)
    results = {r.task: r for r in rep.headline(collected, rep.aggregate(collected), data)}
    assert "3 methods × 1–2 seeds): " in rep.answer_line(results["arith"])
    assert "1 method × 1 seed): " in rep.answer_line(results["facts"])
    table = rep.headline_html(results["arith"], {m: i for i, m in enumerate(METRICS)})
    assert "<th class='collapse'>collapsed (test-split label)</th><th class='collapse'>detector alarms</th>" in table
    assert "<td class='collapse' title='seed 0 @ step 30'>1 of 2</td>" in table
    rule = re.search(r"table\.headline td\.collapse[^{]*\{([^}]*)\}", rep._CSS)
    assert rule and "white-space:normal" in rule.group(1)


def test_the_task_comes_from_the_curves_when_the_run_settings_are_absent(tmp_path) -> None:
    """data/runs/ is a DVC output, absent from a fresh clone: the held-out curves name the task,
    so the README's results table does not turn every method into an arith one."""
    data = make_data(tmp_path, metrics={"rlvrr_direct": METRICS["rlvrr_direct"]}, events={})
    write(data / "plots" / "rlvrr_direct" / "seed0" / "heldout.json",
          [{"step": s, "facts/coverage": 0.5 + s / 100, "facts/n": 50, "train/reward": 0.1} for s in (0, 10)])
    collected = rep.collect(data)
    assert rep.run_task(data, "rlvrr_direct") == "arith"  # nothing else to go by
    assert rep.run_task(data, "rlvrr_direct", collected) == "facts"
    text = rep.results_markdown(rep.aggregate(collected), collected, data)
    assert "`rlvrr_direct` ★|references (as rlvrr)|facts|0.700|+0.400|1|" in "\n".join(readme_rows(text))


def test_a_stale_run_is_left_out_of_the_tables_alarms_charts_and_figures(tmp_path) -> None:
    """A run trained from another base than its study's current one (evals/lineage.py) counts
    nowhere: not in the tables, the collapse label and alarms, the charts or a --figure; the first
    screen says so in one line linking to the section that lists it."""
    data = make_data(tmp_path)
    write(data / "base_model" / "weights.txt", "the current base")
    write(data / "checkpoints" / "rlvr" / "seed1" / "run.json",
          {"method": "rlvr", "seed": 1, "base_model_md5": "0" * 32 + ".dir",
           "collapse_events": EVENTS[("rlvr", 1)]})
    out = tmp_path / "reports"
    rep.build(out, data, order=["rlvr", "random"], now=NOW)
    page = (out / "index.html").read_text()
    record = json.loads((out / "alarms.json").read_text())
    assert [(x["method"], x["seed"]) for x in record["left_out"]] == [("rlvr", 1)]
    assert ("rlvr", 1) not in {(r["method"], r["seed"]) for r in record["runs"]}
    assert ("rlvr", 1) not in {(r["method"], r["seed"]) for r in record["independent"]["runs"]}
    assert json.loads((out / "headline.json").read_text())["rlvr"] == {"arith/pass@1": 0.4,
                                                                        "arith/pass@1_std": 0.0}
    assert all(("rlvr", 1) not in spec_runs(spec) for spec in page_specs(page))
    assert "entropy below 0.05" not in page  # its collapse event is not drawn either
    line = re.search(r"<p class='records' id='records-line'>(.*?)</p>", page).group(1)
    assert "1 stale run left out</b></span> of every table and claim, and of the alarms and figures" in line
    assert "(<a href='#records'>which</a>)" in line
    listed = page.partition("<section id='records'>")[2].partition("</section>")[0]
    assert re.search(r"trained from base 00000000, the study&#x27;s base is now \w{8} \(dvc.lock\): rlvr\.", listed)
    assert "Stale runs are left out (1 here)" in page
    summary = (out / "summary.md").read_text()
    assert summary.splitlines()[2].startswith("> **1 stale run left out**")
    assert "## Stale and outdated runs" in summary
    collected = rep.collect(data)
    assert sorted(spec_runs(rep.figure(collected, "heldout:arith/pass@1", ["rlvr"]))) == [("rlvr", 0)]
    write(data / "checkpoints" / "random" / "seed0" / "run.json",
          {"method": "random", "seed": 0, "base_model_md5": "0" * 32 + ".dir"})
    with pytest.raises(LookupError, match="random: every run is stale"):
        rep.figure(rep.collect(data), "heldout:arith/pass@1", ["random"])


def git_short() -> str:
    return subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip() or "unknown"


@pytest.mark.parametrize("status, dirty", [
    ("", False),
    # What the pipeline rewrites while it runs is a result, not a change to the commit's code.
    ("M dvc.lock\n M reports/summary.md\n M data/eval/rlvr/seed0/metrics.json\n M studies/x/dvc.lock",
     False),
    ("M dvc.lock\n M flows/report.py", True),
    ("M params.yaml", True),
])
def test_the_header_flags_uncommitted_code_not_the_pipelines_results(tmp_path, monkeypatch,
                                                                     status, dirty) -> None:
    import flows.report_collect as rc

    monkeypatch.setattr(rc, "_git", lambda *args: status if args[0] == "status" else "abc1234")
    prov = rc.provenance(load(), rc.Collected(runs={}, notes=[]), make_data(tmp_path), now=NOW)
    assert (prov.commit, prov.dirty) == ("abc1234", dirty)


def test_the_header_says_preset_commit_date_and_seeds(tmp_path) -> None:
    data = make_data(tmp_path)
    write(data / "base_model_info.json", {"parameters": 1869504, "sft_steps": 900})
    out = tmp_path / "reports"
    rep.build(out, data, order=["rlvr"], params=load(), now=NOW)
    page = (out / "index.html").read_text()
    header = re.search(r"<header>.*?</header>", page, flags=re.DOTALL).group(0)
    prov = re.search(r"<p class='provenance'[^>]*>.*?</p>", header, flags=re.DOTALL).group(0)
    assert "data-preset='default'" in prov and "preset <b>default</b>" in prov
    assert f"commit <code>{git_short()}</code>" in prov and f"data-commit='{git_short()}'" in prov
    assert "built 2025-03-04 05:06 UTC" in prov
    planned = ", ".join(map(str, load().seeds))
    assert "seeds 0, 1" + ("" if planned == "0, 1" else f" (params.seeds: {planned})") in prov
    assert "1.87 M parameters, 900 SFT steps" in prov and "4 methods" in prov
    assert "class='smoke'" not in page and "Smoke test" not in page  # 150 steps, 200 items: a result
    assert "Smoke" not in (out / "summary.md").read_text()


def micro_params():
    """A `micro` preset (the `ci` settings under another name), as a fork of params.yaml might add."""
    raw = yaml.safe_load(PARAMS_FILE.read_text())
    raw["presets"]["micro"] = raw["presets"]["ci"]
    return validate(raw, preset="micro")


@pytest.mark.parametrize("params", [lambda: load(preset="ci"), micro_params], ids=["ci", "micro"])
def test_a_smoke_preset_gets_a_banner(tmp_path, params) -> None:
    params = params()
    out = tmp_path / "reports"
    rep.build(out, make_data(tmp_path), params=params, now=NOW)
    page = (out / "index.html").read_text()
    banner = re.search(r"<div class='smoke' id='smoke' role='alert'>(.*?)</div>", page, flags=re.DOTALL)
    assert banner and f"<strong>{rep.SMOKE_BANNER}</strong>" in banner.group(1)
    assert f"preset `{params.preset}` is a smoke test (grpo.max_steps = 2, eval.n_test = 8)" in banner.group(1)
    assert page.index("class='smoke'") < page.index("<section id='result'>")  # above the answer
    assert "<title>[smoke test]" in page
    summary = (out / "summary.md").read_text()
    assert summary.splitlines()[2].startswith(f"> **{rep.SMOKE_BANNER}**")


def test_smoke_data_gets_a_banner_whatever_the_preset(tmp_path) -> None:
    """A report built with the default params over a smoke run's files is still not a result."""
    metrics = {"rlvr": {0: {"arith/pass@1": 0.0, "arith/n": 8}}}
    data = make_data(tmp_path, metrics=metrics, base={"arith/pass@1": 0.0, "arith/n": 8}, events={},
                     steps=(0, 1, 2))
    out = tmp_path / "reports"
    rep.build(out, data, params=load(), now=NOW)
    banner = re.search(r"<div class='smoke'[^>]*>(.*?)</div>", (out / "index.html").read_text()).group(1)
    assert "tiny test sets: arith/n = 8" in banner and "at most 2 GRPO steps" in banner
    assert "preset" not in banner  # the default preset is not the reason


def test_counts_print_as_integers(tmp_path) -> None:
    metrics = {"rlvr": {0: {"arith/pass@1": 0.5, "arith/n": 8, "arith/mean_length": 8.0,
                            "self_eval/n": 8.0, "self_eval/auroc_q0": 0.75},
                        1: {"arith/pass@1": 0.7, "arith/n": 9, "arith/mean_length": 8.0,
                            "self_eval/n": 8.0, "self_eval/auroc_q0": 0.75}}}
    data = make_data(tmp_path, metrics=metrics, base={"arith/pass@1": 0.25, "arith/n": 8}, events={})
    out = tmp_path / "reports"
    rep.build(out, data)
    tables = parse_tables((out / "index.html").read_text())
    arith = as_dicts(tables["arith"])
    assert arith["base"]["n"] == "8"  # a JSON integer
    assert arith["rlvr"]["n"] == "8.5 ± 0.5"  # a mean of counts keeps its fraction, no 8.500
    assert arith["rlvr"]["mean_length"] == "8.000"  # a float metric that happens to be whole
    assert as_dicts(tables["self_eval"])["rlvr"]["n"] == "8"  # written 8.0, named as a count
    assert "8.000 |" not in (out / "summary.md").read_text().split("## self_eval")[1]
    assert rep.count_keys(rep.collect(data)) == {"arith/n", "self_eval/n"}
    assert rep.cell({"mean": 8.0, "std": 0.0, "n": 3}, 3, count=True) == "8"
    assert rep.cell({"mean": 8.0, "std": 0.0, "n": 3}, 3) == "8.000"


# ------------------------------------------------------------------------------ dvc plots

def dvc_yaml() -> dict:
    return yaml.safe_load((ROOT / "dvc.yaml").read_text())


def test_the_dvc_heldout_plot_shows_the_headline_metric() -> None:
    """Without `y`, DVC draws a file's last column: `train/reward` under the name heldout.json."""
    plots = {}
    for entry in dvc_yaml()["stages"]["train"]["plots"]:
        (path, props), = entry.items()
        plots[path.rsplit("/", 1)[1]] = props
    assert plots["train.json"] == {"cache": False, "x": "step", "y": "reward"}
    assert plots["heldout.json"]["x"] == "step"
    assert plots["heldout.json"]["y"] == rep.TASK_HEADLINE[load().grpo.task][0] == "arith/pass@1"


def test_dvc_top_level_plots_overlay_every_method_on_its_task_headline() -> None:
    params = load()
    top = {}
    for entry in dvc_yaml()["plots"]:
        (plot_id, props), = entry.items()
        top[plot_id] = props
    drawn: dict[str, set[str]] = {}
    for plot_id, props in top.items():
        assert props["x"] == "step" and isinstance(props["y"], dict), plot_id
        assert props["template"] == "overlay"
        for path, field in props["y"].items():
            m = re.fullmatch(r"data/plots/([^/]+)/seed\d+/heldout\.json", path)  # a line per recorded run
            assert m, path
            drawn.setdefault(m.group(1), set()).add(field)
    assert set(drawn) == set(params.methods)  # every method of the study, none twice per metric
    for method, fields in drawn.items():
        assert fields == set(rep.TASK_HEADLINE[params.method_grpo(method).task]), method
    template = json.loads((ROOT / ".dvc" / "plots" / "overlay.json").read_text())
    text = json.dumps(template)
    for anchor in ("DATA", "X", "Y", "TITLE", "X_LABEL", "Y_LABEL"):
        assert f"<DVC_METRIC_{anchor}>" in text
    assert template["encoding"]["color"]["field"] == "filename"  # a colour per method's run


def test_the_dvc_plots_page_template_is_offline() -> None:
    """DVC's default page loads Vega from a CDN; the configured template inlines it."""
    config = configparser.ConfigParser()
    config.read(ROOT / ".dvc" / "config")
    template = (ROOT / ".dvc" / config["plots"]["html_template"]).resolve()
    assert template == ROOT / "docs" / "vega" / "plots_template.html"
    page = template.read_text(encoding="utf-8")
    assert "{plot_divs}" in page and "{scripts}" not in page  # DVC's CDN tags have nowhere to go
    assert not re.search(r"<script[^>]*\bsrc\s*=", page, flags=re.IGNORECASE)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page, flags=re.IGNORECASE)
    assert "<link" not in page.lower()
    for bundle in ("vega 5.", "vega-lite 5.", "vega-embed 6."):
        assert f"<script>/* {bundle}" in page
    assert template.stat().st_size < 1_500_000
    assert "dvc_plots/" in (ROOT / ".gitignore").read_text().splitlines()


def test_the_readme_says_what_make_run_cost_from_the_recorded_times(tmp_path) -> None:
    """`make run`'s cost on the front page comes from the times the pipeline recorded, not prose."""
    from flows.pipeline import write_times

    times = tmp_path / "quick.json"
    assert rep.run_cost_line(times) == ""  # nothing recorded yet: nothing said
    write_times(times, {"prepare": (0.0, 1.0), "train@rlvr-0": (1.0, 601.0), "train@dro-0": (1.0, 721.0)},
                {"prepare": {"action": "skip"}, "train@rlvr-0": {"action": "run"},
                 "train@dro-0": {"action": "run"}}, {}, 725.0, 2)
    line = rep.run_cost_line(times)
    assert "took 12 min" in line and "2 of 3 stages ran" in line and "`train@dro-0`, 12 min" in line


def test_a_run_with_collapse_events_keeps_its_task_overlay_in_dvc_plots(tmp_path) -> None:
    """The held-out file a training writes (`flows.train.plot_rows`) is one DVC can overlay: a row
    holding the callback's `events` list made `dvc plots show` drop the whole chart (every method's
    curve on that task), which a raw history still does here."""
    from flows.train import plot_rows

    history = [{"step": 0, "arith/pass@1": 0.3, "train/reward": None},
               {"step": 25, "arith/pass@1": 0.5, "train/reward": 0.4, "events": ["reward_hacking"]}]
    calm = [{"step": 0, "arith/pass@1": 0.3}, {"step": 25, "arith/pass@1": 0.6}]
    dvc = str(Path(sys.executable).with_name("dvc"))

    def shown(rows: list[dict]) -> dict:
        work = tmp_path / str(len(list(tmp_path.iterdir())))
        work.mkdir()
        subprocess.run([dvc, "init", "--no-scm", "-q"], cwd=work, check=True)
        (work / "hacked.json").write_text(json.dumps(rows))
        (work / "calm.json").write_text(json.dumps(calm))
        (work / "dvc.yaml").write_text("plots:\n  - heldout:\n      x: step\n      y:\n"
                                       "        hacked.json: arith/pass@1\n        calm.json: arith/pass@1\n")
        out = subprocess.run([dvc, "plots", "show", "--json"], cwd=work, capture_output=True, text=True)
        return json.loads(out.stdout)

    assert shown(history)["data"]["heldout"] == []  # the failure this guards against
    fixed = shown(plot_rows(history))
    assert "errors" not in fixed or not fixed["errors"], fixed.get("errors")
    assert len(fixed["data"]["heldout"]) == 1 and all("events" not in r for r in plot_rows(history))
    assert len(fixed["data"]["heldout"][0]["content"]["data"]["values"]) == 4  # both runs, both steps


def test_runs_recorded_with_code_head_has_changed_are_counted_per_study(tmp_path) -> None:
    """A run whose run file in dvc.lock (settings + code digest) is not what `configure` writes at
    HEAD is counted as outdated, per study; a run at HEAD's is not; the first screen says so."""
    from flows.report_collect import outdated_runs, outdated_summary, run_file_md5s

    (tmp_path / "params.yaml").write_text(PARAMS_FILE.read_text(encoding="utf-8"), encoding="utf-8")
    params = load(PARAMS_FILE)
    head = run_file_md5s(params, ["rlvr", "rlme"])

    def lock(stages: dict) -> str:
        return yaml.safe_dump({"schema": "2.0", "stages": {
            name: {"cmd": "x", "deps": [{"path": path, "md5": md5} for path, md5 in deps]}
            for name, deps in stages.items()}})

    runs = "data/runs/{}/{}.json"
    (tmp_path / "dvc.lock").write_text(lock({
        "train@rlvr-0": [(runs.format("rlvr", "train"), head[runs.format("rlvr", "train")])],
        "evaluate@rlvr-0": [(runs.format("rlvr", "evaluate"), head[runs.format("rlvr", "evaluate")])],
        "train@rlme-0": [(runs.format("rlme", "train"), "0" * 32)],      # trained at older code
        "train_extra@rlme-3": [(runs.format("rlme", "train"), "0" * 32)],
        "evaluate_base": [("data/runs/base/evaluate.json", "1" * 32)],  # evaluated at older code
        "build_base": [("data/runs/base/build.json", "2" * 32)],        # not a run: not judged
    }), encoding="utf-8")
    assert outdated_runs(tmp_path) == {"default": {"train": 2, "evaluate": 1}}

    # A study's record is judged against the params its workspace runs with (its preset, its arms).
    rec = tmp_path / "studies" / "hint_copier"
    rec.mkdir(parents=True)
    (rec / "study.json").write_text(json.dumps({"preset": "hint_copier", "methods": ["rlvr"]}))
    hinted = validate({**yaml.safe_load(PARAMS_FILE.read_text(encoding="utf-8")),
                       "preset": "hint_copier", "methods": ["rlvr"]}, "t", "hint_copier")
    at_head = run_file_md5s(hinted, ["rlvr"])[runs.format("rlvr", "train")]
    (rec / "dvc.lock").write_text(lock({"train@rlvr-0": [(runs.format("rlvr", "train"), at_head)],
                                        "train@rlvr-1": [(runs.format("rlvr", "train"), "3" * 32)]}))
    got = outdated_runs(tmp_path)
    assert got["hint_copier"] == {"train": 1, "evaluate": 0}
    assert "default: 2 trainings, 1 evaluation; hint_copier: 1 training." in outdated_summary(got)
    # Not a checkout of the lab: nothing to judge, no error.
    assert outdated_runs(tmp_path / "studies") == {}


def test_the_worked_examples_of_report_collect_pass() -> None:
    """flows/ is outside the doctest paths of pyproject.toml; the reading half's examples still
    run (the outdated-run count among them)."""
    import doctest

    from flows import report_collect

    result = doctest.testmod(report_collect)
    assert result.attempted > 0 and result.failed == 0


def test_the_worked_examples_of_the_reports_parts_pass() -> None:
    """The first screen's parts (its ranking, its drawing, the README's blocks, the number
    formats) and the alarms keep their docstring examples true, though flows/ is outside the
    doctest paths."""
    import doctest

    from flows import (
        alarms,
        report_answer,
        report_claims,
        report_format,
        report_rank,
        report_readme,
    )

    for module in (report_rank, report_answer, report_format, report_readme, report_claims, alarms):
        result = doctest.testmod(module)
        assert result.failed == 0, module.__name__
    assert doctest.testmod(report_rank).attempted and doctest.testmod(report_answer).attempted


def test_make_results_writes_the_readme_table_the_report_opens_with(tmp_path, monkeypatch) -> None:
    """`make results` (the report, then `--readme`): the README's three blocks from the records
    the report read, its results table the one reports/summary.md opens with, its bookkeeping line
    linking to that file's section."""
    data = make_data(tmp_path)
    write(data / "base_model" / "weights.txt", "the current base")
    write(data / "checkpoints" / "rlvr" / "seed1" / "run.json",
          {"method": "rlvr", "seed": 1, "base_model_md5": "0" * 32 + ".dir"})
    readme = tmp_path / "README.md"
    readme.write_text("\n".join(f"{b}\nold\n{e}" for b, e in ((rep.RUN_BEGIN, rep.RUN_END),
                                                            (rep.README_BEGIN, rep.README_END),
                                                            (rep.CLAIMS_BEGIN, rep.CLAIMS_END))) + "\n")
    out = tmp_path / "reports"
    rep.build(out, data, order=load().methods, params=load())
    monkeypatch.setattr(sys, "argv", ["flows.report", "--readme", str(readme), "--data-dir", str(data)])
    rep.main()
    text = readme.read_text()
    assert "\nold\n" not in text and "`make run` trains " in text
    block = text.partition(rep.README_BEGIN)[2].partition(rep.README_END)[0]
    summary = (out / "summary.md").read_text()
    assert readme_rows(block) and readme_rows(block) == readme_rows(summary.partition("## Methods compared")[0])
    assert "**1 stale run left out**" in block and "(reports/summary.md#stale-and-outdated-runs)" in block
    assert "## Stale and outdated runs" in summary  # the heading that anchor names


def test_the_first_screen_names_what_each_arm_did_on_the_engineered_bases(tmp_path) -> None:
    """A study whose base's premises are measured (an engineered base, docs/bases.md) gets one
    sentence under the answer: the premises that hold there and each arm against that base."""
    data = make_data(tmp_path)
    study = tmp_path / "studies" / "cal" / "data" / "eval"
    write(study / "base" / "metrics.json", {"arith/pass@1": 0.1})
    write(study / "base" / "premises.json", {"holds/room_to_sharpen": True, "holds/latent_skill": False})
    write(study / "entropy" / "seed0" / "metrics.json", {"arith/pass@1": 0.25})
    write(study / "entropy" / "seed1" / "metrics.json", {"arith/pass@1": 0.35})
    out = tmp_path / "reports"
    rep.build(out, data, order=["rlvr", "random"], now=NOW)
    page = (out / "index.html").read_text()
    answer = re.search(r"<ul class='answer'>(.*?)</ul>", page, flags=re.DOTALL).group(1)
    sentence = ("cal (premises that hold: room_to_sharpen): entropy +0.200 (2 seeds) over its "
                "base&#x27;s 0.100")
    assert sentence in answer and "<b>on the engineered bases</b> (arith pass@1" in answer
    assert sentence.replace("&#x27;", "'") in (out / "summary.md").read_text()
    # Without a premises record the study's base is not an engineered one: no sentence.
    (study / "base" / "premises.json").unlink()
    rep.build(out, data, order=["rlvr", "random"], now=NOW)
    assert "engineered bases" not in (out / "index.html").read_text()
