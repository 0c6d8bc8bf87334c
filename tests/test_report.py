"""The `report` stage (flows/report.py) on a synthetic data folder: tables per benchmark with
mean ± std over seeds, overlaid curves with collapse markers, and no crash on missing files."""

from __future__ import annotations

import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from flows import report as rep

# method -> seed -> metrics.json (None: no evaluation for that run)
METRICS = {
    "rlvr": {0: {"arith/pass@1": 0.4, "arith/pass@k": 0.6, "arith/n": 20, "arith_cf/cheat_rate": 0.05,
                 "eval_seconds": 3.0},
             1: {"arith/pass@1": 0.6, "arith/pass@k": 0.8, "arith/n": 20, "arith_cf/cheat_rate": 0.03,
                 "eval_seconds": 4.0}},
    "random": {0: {"arith/pass@1": 0.1, "arith/pass@k": 0.2, "arith/n": 20, "arith_cf/cheat_rate": 0.04}},
    "rlvrr_direct": {0: {"facts/coverage": 0.7, "facts/style_adherence": 0.5, "facts/n": 10}},
    "rlme_long": {0: {"arith/pass@1": 0.3, "pairs/outcome_acc": 0.55}},
}
BASE = {"arith/pass@1": 0.2, "arith/pass@k": 0.5, "arith/n": 20, "arith_cf/cheat_rate": 0.04,
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
    assert arith["rlvr"]["n"] == "20"  # a count identical over seeds shows no spread
    assert arith["rlme_long"]["pass@k"] == "—"  # a metric that run lacks
    assert list(tables["arith"][0][:4]) == ["method", "seeds", "pass@1", "pass@k"]
    assert list(as_dicts(tables["facts"])) == ["base", "rlvrr_direct"]
    assert list(as_dicts(tables["pairs"])) == ["base", "rlme_long"]
    assert agg["rlvr"]["arith/pass@1"] == {"mean": 0.5, "std": pytest.approx(0.1), "n": 2}
    assert json.loads((out / "metrics.json").read_text())["rlvr"]["arith/pass@1"]["n"] == 2


def test_summary_markdown_keeps_the_headline_table(built) -> None:
    out, _, _ = built
    summary = (out / "summary.md").read_text()
    assert summary.splitlines()[2].startswith("| method | arith/pass@1 |")
    for method in ("base", "rlvr", "random", "rlvrr_direct", "rlme_long"):
        assert f"| {method} |" in summary
    assert "## Collapse events" in summary and "reward_hacking" in summary


def test_curves_overlay_every_method_with_collapse_markers(built) -> None:
    _, _, page = built
    svgs = re.findall(r"<svg class=\"chart\".*?</svg>", page, flags=re.DOTALL)
    titles = [re.search(r'aria-label="([^"]+)"', s).group(1) for s in svgs]
    assert titles[:3] == ["train: reward", "train: entropy", "train: completion_length"]
    assert "held-out: arith/pass@1" in titles and "train: reward_std" not in titles
    assert not any(t.startswith("held-out: train/") or t.endswith("/n") for t in titles)
    reward = svgs[titles.index("train: reward")]
    # every trained method (base has no curve) on the same chart; rlvr once per seed
    classes = re.findall(r'<g class="(m\d+)" opacity', reward)
    assert len(classes) == 5 and len(set(classes)) == 4
    markers = re.findall(r'<g class="m\d+ event"><title>([^<]*)</title>.*?class="event-label"[^>]*>(\w+)<',
                         reward)
    assert sorted(kind for _, kind in markers) == ["entropy", "reward_hacking"]
    assert any("rlme_long seed 0: reward_hacking collapse at step 20" in tip for tip, _ in markers)
    legend = re.findall(r"<label><input type='checkbox' checked data-cls='(m\d+)'>.*?</span>([^<]+)</label>",
                        page)
    assert [name for _, name in legend] == ["rlvr", "random", "rlme_long", "rlvrr_direct"]
    collapse = as_dicts(parse_tables(page)["Collapse events"])
    assert collapse["rlvr"]["step"] == "30" and collapse["rlme_long"]["kind"] == "reward_hacking"


def test_the_page_is_self_contained(built) -> None:
    _, _, page = built
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert "<link" not in page and "@import" not in page


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
    svgs = re.findall(r"<svg class=\"chart\".*?</svg>", page, flags=re.DOTALL)
    assert svgs and all('opacity="1.0"' in s for s in svgs)  # random's curves are drawn


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
    assert not re.search(r"\b(nan|inf|infinity)\b", page, flags=re.IGNORECASE)
    assert math.isfinite(agg["weird<name>"]["arith/pass@1"]["mean"])


def test_report_without_mlflow_uses_the_given_folders(tmp_path) -> None:
    from core.params import load

    data = make_data(tmp_path)
    agg = rep.report(load(preset="ci"), tmp_path / "out", data, track=False)
    assert (tmp_path / "out" / "index.html").exists() and "rlvr" in agg


def test_figure_draws_only_the_named_methods_as_a_standalone_svg(tmp_path) -> None:
    collected = rep.collect(make_data(tmp_path))
    svg = rep.figure(collected, "heldout:arith/pass@1", ["rlvr", "rlme_long"])
    assert svg.startswith("<svg") and svg.endswith("</svg>") and "<style>" in svg  # styles inlined
    lines = re.findall(r'<g class="(m\d+)" opacity="[^"]+"><title>([^<]+)</title>', svg)
    assert sorted(t for _, t in lines) == ["rlme_long seed 0", "rlvr seed 0", "rlvr seed 1"]
    assert "reward_hacking" in svg and "entropy" in svg  # both methods' collapse markers
    assert "random" not in svg and "rlvrr_direct" not in svg
    with pytest.raises(LookupError, match="nope"):
        rep.figure(collected, "heldout:arith/pass@1", ["rlvr", "nope"])
    with pytest.raises(ValueError, match="expected train:<key>"):
        rep.figure(collected, "arith/pass@1", ["rlvr"])
    with pytest.raises(LookupError, match="no heldout values"):
        rep.figure(collected, "heldout:facts/coverage", ["rlvr"])


def test_the_readme_results_table_is_generated_from_the_metrics_files(tmp_path) -> None:
    data = make_data(tmp_path)
    write(data / "runs" / "rlvrr_direct" / "train.json", {"grpo": {"task": "facts"}})
    readme = tmp_path / "README.md"
    readme.write_text(f"# Lab\n\nintro\n\n{rep.README_BEGIN}\nstale numbers\n{rep.README_END}\n\nrest\n")
    collected = rep.collect(data, ["rlvr", "random"])
    rep.update_readme(readme, rep.results_markdown(rep.aggregate(collected), collected, data))
    text = readme.read_text()
    assert text.startswith("# Lab\n\nintro\n\n") and text.endswith(f"{rep.README_END}\n\nrest\n")
    assert "stale numbers" not in text
    rows = {line.split(" | ")[0].strip("| `"): line for line in text.splitlines()
            if line.startswith("| `")}
    assert list(rows)[:2] == ["rlvr", "random"]  # the study's order
    assert "| arith | pass@1 | 0.200 | 0.500 ± 0.100 | 2 | seed 1 |" in rows["rlvr"]
    assert "| facts | coverage | 0.300 | 0.700 | 1 | none |" in rows["rlvrr_direct"]
    rep.update_readme(readme, "again")  # idempotent: the markers stay, once each
    assert readme.read_text().count(rep.README_BEGIN) == 1 and "again" in readme.read_text()
    readme.write_text("no markers")
    with pytest.raises(LookupError, match="no results section"):
        rep.update_readme(readme, "x")
