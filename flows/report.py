"""Stage `report`: the comparison of methods in `reports/` (tables, curves, one HTML page).

Reads whatever the train and evaluate stages left under `data/` (SPEC 10 for the collapse events):

- `data/eval/base/metrics.json` and every `data/eval/<method>/seed<S>/metrics.json`: one table
  per benchmark (the prefix of `arith/pass@1`), a row per method or variant, each cell the mean ±
  std over seeds (population std, as in the README) and the number of seeds;
- `data/plots/<method>/seed<S>/{train,heldout}.json`: one chart per metric with every method's
  curves overlaid (one line per seed), so any two methods can be compared on shared axes; the
  legend's checkboxes hide methods;
- `data/checkpoints/<method>/seed<S>/run.json` (`collapse_events`): a dashed vertical marker on
  every chart of that run at the event's step, labelled with its kind (the message in a tooltip).

Methods are discovered from those folders (any name, not only `params.methods`), so a variant run
by hand shows up too. Nothing missing is fatal: a method with an evaluation but no curves gets a
table row and no line, a run with curves but no evaluation gets lines, an unreadable file is
named in the page's notes. Writes `reports/index.html` (self-contained: the charts are inline SVG,
no script or font from a CDN, unlike `dvc plots show`), `reports/summary.md` and
`reports/metrics.json`, and logs the folder to an MLflow run (tag `stage=report`).

Why inline SVG rather than matplotlib PNGs: vector charts stay sharp, the collapse markers and
points carry native tooltips (`<title>`), and the page needs no plotting library.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from prefect import flow

from core import paths
from core.cli import parser, run_main
from core.io import read_json, write_json
from core.params import Params, load

# Columns of the headline table printed by the CLI and at the top of summary.md.
HEADLINE = ["arith/pass@1", "arith/greedy_accuracy", "arith/pass@k", "arith/mean_length",
            "arith_cf/cheat_rate", "facts/coverage", "facts/style_adherence", "pairs/outcome_acc"]
# Within a benchmark table these metrics come first, in this order; the rest alphabetically, `n` last.
PREFERRED = ["pass@1", "greedy_accuracy", "pass@k", "accuracy", "outcome_acc", "cheat_rate",
             "coverage", "style_adherence"]
# Train-curve columns charted first; every other numeric column follows (`reward_std` is noise).
TRAIN_FIRST = ["reward", "entropy", "completion_length", "clipped_ratio"]
TRAIN_SKIP = {"step", "reward_std"}
# Metrics without a benchmark prefix (`eval_seconds`) are grouped under this name.
OTHER = "other"
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf"]
_SEED_DIR = re.compile(r"^seed(-?\d+)$")


# ------------------------------------------------------------------------------ reading

@dataclass
class RunData:
    """Everything found for one (method, seed); `None`/empty where the file is missing."""

    metrics: dict | None = None
    train: list[dict] = field(default_factory=list)
    heldout: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)


@dataclass
class Collected:
    """`runs[method][seed]` (seed `None` for `base`), in display order, and notes on what was off."""

    runs: dict[str, dict[int | None, RunData]]
    notes: list[str]


def _under(data_dir: Path, canonical: Path) -> Path:
    """`canonical` (a `core.paths` location under the real `data/`) moved under `data_dir`.

    The layout stays defined once, in `core.paths`; tests and `--data-dir` only move its root.
    """
    return Path(data_dir) / canonical.relative_to(paths.DATA)


def _seed_dirs(folder: Path) -> Iterable[tuple[str, int]]:
    if not folder.is_dir():
        return
    for method_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
        for seed_dir in sorted(p for p in method_dir.iterdir() if p.is_dir()):
            if m := _SEED_DIR.match(seed_dir.name):
                yield method_dir.name, int(m.group(1))


def discover(data_dir: Path, order: Sequence[str] = ()) -> list[tuple[str, int | None]]:
    """Every (method, seed) with anything under eval/, plots/ or checkpoints/, and `base`.

    Order: `base` first, then the methods of `order` (params.methods), then the rest by name;
    seeds ascending.
    """
    found: set[tuple[str, int | None]] = set()
    for sub in ("eval", "plots", "checkpoints"):
        found.update(_seed_dirs(Path(data_dir) / sub))
    if (_under(data_dir, paths.eval_dir("base", None)) / "metrics.json").exists():
        found.add(("base", None))
    rank = {name: i for i, name in enumerate(["base", *order])}
    return sorted(found, key=lambda ms: (rank.get(ms[0], len(rank)), ms[0],
                                         -1 if ms[1] is None else ms[1]))


def _read(path: Path, expect: type, notes: list[str]):
    """The JSON at `path` if it exists and has the expected shape, else None (noted if unreadable)."""
    if not path.exists():
        return None
    try:
        value = read_json(path)
    except (OSError, ValueError) as e:
        notes.append(f"{path}: unreadable ({type(e).__name__}: {e}); ignored")
        return None
    if not isinstance(value, expect):
        notes.append(f"{path}: expected a JSON {expect.__name__}, got {type(value).__name__}; ignored")
        return None
    return value


def collect(data_dir: Path = paths.DATA, order: Sequence[str] = ()) -> Collected:
    """Read every run's metrics, curves and collapse events; missing files are simply absent."""
    notes: list[str] = []
    runs: dict[str, dict[int | None, RunData]] = {}
    for method, seed in discover(data_dir, order):
        run = RunData()
        run.metrics = _read(_under(data_dir, paths.eval_dir(method, seed)) / "metrics.json", dict, notes)
        if seed is not None:
            plots = _under(data_dir, paths.plots_dir(method, seed))
            run.train = [r for r in _read(plots / "train.json", list, notes) or [] if isinstance(r, dict)]
            run.heldout = [r for r in _read(plots / "heldout.json", list, notes) or []
                           if isinstance(r, dict)]
            summary = _read(_under(data_dir, paths.checkpoint_dir(method, seed)) / "run.json", dict, notes)
            events = (summary or {}).get("collapse_events") or []
            run.events = [e for e in events if isinstance(e, dict) and _number(e.get("step")) is not None]
            where = paths.run_key(method, seed)
            if run.metrics is None and not (run.train or run.heldout or summary):
                notes.append(f"{where}: nothing to report yet (no evaluation, curves or run.json)")
            if run.metrics is None and (run.train or run.heldout):
                notes.append(f"{where}: curves but no evaluation (data/eval/{where}/metrics.json)")
            if run.metrics is not None and not (run.train or run.heldout):
                notes.append(f"{where}: evaluated but no curves (data/plots/{where}/)")
        runs.setdefault(method, {})[seed] = run
    return Collected(runs, notes)


