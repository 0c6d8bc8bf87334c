"""Each claim's verdict from the study's runs. The report stage (flows/report.py) computes them
with `verdicts` and opens its science section with the table (reports/claims.json holds the same
numbers). By concern, each file one room: the claims and the rule's words are declared in
evals/claims.yaml and read by evals/claims_spec.py (`CLAIMS`, `FAMILY`, `RULE`); the runs are read
by evals/claims_runs.py; the numbers become verdicts in evals/claims_rule.py (`decide`,
`combine`, `family`, `headline`); the seeds are planned by evals/claims_plan.py; the statistics
are evals/stats.py. This module reads a claim's runs, compares them (`compare`), and decides the
claim on each base (`verdict`, `second_base`); every name the report, the pipeline and the tests
read is re-exported here.

**Which runs.** Stale runs (trained from a base that is no longer the study's, or whose files are
not the ones DVC recorded: `evals/lineage.py`) are left out and named in the notes, and a
comparison whose runs stand on different bases is refused (inconclusive, "different bases"): a
number is never pooled across bases.

**The tests** (`evals/stats.py`), per comparison, treatment − control (or treatment against 0
where there is no control), on the planned seeds:

- a metric scored item by item in every run (`evals/items.py`): the **t-interval on per-seed
  means with the items folded in** (`seed_item_t`, 95%): its degrees of freedom are the seeds',
  because the seed is what a claim generalises over; the base is a fixed model sampled once per
  draw (its evaluation and its further draws, params `base_draws`, all of them its rows): with
  one draw its noise is per-item noise, carried by the item part. The percentile **paired
  bootstrap** decides only where its seed level is sound, `BOOTSTRAP_MIN_SEEDS` seeds per arm
  (`RESAMPLES` resamples, numpy seed `SEED`);
- one number per run (`heldout_drop`, `test_rise_fall`, `train_change`, or a metric without
  per-item scores): the **Welch t-interval** (95%; one-sample against 0 without a control), the
  exact permutation p-value recorded beside it, never from fewer than `MIN_SEEDS_PER_RUN` = 5
  seeds per arm, a precondition's included; against a base evaluated once, refused (one draw,
  whose spread no run measures); against the base's draws, decided like any arm.

**The decision**, per comparison (`decide`): `greater`: *reproduced* if the interval's lower bound
is above 0 and the difference is at least `min_effect`; *not reproduced* if the upper bound is
below `min_effect`; else undecided. `less` is its mirror. `within`: *reproduced* if the interval
lies inside ±margin, *not reproduced* if wholly outside; undecided, it says on which side of 0 the
interval lies, if it excludes 0. `no_gain`: *reproduced* if the upper bound is below +margin
("harm found" if below 0), *not reproduced* if the lower bound is above +margin. A comparison
whose declared `bound` leaves the difference short of `min_effect` on its base is *not tested*
there (`_reachable`): its test could not succeed.

**The verdict of a claim on one base** (`verdict`, `combine`). Each precondition is measured first
(a comparison like the others, or a `probe` computed by code: `evals/preconditions.py`), and
recorded beside the verdict. A precondition that fails makes the claim *not tested* (the setting
cannot show the claim); one that cannot be decided makes it *inconclusive*; so does a comparison
that cannot succeed (*not tested*). Otherwise the claim is *reproduced* when each comparison is,
*not reproduced* when any is at Holm's level across its comparisons (`family`), else
*inconclusive*. A claim whose evidence cannot come from runs yet (`blocked`) is inconclusive with
that reason. A claim that rests on a property of the base's prior (evals/claims.yaml `premise`,
measured by the premises stage: `evals/premises.py`) reads it on the base first
(evals/claims_runs.py, `premise_check`): where it fails the claim is *not tested* there, the reason
naming the premise and its measured value against the threshold; where it holds, or is not measured
(no premises.json), the claim is decided as above, the premise's status recorded per base
(`premise_json`, reports/claims.json's `premise`). Failing on both bases, the headline is *not
tested* (the family rule: both bases agree); on one base only, inconclusive unless the other is
not tested too.

**The second base and the headline.** Every claim is also decided on a second, independently
built base: the same study with the top-level `seed` (the base's SFT seed) set to
`SECOND_BASE_SEED`, run by `python -m flows.pipeline --study <study>.seed1` (`default.seed1` for
the default study's arms) and recorded in studies/<study>.seed1/. `on_second_base` renames the
claim's arms to that study's and the same `verdict` decides it on those runs alone:
reports/claims.json's `second_base` (verdict, difference, interval, whether it agrees), `not run`
until they exist. The two bases are never pooled. The headline verdict (`headline`, the family
rule across bases) is the one both give; else inconclusive, the first base's own in `first`.

To add a claim: append an entry to evals/claims.yaml (its arms must be arms of a study;
tests/test_claims.py checks), and run its arms' pilot seeds through the study; the report then
says how many more each arm needs.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, replace

import numpy as np

from core.io import DataError
from evals.claims_plan import _cost, _plan, declared_effect, extra_runs, seed_plan, short_of_plan
from evals.claims_rule import (
    Checked,
    Comparison,
    Verdict,
    _comparison_json,
    _interval_text,
    _round,
    _short,
    combine,
    decide,
    family,
    headline,
    p_not_reproduced,
    per_seed,
)
from evals.claims_runs import (
    _base_of,
    _items,
    _seeded,
    _Spec,
    draw_key,
    premise_check,
    premise_headline,
    premise_json,
    premise_reason,
    run_value,
)
from evals.claims_spec import (
    CLAIMS,
    DECLARATIONS,
    DEFAULT_STUDY,
    FAILS,
    FAMILY,
    HOLDS,
    INCONCLUSIVE,
    KINDS,
    MAX_SEEDS,
    MEASURES,
    MIN_SEEDS,
    MIN_SEEDS_PER_RUN,
    NOT_MEASURED,
    NOT_REPRODUCED,
    NOT_RUN,
    NOT_TESTED,
    PILOT,
    POWER_SEEDS_CEILING,
    REPRODUCED,
    RULE,
    SECOND_BASE_SEED,
    TEST_ITEMS,
    UNDECIDED,
    VERDICTS,
    Claim,
    Family,
    Pair,
    Precondition,
    RunFiles,
    Runs,
    finite,
    is_base,
    load_claims,
    load_family,
    on_second_base,
    parse_bound,
    parse_study,
    second_base_arm,
    second_base_study,
    study_of,
)
from evals.items import item_scores
from evals.stats import (
    BOOTSTRAP_MIN_SEEDS,
    RESAMPLES,
    SEED,
    Estimate,
    paired_bootstrap,
    permutation_p,
    seed_item_t,
    snap,
    t_estimate,
    t_interval,
)

# What the report, the pipeline and the tests read from `evals.claims`: the declarations and the
# plan live in their own modules and are re-exported here.
__all__ = [
    "BOOTSTRAP_MIN_SEEDS", "CLAIMS", "_comparison_json", "DECLARATIONS", "DEFAULT_STUDY", "FAILS", "FAMILY", "HOLDS",
    "INCONCLUSIVE", "KINDS", "MAX_SEEDS", "MEASURES", "MIN_SEEDS", "MIN_SEEDS_PER_RUN",
    "NOT_MEASURED", "NOT_REPRODUCED", "NOT_RUN", "NOT_TESTED", "PILOT", "POWER_SEEDS_CEILING", "REPRODUCED", "RULE",
    "SECOND_BASE_SEED", "TEST_ITEMS", "UNDECIDED", "VERDICTS", "Checked", "Claim", "Comparison",
    "Family", "Pair", "Precondition", "RunFiles", "Runs", "Verdict", "check", "claims_json",
    "combine", "compare", "decide", "declared_effect", "extra_runs", "family", "headline",
    "is_base", "load_claims", "load_family", "on_second_base", "p_not_reproduced",
    "paired_bootstrap", "parse_bound", "parse_study", "per_seed", "permutation_p", "plan_cost",
    "planned_seeds", "premise_json", "run_value", "second_base", "second_base_arm", "second_base_study",
    "seed_plan", "short_of_plan", "study_claims", "study_of", "t_interval", "verdict", "verdicts",
]


def compare(runs: Runs, claim: Claim, treatment: str, control: str | None, notes: list[str],
            resamples: int = RESAMPLES, seed: int = SEED, rule: Pair | None = None,
            spec: _Spec | None = None,
            min_per_run: int = MIN_SEEDS_PER_RUN) -> Comparison:
    """One comparison (of a claim, or of a precondition with `rule` and `spec`), read from the
    runs, planned from the pilot seeds and decided once on the planned seeds."""
    rule = rule or next((p for p in claim.comparisons if (p.treatment, p.control) == (treatment, control)),
                        Pair(treatment, control, claim.kind, claim.min_effect, claim.margin))
    spec = spec or _Spec(rule.metric or claim.metric, claim.measure)
    arms = [a for a in (treatment, control) if a is not None]
    expected, label = rule.expected(), rule.label
    if claim.blocked:  # the runs found, for the record; no number is read from them
        found = {arm: sum(s is not None or is_base(arm) for s in runs.get(arm, {})) for arm in arms}
        return Comparison(treatment, control, found, None, None, None, "", INCONCLUSIVE, claim.blocked,
                          expected=expected, label=label)
    specs = {arm: spec for arm in arms}
    if control is not None and rule.control_metric:
        specs[control] = spec._replace(metric=rule.control_metric)
    arm_runs = {arm: _seeded(runs, arm, specs[arm], notes) for arm in arms}
    seeds = {arm: len(r) for arm, r in arm_runs.items()}
    base, bases = _base_of(arm_runs)

    def result(verdict: str, reason: str, **kw) -> Comparison:
        return Comparison(treatment, control, seeds, kw.pop("diff", None), kw.pop("lo", None),
                          kw.pop("hi", None), kw.pop("basis", ""), verdict, reason,
                          expected=expected, label=label, base=base, **kw)

    if len(bases) > 1:
        return result(INCONCLUSIVE, "its runs stand on different bases (" + ", ".join(
            b or "unrecorded" for b in bases) + "): never pooled; rerun the stale arm on one base")
    per_run = spec.measure != "test"
    minimum = min_per_run if per_run else MIN_SEEDS
    per_item: dict[tuple[str, int], dict[str, float]] = {}
    lacking: list[str] = []
    if not per_run:
        per_item, lacking = _items(arm_runs, {arm: specs[arm].metric for arm in arms}, notes)
        per_run = bool(lacking)
        minimum = min_per_run if per_run else MIN_SEEDS
    # The pilot: seeds 0 .. PILOT-1 of each arm and no other (a base: every draw of it, params
    # `base_draws`, a number fixed before any run), so no seed run after the plan can move the plan.
    pilot = {arm: sorted(r) if is_base(arm) else [s for s in sorted(r) if 0 <= s < PILOT]
             for arm, r in arm_runs.items()}
    short = [a for a in arms if not is_base(a) and len(pilot[a]) < PILOT]
    missing = [a for a in arms if is_base(a) and seeds[a] < 1]
    if short or missing:
        cost = _cost({a: {s: arm_runs[a][s] for s in pilot[a]} for a in short}, {a: PILOT for a in short},
                     runs)
        return result(INCONCLUSIVE, "; ".join(
            [f"arm {a}: {len(pilot[a])} seed{'s' * (len(pilot[a]) != 1)} of the {PILOT} pilot seeds"
             for a in short]
            + [f"{a}: no evaluation records {specs[a].metric}" for a in missing]),
            plan={"seeds": PILOT}, needs="; ".join(
                ([f"the {PILOT} pilot seeds of {', '.join(short)}" + (f" ({cost})" if cost else "")]
                 if short else [])
                + [f"an evaluation of {a} that records {specs[a].metric}" for a in missing]))

    if per_run and any(is_base(a) and seeds[a] < 2 for a in arms):
        # One number per run against one draw of the base: nothing measures that draw's noise
        # (per item, the items do: `evals.stats.variance_parts`); its draws (params
        # `base_draws`) do.
        return result(INCONCLUSIVE, "a per-run number against the base evaluated once: one draw, "
                      "whose spread no run measures", plan={"seeds": PILOT},
                      needs="per-item scores of the base's evaluation, or the base's further "
                            "sampling draws (params base_draws)")
    common: list[str] = []
    if not per_run:
        common = sorted(set.intersection(*(set(s) for s in per_item.values())))
        if not common:
            return result(INCONCLUSIVE, "no test item is scored in every run of both arms")
        if rule.bound:
            reach = _reachable(rule, arm_runs, pilot, common, per_item, treatment, control, notes)
            if reach:
                return result(NOT_TESTED, reach, plan={"seeds": PILOT},
                              basis=f"{len(common)} items paired by id (the pilot)")

    def arrays(chosen: Mapping[str, Sequence[int]]) -> list[np.ndarray]:
        if per_run:
            return [np.array([[run_value(arm_runs[a][s], specs[a])] for s in chosen[a]]) for a in arms]
        return [np.array([[per_item[(a, s)][i] for i in common] for s in chosen[a]]) for a in arms]

    plan = _plan(rule, arrays(pilot), per_run, minimum, claim.max_seeds, len(common))
    want = plan["seeds"]
    chosen = {a: sorted(r) if is_base(a) else sorted(r)[:want] for a, r in arm_runs.items()}
    behind = {a: want for a in arms if not is_base(a) and seeds[a] < want}
    extra = sum(max(0, seeds[a] - want) for a in arms if not is_base(a))
    # The percentile bootstrap only where its seed level is sound (`evals.stats`): many seeds in
    # both arms, none a base evaluated once. Under today's caps, never.
    boot = (not per_run and control is not None and not any(is_base(a) for a in arms)
            and want >= BOOTSTRAP_MIN_SEEDS)
    test = "Welch t-interval" if per_run else "paired bootstrap" if boot else TEST_ITEMS
    # A per-run measure's numbers, seed by seed (the seeds the verdict reads): a reviewer sees
    # how many runs show the effect, not only their mean.
    values = {a: {s: _round(run_value(arm_runs[a][s], specs[a])) for s in chosen[a]}
              for a in arms} if per_run else {}
    if per_run:
        why = (f"the {MEASURES[spec.measure].split(',')[0]} is one number per run" if spec.measure != "test"
               else f"no per-item scores in {len(lacking)} of {sum(seeds.values())} runs")
        basis = f"seeds only ({why})"
    else:
        most = max(len(s) for s in per_item.values())
        basis = (f"{len(common)} items paired by id × seeds"
                 + (f" (common to every run; up to {most} per run)" if len(common) < most else ""))
    if extra:
        basis += f"; {extra} run{'s' * (extra != 1)} beyond the planned {want} seeds per arm left out"
    capped = "beyond" in plan  # the cap, not the power rule, set the seeds
    if behind:
        cost = _cost(arm_runs, behind, runs)
        # A plan at the cap is run all the same (the verdict is computed once, on the planned
        # seeds), but a reader is told the odds: the rule wanted more than the cap allows.
        need = (f"{want} seeds per arm (" + ", ".join(f"{a} has {seeds[a]}" for a in behind) + ")"
                + (f", {cost}" if cost else "")
                + (f"; the power rule wants {plan['beyond']}" if capped else ""))
        odds = ("" if not capped else f"; the cap, where its power is {plan['power']:.0%}"
                if plan.get("power") is not None else "; the cap: no declared effect to plan from")
        return result(INCONCLUSIVE, f"{want} seeds per arm needed (the power rule, from the pilot{odds})",
                      basis=basis, plan=plan, needs=need, test=test, values=values)
    t, c = arrays(chosen) if control is not None else (arrays(chosen)[0], None)
    p = None
    if per_run:
        tv, cv = t[:, 0], None if c is None else c[:, 0]
        e = t_estimate(tv, cv)
        alt = {"greater": "greater", "less": "less"}.get(rule.kind, "two-sided")
        p = permutation_p(tv, cv, alt) if cv is None or len(cv) > 1 else None
    elif boot and c is not None:
        d, lo, hi = paired_bootstrap(t, c, resamples, seed)
        # Holm reads a p-value: a normal one from the interval's width (sound where the
        # bootstrap is used, at many seeds).
        e = Estimate(d, lo, hi, snap((hi - lo) / (2 * 1.959963984540054)), float("inf"))
    else:
        e = seed_item_t(t, c)
    verdict, reason = decide(rule, e.difference, e.low, e.high)
    side = "below" if e.high < 0 else "above" if e.low > 0 else ""
    if verdict == INCONCLUSIVE and rule.kind == "within" and side:
        reason = (f"{_short(treatment)} {side} {_short(control) if control else '0'} (the interval "
                  f"excludes 0); the ±{rule.margin:.2f} margin undecided")
    needs = ""
    if verdict == INCONCLUSIVE:
        reason += (f" at the declared cap of {want} seeds per arm" if capped
                   else f" at the planned {want} seeds per arm")
        needs = plan.get("beyond", "")
        if plan.get("power_seeds"):  # what a cap raised to 80% power would run, and its cost
            cost = _cost(arm_runs, {a: plan["power_seeds"] for a in arms if not is_base(a)}, runs)
            needs += f"; at {plan['power_seeds']} seeds per arm: {cost}" if cost else ""
    return result(verdict, reason, diff=e.difference, lo=e.low, hi=e.high, basis=basis, plan=plan,
                  needs=needs, test=test, p=p, values=values, se=e.se,
                  df=None if math.isinf(e.df) else e.df, side=side)


def _reachable(rule, arm_runs: Mapping[str, Mapping[int, RunFiles]], pilot: Mapping[str, Sequence[int]],
               common: Sequence[str], per_item: Mapping[tuple[str, int], Mapping[str, float]],
               treatment: str, control: str | None, notes: list[str]) -> str:
    """Why the comparison cannot succeed on this base, or "": its declared `bound` (the most the
    treatment's metric can reach, item by item, read from the pilot's own per-item scores)
    minus the control's mean leaves less than the expected effect. r3_resists_dilution's kind:
    the gap R3 − average probability of a test row is at most 1 − the average probability's
    correlation there, so a base whose average probability already tracks correctness leaves no
    room for the gap to reach min_effect, whatever R3 does."""
    const, metric, sign = parse_bound(rule.bound)
    rows: dict[str, list[float]] = {}
    for s in pilot[treatment]:
        run = arm_runs[treatment][s]
        name = draw_key(treatment, s)
        scores: dict[str, float] = {}
        if metric:
            try:
                scores = (item_scores(run.items, metric, f"data/eval/{name}/items.json") if run.items
                          else None) or {}
            except DataError as e:
                notes.append(f"{e}; its bound is not read")
                return ""
            if not scores:
                return ""
        for i in common:
            if metric and i not in scores:
                continue
            rows.setdefault(i, []).append(const + sign * scores.get(i, 0.0))
    if not rows:
        return ""
    ceiling = float(np.mean([np.mean(v) for v in rows.values()]))
    floor = 0.0 if control is None else float(np.mean([
        np.mean([per_item[(control, s)][i] for i in rows]) for s in pilot[control]]))
    direction = 1.0 if rule.kind == "greater" else -1.0
    reach = direction * (ceiling - floor)
    if reach >= rule.min_effect:
        return ""
    effect = f"{'+' if direction > 0 else '−'}{rule.min_effect:.2f}"
    return (f"the test cannot succeed on this base: the difference can reach at most "
            f"{direction * reach:+.3f} ({rule.bound}, mean over {len(rows)} items"
            + (f", less {_short(control)}'s mean" if control else "") + f"), short of {effect}")


def check(runs: Runs, claim: Claim, pre: Precondition, notes: list[str], resamples: int = RESAMPLES,
          seed: int = SEED) -> Checked:
    """A precondition measured: a comparison decided like the claim's, or its probe's result."""
    if pre.probe:
        module, _, name = pre.probe.partition(":")
        try:
            out = getattr(importlib.import_module(module), name)()
        except Exception as e:  # noqa: BLE001 - a probe that cannot run is undecided, with why
            return Checked(pre.what, UNDECIDED, f"probe {pre.probe} failed: {type(e).__name__}: {e}")
        status = {True: HOLDS, False: FAILS}.get(out.get("holds"), UNDECIDED)
        return Checked(pre.what, status, str(out.get("detail", "")), value=finite(out.get("value")))
    # A per-run precondition is decided like any per-run number: at MIN_SEEDS_PER_RUN seeds or
    # more (at 3 the t-interval's 2 degrees of freedom make it 4.30 standard errors wide and the
    # exact test cannot go below p = 0.125 one-sided against 0); fewer: undecided, seeds needed.
    x = compare(runs, claim, pre.treatment, pre.control, notes, resamples, seed,
                rule=Pair(pre.treatment, pre.control, pre.kind, pre.min_effect, pre.margin),
                spec=_Spec(pre.metric, pre.measure))
    status = {REPRODUCED: HOLDS, NOT_REPRODUCED: FAILS}.get(x.verdict, UNDECIDED)
    if not any(x.seeds.values()):
        detail = f"not measured: no run of {', '.join(x.seeds)} records {pre.metric}"
    else:
        detail = f"{_interval_text(x)}: {x.reason}"
    return Checked(pre.what, status, detail, x)


def verdict(runs: Runs, claim: Claim, notes: list[str], resamples: int = RESAMPLES,
            seed: int = SEED) -> Verdict:
    """One claim's verdict on one base from `runs`: its premise read on the base (where measured,
    a precondition: failed, the claim is not tested there, the measured value in the reason) and
    its preconditions measured, then its comparisons, under the family rule across them."""
    premise, _ = premise_check(runs, claim, notes)
    checked = ([premise] if premise else []) + [check(runs, claim, pre, notes, resamples, seed)
                                                for pre in claim.preconditions]
    comps = [compare(runs, claim, p.treatment, p.control, notes, resamples, seed, rule=p)
             for p in claim.comparisons]
    v = combine(claim, family(claim, comps), checked)
    if premise is not None and premise.status == FAILS and v.verdict == NOT_TESTED:
        v = replace(v, reason=premise_reason(claim, premise, checked))
    return v


def verdicts(runs: Runs, claims: Sequence[Claim] = CLAIMS, resamples: int = RESAMPLES,
             seed: int = SEED, second: int | None = SECOND_BASE_SEED) -> tuple[list[Verdict], list[str]]:
    """Every claim's verdict from `runs` (method -> seed -> its files), each with the same claim
    decided on the second base's runs (`second_base`; `second` None: not computed, and the
    verdict is the first base's) and the headline under the family rule across the bases
    (`headline`); and notes on the runs left out (stale) and the per-item files skipped
    (malformed: the run counts as having no per-item scores). `resamples` and `seed` are the
    percentile bootstrap's, which decides only comparisons of `BOOTSTRAP_MIN_SEEDS` seeds per arm."""
    notes: list[str] = []
    out = []
    for claim in claims:
        v = verdict(runs, claim, notes, resamples, seed)
        if second is not None:
            v = premise_headline(headline(replace(v, second=second_base(runs, v, notes, resamples,
                                                                        seed, second))))
        out.append(v)
    return out, notes


