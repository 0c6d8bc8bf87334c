"""Stage `report`: the comparison of methods in `reports/` (tables, curves, one HTML page).

What it reads and concludes is flows/report_collect.py (`collect`, `aggregate`, `headline`,
`provenance`); this module draws it. Inputs, all under `data/`:

- `data/eval/base/metrics.json` and every `data/eval/<method>/seed<S>/metrics.json`: the final
  evaluations (mean ± population std over seeds, the number of seeds);
- `data/plots/<method>/seed<S>/{train,heldout}.json`: the curves;
- `data/checkpoints/<method>/seed<S>/run.json` (`collapse_events`, models/collapse.py): a dashed marker on
  every chart of that run at the event's step, labelled with its kind (the message in a tooltip).

The page (`reports/index.html`) opens with the answer, then the evidence:

1. header: preset, git commit, date, seeds; a "smoke test, not a result" banner when the preset
   or the data is a smoke test of the pipeline (`report_collect.smoke_reasons`); the stale runs
   left out; how many recorded runs ran with code or settings HEAD has changed since
   (`report_collect.outdated_runs`: their run file in dvc.lock, which DVC would run again);
2. result: per task, the methods trained on it ranked by the task's headline metric (mean ± std
   over seeds, the difference to the base, every seed's value drawn), the best marked ★, the
   methods within the seeds' spread of it marked ≈: the answer on the first screen;
3. the papers' claims (`evals/claims.py`), the science section's opening table: each claim's
   arms, metric, difference with its 95% bootstrap interval, seeds per arm and verdict
   (reproduced, not reproduced, inconclusive), and the rule; the same numbers in
   `reports/claims.json`;
4. held-out curves of each headline metric, every method of the task overlaid (mean over seeds,
   min–max band);
5. every benchmark's table, the collapse events, and how often the collapse alarms are right
   (`flows/alarms.py`: each run labelled collapsed or healthy in hindsight, three online alarms
   scored against the labels; the same numbers in `reports/alarms.json`);
6. diagnostics: each method's training reward on its own axis (the rewards are on incompatible
   scales: RLME's is a log-probability), the other training and held-out curves overlaid.

Methods are discovered from those folders (any name, not only `params.methods`), so a variant run
by hand shows up too. Nothing missing is fatal: a method with an evaluation but no curves gets a
table row and no line, a run with curves but no evaluation gets lines, an unreadable file is
named in the page's notes. Writes `reports/index.html` (self-contained: no script or font from a
CDN), `reports/summary.md`, `reports/metrics.json`, `reports/claims.json`, `reports/alarms.json`
and `reports/headline.json`, and logs the folder to an MLflow run (tag `stage=report`).

The charts are Vega-Lite specs from flows/charts.py, the chart definition `dvc plots` shares,
embedded in the page with Vega inlined (docs/vega/plots_template.html's bundle), so the page
renders with no network.
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from prefect import flow

from core import paths
from core.cli import parser, run_main
from core.io import read_json, write_json
from core.params import Params, load
from evals.claims import (
    FAILS,
    INCONCLUSIVE,
    MEASURES,
    NOT_RUN,
    NOT_TESTED,
    PILOT,
    RULE,
    Comparison,
    Verdict,
    claims_json,
    per_seed,
    short_of_plan,
    study_of,
    verdicts,
)
from evals.stats import snap
from flows import alarms as alarms_
from flows import charts as charts_
from flows.charts import PALETTE, Series, series_for  # noqa: F401 - re-exported
from flows.report_collect import (  # noqa: F401 - re-exported: the stage's reading half
    OTHER,
    SMOKE_MAX_STEPS,
    SMOKE_MIN_TEST,
    SMOKE_PRESETS,
    TASK_HEADLINE,
    Collected,
    Provenance,
    Row,
    RunData,
    TaskResult,
    aggregate,
    benchmark_of,
    collect,
    collect_studies,
    count_keys,
    current,
    discover,
    headline,
    headline_metrics,
    number,
    outdated_runs,
    outdated_summary,
    provenance,
    run_task,
    smoke_reasons,
)
from models.collapse import CollapseConfig

# Columns of the headline table printed by the CLI and at the top of summary.md.
HEADLINE = ["arith/pass@1", "arith/greedy_accuracy", "arith/pass@k", "arith/mean_length",
            "arith_cf/cheat_rate", "facts/coverage", "facts/style_adherence", "pairs/outcome_acc"]
# Within a benchmark table these metrics come first, in this order; the rest alphabetically, `n` last.
PREFERRED = ["pass@1", "greedy_accuracy", "pass@k", "accuracy", "outcome_acc", "cheat_rate",
             "coverage", "style_adherence"]
# Train-curve columns charted first; every other numeric column follows (`reward_std` is noise;
# `reward` has its own per-method charts: the methods' rewards are on incompatible scales).
TRAIN_FIRST = ["entropy", "completion_length", "clipped_ratio"]
TRAIN_SKIP = {"step", "reward_std", "reward"}
SMOKE_BANNER = "Smoke test, not a result"


# ------------------------------------------------------------------------------ numbers

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
                   counts: set[str] = frozenset()) -> list[list[str]]:
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


def left_out_markdown(left_out: Sequence[str]) -> str:
    """The first screen's warning: the stale runs no table or claim pools, grouped by why."""
    if not left_out:
        return ""
    return (f"> **{len(left_out)} stale run{'s' * (len(left_out) != 1)} left out** of every table and "
            f"claim (a number is never pooled across bases). {left_out_summary(left_out)}.")


def summary_markdown(agg: dict[str, dict], collected: Collected, smoke: Sequence[str] = (),
                     claims: tuple[list[Verdict], list[str]] | None = None,
                     alarms: dict | None = None, left_out: Sequence[str] = (), outdated: str = "") -> str:
    """summary.md: the headline table, the papers' claims, one table per benchmark, the collapse
    events, the collapse alarms' error rates and notes (and, first, the smoke-test warning when
    there is one)."""
    found, claim_notes = claims if claims is not None else verdicts(collected.runs)
    parts = ["# Reward methods compared", "", "## Methods compared", "", table(agg), "",
             claims_markdown(found, claim_notes)]
    if outdated:
        parts[1:1] = ["", f"> {outdated}"]
    if left_out:
        parts[1:1] = ["", left_out_markdown(left_out)]
    if smoke:
        parts[1:1] = ["", f"> **{SMOKE_BANNER}**: {'; '.join(smoke)}."]
    counts = count_keys(collected)
    for bench, metrics in benchmarks(agg).items():
        parts += ["", f"## {bench}", "", _markdown(["method", "seeds", *metrics],
                                                   benchmark_rows(agg, bench, metrics, counts))]
    events = _event_rows(collected)
    if events:
        parts += ["", "## Collapse events", "", _markdown(["method", "seed", "step", "kind", "message"],
                                                          events)]
    alarms = alarms if alarms is not None else alarms_.score(collected, _collapse_config(None))
    parts += ["", "## Collapse alarms: how often they are right", "", alarms_markdown(alarms)]
    if collected.notes:
        parts += ["", "## Notes", "", *(f"- {n}" for n in collected.notes)]
    return "\n".join(parts) + "\n"