def _number(value) -> float | None:
    """A finite float, or None for anything else (None, NaN, inf, strings, booleans)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


# ------------------------------------------------------------------------------ tables

def aggregate(collected: Collected) -> dict[str, dict]:
    """Per method and metric: mean, population std and the number of seeds with a finite value."""
    agg: dict[str, dict] = {}
    for method, seeds in collected.runs.items():
        evaluated = [r.metrics for r in seeds.values() if r.metrics is not None]
        if not evaluated:
            continue
        keys = sorted({k for m in evaluated for k in m})
        agg[method] = {k: {"mean": float(np.mean(v)), "std": float(np.std(v)), "n": len(v)}
                       for k in keys
                       if (v := [x for m in evaluated if (x := _number(m.get(k))) is not None])}
    return agg


def benchmark_of(key: str) -> tuple[str, str]:
    """`arith/pass@1` -> (`arith`, `pass@1`); a key without a prefix belongs to `other`."""
    bench, sep, metric = key.partition("/")
    return (bench, metric) if sep else (OTHER, key)


def _metric_rank(metric: str) -> tuple:
    if metric in PREFERRED:
        return (0, PREFERRED.index(metric), metric)
    return (2, 0, metric) if metric == "n" else (1, 0, metric)


def benchmarks(agg: dict[str, dict]) -> dict[str, list[str]]:
    """Benchmark -> its metric names in column order (benchmarks by name, `other` last)."""
    out: dict[str, set[str]] = {}
    for metrics in agg.values():
        for key in metrics:
            bench, metric = benchmark_of(key)
            out.setdefault(bench, set()).add(metric)
    names = sorted(out, key=lambda b: (b == OTHER, b))
    return {b: sorted(out[b], key=_metric_rank) for b in names}


def _fmt(value: float) -> str:
    if abs(value) >= 10 and float(value).is_integer():
        return str(int(value))
    if value != 0 and abs(value) < 1e-3:
        return f"{value:.2e}"
    return f"{value:.1f}" if abs(value) >= 100 else f"{value:.2f}" if abs(value) >= 10 else f"{value:.3f}"


def cell(stat: dict | None, row_n: int) -> str:
    """`mean ± std` (std only with several seeds); `(n=k)` when fewer seeds than the row has."""
    if stat is None:
        return "—"
    # A spread of exactly 0 on a count (`n`, the same test set every seed) is not news.
    spread = stat["n"] > 1 and not (stat["std"] == 0 and float(stat["mean"]).is_integer())
    text = _fmt(stat["mean"]) + (f" ± {_fmt(stat['std'])}" if spread else "")
    return text + (f" (n={stat['n']})" if stat["n"] < row_n else "")


def benchmark_rows(agg: dict[str, dict], bench: str, metrics: list[str]) -> list[list[str]]:
    """[method, seeds, cell...] for each method with at least one metric of `bench`."""
    rows = []
    for method, stats in agg.items():
        keyed = [stats.get(m if bench == OTHER else f"{bench}/{m}") for m in metrics]
        if not any(keyed):
            continue
        row_n = max(s["n"] for s in keyed if s)
        rows.append([method, str(row_n), *(cell(s, row_n) for s in keyed)])
    return rows


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def table(agg: dict[str, dict]) -> str:
    """The headline table (markdown): the HEADLINE metrics that any method has."""
    cols = [c for c in HEADLINE if any(c in m for m in agg.values())]
    rows = []
    for name, stats in agg.items():
        row_n = max((stats[c]["n"] for c in cols if c in stats), default=0)
        rows.append([name, *(cell(stats.get(c), row_n) if c in stats else "" for c in cols)])
    return _markdown(["method", *cols], rows)


def summary_markdown(agg: dict[str, dict], collected: Collected) -> str:
    """summary.md: the headline table, one table per benchmark, the collapse events and notes."""
    parts = ["# Reward methods compared", "", table(agg)]
    for bench, metrics in benchmarks(agg).items():
        parts += ["", f"## {bench}", "", _markdown(["method", "seeds", *metrics],
                                                   benchmark_rows(agg, bench, metrics))]
    events = _event_rows(collected)
    if events:
        parts += ["", "## Collapse events", "", _markdown(["method", "seed", "step", "kind", "message"],
                                                          events)]
    if collected.notes:
        parts += ["", "## Notes", "", *(f"- {n}" for n in collected.notes)]
    return "\n".join(parts) + "\n"


# The metrics a task is judged by, in the README's results table.
TASK_HEADLINE = {"arith": ["arith/pass@1"], "facts": ["facts/coverage"],
                 "pairs": ["pairs/outcome_acc", "pairs/rc"]}
README_BEGIN = "<!-- results:begin (python -m flows.report --readme README.md) -->"
README_END = "<!-- results:end -->"


def run_task(data_dir: Path, method: str) -> str:
    """The task a method trained on, from its resolved settings (flows/configure.py)."""
    f = Path(data_dir) / "runs" / method / "train.json"
    try:
        return read_json(f)["grpo"]["task"]
    except (OSError, ValueError, KeyError, TypeError):
        return "arith"


def results_markdown(agg: dict[str, dict], collected: Collected, data_dir: Path) -> str:
    """The README's results table: each method's task headline, base vs trained (mean ± std over
    seeds, n seeds), the base's self-evaluation AUROC and the runs that collapsed."""
    base = agg.get("base", {})
    rows = []
    for method, stats in agg.items():
        if method == "base":
            continue
        task = run_task(data_dir, method)
        metrics = [m for m in TASK_HEADLINE.get(task, [f"{task}/pass@1"]) if m in stats]
        if not metrics:
            continue
        n = max(stats[m]["n"] for m in metrics)
        collapsed = sorted({seed for seed, r in collected.runs.get(method, {}).items() if r.events})
        rows.append([f"`{method}`", task, " / ".join(m.split("/", 1)[1] for m in metrics),
                     " / ".join(cell(base.get(m), 1) for m in metrics),
                     " / ".join(cell(stats[m], n) for m in metrics), str(n),
                     ", ".join(f"seed {s}" for s in collapsed) or "none"])
    auroc = base.get("self_eval/auroc_q0")
    lines = [_markdown(["method", "task", "metric", "base", "trained (mean ± std)", "seeds",
                        "collapse detected"], rows)]
    if auroc:
        lines.append(f"\nBase self-evaluation AUROC (`self_eval/auroc_q0`): {cell(auroc, 1)}.")
    return "\n".join(lines)