# ------------------------------------------------------------------------------ the second base


def second_base(runs: Runs, first: Verdict, notes: list[str], resamples: int = RESAMPLES,
                seed: int = SEED, base_seed: int = SECOND_BASE_SEED) -> dict:
    """Whether the claim holds on the second base: its verdict computed by the same rule on the
    second base's runs alone, the first comparison's difference and interval, and whether it
    agrees with the first base's verdict (None while either is inconclusive: an undecided base
    neither agrees nor differs); `not run` while no arm of it has a run there."""
    mapped = on_second_base(first.claim, base_seed)
    studies = sorted({study_of(a) for a in (*mapped.arms, *mapped.precondition_arms)})
    out: dict = {"studies": studies, "verdict": NOT_RUN, "short_of_pilot": []}
    if first.claim.blocked:
        return out
    _, premise = premise_check(runs, mapped, notes)
    if premise:  # measured once that base is built, before any arm trains there
        out["premise"] = premise
    # A claim's trained arms decide whether it ran there (the base is evaluated first); a claim
    # on the base alone (r3_resists_dilution) ran once that base is evaluated.
    arms = [a for a in mapped.arms if not is_base(a)] or list(mapped.arms)
    ran = any(runs.get(a) for a in arms)
    # Preconditions first, as on the first base: one read from that base's evaluation alone
    # (lcs_beats_direct's "the base produces keyword dumps") can fail before any arm trains
    # there, and then the claim is not tested there and its arms need no pilot.
    # So can its premise, read from that base's premises record alone.
    v = verdict(runs, mapped, notes, resamples, seed) if ran or premise.get("status") == FAILS or any(
        runs.get(a) for a in mapped.precondition_arms) else None
    if v is not None and not ran and v.verdict != NOT_TESTED:
        v = None
    # The trained arms still short of their pilot seeds there (stale runs not counted): what its
    # study runs next; a trained precondition arm first, as the plan runs them (`seed_plan`);
    # nothing once a precondition failed there.
    held = v is not None and all(p.status == HOLDS for p in v.preconditions)
    first_arms = [a for a in mapped.precondition_arms if not is_base(a)]
    wanted = ([] if v is not None and v.verdict == NOT_TESTED else
              first_arms if first_arms and not held else [*mapped.arms, *mapped.precondition_arms])
    out["short_of_pilot"] = sorted({a for a in wanted if not is_base(a) and sum(
        s is not None and 0 <= s < PILOT and not getattr(r, "stale", "")
        for s, r in (runs.get(a) or {}).items()) < PILOT})
    if v is None:
        return out
    x = v.comparisons[0]
    # The arms whose pilot is in but not the seeds the plan from it asks (`short_of_plan`): what
    # `--study <study> --methods <arms>` runs next there; none once decided there (`combine`:
    # more seeds cannot move a decided claim).
    out["short_of_plan"] = {a: list(n) for a, n in short_of_plan([v]).items()
                            if a not in out["short_of_pilot"]} if v.verdict == INCONCLUSIVE else {}
    return {**out, "verdict": v.verdict, "reason": v.reason, "needs": v.needs,
            "agrees": (v.verdict == first.verdict if INCONCLUSIVE not in (v.verdict, first.verdict)
                       else None), "diff": _round(x.difference),
            "ci": None if x.low is None else [_round(x.low), _round(x.high)],
            "comparisons": [{"treatment": c.treatment, "control": c.control, "seeds": c.seeds,
                             "diff": _round(c.difference), "verdict": c.verdict,
                             "ci": None if c.low is None else [_round(c.low), _round(c.high)],
                             "side": c.side, "capped": "beyond" in c.plan}
                            for c in v.comparisons],
            "preconditions": [{"what": p.what, "status": p.status, "detail": p.detail,
                               "value": _round(p.value)} for p in v.preconditions]}


