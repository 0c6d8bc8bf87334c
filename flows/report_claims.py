"""The papers' claims as the report prints them (evals/claims.py decides them): one table row per
claim (`claim_cells`), its premise on each base (`premise_cell`), the second base's cell, the runs
still needed for a verdict and what they cost first (`runs_needed`, `base_first`), as markdown
(summary.md) and HTML (the report's claims section).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from core import paths
from evals.claims import (
    FAILS,
    INCONCLUSIVE,
    MEASURES,
    NOT_MEASURED,
    NOT_RUN,
    NOT_TESTED,
    RULE,
    Comparison,
    Verdict,
    per_seed,
    premise_json,
    short_of_plan,
    study_of,
)
from flows.report_format import _fmt, _markdown, _signed


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
    """A claim's table cells, each a list of lines: claim (its setting, then its premise on each
    base, `premise_cell`: a ninth column squeezed the verdict's to a letter's width in the page),
    paper, arms, metric, difference [95% interval] (one line per comparison, then the test and
    what was resampled), seeds per arm, second base, verdict (the reason, each precondition
    measured, what a decision needs)."""
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
    pre = [f"precondition {p.status}: {p.what} ({short(p.detail)})" for p in v.preconditions
           if p.what != f"premise {c.premise}"]  # the premise has its own cell
    expected = [f"expected {c.expected()}"]
    premise = premise_cell(v)
    return [[c.statement] + ([f"setting: {c.setting}"] if c.setting else [])
            + ([f"premise: {premise[0]}", *premise[1:]] if premise else []), [f"{c.paper} {c.figure}"],
            arms + ([f"(the {setting} study's base)"] if setting else []),
            [metric, *(f"and {m}" for m in own), *expected], diffs + tests + bases + ps,
            [", ".join(f"{name(a)} {n}" for a, n in seeds.items())]
            + ([f"planned {' / '.join(map(str, planned))} per arm"] if planned else []),
            second_base_cell(v),
            # Each precondition's line says its status: a reason that only names them again is left out.
            [v.verdict, *([] if pre and v.reason.startswith("precondition ") else [short(v.reason)]), *pre]
            + ([f"needs: {short(v.needs)}"] if v.needs else [])]


def premise_cell(v: Verdict) -> list[str]:
    """The claim's premise (evals/claims.yaml `premise`) and its status on each base, measured
    value against threshold; [] for a claim without one.

    >>> from evals.claims import CLAIMS, Checked
    >>> c = next(c for c in CLAIMS if c.premise == "confidence_tracks_correctness")
    >>> cell = premise_cell(Verdict(c, (), "not tested", "", (Checked(
    ...     "premise confidence_tracks_correctness", "fails", "self-certainty AUROC 0.543 < 0.70",
    ...     value=0.543),)))
    >>> for line in cell: print(line)
    confidence_tracks_correctness
    first base: fails, self-certainty AUROC 0.543 < 0.70
    second base: not measured
    """
    record = premise_json(v)
    if record is None:
        return []

    def line(where: str, base: dict) -> str:
        status = base["status"]
        return f"{where}: {status}" + (f", {base['text']}" if status != NOT_MEASURED else "")

    return [record["name"], line("first base", record["first_base"]),
            line("second base", record["second_base"])]


def premise_readme(v: Verdict) -> str:
    """The README's compact premise cell: the first base's `✓ 0.81`, `✗ 0.54 < 0.70` or `not
    measured`, then the second base's where measured (`, 2nd ✗ 0.60 < 0.70`); '' without a premise.

    >>> from evals.claims import CLAIMS, Checked
    >>> c = next(c for c in CLAIMS if c.premise == "room_to_sharpen")
    >>> premise_readme(Verdict(c, (), "reproduced", "", (Checked("premise room_to_sharpen", "holds",
    ...     "token entropy 0.812 ≥ 0.30", value=0.812),), second={"premise": {
    ...     "status": "fails", "value": 0.1, "text": "token entropy 0.100 < 0.30"}}))
    '✓ 0.81, 2nd ✗ 0.10 < 0.30'
    """
    record = premise_json(v)
    if record is None:
        return ""

    def mark(base: dict) -> str:
        if base["status"] == NOT_MEASURED or base["value"] is None:
            return NOT_MEASURED
        if base["status"] == FAILS:
            return f"✗ {base['value']:.2f} < {record['threshold']:.2f}"
        return f"✓ {base['value']:.2f}"

    second = record["second_base"]
    return mark(record["first_base"]) + ("" if second["status"] == NOT_MEASURED else f", 2nd {mark(second)}")


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
    # A failed premise (its own cell) is named as such: `premise <name> fails (<value>)`.
    failed = [(f"{p['what']} fails" if p["what"] == f"premise {v.claim.premise}"
               else f"precondition fails: {p['what']}")
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
    took = f" ({seconds / 60:.0f} min when recorded)" if seconds else ""
    return (f"builds the study's base first, none shipped{took}; if the new one differs, the recorded "
            "runs are stale and train again")


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