def update_readme(readme: Path, text: str) -> None:
    """Replace what stands between the results markers of `readme` with `text`."""
    page = Path(readme).read_text(encoding="utf-8")
    head, sep, rest = page.partition(README_BEGIN)
    _, sep2, tail = rest.partition(README_END)
    if not sep or not sep2:
        raise LookupError(f"{readme} has no results section: add the lines {README_BEGIN} and "
                          f"{README_END} where the table goes")
    Path(readme).write_text(f"{head}{README_BEGIN}\n{text}\n{README_END}{tail}", encoding="utf-8")


def _event_rows(collected: Collected) -> list[list[str]]:
    return [[method, str(seed), str(int(_number(e["step"]))), str(e.get("kind", "?")),
             " ".join(str(e.get("message", "")).split())]
            for method, seeds in collected.runs.items() for seed, run in seeds.items()
            for e in run.events]


# ------------------------------------------------------------------------------ charts

@dataclass
class Series:
    method: str
    seed: int
    points: list[tuple[float, float]]


def chart_specs(collected: Collected) -> list[tuple[str, str, str]]:
    """(source, key, title) of every chart: train columns, then held-out metrics."""
    train_keys, heldout_keys = set(), set()
    for seeds in collected.runs.values():
        for run in seeds.values():
            for row in run.train:
                train_keys.update(k for k, v in row.items() if _number(v) is not None)
            for row in run.heldout:
                heldout_keys.update(k for k, v in row.items() if _number(v) is not None)
    train = sorted(train_keys - TRAIN_SKIP,
                   key=lambda k: (TRAIN_FIRST.index(k) if k in TRAIN_FIRST else len(TRAIN_FIRST), k))
    # Held-out rows repeat the train means (`train/...`) and carry row counts (`.../n`): not curves.
    held = [k for k in heldout_keys if k != "step" and not k.startswith("train/") and not k.endswith("/n")]
    held.sort(key=lambda k: (benchmark_of(k)[0], _metric_rank(benchmark_of(k)[1])))
    return ([("train", k, f"train: {k}") for k in train]
            + [("heldout", k, f"held-out: {k}") for k in held])


