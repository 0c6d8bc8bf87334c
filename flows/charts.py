"""The lab's charts as Vega-Lite specs: one definition for the report and for `dvc plots`.

`reports/index.html` (flows/report.py) and `dvc plots show` draw the same curves, so they share
one chart definition here: `line_unit` is the line of a curve (x the GRPO step, y the value, a
colour per run, zero left off the y scale, a tooltip) with `CONFIG`'s look and `PALETTE`'s
colours. The report builds its specs from it (`overlay_spec`: one line per run and seed;
`mean_band_spec`: mean over seeds and min–max band; the collapse events as dashed rules), and
`dvc_template` builds the DVC template `.dvc/plots/overlay.json` from it (DVC's `<DVC_METRIC_*>`
anchors in the place of the report's data and field names; regenerate it with
`python -m flows.charts --dvc-template`, a test checks the committed file is current).

Both render offline. Vega, Vega-Lite and Vega-Embed are bundled once, in
docs/vega/plots_template.html (the page `dvc plots show` fills, built by
docs/vega/build_template.py); the report inlines the same three scripts (`bundle`) and embeds
each chart's spec as JSON beside its `<div>`, so the page needs no network, no CDN and no
plotting library in Python. Why Vega-Lite rather than hand-drawn SVG or matplotlib: the ticks,
axes, legends and tooltips come from a library that DVC already uses, a chart is data plus a
short declaration (the spec is the figure: `--figure ... --out fig.json` writes it), and
vega-embed's menu exports any chart as SVG or PNG.
"""

from __future__ import annotations

import argparse
import html
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.params import ROOT
from flows.report_collect import Collected, number
from flows.report_rank import TaskResult

# Colour i of a method (its index in the report's colour order); DVC cycles through the same.
# Tableau's ten without its grey (grey is the base's), then ten darker or lighter hues, so a study
# of up to 19 arms gives every arm its own colour.
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22",
           "#17becf", "#393b79", "#637939", "#ad494a", "#7b4173", "#8c6d31", "#6baed6", "#fd8d3c",
           "#74c476", "#9e9ac8", "#e7969c"]
BASE_COLOR = "#888"
X_TITLE = "GRPO step"
SCHEMA = "https://vega.github.io/schema/vega-lite/v5.json"
# The look of every chart: the report's font, a light frame and grid, small tick labels.
CONFIG = {
    "font": "system-ui, -apple-system, 'Segoe UI', sans-serif",
    "title": {"fontSize": 13, "fontWeight": 600, "anchor": "start"},
    "axis": {"labelFontSize": 10, "titleFontSize": 11, "titleFontWeight": 400, "gridColor": "#e4e4e4",
             "labelColor": "#555", "titleColor": "#333"},
    "view": {"stroke": "#999"},
    "legend": {"labelFontSize": 11, "titleFontSize": 11},
}
# The bundle (Vega, Vega-Lite, Vega-Embed) that `dvc plots show` inlines; the report inlines it too.
BUNDLE = ROOT / "docs" / "vega" / "plots_template.html"
# The DVC template of the top-level `plots:` of dvc.yaml, written by `dvc_template`.
DVC_TEMPLATE = ROOT / ".dvc" / "plots" / "overlay.json"
# A chart draws a dot at every point (each with a tooltip) while no line has more points than this.
MAX_DOTS = 60
# The name of the page-wide list of methods unticked in the report's legend (a Vega-Lite parameter).
HIDDEN = "hidden"

Event = tuple[str, int, dict]  # (method, seed, collapse event of run.json)


@dataclass
class Series:
    """One run's curve: (step, value) points of one key."""

    method: str
    seed: int
    points: list[tuple[float, float]]


# ------------------------------------------------------------------------------ data

def series_for(collected: Collected, source: str, key: str) -> list[Series]:
    """Every run's (step, `key`) points from its `source` curve (`train` or `heldout`), sorted."""
    out = []
    for method, seeds in collected.runs.items():
        for seed, run in seeds.items():
            rows = run.train if source == "train" else run.heldout
            pts = [(x, y) for r in rows
                   if (x := number(r.get("step"))) is not None and (y := number(r.get(key))) is not None]
            if pts and seed is not None:
                out.append(Series(method, seed, sorted(pts)))
    return out