def _interval(c: Comparison) -> str:
    """`+0.120 [+0.080, +0.160]`; before the planned seeds exist, the pilot's difference alone
    (no interval: the verdict is computed once, on the planned seeds); `—` without a number."""
    if c.difference is None or c.low is None or c.high is None:
        pilot = c.plan.get("pilot_difference") if c.plan else None
        return f"pilot {_signed(pilot)} (no interval before the planned seeds)" if pilot is not None else "—"
    return f"{_signed(c.difference)} [{_signed(c.low)}, {_signed(c.high)}]"


def _without_study(text: str, study: str) -> str:
    """`text` with the arms of `study` named without it (`hint_copier/rlme` -> `rlme`); as is
    when `study` is ''."""
    return text.replace(f"{study}/", "") if study else text


def claim_cells(v: Verdict) -> list[list[str]]:
    """A claim's table cells, each a list of lines: claim (and its setting), paper, arms, metric,
    difference [95% interval] (one line per comparison, then the test and what was resampled),
    seeds per arm, verdict (the reason, each precondition measured, what a decision needs)."""
    c, comps = v.claim, v.comparisons
    several = len(comps) > 1
    # Arms of one preset study (`hint_copier/rlme`, ...) are named once with their base.
    presets = {a.rpartition("/")[0] for a in c.arms}
    setting = presets.pop() if len(presets) == 1 else ""

    def name(arm: str | None) -> str:
        if arm is None:
            return "0"
        return arm.removeprefix(f"{setting}/") if setting else arm

    def short(text: str) -> str:
        return _without_study(text, setting)

    def head(x: Comparison) -> str:
        return (x.label or f"{name(x.treatment)} − {name(x.control)}") + ": "

    diffs = [(head(x) if several else "") + _interval(x) + (f" ({short(per_seed(x))})" if per_seed(x) else "")
             for x in comps]
    tests = list(dict.fromkeys(x.test for x in comps if x.test))
    bases = list(dict.fromkeys(x.basis for x in comps if x.basis))
    ps = [f"{name(x.treatment)}: exact permutation p = {_fmt(x.p)}" for x in comps if x.p is not None]
    seeds: dict[str, int] = {}
    for x in comps:
        seeds.update(x.seeds)
    planned = list(dict.fromkeys(int(x.plan["seeds"]) for x in comps if x.plan.get("seeds")))
    own = list(dict.fromkeys(p.metric for p in c.comparisons if p.metric and p.metric != c.metric))
    own += [f"{name(p.control)}'s {p.control_metric}" for p in c.comparisons if p.control and p.control_metric]
    metric = f"{c.metric}, {MEASURES[c.measure]}" if c.metric else "—"
    arms = [f"{name(x.treatment)} vs {name(x.control)}" if x.control else f"{name(x.treatment)} (vs 0)"
            for x in comps]
    pre = [f"precondition {p.status}: {p.what} ({short(p.detail)})" for p in v.preconditions]
    expected = [f"expected {c.expected()}"]
    return [[c.statement] + ([f"setting: {c.setting}"] if c.setting else []), [f"{c.paper} {c.figure}"],
            arms + ([f"(the {setting} study's base)"] if setting else []),
            [metric, *(f"and {m}" for m in own), *expected], diffs + tests + bases + ps,
            [", ".join(f"{name(a)} {n}" for a, n in seeds.items())]
            + ([f"planned {' / '.join(map(str, planned))} per arm"] if planned else []),
            second_base_cell(v),
            # Each precondition's line says its status: a reason that only names them again is left out.
            [v.verdict, *([] if pre and v.reason.startswith("precondition ") else [short(v.reason)]), *pre]
            + ([f"needs: {short(v.needs)}"] if v.needs else [])]


def second_base_cell(v: Verdict) -> list[str]:
    """The claim on the second base (evals/claims.py, `second_base`): its verdict, the first
    comparison's difference and interval, and whether it agrees with the first base's (said only
    when both are decided: "inconclusive" on either base is neither); `not run`. A claim not
    tested there names the precondition that failed there, with what was measured (its arms
    named without their study when it has one).

    >>> from evals.claims import CLAIMS
    >>> second_base_cell(Verdict(CLAIMS[0], (), "inconclusive", "", second={"verdict": "not run"}))
    ['not run']
    >>> second_base_cell(Verdict(CLAIMS[0], (), "reproduced", "", second={"verdict": "reproduced",
    ...     "diff": -0.02, "ci": [-0.05, 0.01], "agrees": True}))
    ['reproduced', '−0.020 [−0.050, +0.010]', 'agrees']
    >>> second_base_cell(Verdict(CLAIMS[0], (), "reproduced", "", second={
    ...     "verdict": "inconclusive", "agrees": None}))
    ['inconclusive']
    >>> second_base_cell(Verdict(CLAIMS[0], (), "not tested", "", second={
    ...     "verdict": "not tested", "agrees": True, "studies": ["hint_copier.seed1"], "preconditions": [
    ...         {"what": "RLME learns to copy", "status": "fails", "detail":
    ...          "hint_copier.seed1/rlme − hint_copier.seed1/base -0.252 [-0.295, -0.208]"},
    ...         {"what": "RLVR learns to copy", "status": "undecided", "detail": "4 seeds needed"}]}))
    ['not tested', 'precondition fails: RLME learns to copy (rlme − base -0.252 [-0.295, -0.208])', 'agrees']
    """
    second = v.second or {"verdict": NOT_RUN}
    if second["verdict"] == NOT_RUN:
        return [NOT_RUN]
    studies = second.get("studies") or []
    study = studies[0] if len(studies) == 1 else ""
    failed = [f"precondition fails: {p['what']}"
              + (f" ({_without_study(p['detail'], study)})" if p.get("detail") else "")
              for p in second.get("preconditions", []) if p["status"] == FAILS
              ] if second["verdict"] == NOT_TESTED else []
    diff, ci = second.get("diff"), second.get("ci")
    number = ([f"{_signed(diff)} [{_signed(ci[0])}, {_signed(ci[1])}]"] if diff is not None and ci
              else [f"{_signed(diff)}"] if diff is not None else [])
    agrees = second.get("agrees")
    return [second["verdict"], *number, *failed,
            *([] if agrees is None else ["agrees" if agrees else "differs from the first base"])]


