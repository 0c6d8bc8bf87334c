"""flows/charts.py: one chart definition for the report and `dvc plots`, Vega-Lite specs embedded
in the report with the Vega bundle inlined, and the `--figure` files."""

from __future__ import annotations

import doctest
import json
import re
import subprocess
import sys

import pytest

from core.params import ROOT
from flows import charts
from flows import report as rep
from tests.test_report import make_data, page_specs


@pytest.fixture()
def page(tmp_path) -> str:
    out = tmp_path / "reports"
    rep.build(out, make_data(tmp_path), order=["rlvr", "random"])
    return (out / "index.html").read_text(encoding="utf-8")


def layers(spec: dict) -> list[dict]:
    return spec.get("layer", [spec])


def test_the_doctests_of_flows_charts_pass() -> None:
    """flows/ is outside the doctest paths of pyproject.toml; the worked examples still run."""
    result = doctest.testmod(charts)
    assert result.attempted >= 5 and result.failed == 0


def test_the_dvc_template_is_generated_from_the_chart_definition() -> None:
    """`.dvc/plots/overlay.json` is `dvc_template()`: regenerate it with
    `python -m flows.charts --dvc-template` after changing the definition."""
    committed = (ROOT / ".dvc" / "plots" / "overlay.json").read_text(encoding="utf-8")
    assert committed == charts.dvc_template_text()


def test_the_report_and_dvc_plots_draw_a_curve_alike(page) -> None:
    """The report's curves and the DVC template come from `line_unit`: same mark, x axis, y scale,
    look and palette; only the data's names differ (DVC's anchors)."""
    dvc = charts.dvc_template()
    for spec in page_specs(page):
        if "title" not in spec:
            continue  # the per-seed dots under the tables are not curves
        line = next(layer for layer in spec["layer"] if layer["mark"]["type"] == "line")
        assert line["mark"]["type"] == dvc["mark"]["type"] and spec["config"] == dvc["config"]
        assert line["encoding"]["x"]["title"] == "GRPO step"
        assert line["encoding"]["x"]["scale"] == dvc["encoding"]["x"]["scale"]
        assert line["encoding"]["y"]["scale"] == dvc["encoding"]["y"]["scale"] == {"zero": False}
        assert line["encoding"]["y"]["axis"] == dvc["encoding"]["y"]["axis"]
        assert set(line["encoding"]["color"]["scale"]["range"]) <= set(dvc["encoding"]["color"]["scale"]["range"])


def test_dvc_fills_the_template_with_a_run_per_file() -> None:
    """DVC's renderer (dvc-render, as `dvc plots show` calls it) fills every anchor of the template."""
    from dvc_render.vega import VegaRenderer
    from dvc_render.vega_templates import Template

    points = [{"step": s, "arith/pass@1": 0.1 * s, "rev": "workspace", "filename": f"data/plots/{m}/seed0/heldout.json",
               "field": "arith/pass@1"} for m in ("rlvr", "rlme") for s in (0, 1)]
    filled = VegaRenderer(points, "heldout", template=Template(charts.dvc_template(), "overlay"), x="step",
                          y="arith/pass@1", title="held-out", x_label="GRPO step", y_label="pass@1",
                          ).get_filled_template()
    assert "<DVC_METRIC" not in json.dumps(filled)
    assert filled["data"]["values"] == points and filled["title"] == "held-out"
    assert filled["encoding"]["y"]["field"] == "arith/pass@1" and filled["encoding"]["y"]["title"] == "pass@1"
    assert filled["encoding"]["color"]["field"] == "filename"


def test_every_chart_gives_a_method_the_colour_of_its_legend_swatch(page) -> None:
    swatch = dict(re.findall(r"data-method='([^']+)'><span class='swatch' style='background:(#\w+)'>", page))
    assert set(swatch) == {"rlvr", "random", "rlme_long", "rlvrr_direct"}
    assert len(set(swatch.values())) == len(swatch)  # one colour each
    for spec in page_specs(page):
        for layer in layers(spec):
            color = layer.get("encoding", {}).get("color", {})
            if color.get("field") != "method":
                continue
            mapped = dict(zip(color["scale"]["domain"], color["scale"]["range"]))
            assert all(mapped[m] == c for m, c in swatch.items() if m in mapped), spec.get("description")


def test_unticking_a_method_reaches_every_layer_that_draws_methods(page) -> None:
    """The legend sets the page-wide `hidden` parameter; each layer drawing a method filters it."""
    specs = page_specs(page)
    assert specs
    for spec in specs:
        assert {"name": charts.HIDDEN, "value": []} in spec["params"]
        for layer in layers(spec):
            if layer.get("encoding", {}).get("color", {}).get("field") == "method":
                assert layer["transform"][0] == {"filter": f"indexof({charts.HIDDEN}, datum.method) < 0"}
    assert "view.signal('hidden', off)" in page