def events_of(collected: Collected, methods: Iterable[str]) -> list[Event]:
    """The collapse events of the runs of `methods`."""
    keep = set(methods)
    return [(m, s, e) for m, seeds in collected.runs.items() if m in keep
            for s, r in seeds.items() if s is not None for e in r.events]


def _short(value: float) -> float | int:
    """Six significant digits (an integer when whole): what a chart or tooltip can show, and a
    smaller page.

    >>> _short(0.054750204831), _short(57.145), _short(200.0)
    (0.0547502, 57.145, 200)
    """
    value = float(f"{value:.6g}")
    return int(value) if value.is_integer() and abs(value) < 1e15 else value


def curve_rows(series: Sequence[Series]) -> list[dict]:
    """A row per curve: method, seed, whether the seed is the method's first (drawn solid; the
    others lighter), and its steps and values as two arrays; `FLATTEN` turns them into a row per
    point inside the chart (a third of the bytes of writing a row per point).

    >>> curve_rows([Series("rlvr", 1, [(5.0, 0.5), (10.0, 0.75)]), Series("rlvr", 0, [(5.0, 0.25)])])[0]
    {'method': 'rlvr', 'seed': 1, 'first': False, 'step': [5, 10], 'value': [0.5, 0.75]}
    """
    first: dict[str, int] = {}
    for s in series:
        first[s.method] = min(first.get(s.method, s.seed), s.seed)
    return [{"method": s.method, "seed": s.seed, "first": s.seed == first[s.method],
             "step": [_short(x) for x, _ in s.points], "value": [_short(y) for _, y in s.points]}
            for s in series]


# A row per point from `curve_rows`' arrays (Vega-Lite's flatten transform zips them).
FLATTEN = {"flatten": ["step", "value"]}


def event_rows(events: Sequence[Event]) -> list[dict]:
    """One row per collapse event: its step, kind, a tooltip and a label lane (0-2, staggered so
    labels of events at nearby steps stay readable)."""
    out = []
    for i, (method, seed, e) in enumerate(events):
        step = number(e.get("step"))
        if step is None:
            continue
        kind = str(e.get("kind", "collapse"))
        tip = f"{method} seed {seed}: {kind} collapse at step {int(step)}. {e.get('message', '')}".strip()
        out.append({"method": method, "seed": seed, "step": step, "kind": kind,
                    "tip": " ".join(tip.split()), "lane": i % 3})
    return out


# ------------------------------------------------------------------------------ the definition

def color_scale(colors: dict[str, int]) -> dict:
    """Each method's colour, fixed (the same in every chart and the HTML legend's swatches)."""
    return {"domain": list(colors), "range": [color_of(colors, m) for m in colors]}


def color_of(colors: dict[str, int], method: str) -> str:
    return PALETTE[colors[method] % len(PALETTE)]


def line_unit(x: str, y: str, color: dict, *, x_title: str = X_TITLE, y_title: str | None = None,
              detail: str | None = None, dash: dict | None = None, opacity: dict | None = None,
              tooltip: list[dict] | dict | None = None, width: float = 1.8, dots: bool = False,
              zoom: bool = False) -> dict:
    """A curve, the definition the report and `dvc plots` share: `y` against `x` (the GRPO step),
    a line per `color` (and per `detail` within it), y's scale not forced to start at 0.

    >>> unit = line_unit("step", "value", {"field": "method", "type": "nominal"}, detail="seed")
    >>> unit["mark"]["type"], unit["encoding"]["x"]["title"], unit["encoding"]["y"]["scale"]
    ('line', 'GRPO step', {'zero': False})
    """
    mark: dict = {"type": "line", "strokeWidth": width}
    if dots:
        mark["point"] = {"size": 18}
    if tooltip is not None:
        mark["tooltip"] = tooltip if isinstance(tooltip, dict) else True
    encoding: dict = {
        "x": {"field": x, "type": "quantitative", "title": x_title, "scale": {"nice": False}},
        "y": {"field": y, "type": "quantitative", "title": y if y_title is None else y_title,
              "scale": {"zero": False}, "axis": {"format": "~g"}},
        "color": color,
    }
    if detail:
        encoding["detail"] = {"field": detail, "type": "nominal"}
    if dash:
        encoding["strokeDash"] = dash
    if opacity:
        encoding["opacity"] = opacity
    if isinstance(tooltip, list):
        encoding["tooltip"] = tooltip
    unit: dict[str, object] = {"mark": mark, "encoding": encoding}
    if zoom:
        unit["params"] = [{"name": "grid", "select": "interval", "bind": "scales"}]
    return unit