def series_for(collected: Collected, source: str, key: str) -> list[Series]:
    out = []
    for method, seeds in collected.runs.items():
        for seed, run in seeds.items():
            rows = run.train if source == "train" else run.heldout
            pts = [(x, y) for r in rows
                   if (x := _number(r.get("step"))) is not None and (y := _number(r.get(key))) is not None]
            if pts:
                out.append(Series(method, seed, sorted(pts)))
    return out


def _ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About `count` round tick values covering [lo, hi]."""
    raw = (hi - lo) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    return [round(first + i * step, 10) for i in range(int((hi - first) / step + 1e-9) + 1)]


def _span(values: list[float]) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    if hi - lo < 1e-12:
        pad = abs(lo) * 0.1 or 0.5
        return lo - pad, hi + pad
    pad = (hi - lo) * 0.05
    return lo - pad, hi + pad


def svg_chart(title: str, series: list[Series], events: list[tuple[str, int, dict]],
              colors: dict[str, int], width: int = 520, height: int = 280) -> str:
    """One line chart: a polyline per (method, seed), dashed verticals at collapse events.

    Every mark has class `m<i>` (the method's index in `colors`) so the legend can hide a
    method; points and event markers carry `<title>` tooltips.
    """
    left, right, top, bottom = 58, 14, 26, 36
    xs = [p[0] for s in series for p in s.points] + [float(e["step"]) for _, _, e in events]
    ys = [p[1] for s in series for p in s.points]
    x0, x1 = _span(xs)
    y0, y1 = _span(ys)
    pw, ph = width - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * pw

    def py(y: float) -> float:
        return top + (1 - (y - y0) / (y1 - y0)) * ph

    esc = html.escape
    out = [(f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}">'),
           f'<text x="{left}" y="16" class="title">{esc(title)}</text>',
           f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" class="frame"/>']
    for t in _ticks(y0, y1):
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{py(t):.1f}" y2="{py(t):.1f}" class="grid"/>'
                   f'<text x="{left - 4}" y="{py(t) + 4:.1f}" class="tick" text-anchor="end">{_fmt(t)}</text>')
    for t in _ticks(x0, x1):
        out.append(f'<text x="{px(t):.1f}" y="{top + ph + 14}" class="tick" '
                   f'text-anchor="middle">{t:g}</text>')
    out.append(f'<text x="{left + pw / 2}" y="{height - 4}" class="axis" text-anchor="middle">GRPO step</text>')
    for i, (method, seed, e) in enumerate(events):
        x, kind = px(float(e["step"])), str(e.get("kind", "collapse"))
        label_y = top + 10 + 12 * (i % 3)  # staggered: events at nearby steps stay readable
        tip = f"{method} seed {seed}: {kind} collapse at step {int(e['step'])}. {e.get('message', '')}"
        out.append(f'<g class="m{colors[method]} event"><title>{esc(tip.strip())}</title>'
                   f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + ph}" '
                   f'stroke="{PALETTE[colors[method] % len(PALETTE)]}" stroke-dasharray="5,3"/>'
                   f'<text x="{x + 3:.1f}" y="{label_y}" class="event-label" '
                   f'fill="{PALETTE[colors[method] % len(PALETTE)]}">{esc(kind)}</text></g>')
    for s in series:
        color = PALETTE[colors[s.method] % len(PALETTE)]
        first_seed = min(r.seed for r in series if r.method == s.method)
        opacity = 1.0 if s.seed == first_seed else 0.55
        coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in s.points)
        out.append(f'<g class="m{colors[s.method]}" opacity="{opacity}">'
                   f'<title>{esc(s.method)} seed {s.seed}</title>'
                   f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="1.8"/>')
        if len(s.points) <= 60:
            out += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.6" fill="{color}">'
                    f'<title>{esc(s.method)} seed {s.seed}, step {x:g}: {y:.4g}</title></circle>'
                    for x, y in s.points]
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)


def charts(collected: Collected, colors: dict[str, int]) -> list[str]:
    """Every chart of `chart_specs`, each with every method's curves and collapse markers."""
    events = [(m, s, e) for m, seeds in collected.runs.items() for s, r in seeds.items()
              for e in r.events]
    out = []
    for source, key, title in chart_specs(collected):
        series = series_for(collected, source, key)
        shown = {s.method for s in series}
        out.append(svg_chart(title, series, [e for e in events if e[0] in shown], colors))
    return out


# ------------------------------------------------------------------------------ page

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em;color:#222;background:#fff}
table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #bbb;padding:4px 10px;text-align:right;font-variant-numeric:tabular-nums}
th{background:#f0f0f0} td:first-child,th:first-child,table.text td,table.text th{text-align:left}
.charts{display:flex;flex-wrap:wrap;gap:12px}
svg.chart{border:1px solid #ddd;background:#fff}
svg .title{font-size:13px;font-weight:600} svg .tick{font-size:10px;fill:#555}
svg .axis{font-size:11px;fill:#333} svg .frame{fill:none;stroke:#999}
svg .grid{stroke:#e4e4e4} svg .event-label{font-size:10px}
.legend label{margin-right:1.2em;cursor:pointer;white-space:nowrap}
.swatch{display:inline-block;width:14px;height:4px;margin:0 4px 3px 2px;vertical-align:middle}
.notes{color:#8a4b00}
"""

# Unticking a method in the legend hides its lines and markers in every chart (compare any two).
_SCRIPT = """
document.querySelectorAll('.legend input').forEach(function (box) {
  box.addEventListener('change', function () {
    document.querySelectorAll('.' + box.dataset.cls).forEach(function (el) {
      el.style.display = box.checked ? '' : 'none';
    });
  });
});
"""


def html_table(header: list[str], rows: list[list[str]], css: str = "numbers") -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table class='{css}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def html_page(agg: dict[str, dict], collected: Collected) -> str:
    """The whole report as one self-contained HTML document."""
    esc = html.escape
    colors = {m: i for i, m in enumerate(collected.runs)}
    parts = ["<!doctype html><html lang='en'><head><meta charset='utf-8'>",
             "<title>Reward methods compared</title>", f"<style>{_CSS}</style></head><body>",
             "<h1>Reward methods compared</h1>"]
    if collected.notes:
        parts.append("<ul class='notes'>" + "".join(f"<li>{esc(n)}</li>" for n in collected.notes)
                     + "</ul>")
    parts.append("<h2>Held-out benchmarks</h2>")
    tables = benchmarks(agg)
    if not tables:
        parts.append("<p>No evaluations found (data/eval/ is empty).</p>")
    for bench, metrics in tables.items():
        parts.append(f"<h3 id='bench-{esc(bench)}'>{esc(bench)}</h3>")
        parts.append(html_table(["method", "seeds", *metrics], benchmark_rows(agg, bench, metrics)))
    events = _event_rows(collected)
    parts.append("<h2>Collapse events</h2>")
    parts.append(html_table(["method", "seed", "step", "kind", "message"], events, css="text") if events
                 else "<p>None detected.</p>")
    parts.append("<h2>Curves</h2>")
    drawn = charts(collected, colors)
    if drawn:
        with_curves = [m for m, seeds in collected.runs.items()
                       if any(r.train or r.heldout for r in seeds.values())]
        parts.append("<p class='legend'>" + "".join(
            f"<label><input type='checkbox' checked data-cls='m{colors[m]}'>"
            f"<span class='swatch' style='background:{PALETTE[colors[m] % len(PALETTE)]}'></span>"
            f"{esc(m)}</label>" for m in with_curves) + "</p>")
        parts.append("<p>One line per seed (the first seed solid); dashed verticals mark collapse "
                     "events (hover for the message). Untick a method to hide it.</p>")
        parts.append("<div class='charts'>" + "".join(drawn) + "</div>")
    else:
        parts.append("<p>No training curves found (data/plots/ is empty).</p>")
    parts.append(f"<script>{_SCRIPT}</script></body></html>")
    return "\n".join(parts)


def figure(collected: Collected, chart: str, methods: Sequence[str]) -> str:
    """One chart as a standalone SVG file (styles inlined, a legend), for a README or a paper.

    `chart` is `<source>:<key>` as in `chart_specs`, e.g. `heldout:arith/pass@1` or `train:reward`.
    """
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
    events = [(m, seed, e) for m in methods for seed, r in sub.runs[m].items() for e in r.events]
    svg = svg_chart(f"{'held-out' if source == 'heldout' else 'train'}: {key}", series, events,
                    colors, width=640, height=320)
    style = ("<style>text{font-family:system-ui,sans-serif} .title{font-size:13px;font-weight:600}"
             " .tick{font-size:10px;fill:#555} .axis{font-size:11px;fill:#333}"
             " .frame{fill:none;stroke:#999} .grid{stroke:#e4e4e4} .event-label{font-size:10px}</style>")
    # The legend goes in a 16-pixel band added below the chart.
    legend = "".join(
        f'<rect x="{70 + 150 * i}" y="324" width="14" height="4" fill="{PALETTE[i % len(PALETTE)]}"/>'
        f'<text x="{88 + 150 * i}" y="330" class="tick">{html.escape(m)}</text>'
        for i, m in enumerate(methods))
    svg = svg.replace('height="320" viewBox="0 0 640 320"', 'height="336" viewBox="0 0 640 336"', 1)
    head, _, rest = svg.partition(">")
    return head + ">" + style + rest.removesuffix("</svg>") + legend + "</svg>"


def build(out_dir: Path = paths.REPORTS, data_dir: Path = paths.DATA,
          order: Sequence[str] = ()) -> dict[str, dict]:
    """Write index.html, summary.md and metrics.json into `out_dir`; returns the aggregate."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    collected = collect(Path(data_dir), order)
    agg = aggregate(collected)
    (out_dir / "summary.md").write_text(summary_markdown(agg, collected), encoding="utf-8")
    write_json(out_dir / "metrics.json", agg)
    (out_dir / "index.html").write_text(html_page(agg, collected), encoding="utf-8")
    for note in collected.notes:
        print(f"report: {note}")
    return agg


def report(params: Params, out_dir: Path = paths.REPORTS, data_dir: Path = paths.DATA,
           track: bool = True) -> dict[str, dict]:
    """Build the report and log `out_dir` to an MLflow run tagged `stage=report`."""
    agg = build(out_dir, data_dir, params.methods)
    if track:
        from tasks import tracking

        tracking.setup()
        with tracking.run("report", {"stage": "report", "git_commit": tracking.git_commit()}):
            tracking.log_artifacts(Path(out_dir))
    return agg


@flow(name="report", log_prints=True)
def report_flow(preset: str | None = None) -> dict:
    """Build the comparison report."""
    return report(load(preset=preset))


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--data-dir", type=Path, default=paths.DATA, help="root of eval/, plots/, checkpoints/")
    p.add_argument("--out-dir", type=Path, default=paths.REPORTS, help="where the report is written")
    p.add_argument("--no-mlflow", action="store_true", help="do not log the report to MLflow")
    p.add_argument("--figure", metavar="SOURCE:KEY", help="write one chart as a standalone SVG "
                   "instead (e.g. heldout:arith/pass@1 or train:reward), with --methods and --out")
    p.add_argument("--methods", nargs="+", default=None, help="methods drawn in --figure")
    p.add_argument("--out", type=Path, default=None, help="SVG file written by --figure")
    p.add_argument("--readme", type=Path, default=None, help="rewrite the results section of this "
                   "file (README.md) from the metrics under --data-dir instead")
    args = p.parse_args()
    if args.readme:
        collected = collect(args.data_dir, load(args.params, preset=args.preset).methods)
        update_readme(args.readme, results_markdown(aggregate(collected), collected, args.data_dir))
        print(f"updated the results section of {args.readme}")
        return
    if args.figure:
        if not args.methods or args.out is None:
            p.error("--figure needs --methods and --out")
        from core.io import write_text

        write_text(args.out, figure(collect(args.data_dir), args.figure, args.methods))
        print(f"wrote {args.out}")
        return
    agg = report(load(args.params, preset=args.preset), args.out_dir, args.data_dir,
                 track=not args.no_mlflow)
    print(table(agg))
    print(f"wrote {args.out_dir / 'index.html'}")


if __name__ == "__main__":
    run_main(main)