def test_the_headline_chart_is_mean_and_band_over_seeds(page) -> None:
    spec = next(s for s in page_specs(page) if s.get("title") == "held-out arith/pass@1 (arith)")
    rows = spec["data"]["values"]
    assert sorted((r["method"], r["seed"]) for r in rows) == [("random", 0), ("rlme_long", 0), ("rlvr", 0),
                                                              ("rlvr", 1)]
    assert all(r["step"] == [0, 10, 20, 30, 40] and len(r["value"]) == 5 for r in rows)
    marks = [layer["mark"]["type"] for layer in spec["layer"]]
    assert marks[-2:] == ["area", "line"]  # min-max band, then the mean on top
    stats = spec["layer"][-1]["transform"]
    assert charts.FLATTEN in stats
    agg = next(t["aggregate"] for t in stats if "aggregate" in t)
    assert {a["op"] for a in agg} == {"mean", "min", "max", "distinct"}


def test_the_per_seed_dots_sit_under_each_headline_table(page) -> None:
    result = page.partition("<section id='result'>")[2].partition("</section>")[0]
    seeds = [json.loads(s) for s in re.findall(r"<figure class='vl seeds'[^>]*><div class='vl-view'></div>"
                                              r"<script type='application/json' class='vl-spec'>(.*?)</script>",
                                              result)]
    arith = next(s for s in seeds if s["description"] == "arith/pass@1 per seed")
    values = sorted((r["method"], r["seed"], r["value"]) for r in arith["data"]["values"])
    assert ("rlvr", "seed 0", 0.4) in values and ("rlvr", "seed 1", 0.6) in values
    assert ("base", "base", 0.2) in values
    base_rule = next(layer for layer in arith["layer"] if layer["mark"]["type"] == "rule")
    assert base_rule["data"]["values"] == [{"base": 0.2}]
    order = next(layer for layer in arith["layer"] if layer["mark"]["type"] == "circle")["encoding"]["y"]["sort"]
    table = re.search(r"<table class='headline' id='headline-arith'>.*?</table>", result).group(0)
    assert order == re.findall(r"data-method='([^']+)'", table)  # the table's order: grouped, ranked
    assert order == ["random", "rlvr", "rlme_long", "base"]


def test_specs_cannot_close_their_script_element() -> None:
    spec = {"title": "</script><script>alert(1)</script>", "x": "a & b"}
    text = charts.spec_json(spec)
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == spec
    assert "</script>alert" not in charts.embed(spec)


def test_the_bundle_is_the_dvc_templates(tmp_path) -> None:
    scripts = charts.bundle()
    assert [m for m in ("vega", "vega-lite", "vega-embed") if f"<script>/* {m} " in scripts] == [
        "vega", "vega-lite", "vega-embed"]
    assert scripts.count("<script>") == 3 and scripts.count("</script>") == 3
    broken = tmp_path / "template.html"
    broken.write_text("<html>{plot_divs}</html>")
    with pytest.raises(LookupError, match="build_template.py"):
        charts.bundle(broken)


def test_a_report_without_curves_inlines_no_bundle(tmp_path) -> None:
    out = tmp_path / "reports"
    rep.build(out, tmp_path / "nothing-here")
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "<figure class='vl" not in page and "vega-embed" not in page


def figure_cli(data, out) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flows.report", "--figure", "heldout:arith/pass@1", "--methods",
                           "rlvr", "rlme_long", "--data-dir", str(data), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


def test_the_figure_command_writes_an_offline_page_or_the_spec(tmp_path) -> None:
    data = make_data(tmp_path)
    page = tmp_path / "fig.html"
    r = figure_cli(data, page)
    assert r.returncode == 0, r.stderr[-2000:]
    text = page.read_text(encoding="utf-8")
    assert "<script>/* vega-embed " in text and not re.search(r"<script[^>]*\bsrc\s*=", text)
    (spec,) = page_specs(text)
    assert spec["title"] == "held-out: arith/pass@1"
    assert sorted({r["method"] for r in spec["data"]["values"]}) == ["rlme_long", "rlvr"]
    r = figure_cli(data, tmp_path / "fig.json")
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads((tmp_path / "fig.json").read_text()) == spec
    r = figure_cli(data, tmp_path / "fig.svg")
    assert r.returncode == 2 and not (tmp_path / "fig.svg").exists()
    assert "--out" in r.stderr and ".html" in r.stderr and "Traceback" not in r.stderr