def _method_color(colors: dict[str, int], legend: bool) -> dict:
    return {"field": "method", "type": "nominal", "scale": color_scale(colors),
            "legend": {"orient": "bottom", "title": None} if legend else None}


def _hidden_filter() -> dict:
    return {"filter": f"indexof({HIDDEN}, datum.method) < 0"}


def _event_layers(events: Sequence[Event], colors: dict[str, int]) -> list[dict]:
    """Dashed verticals at the collapse events, labelled with the kind (the message in a tooltip)."""
    rows = event_rows(events)
    if not rows:
        return []
    color = {"field": "method", "type": "nominal", "scale": color_scale(colors), "legend": None}
    x = {"field": "step", "type": "quantitative"}
    tip = [{"field": "tip", "title": "collapse"}]
    layers = [{"data": {"values": rows}, "transform": [_hidden_filter()],
               "mark": {"type": "rule", "strokeDash": [5, 3], "strokeWidth": 1.5},
               "encoding": {"x": x, "color": color, "tooltip": tip}}]
    for lane in sorted({r["lane"] for r in rows}):
        layers.append({"data": {"values": [r for r in rows if r["lane"] == lane]},
                       "transform": [_hidden_filter()],
                       "mark": {"type": "text", "align": "left", "baseline": "top", "dx": 3,
                                "dy": 2 + 12 * lane, "fontSize": 10},
                       "encoding": {"x": x, "y": {"value": 0}, "text": {"field": "kind"},
                                    "color": color, "tooltip": tip}})
    return layers


def _page_spec(title: str, width: int, height: int, layers: list[dict], data: list[dict]) -> dict:
    return {"$schema": SCHEMA, "description": title, "title": title, "width": width, "height": height,
            "config": CONFIG, "params": [{"name": HIDDEN, "value": []}],
            "data": {"values": data}, "layer": layers}


def overlay_spec(title: str, series: Sequence[Series], events: Sequence[Event], colors: dict[str, int],
                 width: int = 330, height: int = 200, legend: bool = False) -> dict:
    """One line per (method, seed), the first seed of a method solid and the others lighter; a
    dot with a tooltip at every point while the curves are short; dashed collapse markers."""
    rows = curve_rows(series)
    dots = max((len(s.points) for s in series), default=0) <= MAX_DOTS
    tooltip = [{"field": "method"}, {"field": "seed"}, {"field": "step"},
               {"field": "value", "format": ".4g"}]
    line = line_unit("step", "value", _method_color(colors, legend), y_title=None, detail="seed",
                     opacity={"condition": {"test": "datum.first", "value": 1}, "value": 0.55},
                     tooltip=tooltip, dots=dots)
    line["encoding"]["y"]["title"] = None
    line["transform"] = [_hidden_filter(), FLATTEN]
    return _page_spec(title, width, height, [*_event_layers(events, colors), line], rows)


def mean_band_spec(title: str, series: Sequence[Series], events: Sequence[Event], colors: dict[str, int],
                   width: int = 500, height: int = 240, legend: bool = False) -> dict:
    """Every method's mean over seeds (a line, a dot per step with the seeds' range in its
    tooltip) and min–max over seeds (a band), per step."""
    stats = [_hidden_filter(), FLATTEN,
             {"aggregate": [{"op": "mean", "field": "value", "as": "mean"},
                            {"op": "min", "field": "value", "as": "low"},
                            {"op": "max", "field": "value", "as": "high"},
                            {"op": "distinct", "field": "seed", "as": "seeds"}],
              "groupby": ["method", "step"]}]
    color = _method_color(colors, legend)
    x = {"field": "step", "type": "quantitative", "title": X_TITLE, "scale": {"nice": False}}
    band = {"transform": stats, "mark": {"type": "area", "opacity": 0.15},
            "encoding": {"x": x, "y": {"field": "low", "type": "quantitative", "title": None,
                                       "scale": {"zero": False}, "axis": {"format": "~g"}},
                         "y2": {"field": "high"}, "color": {**color, "legend": None}}}
    tooltip = [{"field": "method"}, {"field": "step"}, {"field": "mean", "format": ".4g"},
               {"field": "low", "title": "lowest seed", "format": ".4g"},
               {"field": "high", "title": "highest seed", "format": ".4g"}, {"field": "seeds"}]
    mean = line_unit("step", "mean", color, y_title=None, tooltip=tooltip, width=2.2,
                     dots=True)
    mean["encoding"]["y"]["title"] = None
    mean["transform"] = stats
    return _page_spec(title, width, height, [*_event_layers(events, colors), band, mean],
                      curve_rows(series))