def runs_needed(found: list[Verdict]) -> list[tuple[str, list[str]]]:
    """What the claims still lack seeds for, as the power rule plans them (`short_of_plan`): (the
    command that runs it, its arms with the seeds found and planned), the default study's arms in
    one command, then one per preset study (claims still undecided only: more seeds cannot move a
    decided one, `combine`); then, per second-base study, its arms short of their
    pilot seeds (`second_base`'s `short_of_pilot`), and its arms whose pilot is in but not the
    seeds the plan from it asks (`short_of_plan`). Blocked claims need no runs.

    >>> from evals.claims import CLAIMS
    >>> [(cmd, arms)] = runs_needed([Verdict(CLAIMS[0], (), "reproduced", "", second={
    ...     "verdict": "not run", "short_of_pilot": ["default.seed1/rlvr", "default.seed1/rlme"]})])
    >>> print(cmd); print(arms)
    python -m flows.pipeline --study default.seed1 --no-extend --methods rlme rlvr
    ['default.seed1/rlme (pilot)', 'default.seed1/rlvr (pilot)']
    >>> [(cmd, arms)] = runs_needed([Verdict(CLAIMS[0], (), "reproduced", "", second={
    ...     "verdict": "inconclusive", "short_of_pilot": [],
    ...     "short_of_plan": {"default.seed1/rlvr": [4, 6], "default.seed1/rlme": [3, 6]}})])
    >>> print(cmd); print(arms)
    python -m flows.pipeline --study default.seed1 --methods rlme rlvr
    ['default.seed1/rlme (3 of 6 seeds)', 'default.seed1/rlvr (4 of 6 seeds)']
    """
    short = short_of_plan([v for v in found if v.verdict in (INCONCLUSIVE, NOT_RUN)])

    def line(a: str, n: Sequence[int]) -> str:
        return f"{a} ({n[0]} of {n[1]} seeds)"

    default = sorted(a for a in short if "/" not in a)
    out = ([(f"make study ARGS='--methods {' '.join(default)}'", [line(a, short[a]) for a in default])]
           if default else [])
    for preset in sorted({a.split("/")[0] for a in short if "/" in a}):
        out.append((f"python -m flows.pipeline --study {preset}",
                    [line(a, short[a]) for a in sorted(short) if a.startswith(f"{preset}/")]))
    second = sorted({a for v in found for a in (v.second or {}).get("short_of_pilot", [])})
    for study in sorted({study_of(a) for a in second}):
        arms = [a for a in second if study_of(a) == study]
        out.append((f"python -m flows.pipeline --study {study} --no-extend --methods "
                    + " ".join(a.rpartition("/")[2] for a in arms), [f"{a} (pilot)" for a in arms]))
    planned: dict[str, list[int]] = {}
    for v in found:
        if v.claim.blocked:
            continue
        for a, (n, want) in (v.second or {}).get("short_of_plan", {}).items():
            if a not in second:
                planned[a] = [max(n, planned.get(a, [0, 0])[0]), max(want, planned.get(a, [0, 0])[1])]
    for study in sorted({study_of(a) for a in planned}):
        arms = sorted(a for a in planned if study_of(a) == study)
        out.append((f"python -m flows.pipeline --study {study} --methods "
                    + " ".join(a.rpartition("/")[2] for a in arms), [line(a, planned[a]) for a in arms]))
    return out


def base_first(cmd: str, root: Path | None = None) -> str:
    """What a runs-needed command spends before its runs when its study's record names a base of
    its own and ships none (tasks/studies.py `unshipped_base`): the call builds that base again
    first, and on a CPU that builds another one every recorded run of the study is stale and
    trains again. '' for any other command."""
    from tasks.studies import unshipped_base

    study = cmd.split("--study ", 1)[1].split()[0] if "--study " in cmd else None
    seconds = unshipped_base(study, root or paths.ROOT) if study else None
    if seconds is None:
        return ""
    took = f", {seconds / 60:.0f} min when it was recorded" if seconds else ""
    return (f"builds the study's base first, its record ships none{took}; if this CPU builds "
            "another, the recorded runs are stale and train again")


def _needed_lines(found: list[Verdict]) -> list[str]:
    return [f"`{cmd}`: {', '.join(arms)}" + (f"; {note}" if (note := base_first(cmd)) else "")
            for cmd, arms in runs_needed(found)]


def claims_markdown(found: list[Verdict], notes: Sequence[str] = (), heading: bool = True) -> str:
    """The claims table (markdown) with the rule and any skipped per-item files."""
    header = ["claim", "paper", "arms", "metric", "difference [95% interval]", "seeds", "second base",
              "verdict"]

    def md(lines: list[str], bold: bool = False) -> str:
        lines = [line.replace("|", "\\|") for line in lines]
        return f"**{lines[0]}**: {'; '.join(lines[1:])}" if bold else "; ".join(lines)

    rows = [[*(md(cell) for cell in cells[:-1]), md(cells[-1], bold=True)]
            for cells in (claim_cells(v) for v in found)]
    parts = [*(["## The papers' claims", ""] if heading else []), _markdown(header, rows), "",
             f"Rule: {RULE}"]
    if needed := _needed_lines(found):
        parts += ["", "Runs still needed for a verdict:", "", *(f"- {line}" for line in needed)]
    if notes:
        parts += ["", "Per-item files skipped:", "", *(f"- {n}" for n in notes)]
    return "\n".join(parts)


def claims_html(found: list[Verdict], notes: Sequence[str] = ()) -> str:
    """The claims section's table: one row per claim, its verdict coloured."""
    esc = html.escape
    header = ["claim", "paper", "arms", "metric", "difference [95% interval]", "seeds", "second base",
              "verdict"]
    body = []
    for v in found:
        cells = claim_cells(v)
        # The second base's measured precondition reads as the verdict cell's reasons do: muted.
        tds = ["<td>" + "<br>".join(f"<span class='muted'>{esc(line)}</span>"
                                    if line.startswith("precondition ") else esc(line)
                                    for line in cell) + "</td>" for cell in cells[:-1]]
        verdict, *why = cells[-1]
        tds.append(f"<td class='verdict'><b>{esc(verdict)}</b><br><span class='muted'>"
                   + "<br>".join(esc(line) for line in why) + "</span></td>")
        body.append(f"<tr class='{esc(v.verdict.replace(' ', '-'))}' data-claim='{esc(v.claim.id)}'>"
                    + "".join(tds) + "</tr>")
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    skipped = ("<p class='notes'>Per-item files skipped: " + "; ".join(esc(n) for n in notes) + "</p>"
               if notes else "")
    needed = runs_needed(found)  # the command as code, not markdown's backticks
    todo = ("<p class='needed'>Runs still needed for a verdict:</p><ul class='needed'>"
            + "".join(f"<li><code>{esc(cmd)}</code>: {esc(', '.join(arms))}"
                      + (f"; {esc(note)}" if (note := base_first(cmd)) else "") + "</li>"
                      for cmd, arms in needed)
            + "</ul>") if needed else ""
    return (f"<table class='claims text'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}"
            f"</tbody></table>{todo}<p class='muted'>Rule: {esc(RULE)}</p>{skipped}")


