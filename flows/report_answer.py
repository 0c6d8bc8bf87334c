"""The report's first screen, drawn from flows/report_rank.py's answer: one sentence per task
(`answer_line`), each task's table of methods grouped by what they read (`headline_html`), the
legend of its collapse columns (`collapse_legend`), and the one line of bookkeeping above it all
(`records_html`, `records_markdown`) whose details sit in a section lower on the page
(`records_section_html`, `records_section_markdown`).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

from evals.claims import TEST_ITEMS
from flows import alarms as alarms_
from flows import charts as charts_
from flows.report_collect import RunData
from flows.report_format import _fmt, _signed, cell
from flows.report_rank import (
    COLLAPSE_LABEL,
    GROUP_TITLES,
    LABEL_FREE,
    WELCH,
    Row,
    Separation,
    TaskResult,
)

# The bookkeeping's details: a section lower on the page, and in summary.md.
RECORDS_ID = "records"
RECORDS_TITLE = "Stale and outdated runs"
RECORDS_ANCHOR = "stale-and-outdated-runs"  # the heading's anchor on a rendered markdown page
FLOOR = "floor: the base model, before any training"
BASES_LEAD = "on the engineered bases"  # `bases_line`'s opening words, bold on the first screen


# ------------------------------------------------------------------------------ bookkeeping

def left_out_summary(left_out: Sequence[str]) -> str:
    """The stale runs (each entry `<run>: <why>`) grouped by why, each group's runs counted by
    method: one short sentence however many runs a new base leaves behind.

    >>> left_out_summary(["rlvr/seed0: base a", "rlvr/seed1: base a", "base: base a"])
    'base a: base, rlvr ×2'
    """
    groups: dict[str, dict[str, int]] = {}
    for entry in left_out:
        run, _, why = entry.partition(": ")
        method = run.rsplit("/seed", 1)[0]
        counts = groups.setdefault(why or "stale", {})
        counts[method] = counts.get(method, 0) + 1
    return "; ".join(f"{why}: " + ", ".join(m if n == 1 else f"{m} ×{n}" for m, n in sorted(c.items()))
                     for why, c in groups.items())


def outdated_counts_text(outdated: Mapping[str, Mapping[str, int]]) -> str:
    """`295 trainings and 98 evaluations` over every study ('' when none).

    >>> outdated_counts_text({"default": {"train": 2, "evaluate": 1}, "x": {"train": 1, "evaluate": 0}})
    '3 trainings and 1 evaluation'
    """
    train = sum(c.get("train", 0) for c in outdated.values())
    evaluate = sum(c.get("evaluate", 0) for c in outdated.values())
    parts = [f"{n} {kind}{'s' * (n != 1)}" for kind, n in (("training", train), ("evaluation", evaluate)) if n]
    return " and ".join(parts)


def _stale_head(left_out: Sequence[str]) -> str:
    n = len(left_out)
    return f"{n} stale run{'s' * (n != 1)} left out"


STALE_TAIL = " of every table and claim, and of the alarms and figures"


def _outdated_tail(outdated: Mapping[str, Mapping[str, int]]) -> str:
    counts = outdated_counts_text(outdated)
    verb = "was" if counts.startswith("1 ") and " and " not in counts else "were"
    return f"{counts} {verb} recorded before a change to their code or settings, shown as recorded"


def records_markdown(left_out: Sequence[str], outdated: Mapping[str, Mapping[str, int]],
                     link: str = f"#{RECORDS_ANCHOR}") -> str:
    """The one line of bookkeeping (markdown, a quote): the stale runs left out and the runs
    recorded before a change to their code, with a link to where they are listed; '' with none.

    >>> line = records_markdown(["a/seed1: old base"], {"default": {"train": 2, "evaluate": 0}}, "x.md#r")
    >>> print(line.replace("; ", ";\\n"))
    > **1 stale run left out** of every table and claim, and of the alarms and figures;
    2 trainings were recorded before a change to their code or settings, shown as recorded ([which](x.md#r)).
    """
    parts = []
    if left_out:
        parts.append(f"**{_stale_head(left_out)}**{STALE_TAIL}")
    if outdated_counts_text(outdated):
        parts.append(_outdated_tail(outdated))
    return f"> {'; '.join(parts)} ([which]({link}))." if parts else ""


def records_html(left_out: Sequence[str], outdated: Mapping[str, Mapping[str, int]]) -> str:
    """The header's one line of bookkeeping, linking to the section that lists the runs; the
    stale runs' reasons ride in its tooltip."""
    esc = html.escape
    parts = []
    if left_out:
        parts.append(f"<span id='stale' title='{esc(left_out_summary(left_out))}'>"
                     f"<b>{_stale_head(left_out)}</b></span>{esc(STALE_TAIL)}")
    if outdated_counts_text(outdated):
        parts.append(esc(_outdated_tail(outdated)))
    if not parts:
        return ""
    return (f"<p class='records' id='records-line'>{'; '.join(parts)} "
            f"(<a href='#{RECORDS_ID}'>which</a>).</p>")


def records_section_markdown(left_out: Sequence[str], outdated_text: str) -> str:
    """summary.md's section of the runs the one line counts ('' when there are none)."""
    lines = []
    if left_out:
        lines.append(f"- **{_stale_head(left_out)}**{STALE_TAIL} (a number is never pooled across "
                     f"bases): {left_out_summary(left_out)}.")
    if outdated_text:
        lines.append(f"- {outdated_text}")
    return "\n".join([f"## {RECORDS_TITLE}", "", *lines]) if lines else ""


def records_section_html(left_out: Sequence[str], outdated_text: str) -> str:
    esc = html.escape
    items = []
    if left_out:
        items.append(f"<li><b>{_stale_head(left_out)}</b>{esc(STALE_TAIL)} (a number is never "
                     f"pooled across bases): {esc(left_out_summary(left_out))}.</li>")
    if outdated_text:
        items.append(f"<li>{esc(outdated_text)}</li>")
    body = f"<ul class='text'>{''.join(items)}</ul>" if items else "<p>None: every run is current.</p>"
    return f"<section id='{RECORDS_ID}'><h2>{RECORDS_TITLE}</h2>{body}</section>"


# ------------------------------------------------------------------------------ the answer

def _seed_range(trained: Sequence[Row], metric: str) -> tuple[str, int]:
    counts = sorted({r.stats[metric]["n"] for r in trained})
    # Methods with different numbers of seeds read as a range ("1-10 seeds"), never as the
    # largest alone: "10 methods × 10 seeds" said every method had ten.
    return (f"{counts[0]}–{counts[-1]}" if len(counts) > 1 else f"{counts[0]}"), counts[-1]


def interval_text(t: Separation) -> str:
    """`−0.215 [−0.364, −0.065]`, or the reason the pair is untested.

    >>> interval_text(Separation("b", -0.2, -0.3, -0.1, "t"))
    '−0.200 [−0.300, −0.100]'
    """
    if not t.tested or t.difference is None:
        return t.reason or "untested"
    return f"{_signed(t.difference)} [{_signed(t.low or 0.0)}, {_signed(t.high or 0.0)}]"


def _vs_ceiling(free: Row, ceiling: Row, v: Separation | None, m: str) -> str:
    head = f"the ceiling {ceiling.method} {cell(ceiling.stats[m], 1)} (reads labels)"
    if v is None or not v.tested:
        return f"; {head}, {v.reason if v else 'untested'}"
    where = "not separable from" if v.tied else "above" if (v.low or 0) > 0 else "below"
    return f"; {where} {head}: {free.method} − {ceiling.method} {interval_text(v)}"


def answer_line(res: TaskResult) -> str | None:
    """The task's answer: the best label-free method, by how much over the floor (the base), the
    methods the claims' test cannot separate from it, where it stands against the ceiling (the
    best label-reading method), and the methods that collapsed by the lab's label; None if no
    trained method has the task's metric."""
    m = res.metrics[0]
    metric = m.split("/", 1)[1]
    trained = [r for r in res.trained() if m in r.stats]
    if not trained:
        return None
    base = next((r.stats.get(m) for r in res.rows if r.base), None)
    seeds, most = _seed_range(trained, m)
    size = f", {res.test_n} test items" if res.test_n else ""
    head = (f"{res.task} ({metric}{size}, {len(trained)} method{'s' * (len(trained) > 1)} × {seeds} "
            f"seed{'s' * (most > 1)}): ")

    def over(r: Row) -> str:
        return (f", {_signed(r.stats[m]['mean'] - base['mean'])} over the floor (the base, "
                f"{_fmt(base['mean'])})" if base else "")

    free, ceiling = res.row(res.best.get(LABEL_FREE)), res.row(res.ceiling)
    if free is not None:
        only = len([r for r in trained if r.group == LABEL_FREE]) == 1
        text = f"{'only' if only else 'best'} label-free {free.method} {cell(free.stats[m], 1)}{over(free)}"
        if res.ties.get(LABEL_FREE):
            text += f"; {', '.join(res.ties[LABEL_FREE])} not separable from it by the claims' test"
        if ceiling is not None:
            text += _vs_ceiling(free, ceiling, res.vs_ceiling, m)
    else:
        top = max(trained, key=lambda r: r.stats[m]["mean"])
        text = (f"no label-free method trained on it; best {top.method} ({top.use.group}) "
                f"{cell(top.stats[m], 1)}{over(top)}")
    if base and max(r.stats[m]["mean"] for r in trained) <= base["mean"]:
        text += "; no method beats the base"
    collapsed = [(r.method, r.collapse) for r in trained if r.collapse and r.collapse.collapsed]
    if collapsed:
        text += f"; collapsed ({COLLAPSE_LABEL}): " + ", ".join(
            f"{name} {c.cell()}" for name, c in sorted(collapsed, key=lambda mc: -len(mc[1].collapsed)))
    return head + text + "."


def answer_lines(results: Sequence[TaskResult]) -> list[str]:
    """One plain sentence per task."""
    return [line for res in results if (line := answer_line(res))]


def engineered_arms(runs: Mapping[str, Mapping[int | None, RunData]], metric: str = "arith/pass@1"
                    ) -> list[tuple[str, dict, float | None, list[tuple[str, list[tuple[int, float]]]]]]:
    """Each study whose base's premises are measured (an engineered base, docs/bases.md:
    `<study>/base` with a premises record), by name: (study, its base's premises, the base's own
    `metric` or None, [(arm, [(seed, value), ...]), ...] by arm and seed, arms with a value only).
    `runs` as `Collected.runs` with the studies (`<study>/<arm>`). The first screen's sentence
    (`bases_line`) and docs/bases.md's arms table (benchmarks/tables.py) both read it."""
    out = []
    for key in sorted(k for k in runs if k.endswith("/base")):
        base = runs[key].get(None)
        if base is None or not base.premises:
            continue
        study = key.removesuffix("/base")
        value = (base.metrics or {}).get(metric)
        arms = []
        for name in sorted(n for n in runs if n.startswith(f"{study}/") and n != key):
            seeds = sorted((seed, v) for seed, run in runs[name].items() if seed is not None
                           and isinstance(v := (run.metrics or {}).get(metric), (int, float)))
            if seeds:
                arms.append((name.split("/", 1)[1], seeds))
        out.append((study, base.premises, value if isinstance(value, (int, float)) else None, arms))
    return out


def bases_line(runs: Mapping[str, Mapping[int | None, RunData]], metric: str = "arith/pass@1") -> str | None:
    """The first screen's sentence on the engineered bases (`engineered_arms`): per study, the
    premises that hold on its base, then each arm's mean `metric` over its seeds so far minus
    that base's own, best first, with its seeds; None where no such study has a trained arm.
    Stale runs should be left out of `runs` first (`current`). A seed or two is a pilot, and the
    sentence says so: the verdicts are the claims table's.

    >>> from flows.report_collect import RunData as R
    >>> runs = {"cal/base": {None: R(premises={"holds/a": True, "holds/b": False},
    ...                                  metrics={"arith/pass@1": 0.1})},
    ...         "cal/x": {0: R(metrics={"arith/pass@1": 0.3}), 1: R(metrics={"arith/pass@1": 0.5})},
    ...         "cal/y": {0: R(metrics={"arith/pass@1": 0.05})},
    ...         "rlvr": {0: R(metrics={"arith/pass@1": 0.9})}}
    >>> print(bases_line(runs))  # doctest: +NORMALIZE_WHITESPACE
    on the engineered bases (arith pass@1, each arm's mean over its seeds so far minus its base's;
    a pilot until the claims decide): cal (premises that hold: a): x +0.300 (2 seeds),
    y −0.050 (1 seed) over its base's 0.100.
    >>> bases_line({"rlvr": {0: R(metrics={"arith/pass@1": 0.9})}}) is None
    True
    """
    parts = []
    for study, premises, base_value, arms in engineered_arms(runs, metric):
        if base_value is None or not arms:
            continue
        gains = sorted(((sum(v for _, v in seeds) / len(seeds) - base_value, arm, len(seeds))
                        for arm, seeds in arms), key=lambda a: (-a[0], a[1]))
        held = [k.removeprefix("holds/") for k, v in premises.items() if k.startswith("holds/") and v is True]
        parts.append(f"{study} (premises that hold: {', '.join(held) or 'none'}): "
                     + ", ".join(f"{arm} {_signed(gain)} ({n} seed{'s' * (n > 1)})" for gain, arm, n in gains)
                     + f" over its base's {_fmt(base_value)}")
    if not parts:
        return None
    return (f"{BASES_LEAD} ({metric.replace('/', ' ')}, each arm's mean over its seeds so "
            "far minus its base's; a pilot until the claims decide): " + "; ".join(parts) + ".")


def answer_html(line: str, res: TaskResult) -> str:
    """An answer line with the task and the best label-free method in bold."""
    text = html.escape(line)
    task = html.escape(res.task)
    if text.startswith(task):
        text = f"<b>{task}</b>{text[len(task):]}"
    best = html.escape(res.best.get(LABEL_FREE, ""))
    for lead in ("best label-free ", "only label-free "):
        if best and f"{lead}{best} " in text:
            return text.replace(f"{lead}{best} ", f"{lead}<b>{best}</b> ", 1)
    return text


def collapse_legend(record: Mapping | None) -> str:
    """What the collapse columns count, and the detector's measured error rates (plain text): the
    one place the first screen says which label it counts."""
    runs, collapsed, healthy = alarms_.label_counts(record or {})
    return (f"Collapsed: seeds the lab's collapse label calls collapsed, of the seeds it labelled: the "
            f"{COLLAPSE_LABEL} (the test split at each checkpoint, which no alarm reads; rule in "
            f"flows/alarms.py). Detector alarms: seeds where the lab's detector (models/collapse.py) "
            f"fires; against that label, over all {runs} current runs of record ({collapsed} collapsed, "
            f"{healthy} healthy), it {alarms_.detector_rates(record or {})}.")


MARKS = (f"★ the best of its group; ≈ one the claims' test ({TEST_ITEMS}, 95%; {WELCH} where a run "
         "lacks per-item scores) cannot separate from it: the interval of the difference contains 0. "
         "Ceiling: the best method that reads labels; floor: the base.")


def first_screen_key(record: Mapping | None) -> list[str]:
    """The key above the first screen's tables: the marks (the tie rule: the claims' own test),
    the ceiling and the floor; then the collapse columns (`collapse_legend`)."""
    return [MARKS, collapse_legend(record)]


# ------------------------------------------------------------------------------ the table

_MARK_BEST = "<span class='mark' title='the best mean of its group on this task'>★ </span>"
_MARK_TIE = ("<span class='tie' title=\"the claims' test cannot separate it from its group's best: "
             "the 95% interval of the difference contains 0\">≈ </span>")


def _vs_cell(r: Row, res: TaskResult) -> tuple[str, str]:
    """(text, tooltip) of the `vs best` cell."""
    if r.base:
        return "floor", "the base model, before any training"
    if r.method == res.ceiling:
        return "ceiling", "the best method that reads labels"
    if res.best.get(r.group) == r.method:
        if r.group == LABEL_FREE and res.vs_ceiling is not None and res.ceiling:
            v = res.vs_ceiling
            return (f"vs ceiling {cell_text(v)}",
                    f"{r.method} − {res.ceiling}: {v.test}" if v.tested else v.reason)
        return "best of its group", ""
    if r.test is None:
        return "—", ""
    return cell_text(r.test), (f"{r.method} − {r.test.against}: {r.test.test}" if r.test.tested
                               else r.test.reason)


def cell_text(t: Separation) -> str:
    """`interval_text`, an untested pair short (its reason goes in the cell's tooltip).

    >>> cell_text(Separation("b", test="t", reason="untested: ...", need=5))
    'untested (< 5 seeds)'
    """
    return interval_text(t) if t.tested else f"untested (< {t.need} seeds)" if t.need else "untested"


def _collapse_cells(r: Row) -> str:
    esc = html.escape
    if r.base or r.collapse is None:
        return "<td class='collapse'></td><td class='collapse'></td>"
    c = r.collapse
    label_tip = (f"seeds collapsed: {', '.join(map(str, c.collapsed)) or 'none'} ({COLLAPSE_LABEL})"
                 if c.labelled else "no run labelled (no test evidence)")
    alarm_tip = "; ".join(f"seed {s} @ step {step}" for s, step in c.alarms) or "no alarm"
    return (f"<td class='collapse' title='{esc(label_tip)}'>{esc(c.cell())}</td>"
            f"<td class='collapse' title='{esc(alarm_tip)}'>{esc(c.alarm_cell())}</td>")


def headline_html(res: TaskResult, colors: dict[str, int]) -> str:
    """A task's table: the methods grouped by what they read (label-free first), each group ranked,
    its best ★ and the methods its claims' test cannot separate from it ≈, the ceiling, the base
    (the floor); mean ± std (every seed in its tooltip), vs base, the test against the group's
    best, seeds, the collapse label and the detector's alarms."""
    esc = html.escape
    base = next((r for r in res.rows if r.base), None)
    header = ["method", "reads"]
    for i, m in enumerate(res.metrics):
        name = m.split("/", 1)[1]
        header += [f"{name} (mean ± std)" if len(res.metrics) == 1 else name, "vs base"]
        if i == 0:
            header.append("vs group's best [95% interval]")
    header += ["seeds", f"collapsed ({COLLAPSE_LABEL})", "detector alarms"]
    body = []
    for group, rows in res.groups():
        title = FLOOR if group == "base" else GROUP_TITLES[group]
        body.append(f"<tbody data-group='{esc(group)}'><tr class='group'><th colspan='{len(header)}'>"
                    f"{esc(title)}</th></tr>")
        for r in rows:
            body.append(_row_html(r, res, base, colors))
        body.append("</tbody>")
    css = {"reads": " class='reads'", "detector alarms": " class='collapse'",
           f"collapsed ({COLLAPSE_LABEL})": " class='collapse'"}
    head = "".join(f"<th{css.get(h, '')}>{esc(h)}</th>" for h in header)
    return (f"<table class='headline' id='headline-{esc(res.task)}'><thead><tr>{head}</tr></thead>"
            f"{''.join(body)}</table>")


def _row_html(r: Row, res: TaskResult, base: Row | None, colors: dict[str, int]) -> str:
    esc = html.escape
    first = res.metrics[0]
    best = res.best.get(r.group) == r.method and not r.base
    cls = ("base" if r.base else "ceiling" if r.method == res.ceiling
           else "best" if best and r.group == LABEL_FREE else "group-best" if best else "")
    color = charts_.color_of(colors, r.method) if r.method in colors and not r.base else charts_.BASE_COLOR
    cells = [f"<td><span class='swatch' style='background:{color}'></span>{esc(r.method)}</td>",
             f"<td class='reads'>{'' if r.base else esc(r.use.text())}</td>"]
    n = max((s["n"] for s in r.stats.values()), default=0)
    for m in res.metrics:
        st = r.stats.get(m)
        if st is None:
            cells += ["<td>—</td>", "<td></td>"] + (["<td></td>"] if m == first else [])
            continue
        mark = ""
        if m == first and best:
            mark = _MARK_BEST
        elif m == first and r.test is not None and r.test.tied:
            mark = _MARK_TIE
        # Every seed's value in the tooltip (and drawn as dots under the table), its range beside.
        seeds = sorted(r.seeds.get(m, []), key=lambda sv: -1 if sv[0] is None else sv[0])
        vals = [v for _, v in seeds]
        spread = f"min–max {_fmt(min(vals))}–{_fmt(max(vals))}: " if len(vals) > 1 else ""
        tip = spread + " · ".join(f"{'base' if s is None else f'seed {s}'}: {v:.4g}" for s, v in seeds)
        cells.append(f"<td title='{esc(tip)}'>{mark}{esc(cell(st, n))}</td>")
        b = base.stats.get(m) if base is not None else None
        cells.append(f"<td>{_signed(st['mean'] - b['mean']) if b and not r.base else '—'}</td>")
        if m == first:
            text, tip = _vs_cell(r, res)
            cells.append(f"<td class='vs' title='{esc(tip)}'>{esc(text)}</td>")
    cells.append(f"<td>{n}</td>")
    cells.append(_collapse_cells(r))
    return f"<tr class='{cls}' data-method='{esc(r.method)}'>" + "".join(cells) + "</tr>"