def seeds_spec(res: TaskResult, metric: str, colors: dict[str, int]) -> dict | None:
    """A task's headline metric per seed: a row per method (the table's order), a dot per seed,
    a black tick at the mean (several seeds), the base's value dashed across."""
    rows, order, range_ = [], [], []
    base = None
    for r in res.rows:
        seeds = r.seeds.get(metric, [])
        if not seeds:
            continue
        order.append(r.method)
        range_.append(BASE_COLOR if r.base or r.method not in colors else color_of(colors, r.method))
        if r.base and metric in r.stats:
            base = r.stats[metric]["mean"]
        rows += [{"method": r.method, "value": _short(v),
                  "seed": "base" if s is None else f"draw {s}" if r.base else f"seed {s}"}
                 for s, v in seeds]
    if not rows:
        return None
    y = {"field": "method", "type": "nominal", "sort": order, "title": None}
    color = {"field": "method", "type": "nominal", "scale": {"domain": order, "range": range_},
             "legend": None}
    x = {"field": "value", "type": "quantitative", "title": metric.split("/", 1)[-1],
         "scale": {"zero": False}, "axis": {"tickCount": 5}}
    layers: list[dict] = [
        {"transform": [_hidden_filter()], "mark": {"type": "circle", "size": 45, "opacity": 0.75},
         "encoding": {"x": x, "y": y, "color": color,
                      "tooltip": [{"field": "method"}, {"field": "seed"},
                                  {"field": "value", "format": ".4g"}]}},
        {"transform": [_hidden_filter(),
                       {"aggregate": [{"op": "mean", "field": "value", "as": "mean"},
                                      {"op": "count", "as": "n"}], "groupby": ["method"]},
                       {"filter": "datum.n > 1"}],
         "mark": {"type": "tick", "color": "#000", "thickness": 1.5},
         "encoding": {"x": {"field": "mean", "type": "quantitative"}, "y": y,
                      "tooltip": [{"field": "method"}, {"field": "mean", "format": ".4g"},
                                  {"field": "n", "title": "seeds"}]}}]
    if base is not None:
        layers.insert(0, {"data": {"values": [{"base": _short(base)}]},
                          "mark": {"type": "rule", "strokeDash": [2, 2], "color": BASE_COLOR},
                          "encoding": {"x": {"field": "base", "type": "quantitative"},
                                       "tooltip": [{"field": "base", "format": ".4g"}]}})
    spec = _page_spec(f"{metric} per seed", 280, 0, layers, rows)
    spec["height"] = {"step": 16}
    del spec["title"]  # the table above names it
    return spec


# ------------------------------------------------------------------------------ the report's charts

def headline_specs(collected: Collected, results: Sequence[TaskResult],
                   colors: dict[str, int]) -> list[dict]:
    """Per task and headline metric: the held-out curve of every method trained on the task."""
    out = []
    for res in results:
        methods = {r.method for r in res.trained()}
        for metric in res.metrics:
            series = [s for s in series_for(collected, "heldout", metric) if s.method in methods]
            if series:
                shown = {s.method for s in series}
                out.append(mean_band_spec(f"held-out {metric} ({res.task})", series,
                                          events_of(collected, shown), colors))
    return out


def reward_specs(collected: Collected, colors: dict[str, int]) -> list[dict]:
    """Small multiples: each method's training reward on its own y axis (one line per seed)."""
    out = []
    every = series_for(collected, "train", "reward")
    for method in collected.runs:
        series = [s for s in every if s.method == method]
        if series:
            out.append(overlay_spec(f"{method}: train reward", series, events_of(collected, {method}),
                                    colors, width=260, height=150))
    return out