README_BEGIN = "<!-- results:begin (python -m flows.report --readme README.md) -->"
README_END = "<!-- results:end -->"
# The README's second generated block: the claims table and the alarms' error rates.
CLAIMS_BEGIN = "<!-- claims:begin (python -m flows.report --readme README.md) -->"
CLAIMS_END = "<!-- claims:end -->"


def results_markdown(agg: dict[str, dict], collected: Collected, data_dir: Path,
                     params: Params | None = None, left_out: Sequence[str] = (), outdated: str = "") -> str:
    """The README's results table: each method's task headline, base vs trained (mean ± std over
    seeds, n seeds), the base's self-evaluation AUROC and the runs that collapsed (and, first, the
    stale runs left out and the runs recorded with code HEAD has changed)."""
    base = agg.get("base", {})
    rows = []
    for method, stats in agg.items():
        if method == "base":
            continue
        task = run_task(data_dir, method, collected, params)
        metrics = [m for m in headline_metrics(task) if m in stats]
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
    if outdated:
        lines[0:0] = [f"> {outdated}", ""]
    if left_out:
        lines[0:0] = [left_out_markdown(left_out), ""]
    return "\n".join(lines)


def write_readme(readme: Path, data_dir: Path = paths.DATA, params: Params | None = None) -> None:
    """`make results`: the README's generated blocks from the committed records (data/, studies/,
    dvc.lock): the results table of the current base's runs and the claims block."""
    params = params if params is not None else load()
    found = collect(data_dir, params.methods)
    fresh = current(found)
    every = with_studies(found, data_dir)
    outdated = outdated_summary(outdated_runs(Path(data_dir).parent))
    update_readme(readme, results_markdown(aggregate(fresh), fresh, data_dir, params, current(every).left_out,
                                           outdated)
                  + run_cost_line(Path(data_dir).parent / "reports" / "times" / "quick.json"))
    update_readme(readme, claims_readme(every, _collapse_config(params)), CLAIMS_BEGIN, CLAIMS_END)


def run_cost_line(times: Path) -> str:
    """The README's line on what `make run` cost here, from the times the pipeline recorded
    (flows/pipeline.py `write_times`); nothing before a `make run` was recorded."""
    if not times.exists():
        return ""
    t = read_json(times)
    ran = {s: v for s, v in t["stages"].items() if v["action"] not in ("skip", "not run")}
    longest = max(ran.items(), key=lambda kv: kv[1]["seconds"] or 0, default=None)
    return (f"\n\n`make run` took {t['wall_seconds'] / 60:.0f} min here ({t['machine']['cores']} cores, "
            f"up to {t['max_parallel']} stages at once; {len(ran)} of {len(t['stages'])} stages ran, the "
            "rest were up to date"
            + (f"; the longest, `{longest[0]}`, {longest[1]['seconds'] / 60:.0f} min" if longest else "")
            + "): `reports/times/quick.json`.")


def update_readme(readme: Path, text: str, begin: str = README_BEGIN, end: str = README_END) -> None:
    """Replace what stands between the markers `begin` and `end` of `readme` with `text`."""
    page = Path(readme).read_text(encoding="utf-8")
    head, sep, rest = page.partition(begin)
    _, sep2, tail = rest.partition(end)
    if not sep or not sep2:
        what = "results" if begin == README_BEGIN else "claims"
        raise LookupError(f"{readme} has no {what} section: add the lines {begin} and {end} where "
                          "the table goes")
    Path(readme).write_text(f"{head}{begin}\n{text}\n{end}{tail}", encoding="utf-8")


def with_studies(collected: Collected, data_dir: Path) -> Collected:
    """The default study's runs and the presets' own studies (studies/<preset>/, tasks/studies.py)
    as `<preset>/<arm>` runs: they stand on other bases, so the claims and the alarms read them and
    the headline ranking does not."""
    studies = collect_studies(Path(data_dir).parent / "studies")
    collected.notes.extend(studies.notes)
    return Collected({**collected.runs, **studies.runs}, collected.notes)


def claims_readme(every: Collected, collapse: CollapseConfig) -> str:
    """The README's claims block, one line per claim (the front page stays short: the full table,
    with settings, preconditions and what each undecided claim needs, is the report's and
    `reports/claims.json`'s), then the runs still needed and the alarms' count line."""
    found, _ = verdicts(every.runs)
    rows = []
    for v in found:
        c = v.claim
        diff = "; ".join(i.replace(" (no interval before the planned seeds)", "")
                         for x in v.comparisons if (i := _interval(x)) != "—") or "—"
        second = second_base_cell(v)
        rows.append([f"`{c.id}`", f"{c.paper} {c.figure}", diff.replace("|", "\\|"),
                     f"**{v.verdict}**", second[0]])
    parts = [_markdown(["claim", "paper", "difference [95% interval]", "verdict", "second base"], rows)]
    if needed := runs_needed(found):
        parts.append("Runs still needed for a verdict (seeds planned by the power rule; on a "
                     "second base, its pilot first): "
                     + "; ".join(f"`{cmd}`" + (f" ({note})" if (note := base_first(cmd)) else "")
                                 for cmd, _ in needed) + ".")
    record = alarms_.score(every, collapse)
    parts.append(f"Collapse alarms over the same runs: {alarms_.counts(record)} (their error rates "
                 "against a label no alarm reads: the report, `reports/alarms.json`).")
    return "\n\n".join(parts)


def _collapse_config(params: Params | None) -> CollapseConfig:
    """The params' `collapse` thresholds, as flows/train.py builds them (params.yaml's if None)."""
    return CollapseConfig(**(params if params is not None else load()).collapse.model_dump())


def _event_rows(collected: Collected) -> list[list[str]]:
    return [[method, str(seed), str(int(number(e["step"]))), str(e.get("kind", "?")),
             " ".join(str(e.get("message", "")).split())]
            for method, seeds in collected.runs.items() for seed, run in seeds.items()
            for e in run.events]