def study_claims(study: str, claims: Sequence[Claim] = CLAIMS) -> list[Claim]:
    """The claims that read an arm of `study` (a record's name: `""` the default study,
    `hint_copier`, a second base's `default.seed1`), named as that study's runs are."""
    _, base_seed = parse_study(study)
    out = []
    for c in claims:
        named = c if base_seed is None else on_second_base(c, base_seed)
        if any(study_of(a) == study for a in (*named.arms, *named.precondition_arms)):
            out.append(named)
    return out


def planned_seeds(runs: Runs, study: str, claims: Sequence[Claim] = CLAIMS,
                  methods: Collection[str] | None = None) -> dict[str, int]:
    """Per arm of `study` (its name in the study: `rlme`), the seeds the power rule plans from
    the pilot seeds alone (each claim capped by its `max_seeds`; 0 for an arm that waits for its
    claim's preconditions, `seed_plan`). `runs` are named as the claims name them
    (`<study>/<arm>` outside the default study). The numbers read no seed beyond the pilot; the
    preconditions are decided as the report decides them (every resample: a per-item
    precondition decided on one resample would hold or fail by chance). `methods`: the arms a
    `--methods` call runs (`seed_plan`'s `named`)."""
    found, _ = verdicts(runs, study_claims(study, claims), second=None)
    prefix = f"{study}/" if study else ""
    named = None if methods is None else {prefix + m for m in methods}
    return {a.removeprefix(prefix): n for a, n in seed_plan(found, named).items()
            if study_of(a) == study}


def plan_cost(runs: Runs, study: str, plan: Mapping[str, int]) -> str:
    """What the plan's runs not yet made cost, from the arms' committed stage times."""
    prefix = f"{study}/" if study else ""
    arm_runs = {a: {s: r for s, r in runs.get(prefix + a, {}).items() if s is not None} for a in plan}
    return _cost(arm_runs, plan, runs) or "nothing to run"


def claims_json(found: Sequence[Verdict], notes: Sequence[str]) -> dict:
    """reports/claims.json: the rule, its constants, each claim's verdict and numbers (its premise
    per base, `premise_json`), the seeds the power rule plans per arm, the notes."""
    return {"rule": RULE, "family": asdict(FAMILY), "resamples": RESAMPLES, "seed": SEED,
            "bootstrap_min_seeds": BOOTSTRAP_MIN_SEEDS, "pilot_seeds": PILOT,
            "min_seeds": MIN_SEEDS, "min_seeds_per_run": MIN_SEEDS_PER_RUN,
            "claims": [{**v.as_json(), "premise": premise_json(v)} for v in found],
            "plan": seed_plan(found), "notes": list(notes)}