def overlay_specs(collected: Collected, colors: dict[str, int],
                  charts: Sequence[tuple[str, str, str]]) -> list[dict]:
    """Each (source, key, title) of `charts`, every method's curves and collapse markers overlaid."""
    out = []
    for source, key, title in charts:
        series = series_for(collected, source, key)
        if series:
            out.append(overlay_spec(title, series, events_of(collected, {s.method for s in series}),
                                    colors))
    return out


def figure_spec(collected: Collected, chart: str, methods: Sequence[str]) -> dict:
    """One chart for a README or a paper: `chart` is `<source>:<key>` (`heldout:arith/pass@1`,
    `train:reward`), the runs of `methods` overlaid with a legend."""
    source, _, key = chart.partition(":")
    if source not in ("train", "heldout") or not key:
        raise ValueError(f"chart {chart!r}: expected train:<key> or heldout:<key>")
    missing = [m for m in methods if m not in collected.runs]
    if missing:
        raise LookupError(f"no runs of {missing} under data/ (found: {sorted(collected.runs)})")
    sub = Collected({m: collected.runs[m] for m in methods}, [])
    series = series_for(sub, source, key)
    if not series:
        raise LookupError(f"no {source} values of {key!r} for {list(methods)}")
    colors = {m: i for i, m in enumerate(methods)}
    title = f"{'held-out' if source == 'heldout' else 'train'}: {key}"
    return overlay_spec(title, series, events_of(sub, methods), colors, width=560, height=300, legend=True)


# ------------------------------------------------------------------------------ HTML

def spec_json(spec: dict) -> str:
    """The spec as JSON safe inside an HTML `<script>` element (`<`, `>` and `&` escaped).

    >>> spec_json({"title": "</script><b>"})
    '{"title": "\\\\u003c/script\\\\u003e\\\\u003cb\\\\u003e"}'
    """
    text = json.dumps(spec, ensure_ascii=False, allow_nan=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def embed(spec: dict, css: str = "") -> str:
    """A chart of the page: a `<figure class='vl'>` holding its spec; `SCRIPT` draws it."""
    title = spec.get("description") or ""
    return (f"<figure class='vl{' ' + css if css else ''}' aria-label='{html.escape(str(title))}'>"
            f"<div class='vl-view'></div><script type='application/json' class='vl-spec'>"
            f"{spec_json(spec)}</script></figure>")


_BUNDLED = re.compile(r"<script>/\* (vega(?:-lite|-embed)? [\w.-]+) \*/\n.*?\n    </script>", re.S)


def bundle(template: Path = BUNDLE) -> str:
    """Vega, Vega-Lite and Vega-Embed as inline `<script>` elements, read from the DVC page
    template (one copy of the bundle in the repository)."""
    page = Path(template).read_text(encoding="utf-8")
    scripts = [m.group(0).strip() for m in _BUNDLED.finditer(page)]
    names = [m.group(1).split()[0] for m in _BUNDLED.finditer(page)]
    if names != ["vega", "vega-lite", "vega-embed"]:
        raise LookupError(f"{template}: expected the vega, vega-lite and vega-embed scripts "
                          f"(docs/vega/build_template.py writes them), found {names}")
    return "\n".join(scripts)


# Draws every chart of the page; unticking a method in the legend hides it in every chart.
SCRIPT = """
(function () {
  var views = [];
  var options = {renderer: 'svg', actions: {export: true, source: false, compiled: false, editor: false}};
  document.querySelectorAll('figure.vl').forEach(function (fig) {
    var target = fig.querySelector('.vl-view');
    try {
      var spec = JSON.parse(fig.querySelector('script.vl-spec').textContent);
      vegaEmbed(target, spec, options).then(function (result) {
        views.push(result.view);
        fig.classList.add('drawn');
      }).catch(function (err) { fail(fig, target, err); });
    } catch (err) { fail(fig, target, err); }
  });
  function fail(fig, target, err) {
    fig.classList.add('failed');
    target.textContent = 'This chart could not be drawn: ' + err;
  }
  function hidden() {
    return Array.prototype.map.call(document.querySelectorAll('.legend input:not(:checked)'),
                                    function (box) { return box.dataset.method; });
  }
  document.querySelectorAll('.legend input').forEach(function (box) {
    box.addEventListener('change', function () {
      var off = hidden();
      views.forEach(function (view) { view.signal('HIDDEN', off).runAsync(); });
    });
  });
})();
""".replace("HIDDEN", HIDDEN)

CSS = """
.charts{display:flex;flex-wrap:wrap;gap:12px}
figure.vl{display:inline-block;margin:0;border:1px solid #ddd;background:#fff;padding:4px}
figure.vl.seeds{border:none;padding:0;margin:.2em 0 .8em}
figure.vl.failed{color:#8a4b00}
.legend{position:sticky;top:0;background:#fff;padding:.4em 0;z-index:1;border-bottom:1px solid #eee}
.legend label{margin-right:1.2em;cursor:pointer;white-space:nowrap}
.swatch{display:inline-block;width:14px;height:4px;margin:0 4px 3px 2px;vertical-align:middle}
"""


def legend_html(methods: Sequence[str], colors: dict[str, int]) -> str:
    """The page's legend: a checkbox per method with curves (unticked: hidden in every chart)."""
    return "<p class='legend'>" + "".join(
        f"<label><input type='checkbox' checked data-method='{html.escape(m)}'>"
        f"<span class='swatch' style='background:{color_of(colors, m)}'></span>"
        f"{html.escape(m)}</label>" for m in methods) + "</p>"


def standalone_html(spec: dict) -> str:
    """One chart as a page that renders offline (the bundle inlined), for `--figure ... --out x.html`."""
    title = html.escape(str(spec.get("description") or "chart"))
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{title}</title><style>body{{font-family:system-ui,sans-serif;margin:1em}}{CSS}"
            f"</style></head><body>{embed(spec)}\n{bundle()}\n<script>{SCRIPT}</script></body></html>")