def answer_lines(results: list[TaskResult]) -> list[str]:
    """One plain sentence per task: who won, by how much over the base, what came next."""
    return [line for res in results if (line := answer_line(res))]


def answer_line(res: TaskResult) -> str | None:
    """Who won the task, by how much over the base, what came next; None if nobody has its metric."""
    m = res.metrics[0]
    metric = m.split("/", 1)[1]
    trained = [r for r in res.trained() if m in r.stats]
    base = next((r.stats.get(m) for r in res.rows if r.base), None)
    if not trained:
        return None
    best = next(r for r in trained if r.method == res.best[m])
    vs = (f", {_signed(best.stats[m]['mean'] - base['mean'])} over the base ({_fmt(base['mean'])})"
          if base else "")
    counts = sorted({r.stats[m]["n"] for r in trained})
    # Methods with different numbers of seeds read as a range ("1-10 seeds"), never as the
    # largest alone: "10 methods × 10 seeds" said every method had ten.
    seeds = f"{counts[0]}–{counts[-1]}" if len(counts) > 1 else f"{counts[0]}"
    size = f", {res.test_n} test items" if res.test_n else ""
    head = (f"{res.task} ({metric}{size}, {len(trained)} method{'s' * (len(trained) > 1)} × {seeds} "
            f"seed{'s' * (counts[-1] > 1)}): ")
    if len(trained) == 1:
        text = f"only {best.method} trained on it: {cell(best.stats[m], 1)}{vs}"
    else:
        runner = next(r for r in trained if r is not best)
        text = (f"best {best.method} {cell(best.stats[m], 1)}{vs}; next {runner.method} "
                f"{cell(runner.stats[m], 1)}")
        if res.ties.get(m):
            text += f" ({', '.join(res.ties[m])} within the seeds' spread of the best)"
    if base and best.stats[m]["mean"] <= base["mean"]:
        text += "; no method beats the base"
    collapsed = sorted({r.method for r in trained if r.collapsed})
    if collapsed:
        text += f"; collapse detected in {', '.join(collapsed)}"
    return head + text + "."


# ------------------------------------------------------------------------------ charts

def chart_specs(collected: Collected, skip_heldout: Sequence[str] = ()) -> list[tuple[str, str, str]]:
    """(source, key, title) of the overlaid diagnostic charts: train columns (not the reward),
    then held-out metrics other than `skip_heldout` (the headline curves, drawn first)."""
    train_keys, heldout_keys = set(), set()
    for seeds in collected.runs.values():
        for run in seeds.values():
            for row in run.train:
                train_keys.update(k for k, v in row.items() if number(v) is not None)
            for row in run.heldout:
                heldout_keys.update(k for k, v in row.items() if number(v) is not None)
    train = sorted(train_keys - TRAIN_SKIP,
                   key=lambda k: (TRAIN_FIRST.index(k) if k in TRAIN_FIRST else len(TRAIN_FIRST), k))
    # Held-out rows repeat the train means (`train/...`) and carry row counts (`.../n`): not curves.
    held = [k for k in heldout_keys if k != "step" and not k.startswith("train/") and not k.endswith("/n")
            and k not in skip_heldout]
    held.sort(key=lambda k: (benchmark_of(k)[0], _metric_rank(benchmark_of(k)[1])))
    return ([("train", k, f"train: {k}") for k in train]
            + [("heldout", k, f"held-out: {k}") for k in held])


def _color(colors: dict[str, int], method: str) -> str:
    return charts_.color_of(colors, method)


def headline_charts(collected: Collected, results: list[TaskResult], colors: dict[str, int]) -> list[str]:
    """Per task and headline metric: the held-out curve of every method trained on the task."""
    return [charts_.embed(spec) for spec in charts_.headline_specs(collected, results, colors)]


def reward_charts(collected: Collected, colors: dict[str, int]) -> list[str]:
    """Small multiples: each method's training reward on its own y axis (one line per seed)."""
    return [charts_.embed(spec) for spec in charts_.reward_specs(collected, colors)]


def charts(collected: Collected, colors: dict[str, int], skip_heldout: Sequence[str] = ()) -> list[str]:
    """Every chart of `chart_specs`, each with every method's curves and collapse markers."""
    return [charts_.embed(spec)
            for spec in charts_.overlay_specs(collected, colors, chart_specs(collected, skip_heldout))]


