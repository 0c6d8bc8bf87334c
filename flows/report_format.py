"""How the report prints a number and lays out a table (flows/report.py and the modules it is
split into: report_claims, report_answer, report_readme): three significant decimals, signed
differences, `mean ± std (n=k)` cells, markdown and HTML tables; the tables of every benchmark
(`benchmarks`, `benchmark_rows`, `table`) and of the collapse alarms (`alarms_markdown`,
`alarms_html`).
"""

from __future__ import annotations

import html
from collections.abc import Set

from evals.stats import snap
from flows import alarms as alarms_
from flows.report_collect import OTHER, benchmark_of

# Columns of the headline table printed by the CLI and in summary.md ("Methods compared").
HEADLINE = ["arith/pass@1", "arith/greedy_accuracy", "arith/pass@k", "arith/mean_length",
            "arith_cf/cheat_rate", "facts/coverage", "facts/style_adherence", "pairs/outcome_acc"]
# Within a benchmark table these metrics come first, in this order; the rest alphabetically, `n` last.
PREFERRED = ["pass@1", "greedy_accuracy", "pass@k", "accuracy", "outcome_acc", "cheat_rate",
             "coverage", "style_adherence"]


def _fmt(value: float) -> str:
    """Three significant decimals below 10, fewer above; integers from 10 up as integers. The
    value is snapped to 9 decimals first (evals.stats.snap), so a mean that is exactly 0.8475 prints
    the same whichever way one machine's float sums rounded it.

    >>> [_fmt(v) for v in (0.8476, 57.76, 200.0, 1234.5, 0.0001)]
    ['0.848', '57.76', '200', '1234.5', '1.00e-04']
    >>> _fmt(0.0125 + 1e-15) == _fmt(0.0125 - 1e-15) == _fmt(0.0125)
    True
    """
    value = snap(value)
    if abs(value) >= 10 and float(value).is_integer():
        return str(int(value))
    if value != 0 and abs(value) < 1e-3:
        return f"{value:.2e}"
    return f"{value:.1f}" if abs(value) >= 100 else f"{value:.2f}" if abs(value) >= 10 else f"{value:.3f}"


def _fmt_count(value: float) -> str:
    """A count (or a mean of counts): an integer when whole, else one decimal.

    >>> [_fmt_count(v) for v in (8.0, 200, 8.5, 0.0)]
    ['8', '200', '8.5', '0']
    """
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def _signed(value: float) -> str:
    """The difference to a reference, always signed.

    >>> _signed(0.505), _signed(-0.054), _signed(0.0)
    ('+0.505', '−0.054', '±0.000')
    """
    text = _fmt(abs(value))
    return ("+" if value > 0 else "−" if value < 0 else "±") + text


def cell(stat: dict | None, row_n: int, count: bool = False) -> str:
    """`mean ± std` (std only with several seeds); `(n=k)` when fewer seeds than the row has.

    A count prints as an integer (`8`, not `8.000`).
    """
    if stat is None:
        return "—"
    fmt = _fmt_count if count else _fmt
    # A spread of exactly 0 on a count (`n`, the same test set every seed) is not news.
    spread = stat["n"] > 1 and not (stat["std"] == 0 and float(stat["mean"]).is_integer())
    text = fmt(stat["mean"]) + (f" ± {fmt(stat['std'])}" if spread else "")
    return text + (f" (n={stat['n']})" if stat["n"] < row_n else "")


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def html_table(header: list[str], rows: list[list[str]], css: str = "numbers") -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table class='{css}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# ------------------------------------------------------------------------------ tables

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


def benchmark_rows(agg: dict[str, dict], bench: str, metrics: list[str],
                   counts: Set[str] = frozenset()) -> list[list[str]]:
    """[method, seeds, cell...] for each method with at least one metric of `bench`."""
    rows = []
    for method, stats in agg.items():
        keys = [m if bench == OTHER else f"{bench}/{m}" for m in metrics]
        keyed = [stats.get(k) for k in keys]
        if not any(keyed):
            continue
        row_n = max(s["n"] for s in keyed if s)
        rows.append([method, str(row_n), *(cell(s, row_n, k in counts) for k, s in zip(keys, keyed))])
    return rows


def table(agg: dict[str, dict]) -> str:
    """The headline table (markdown): the HEADLINE metrics that any method has."""
    cols = [c for c in HEADLINE if any(c in m for m in agg.values())]
    rows = []
    for name, stats in agg.items():
        row_n = max((stats[c]["n"] for c in cols if c in stats), default=0)
        rows.append([name, *(cell(stats.get(c), row_n) if c in stats else "" for c in cols)])
    return _markdown(["method", *cols], rows)


def alarms_markdown(record: dict) -> str:
    """The collapse alarms' summary tables (flows/alarms.py): first against the independent label
    (the test split, which no alarm reads), then against the lab detector's own held-out rule."""
    def rows(part: dict) -> list[list[str]]:
        return [[c.replace("|", "\\|") for c in r] for r in alarms_.summary_rows(part)]

    out = []
    if record.get("independent"):
        ind = record["independent"]
        out += ["Against a label no alarm reads (the test split):", "", _markdown(alarms_.HEADER, rows(ind)),
                "", f"{alarms_.independent_counts(record)}. Label: {ind['rule']}", ""]
    out += ["Against the lab detector's own held-out rule (agreement partly by construction):", "",
            _markdown(alarms_.HEADER, rows(record)), "",
            f"{alarms_.counts(record)}. Label: {record['rules']['label']} Delay: alarm "
            "step − onset step (negative: before the onset). Rules: reports/alarms.json, "
            "flows/alarms.py."]
    return "\n".join(out)


def alarms_html(record: dict) -> str:
    """The alarms section's body: the summary table, the rules, one row per run (folded)."""
    esc = html.escape
    rules = record["rules"]
    per_run = alarms_.run_rows(record)
    parts = []
    if record.get("independent"):
        ind = record["independent"]
        parts += ["<h3>Against a label no alarm reads (the test split)</h3>",
                  html_table(alarms_.HEADER, alarms_.summary_rows(ind), "alarms numbers"),
                  f"<p class='muted'>{esc(alarms_.independent_counts(record))}. Label: {esc(ind['rule'])}</p>",
                  "<h3>Against the lab detector's own held-out rule</h3>"]
    parts += [html_table(alarms_.HEADER, alarms_.summary_rows(record), "alarms numbers"),
             f"<p class='muted'>{esc(alarms_.counts(record))}. Label: {esc(rules['label'])}</p>"
             "<ul class='muted'>" + "".join(f"<li><b>{esc(alarms_.TITLES[a])}</b>: {esc(rules[a])}</li>"
                                           for a in alarms_.ALARMS)
             + f"</ul><p class='muted'>{esc(rules['scoring'])} {esc(rules['caveat'])}</p>",
             f"<details><summary>Per run ({len(per_run)})</summary><h3>Alarms per run</h3>"
             + html_table(alarms_.RUN_HEADER, per_run, "alarms-runs numbers") + "</details>"]
    if record["notes"]:
        parts.append("<p class='notes'>" + "; ".join(esc(n) for n in record["notes"]) + "</p>")
    return "".join(parts)