# What `--figure ... --out` writes: a page drawing the chart offline, or the spec itself.
FIGURE_SUFFIXES = (".html", ".json")


def write_figure(out: Path, spec: dict) -> None:
    """`spec` as a Vega-Lite JSON file (`.json`) or a page that draws it offline (`.html`)."""
    from core.io import write_text

    out = Path(out)
    if out.suffix == ".json":
        write_text(out, json.dumps(spec, indent=1) + "\n")
    elif out.suffix == ".html":
        write_text(out, standalone_html(spec))
    else:
        raise ValueError(f"{out}: a figure is written as .html or .json, not {out.suffix or 'no suffix'}")


# ------------------------------------------------------------------------------ dvc plots

def _anchor(name: str) -> str:
    return f"<DVC_METRIC_{name.upper()}>"


def dvc_template() -> dict:
    """`.dvc/plots/overlay.json`, the template of dvc.yaml's top-level plots: `line_unit` with
    DVC's anchors for the data, fields and titles; a colour per file (a method's run) from the
    report's palette, dashed by revision in `dvc plots diff`, the scales zoomable."""
    color = {"field": "filename", "type": "nominal", "title": "run", "scale": {"range": PALETTE},
             "legend": {"orient": "bottom", "columns": 2, "labelLimit": 260}}
    dash = {"field": "rev", "type": "nominal", "title": "revision",
            "legend": {"symbolType": "stroke", "symbolStrokeColor": "grey", "symbolStrokeWidth": 2}}
    unit = line_unit(_anchor("x"), _anchor("y"), color, x_title=_anchor("x_label"),
                     y_title=_anchor("y_label"), dash=dash, tooltip={"content": "data"}, dots=True,
                     zoom=True)
    return {"$schema": SCHEMA,
            "description": ("One line per file (a method's run), coloured by file; dashed by revision "
                            "in `dvc plots diff`. Written by `python -m flows.charts --dvc-template` "
                            "(flows/charts.py: the report's chart definition); do not edit by hand."),
            "data": {"values": _anchor("data")}, "title": _anchor("title"), "width": 440, "height": 280,
            "config": CONFIG, **unit}


def dvc_template_text() -> str:
    return json.dumps(dvc_template(), indent=2) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dvc-template", action="store_true",
                   help=f"rewrite {DVC_TEMPLATE.relative_to(ROOT)} from the chart definition")
    args = p.parse_args()
    if not args.dvc_template:
        p.error("nothing to do: pass --dvc-template")
    DVC_TEMPLATE.write_text(dvc_template_text(), encoding="utf-8")
    print(f"wrote {DVC_TEMPLATE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
