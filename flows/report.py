"""Stage `report`: the comparison of methods in `reports/` (tables, curves, one HTML page).

What it reads is flows/report_collect.py (`collect`, `current`, `aggregate`, `provenance`); what it
concludes on the first screen is flows/report_rank.py (`headline`: the methods grouped by what
they read, ranked, tied only where the claims' test cannot separate them, the ceiling and the
floor, the lab's collapse label); this module and its parts draw it (report_answer: the first
screen; report_claims: the claims table; report_readme: the README's blocks; report_format:
numbers and tables). Inputs, all under `data/`:

- `data/eval/base/metrics.json` and every `data/eval/<method>/seed<S>/metrics.json`: the final
  evaluations (mean ± population std over seeds, the number of seeds), and `items.json` beside
  each (per-item scores: the claims' test, and the first screen's);
- `data/plots/<method>/seed<S>/{train,heldout,test}.json`: the curves (test.json: the lab's
  collapse label, flows/alarms.py);
- `data/checkpoints/<method>/seed<S>/run.json` (`collapse_events`, models/collapse.py): a dashed marker on
  every chart of that run at the event's step, labelled with its kind (the message in a tooltip);
- `docs/methods/label_use.json`: what each method reads (measured by tests/test_label_use.py).

Only runs of their study's current base are drawn, counted or scored: a stale run (another base,
evals/lineage.py) is left out of every table, claim, chart, figure and collapse alarm.

The page (`reports/index.html`) opens with the answer, then the evidence:

1. header: preset, git commit, date, seeds; a "smoke test, not a result" banner when the preset
   or the data is a smoke test of the pipeline (`report_collect.smoke_reasons`); ONE line of
   bookkeeping (the stale runs left out, the runs recorded before a change to their code or
   settings: `report_collect.outdated_runs`) linking to the section that lists them;
2. result, "which reward can you trust without labels": per task, the methods trained on it in
   groups by what they read (label-free first, then those reading references, then those reading
   labels, whose best is the ceiling; the base last, the floor), each group ranked by the task's
   headline metric (mean ± std over seeds, the difference to the base, the claims' test against
   the group's best with its 95% interval, every seed's value drawn), the best ★ and the methods
   the test cannot separate from it ≈; the seeds the lab's collapse label calls collapsed, and the
   lab detector's alarms beside them with its measured miss and false-alarm rates;
3. the papers' claims (`evals/claims.py`), the science section's opening table: each claim's
   arms, metric, difference with its 95% interval, seeds per arm and verdict
   (reproduced, not reproduced, inconclusive), and the rule; the same numbers in
   `reports/claims.json`;
4. held-out curves of each headline metric, every method of the task overlaid (mean over seeds,
   min–max band);
5. every benchmark's table, the collapse events, and how often the collapse alarms are right
   (`flows/alarms.py`: each run labelled collapsed or healthy in hindsight, three online alarms
   scored against the labels; the same numbers in `reports/alarms.json`);
6. diagnostics: each method's training reward on its own axis (the rewards are on incompatible
   scales: RLME's is a log-probability), the other training and held-out curves overlaid;
7. the stale and outdated runs, listed.

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
from core.io import write_json
from core.params import Params, load
from evals.claims import INCONCLUSIVE, PILOT, Verdict, claims_json, verdicts
from flows import alarms as alarms_
from flows import charts as charts_
from flows.charts import PALETTE, Series, series_for  # noqa: F401 - re-exported
from flows.report_answer import (  # noqa: F401 - re-exported
    BASES_LEAD,
    RECORDS_ANCHOR,
    RECORDS_ID,
    answer_html,
    answer_line,
    answer_lines,
    bases_line,
    collapse_legend,
    first_screen_key,
    headline_html,
    left_out_summary,
    records_html,
    records_markdown,
    records_section_html,
    records_section_markdown,
)
from flows.report_claims import (  # noqa: F401 - re-exported
    _interval,
    base_first,
    claim_cells,
    claims_html,
    claims_markdown,
    runs_needed,
    second_base_cell,
)
from flows.report_collect import (  # noqa: F401 - re-exported: the stage's reading half
    OTHER,
    SMOKE_MAX_STEPS,
    SMOKE_MIN_TEST,
    SMOKE_PRESETS,
    TASK_HEADLINE,
    Collected,
    Provenance,
    RunData,
    aggregate,
    benchmark_of,
    collect,
    collect_studies,
    count_keys,
    current,
    discover,
    headline_metrics,
    number,
    outdated_runs,
    outdated_summary,
    provenance,
    run_task,
    smoke_reasons,
    with_studies,
)
from flows.report_format import (  # noqa: F401 - re-exported: the tables
    HEADLINE,
    PREFERRED,
    _fmt,
    _fmt_count,
    _markdown,
    _metric_rank,
    _signed,
    alarms_html,
    alarms_markdown,
    benchmark_rows,
    benchmarks,
    cell,
    html_table,
    table,
)
from flows.report_leak import leak_html, leaking_studies
from flows.report_rank import (  # noqa: F401 - re-exported
    COLLAPSE_LABEL,
    Records,
    Row,
    TaskResult,
    collapse_config,
    gather,
    headline,
)
from flows.report_readme import (  # noqa: F401 - re-exported: `make results`
    CLAIMS_BEGIN,
    CLAIMS_END,
    README_BEGIN,
    README_END,
    RUN_BEGIN,
    RUN_END,
    claims_readme,
    results_markdown,
    run_cost_line,
    run_markdown,
    update_readme,
    write_readme,
)
from flows.report_urlvr import urlvr_html, urlvr_markdown
from models.collapse import CollapseConfig

# Train-curve columns charted first; every other numeric column follows (`reward_std` is noise;
# `reward` has its own per-method charts: the methods' rewards are on incompatible scales).
TRAIN_FIRST = ["entropy", "completion_length", "clipped_ratio"]
TRAIN_SKIP = {"step", "reward_std", "reward"}
SMOKE_BANNER = "Smoke test, not a result"
ANSWER_TITLE = "Which reward can you trust without labels?"


def summary_markdown(agg: dict[str, dict], collected: Collected, smoke: Sequence[str] = (),
                     claims: tuple[list[Verdict], list[str]] | None = None,
                     alarms: dict | None = None, left_out: Sequence[str] = (), outdated: str = "",
                     outdated_counts: dict[str, dict[str, int]] | None = None,
                     results: list[TaskResult] | None = None, data_dir: Path = paths.DATA,
                     bases: str | None = None) -> str:
    """summary.md: first the answer as the first screen gives it (the smoke-test warning and the one
    line of bookkeeping when they apply, a sentence per task, the methods grouped by what they read
    with the tie rule and the collapse label: `results_markdown`), then the headline table, the
    papers' claims, one table per benchmark, the collapse events, the collapse alarms' error rates,
    the stale and outdated runs and notes."""
    found, claim_notes = claims if claims is not None else verdicts(collected.runs)
    alarms = alarms if alarms is not None else alarms_.score(collected, _collapse_config(None))
    results = results if results is not None else headline(collected, agg, data_dir, alarms=alarms)
    parts = ["# Reward methods compared", ""]
    if smoke:
        parts += [f"> **{SMOKE_BANNER}**: {'; '.join(smoke)}.", ""]
    if line := records_markdown(left_out, outdated_counts or {}, f"#{RECORDS_ANCHOR}"):
        parts += [line, ""]
    parts += [f"## {ANSWER_TITLE}", ""]
    if results:
        parts += [*(f"- {line}" for line in [*answer_lines(results), *([bases] if bases else [])]), "",
                  results_markdown(agg, collected, data_dir, alarms=alarms, results=results)]
    else:
        parts.append("No evaluations found (data/eval/ is empty).")
    parts += ["", "## Methods compared", "", table(agg), "", claims_markdown(found, claim_notes)]
    counts = count_keys(collected)
    for bench, metrics in benchmarks(agg).items():
        parts += ["", f"## {bench}", "", _markdown(["method", "seeds", *metrics],
                                                   benchmark_rows(agg, bench, metrics, counts))]
    events = _event_rows(collected)
    if events:
        parts += ["", "## Collapse events", "", _markdown(["method", "seed", "step", "kind", "message"],
                                                          events)]
    parts += ["", "## Collapse alarms: how often they are right", "", alarms_markdown(alarms)]
    parts += ["", "## URLVR's measures", "", urlvr_markdown(collected.runs)]
    if section := records_section_markdown(left_out, outdated):
        parts += ["", section]
    if collected.notes:
        parts += ["", "## Notes", "", *(f"- {n}" for n in collected.notes)]
    return "\n".join(parts) + "\n"


_collapse_config = collapse_config  # the name the tests and older callers use


def _event_rows(collected: Collected) -> list[list[str]]:
    return [[method, str(seed), str(int(number(e["step"]) or 0)), str(e.get("kind", "?")),
             " ".join(str(e.get("message", "")).split())]
            for method, seeds in collected.runs.items() for seed, run in seeds.items()
            for e in run.events]


# ------------------------------------------------------------------------------ charts

def chart_specs(collected: Collected, skip_heldout: Sequence[str] = ()) -> list[tuple[str, str, str]]:
    """(source, key, title) of the overlaid diagnostic charts: train columns (not the reward),
    then held-out metrics other than `skip_heldout` (the headline curves, drawn first)."""
    train_keys: set[str] = set()
    heldout_keys: set[str] = set()
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
.records{color:#444;margin:.2em 0 .5em;font-size:.95em} .records b{color:#6b3e00}
.smoke{background:#fff1cc;border:2px solid #d98b00;color:#6b3e00;padding:.6em 1em;margin:.6em 0;
 font-size:1.05em} .smoke strong{font-size:1.25em;text-transform:uppercase;margin-right:.6em}
nav a{margin-right:1.2em}
.answer{margin:.3em 0 .8em;padding-left:1.2em} .answer li{margin:.2em 0}
table{border-collapse:collapse;margin:.4em 0 1.2em}
td,th{border:1px solid #bbb;padding:3px 9px;text-align:right;font-variant-numeric:tabular-nums}
th{background:#f0f0f0} td:first-child,th:first-child,table.text td,table.text th{text-align:left}
table.headline tr.best td{background:#eef7ee;font-weight:600}
table.headline tr.ceiling td{background:#f1eefa} table.headline tr.group-best td{font-weight:600}
table.headline tr.base td{color:#555;font-style:italic;background:#fafafa}
table.headline tr.group th{text-align:left;background:#e7edf6;font-weight:600;font-size:.92em;white-space:normal}
table.headline tbody[data-group='base'] tr.group th{background:#f3f3f3}
table.headline{font-size:.92em} table.headline td{white-space:nowrap;padding:3px 6px}
table.headline th{white-space:normal;padding:3px 6px;vertical-align:bottom}
table.headline td.reads,table.headline th.reads{text-align:left;font-size:.92em;color:#444}
table.headline td.vs{font-size:.92em}
table.headline td.collapse,table.headline th.collapse{white-space:normal;text-align:right;min-width:4.5em}
table.headline th.collapse{max-width:6.5em}
.key{margin:.3em 0 .6em;max-width:75em}
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
    if (parameters := number(info.get("parameters"))) is not None:
        items.append(f"base model {parameters / 1e6:.2f} M parameters"
                     + (f", {int(info['sft_steps'])} SFT steps" if number(info.get("sft_steps")) else ""))
    out = [f"<p class='provenance' id='provenance' data-preset='{esc(preset)}' "
           f"data-commit='{esc(prov.commit)}' data-date='{esc(prov.date)}'>"
           + " ".join(f"<span>{i}</span>" for i in items) + "</p>"]
    if line := records_html(prov.left_out, prov.outdated_counts):
        out.append(line)
    if prov.smoke:
        out.append(f"<div class='smoke' id='smoke' role='alert'><strong>{SMOKE_BANNER}</strong>"
                   f"{esc('; '.join(prov.smoke))}. These numbers check that the pipeline runs; "
                   f"they say nothing about the methods.</div>")
    return "\n".join(out)


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
              alarms: dict | None = None, leak: str | None = None, bases: str | None = None) -> str:
    """The whole report as one self-contained HTML document: the answer first, then the evidence
    (`bases`: the sentence on the engineered bases, `bases_line`)."""
    esc = html.escape
    alarms = alarms if alarms is not None else alarms_.score(collected, _collapse_config(None))
    results = results if results is not None else headline(collected, agg, paths.DATA, alarms=alarms)
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
                 "<a href='#alarms'>Collapse alarms</a><a href='#urlvr'>URLVR's measures</a>"
                 "<a href='#leak'>Leaked and clean items</a>"
                 "<a href='#diagnostics'>Diagnostics</a>"
                 f"<a href='#{RECORDS_ID}'>Stale and outdated runs</a></nav></header>")
    if collected.notes:
        parts.append(f"<details class='notes'><summary>{len(collected.notes)} note"
                     f"{'s' * (len(collected.notes) > 1)} on missing or unreadable files</summary><ul>"
                     + "".join(f"<li>{esc(n)}</li>" for n in collected.notes) + "</ul></details>")

    parts.append(f"<section id='result'><h2>{ANSWER_TITLE}</h2>")
    if results:
        parts.append("<ul class='answer'>" + "".join(f"<li>{answer_html(line, r)}</li>" for r in results
                                                     if (line := answer_line(r)))
                     + (f"<li>{esc(bases).replace(BASES_LEAD, f'<b>{BASES_LEAD}</b>', 1)}</li>"
                        if bases else "") + "</ul>")
        parts.append("".join(f"<p class='key'>{esc(line)}</p>" for line in first_screen_key(alarms))
                     + "<div class='tasks'>")
        for res in results:
            names = " / ".join(m.split("/", 1)[1] for m in res.metrics)
            parts.append(f"<div><h3 id='task-{esc(res.task)}'>{esc(res.task)}: {esc(names)}</h3>"
                         + headline_html(res, colors) + seeds_charts(res, colors) + "</div>")
        parts.append("</div>")
        parts.append("<p class='muted'>Per task, the methods trained on it, grouped by what they read "
                     "(docs/methods/label_use.json, measured by tests/test_label_use.py; a variant it "
                     "does not list reads as its family when every measured member of the family reads "
                     "alike), each group ranked by the task's headline metric on its test set (mean ± "
                     "population std over seeds; every seed's value in the cell's tooltip). The interval "
                     "is the difference to the group's best by the claims' own test, from the claims' "
                     "minimum seeds per arm (untested below). Per seed: each dot one seed, the black "
                     "tick the mean, the dashed line the base.</p>")
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
    parts.append("<section id='alarms'><h2>Collapse alarms: how often they are right</h2>"
                 "<p class='muted'>Each run labelled collapsed or healthy in hindsight from its whole "
                 "held-out curve, then three online alarms scored against the labels: false alarms "
                 "on healthy runs, misses on collapsed runs, and how many steps from the onset a "
                 "hit came (negative: before it). Stale runs are left out"
                 + (f" ({len(alarms['left_out'])} here)" if alarms.get("left_out") else "")
                 + ", as from every table.</p>")
    parts.append(alarms_html(alarms) + "</section>")
    parts.append("<section id='urlvr'><h2>URLVR's measures</h2>" + urlvr_html(collected.runs) + "</section>")
    leak = leak if leak is not None else leak_html(collected.runs, leaking_studies(collected.runs))
    parts.append("<section id='leak'><h2>Leaked and clean test items</h2>" + leak + "</section>")

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
    parts.append(records_section_html(prov.left_out if prov else (), prov.outdated if prov else ""))
    if any("<figure class='vl" in part for part in parts):  # Vega inlined: drawn with no network
        parts += [charts_.bundle(), f"<script>{charts_.SCRIPT}</script>"]
    parts.append("</body></html>")
    return "\n".join(parts)


def figure(collected: Collected, chart: str, methods: Sequence[str]) -> dict:
    """One chart as a Vega-Lite spec (a legend, the runs of `methods` only), for a README or a
    paper: `--figure` writes it as JSON or as a page that draws it offline (flows/charts.py).

    `chart` is `<source>:<key>` as in `chart_specs`, e.g. `heldout:arith/pass@1` or `train:reward`.
    Only runs of their study's current base are drawn (`current`), as in every table: a figure
    never mixes bases. A method whose every run is stale is refused, with why.
    """
    fresh = current(collected)
    gone = [m for m in methods if m in collected.runs and m not in fresh.runs]
    if gone:
        why = left_out_summary([e for e in fresh.left_out if e.rsplit("/seed", 1)[0] in gone])
        raise LookupError(f"{', '.join(gone)}: every run is stale ({why}); a figure draws only runs of "
                          "their study's current base")
    return charts_.figure_spec(fresh, chart, methods)


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
    rec = gather(Path(data_dir), params, order, collapse)
    collected, agg, alarms, results = rec.collected, rec.agg, rec.alarms, rec.results
    prov = provenance(params, collected, Path(data_dir), now)
    prov.left_out = rec.left_out
    claims = verdicts(rec.every.runs)  # the claims leave stale runs out themselves
    bases = bases_line(current(rec.every).runs)
    prov.outdated_counts = rec.outdated
    prov.outdated = outdated_summary(rec.outdated)
    (out_dir / "summary.md").write_text(summary_markdown(agg, collected, prov.smoke, claims, alarms,
                                                         prov.left_out, prov.outdated,
                                                         prov.outdated_counts, results, Path(data_dir),
                                                         bases),
                                        encoding="utf-8")
    write_json(out_dir / "metrics.json", agg)
    write_json(out_dir / "headline.json", headline_json(results))
    write_json(out_dir / "claims.json", claims_json(*claims))
    write_json(out_dir / "alarms.json", alarms)
    # The studies' runs too (`collected` holds the default study's): a leaked base is a study's.
    leak = leak_html(rec.every.runs, leaking_studies(rec.every.runs, params, Path(data_dir).parent))
    (out_dir / "index.html").write_text(html_page(agg, collected, results, prov, claims, alarms,
                                                  leak=leak, bases=bases), encoding="utf-8")
    for note in collected.notes + [f"claims: {n}" for n in claims[1]]:
        print(f"report: {note}")
    for v in claims[0]:
        print(f"report: claim {v.claim.id}: {v.verdict} ({v.reason})")
    for name, cells in zip(alarms_.ALARMS, alarms_.summary_rows(alarms["independent"])):
        print(f"report: alarm {name} (test-split label): "
              + "; ".join(f"{h} {c}" for h, c in zip(alarms_.HEADER[1:], cells[1:])))
    for line in [*answer_lines(results), *([bases] if bases else [])]:
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
    p.add_argument("--readme", type=Path, default=None, help="rewrite the make-run, results and claims "
                   "sections of this file (README.md) from the records under --data-dir (and studies/, "
                   "dvc.lock, reports/times/) instead (`make results`, after the report itself)")
    args = p.parse_args()
    if args.readme:
        params = load(args.params, preset=args.preset)
        write_readme(args.readme, args.data_dir, params)
        print(f"updated the make-run, results and claims sections of {args.readme}")
        return
    if args.figure:
        if not args.methods or args.out is None:
            p.error("--figure needs --methods and --out")
        if args.out.suffix not in charts_.FIGURE_SUFFIXES:
            p.error(f"--out {args.out}: write .html (a page that draws the chart offline; its menu "
                    "exports SVG or PNG) or .json (the Vega-Lite spec)")
        found = collect(args.data_dir)
        spec = figure(found, args.figure, args.methods)
        stale = [e for e in current(found).left_out if e.rsplit("/seed", 1)[0] in args.methods]
        if stale:
            print(f"left out (stale: another base than the study's current one): {left_out_summary(stale)}")
        charts_.write_figure(args.out, spec)
        print(f"wrote {args.out}")
        return
    agg = report(load(args.params, preset=args.preset), args.out_dir, args.data_dir,
                 track=not args.no_mlflow)
    print(table(agg))
    print(f"wrote {args.out_dir / 'index.html'}")


if __name__ == "__main__":
    run_main(main)