# ------------------------------------------------------------------------------ page

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.2em 2em;color:#222;background:#fff}
h1{margin:.2em 0 .1em;font-size:1.6em} h2{margin:1.2em 0 .4em;border-bottom:1px solid #ddd}
h3{margin:.9em 0 .3em}
.provenance{color:#444;margin:.2em 0 .6em} .provenance span{margin-right:1.4em;white-space:nowrap}
.provenance code{background:#f3f3f3;padding:0 .3em}
.outdated{background:#eef3fb;border-left:4px solid #4a78c2;color:#233;padding:.4em .8em;margin:.6em 0}
.smoke{background:#fff1cc;border:2px solid #d98b00;color:#6b3e00;padding:.6em 1em;margin:.6em 0;
 font-size:1.05em} .smoke strong{font-size:1.25em;text-transform:uppercase;margin-right:.6em}
nav a{margin-right:1.2em}
.answer{margin:.3em 0 .8em;padding-left:1.2em} .answer li{margin:.2em 0}
table{border-collapse:collapse;margin:.4em 0 1.2em}
td,th{border:1px solid #bbb;padding:3px 9px;text-align:right;font-variant-numeric:tabular-nums}
th{background:#f0f0f0} td:first-child,th:first-child,table.text td,table.text th{text-align:left}
table.headline tr.best td{background:#eef7ee;font-weight:600}
table.headline tr.base td{color:#555;font-style:italic;background:#fafafa}
table.headline td.spread{font-size:.9em;color:#333} table.headline td,table.headline th{white-space:nowrap}
table.headline td{padding:3px 7px}
table.headline td.collapse,table.headline th.collapse{white-space:normal;text-align:left;min-width:12em}
table.headline,table.numbers{display:block;max-width:100%;overflow-x:auto}
.mark{color:#1a7f37} .tie{color:#555}
table.claims{width:100%;table-layout:fixed} table.claims td{vertical-align:top;font-size:.95em;overflow-wrap:break-word}
table.claims th:nth-child(1){width:13%} table.claims th:nth-child(2){width:5%} table.claims th:nth-child(3){width:12%}
table.claims th:nth-child(4){width:10%} table.claims th:nth-child(5){width:14%} table.claims th:nth-child(6){width:9%}
table.claims th:nth-child(7){width:9%} table.claims th:nth-child(8){width:28%}
table.claims tr.reproduced td.verdict{background:#eef7ee} table.claims tr.not-reproduced td.verdict{background:#fbeaea}
table.claims tr.inconclusive td.verdict{background:#f6f6f6} table.claims tr.not-tested td.verdict{background:#fdf5e0}
.tasks{display:flex;flex-wrap:wrap;gap:0 28px;align-items:flex-start} .tasks>div{min-width:0;max-width:100%}
.notes{color:#8a4b00} .muted{color:#666}
""" + charts_.CSS


def html_table(header: list[str], rows: list[list[str]], css: str = "numbers") -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table class='{css}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


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


def provenance_html(prov: Provenance) -> str:
    """The header line (preset, commit, date, seeds) and the smoke-test banner if there is one."""
    esc = html.escape
    seeds = ", ".join(map(str, prov.seeds)) or "none found"
    planned = ""
    if prov.planned_seeds is not None and sorted(prov.planned_seeds) != prov.seeds:
        planned = f" (params.seeds: {', '.join(map(str, prov.planned_seeds))})"
    preset = prov.preset or ("default" if prov.planned_seeds is not None else "unknown")
    items = [f"preset <b>{esc(preset)}</b>",
             f"commit <code>{esc(prov.commit)}</code>" + (" + uncommitted code" if prov.dirty else ""),
             f"built {esc(prov.date)}", f"seeds {esc(seeds)}{esc(planned)}",
             f"{prov.methods} method{'s' * (prov.methods != 1)}"]
    info = prov.base_model or {}
    if number(info.get("parameters")) is not None:
        items.append(f"base model {number(info['parameters']) / 1e6:.2f} M parameters"
                     + (f", {int(info['sft_steps'])} SFT steps" if number(info.get("sft_steps")) else ""))
    out = [f"<p class='provenance' id='provenance' data-preset='{esc(preset)}' "
           f"data-commit='{esc(prov.commit)}' data-date='{esc(prov.date)}'>"
           + " ".join(f"<span>{i}</span>" for i in items) + "</p>"]
    if prov.left_out:
        out.append(f"<div class='smoke' id='stale' role='alert'><strong>{len(prov.left_out)} stale "
                   f"run{'s' * (len(prov.left_out) != 1)} left out</strong> of every table and claim "
                   "(a number is never pooled across bases). "
                   + esc(left_out_summary(prov.left_out)) + ".</div>")
    if prov.outdated:
        out.append(f"<p class='outdated' id='outdated'>{esc(prov.outdated)}</p>")
    if prov.smoke:
        out.append(f"<div class='smoke' id='smoke' role='alert'><strong>{SMOKE_BANNER}</strong>"
                   f"{esc('; '.join(prov.smoke))}. These numbers check that the pipeline runs; "
                   f"they say nothing about the methods.</div>")
    return "\n".join(out)


def headline_html(res: TaskResult, colors: dict[str, int]) -> str:
    """A task's headline table: rank, mean ± std, vs base, every seed drawn, seeds, collapses."""
    esc = html.escape
    base = next((r for r in res.rows if r.base), None)
    header = ["method"]
    for m in res.metrics:
        name = m.split("/", 1)[1]
        header += [f"{name} (mean ± std)" if len(res.metrics) == 1 else name, "vs base",
                   f"{name} per seed"]
    header += ["seeds", "collapse"]
    body = []
    for r in res.rows:
        cls = "base" if r.base else "best" if res.best.get(res.metrics[0]) == r.method else ""
        color = _color(colors, r.method) if r.method in colors and not r.base else charts_.BASE_COLOR
        cells = [f"<td><span class='swatch' style='background:{color}'></span>{esc(r.method)}</td>"]
        n = max((s["n"] for s in r.stats.values()), default=0)
        for m in res.metrics:
            st = r.stats.get(m)
            if st is None:
                cells += ["<td>—</td>", "<td></td>", "<td></td>"]
                continue
            mark = ""
            if res.best.get(m) == r.method:
                mark = "<span class='mark' title='best mean of the methods trained on this task'>★ </span>"
            elif r.method in res.ties.get(m, []):
                mark = ("<span class='tie' title=\"within the seeds' spread of the best: the means "
                        "differ by less than the sum of the two standard deviations\">≈ </span>")
            cells.append(f"<td>{mark}{esc(cell(st, n))}</td>")
            b = base.stats.get(m) if base is not None else None
            cells.append(f"<td>{_signed(st['mean'] - b['mean']) if b and not r.base else '—'}</td>")
            seeds = sorted(r.seeds.get(m, []), key=lambda sv: -1 if sv[0] is None else sv[0])
            tip = " · ".join(f"{'base' if s is None else f'seed {s}'}: {v:.4g}" for s, v in seeds)
            vals = [v for _, v in seeds]
            text = (f"{_fmt(min(vals))}–{_fmt(max(vals))}" if len(vals) > 1
                    else _fmt(vals[0]) if vals else "")
            cells.append(f"<td class='spread' title='{esc(tip)}'>{esc(text)}</td>")
        events = "; ".join(f"seed {s}: {esc(str(e.get('kind', '?')))} @ {int(e['step'])}"
                           for s, e in r.collapsed)
        cells += [f"<td>{n}</td>", f"<td class='collapse'>{'' if r.base else events or 'none'}</td>"]
        body.append(f"<tr class='{cls}' data-method='{esc(r.method)}'>" + "".join(cells) + "</tr>")
    head = "".join(f"<th class='collapse'>{esc(h)}</th>" if h == "collapse" else f"<th>{esc(h)}</th>"
                   for h in header)
    return (f"<table class='headline' id='headline-{esc(res.task)}'><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>")


def _answer_html(line: str, res: TaskResult) -> str:
    """An answer line with the task and the best method in bold."""
    text = html.escape(line)
    task = html.escape(res.task)
    if text.startswith(task):
        text = f"<b>{task}</b>{text[len(task):]}"
    best = html.escape(res.best.get(res.metrics[0], ""))
    for lead in ("best ", "only "):
        if best and f"{lead}{best} " in text:
            return text.replace(f"{lead}{best} ", f"{lead}<b>{best}</b> ", 1)
    return text


def seeds_charts(res: TaskResult, colors: dict[str, int]) -> str:
    """Under a task's headline table, its metrics per seed (dots, the mean, the base)."""
    specs = [charts_.seeds_spec(res, m, colors) for m in res.metrics]
    return "".join(charts_.embed(spec, "seeds") for spec in specs if spec)


def _legend(collected: Collected, colors: dict[str, int]) -> str:
    with_curves = [m for m, seeds in collected.runs.items()
                   if any(r.train or r.heldout for r in seeds.values())]
    return charts_.legend_html(with_curves, colors)


def html_page(agg: dict[str, dict], collected: Collected, results: list[TaskResult] | None = None,
              prov: Provenance | None = None,
              claims: tuple[list[Verdict], list[str]] | None = None,
              alarms: dict | None = None) -> str:
    """The whole report as one self-contained HTML document: the answer first, then the evidence."""
    esc = html.escape
    results = results if results is not None else headline(collected, agg, paths.DATA)
    found, claim_notes = claims if claims is not None else verdicts(collected.runs)
    # The base has no curves: the trained methods take the palette's colours in study order.
    colors = {m: i for i, m in enumerate(m for m in collected.runs if m != "base")}
    smoke = prov is not None and prov.smoke
    parts = ["<!doctype html><html lang='en'><head><meta charset='utf-8'>",
             f"<title>{'[smoke test] ' if smoke else ''}Reward methods compared</title>",
             f"<style>{_CSS}</style></head><body>",
             "<header><h1>Reward methods compared</h1>"]
    if prov is not None:
        parts.append(provenance_html(prov))
    parts.append("<nav><a href='#result'>Result</a><a href='#claims'>Claims</a><a href='#curves'>Held-out curves</a>"
                 "<a href='#benchmarks'>All benchmarks</a><a href='#collapse'>Collapse events</a>"
                 "<a href='#alarms'>Collapse alarms</a><a href='#diagnostics'>Diagnostics</a></nav></header>")
    if collected.notes:
        parts.append(f"<details class='notes'><summary>{len(collected.notes)} note"
                     f"{'s' * (len(collected.notes) > 1)} on missing or unreadable files</summary><ul>"
                     + "".join(f"<li>{esc(n)}</li>" for n in collected.notes) + "</ul></details>")

    parts.append("<section id='result'><h2>Result: which method won</h2>")
    if results:
        parts.append("<ul class='answer'>" + "".join(f"<li>{_answer_html(line, r)}</li>" for r in results
                                                     if (line := answer_line(r))) + "</ul>")
        parts.append("<p class='muted'>Per task, the methods trained on it ranked by the task's "
                     "headline metric on its test set (mean ± population std over seeds); ★ the "
                     "best mean, ≈ within the seeds' spread of it; per seed: each dot one seed, the "
                     "black tick the mean, the dashed line the base.</p><div class='tasks'>")
        for res in results:
            names = " / ".join(m.split("/", 1)[1] for m in res.metrics)
            parts.append(f"<div><h3 id='task-{esc(res.task)}'>{esc(res.task)}: {esc(names)}</h3>"
                         + headline_html(res, colors) + seeds_charts(res, colors) + "</div>")
        parts.append("</div>")
    else:
        parts.append("<p>No evaluations found (data/eval/ is empty).</p>")
    parts.append("</section>")

    parts.append("<section id='claims'><h2>The papers' claims</h2>")
    open_ = sum(v.verdict == INCONCLUSIVE for v in found)
    parts.append(f"<p class='muted'>Each claim tested in its setting on the runs of one base "
                 f"({PILOT} pilot seeds per arm, then the seeds the power rule plans); "
                 f"{len(found) - open_} of {len(found)} decided (reproduced, not reproduced or not "
                 "tested); each undecided claim says why and what a decision needs.</p>")
    parts.append(claims_html(found, claim_notes) + "</section>")

    headline_keys = [m for res in results for m in res.metrics]
    has_curves = any(r.train or r.heldout for seeds in collected.runs.values() for r in seeds.values())
    parts.append("<section id='curves'><h2>Held-out curves</h2>")
    if has_curves:
        parts.append(_legend(collected, colors))
        parts.append("<p class='muted'>The headline metric on the held-out set sampled during "
                     "training, every method of the task overlaid: the line is the mean over seeds, "
                     "the band min–max over seeds; step 0 is the base. Dashed verticals mark collapse "
                     "events (hover for the message). Untick a method to hide it everywhere.</p>")
        parts.append("<div class='charts'>" + "".join(headline_charts(collected, results, colors))
                     + "</div>")
    else:
        parts.append("<p>No training curves found (data/plots/ is empty).</p>")
    parts.append("</section>")

    parts.append("<section id='benchmarks'><h2>All benchmarks</h2><p class='muted'>The final "
                 "evaluation of every method on every benchmark (mean ± std over seeds; a method "
                 "trained on one task is scored on the others too).</p>")
    counts = count_keys(collected)
    for bench, metrics in benchmarks(agg).items():
        parts.append(f"<h3 id='bench-{esc(bench)}'>{esc(bench)}</h3>")
        parts.append(html_table(["method", "seeds", *metrics], benchmark_rows(agg, bench, metrics, counts)))
    if not agg:
        parts.append("<p>No evaluations found (data/eval/ is empty).</p>")
    parts.append("</section>")
    events = _event_rows(collected)
    parts.append("<section id='collapse'><h2>Collapse events</h2>")
    parts.append(html_table(["method", "seed", "step", "kind", "message"], events, css="text") if events
                 else "<p>None detected.</p>")
    parts.append("</section>")
    alarms = alarms if alarms is not None else alarms_.score(collected, _collapse_config(None))
    parts.append("<section id='alarms'><h2>Collapse alarms: how often they are right</h2>"
                 "<p class='muted'>Each run labelled collapsed or healthy in hindsight from its whole "
                 "held-out curve, then three online alarms scored against the labels: false alarms "
                 "on healthy runs, misses on collapsed runs, and how many steps from the onset a "
                 "hit came (negative: before it).</p>")
    parts.append(alarms_html(alarms) + "</section>")

    parts.append("<section id='diagnostics'><h2>Diagnostics</h2>")
    if has_curves:
        rewards = reward_charts(collected, colors)
        if rewards:
            parts.append("<h3>Training reward, per method</h3><p class='muted'>Each method on its own "
                         "y axis: the rewards are on incompatible scales (RLME's is a log-probability, "
                         "RLVR's 0 or 1), so they are never overlaid. One line per seed.</p>")
            parts.append("<div class='charts'>" + "".join(rewards) + "</div>")
        parts.append("<h3>Training and held-out curves</h3><p class='muted'>One line per seed (the first "
                     "seed solid).</p>")
        parts.append("<div class='charts'>" + "".join(charts(collected, colors, headline_keys)) + "</div>")
    else:
        parts.append("<p>No training curves found (data/plots/ is empty).</p>")
    parts.append("</section>")
    if any("<figure class='vl" in part for part in parts):  # Vega inlined: drawn with no network
        parts += [charts_.bundle(), f"<script>{charts_.SCRIPT}</script>"]
    parts.append("</body></html>")
    return "\n".join(parts)


def figure(collected: Collected, chart: str, methods: Sequence[str]) -> dict:
    """One chart as a Vega-Lite spec (a legend, the runs of `methods` only), for a README or a
    paper: `--figure` writes it as JSON or as a page that draws it offline (flows/charts.py).

    `chart` is `<source>:<key>` as in `chart_specs`, e.g. `heldout:arith/pass@1` or `train:reward`.
    """
    return charts_.figure_spec(collected, chart, methods)


def headline_json(results: list[TaskResult]) -> dict[str, dict[str, float]]:
    """The study in a few numbers (a DVC metric: `dvc metrics show`, `dvc exp show`): per method,
    the mean over seeds of its task's headline metrics (and its std), the base per task.

    >>> row = Row("rlvr", {"arith/pass@1": {"mean": 0.8481, "std": 0.007, "n": 3}}, {}, [])
    >>> base = Row("base", {"arith/pass@1": {"mean": 0.3425, "std": 0.0, "n": 1}}, {}, [], base=True)
    >>> headline_json([TaskResult("arith", ["arith/pass@1"], [row, base], {}, {}, 200)])
    {'rlvr': {'arith/pass@1': 0.8481, 'arith/pass@1_std': 0.007}, 'base': {'arith/pass@1': 0.3425}}
    """
    out: dict[str, dict[str, float]] = {}
    for res in results:
        for r in res.rows:
            for metric in res.metrics:
                stat = r.stats.get(metric)
                if stat is None:
                    continue
                entry = out.setdefault(r.method, {})
                entry[metric] = round(stat["mean"], 4)
                if not r.base:
                    entry[f"{metric}_std"] = round(stat["std"], 4)
    return out


def build(out_dir: Path = paths.REPORTS, data_dir: Path = paths.DATA, order: Sequence[str] = (),
          params: Params | None = None, now: datetime | None = None,
          collapse: CollapseConfig | None = None) -> dict[str, dict]:
    """Write index.html, summary.md, metrics.json, headline.json, claims.json and alarms.json into
    `out_dir`; returns the aggregate.

    `params` (the stage's) gives the header its preset and planned seeds and the smoke-test check
    its preset; without them the header says the preset is unknown and only the data is checked.
    `collapse` (the alarms' lab detector thresholds) defaults to the params' `collapse`, or
    params.yaml's without params.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    found = collect(Path(data_dir), order)
    collected = current(found)  # the tables pool only runs of the current base
    agg = aggregate(collected)
    results = headline(collected, agg, Path(data_dir), params)
    prov = provenance(params, collected, Path(data_dir), now)
    every = with_studies(found, Path(data_dir))  # the claims leave stale runs out themselves
    prov.left_out = current(every).left_out
    claims = verdicts(every.runs)
    alarms = alarms_.score(every, collapse if collapse is not None else _collapse_config(params))
    prov.outdated = outdated_summary(outdated_runs(Path(data_dir).parent))
    (out_dir / "summary.md").write_text(summary_markdown(agg, collected, prov.smoke, claims, alarms,
                                                         prov.left_out, prov.outdated), encoding="utf-8")
    write_json(out_dir / "metrics.json", agg)
    write_json(out_dir / "headline.json", headline_json(results))
    write_json(out_dir / "claims.json", claims_json(*claims))
    write_json(out_dir / "alarms.json", alarms)
    (out_dir / "index.html").write_text(html_page(agg, collected, results, prov, claims, alarms),
                                        encoding="utf-8")
    for note in collected.notes + [f"claims: {n}" for n in claims[1]]:
        print(f"report: {note}")
    for v in claims[0]:
        print(f"report: claim {v.claim.id}: {v.verdict} ({v.reason})")
    for name, cells in zip(alarms_.ALARMS, alarms_.summary_rows(alarms["independent"])):
        print(f"report: alarm {name} (test-split label): "
              + "; ".join(f"{h} {c}" for h, c in zip(alarms_.HEADER[1:], cells[1:])))
    for line in answer_lines(results):
        print(f"report: {line}")
    if prov.smoke:
        print(f"report: {SMOKE_BANNER.upper()}: {'; '.join(prov.smoke)}")
    return agg


def report(params: Params, out_dir: Path = paths.REPORTS, data_dir: Path = paths.DATA,
           track: bool = True) -> dict[str, dict]:
    """Build the report and log `out_dir` to an MLflow run tagged `stage=report`."""
    agg = build(out_dir, data_dir, params.methods, params)
    if track:
        from tasks import tracking

        tracking.setup()
        with tracking.run("report", {"stage": "report", "git_commit": tracking.git_commit()}):
            tracking.log_artifacts(Path(out_dir))
        # The saved comparison of held-out accuracy across methods (the experiment's description),
        # set up by `dvc repro` and the Prefect pipeline alike, since both run this stage.
        tracking.save_comparison(os.environ.get(tracking.PARENT_ENV))
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
    p.add_argument("--figure", metavar="SOURCE:KEY", help="write one chart instead (e.g. "
                   "heldout:arith/pass@1 or train:reward), with --methods and --out")
    p.add_argument("--methods", nargs="+", default=None, help="methods drawn in --figure")
    p.add_argument("--out", type=Path, default=None, help="file written by --figure: .html (a page "
                   "that draws the chart offline; its menu exports SVG or PNG) or .json (the Vega-Lite spec)")
    p.add_argument("--readme", type=Path, default=None, help="rewrite the results and claims sections "
                   "of this file (README.md) from the metrics under --data-dir (and studies/) instead")
    args = p.parse_args()
    if args.readme:
        params = load(args.params, preset=args.preset)
        write_readme(args.readme, args.data_dir, params)
        print(f"updated the results and claims sections of {args.readme}")
        return
    if args.figure:
        if not args.methods or args.out is None:
            p.error("--figure needs --methods and --out")
        if args.out.suffix not in charts_.FIGURE_SUFFIXES:
            p.error(f"--out {args.out}: write .html (a page that draws the chart offline; its menu "
                    "exports SVG or PNG) or .json (the Vega-Lite spec)")
        charts_.write_figure(args.out, figure(collect(args.data_dir), args.figure, args.methods))
        print(f"wrote {args.out}")
        return
    agg = report(load(args.params, preset=args.preset), args.out_dir, args.data_dir,
                 track=not args.no_mlflow)
    print(table(agg))
    print(f"wrote {args.out_dir / 'index.html'}")


if __name__ == "__main__":
    run_main(main)
