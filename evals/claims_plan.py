"""How many seeds each claim's arms run: the power rule, planned from the pilot's variances and
the claim's declared effect (issue 68), and what the runs still needed cost.

Every arm first runs the `PILOT` = 3 pilot seeds (0, 1, 2). From the pilot alone (seeds 0-2 and
no other, so no seed run later can move the plan), `_plan` asks `evals.stats.seeds_needed` for the
seeds per arm (and test items) that decide the comparison with 80% power at 95%: for the effect
the claim DECLARES (`declared_effect`: its min_effect, or its margin), from the pilot's variances
(between seeds and, per item, between items), never from the pilot's difference, which is only
recorded (`pilot_difference`: what the report shows before the planned seeds exist). That is an
internal pilot: the pilot seeds are reused in the final test and the error rate holds
(tests/test_stats_plan.py simulates plan-then-test). The quantiles are the verdict test's own t
quantiles at its degrees of freedom. At least 3 seeds (5 for a per-run measure, a precondition's
included), at most the claim's `max_seeds`; a claim with nothing declared (min_effect 0) is
planned its cap. The verdict is then computed ONCE on the first planned seeds of each arm
(0 .. n-1): seeds run beyond the plan are left out, so looking at more data cannot change the
error rate. A comparison still undecided there says what a decision would need (seeds, items)
and what it costs (`_cost`: the committed stage wall times, `eval_seconds` in metrics.json,
`train_seconds` in run.json where it exists, else its study's times files).

Preconditions first (`seed_plan`): while a claim's precondition is undecided, only the
precondition's arms get their planned seeds; the comparisons' seeds follow once it holds, and
never if it fails (the claim is then not tested, whatever the comparisons would show). An arm
that only such waiting comparisons read is planned 0 seeds: a preset study does not even run its
pilot until the precondition holds. Their numbers come from the pilot either way, so waiting
changes no number, only what is run for nothing.

The pipeline runs the plan (flows/pipeline.py): the pilot first, then `evals.claims.planned_seeds`
for the study's arms, the seeds after the pilot as params `extra_runs` (`extra_runs`), asked again
until it adds nothing, then the report.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from evals.claims_spec import HOLDS, PILOT, POWER_SEEDS_CEILING, RunFiles, Runs, finite, is_base
from evals.stats import power_at, seeds_needed, snap, variance_parts

if TYPE_CHECKING:
    from evals.claims import Verdict

def declared_effect(rule) -> tuple[float | None, int]:
    """(the effect the power rule plans for, its sides): the DECLARED size, never the pilot's
    difference. `greater` / `less`: min_effect (80% power to see the interval clear 0 when the
    truth is min_effect, and as much to see it fall short of min_effect when the truth is 0);
    `within`: the margin, both edges at once at a truth of 0; `no_gain`: the margin, one edge.
    None where nothing is declared (min_effect 0): the claim's cap is planned.

    >>> from evals.claims_spec import Pair
    >>> declared_effect(Pair("a", "b", "greater", min_effect=0.05))
    (0.05, 1)
    >>> declared_effect(Pair("a", "b", "within", margin=0.1))
    (0.1, 2)
    >>> declared_effect(Pair("a", None, "greater"))
    (None, 1)
    """
    if rule.kind == "within":
        return rule.margin, 2
    if rule.kind == "no_gain":
        return rule.margin, 1
    return (rule.min_effect if rule.min_effect > 0 else None), 1


def _plan(rule, pilot: Sequence[np.ndarray], per_run: bool, minimum: int, cap: int,
          items: int) -> dict:
    """The power rule on the pilot's arrays (each (seeds, items); a base has one row): the seeds
    per arm to run, the items a decision would need if more than today's, and why. From the
    DECLARED effect (`declared_effect`) and the pilot's variances only: the pilot's difference is
    recorded (`pilot_difference`, what the report shows before the planned seeds exist) and plans
    nothing, so a lucky pilot cannot shrink the plan (issue 68: rlme's and the filter's pilots
    promised far more than their planned seeds then showed)."""
    t = pilot[0]
    c = pilot[1] if len(pilot) > 1 else None
    if per_run:
        arm_vars = [float(x[:, 0].var(ddof=1)) for x in (t, c) if x is not None and x.shape[0] > 1]
        diff, item_var, items = float(t.mean() - (0.0 if c is None else c.mean())), 0.0, 0
    else:
        parts = variance_parts(t, c)
        arm_vars = [float(v) for v, _ in parts.seed_vars]
        diff, item_var = float(parts.difference), float(parts.item_var)
    seed_var = sum(arm_vars)
    effect, sides = declared_effect(rule)
    plan = {"pilot_difference": round(snap(diff), 4), "effect": effect,
            "seed_var": round(snap(seed_var), 6), "item_var": round(snap(item_var), 6)}
    if effect is None:
        return {**plan, "seeds": cap, "items": None, "power": None, "power_seeds": None,
                "beyond": f"no declared effect (min_effect 0) to plan from: the cap of {cap} seeds per arm"}
    n, m = seeds_needed(effect, seed_var, item_var, items, cap=cap, minimum=minimum, arm_vars=arm_vars,
                        sides=sides)
    # What the cap can still expect, when the rule wanted more (the odds a reader weighs
    # before spending the planned runs): at today's items.
    power = round(power_at(effect, seed_var, cap, item_var, items, arm_vars, sides), 2)
    if n is None:
        return {**plan, "seeds": cap, "items": None, "power": power, **_past_cap(
            effect, seed_var, item_var, items, minimum, arm_vars, sides,
            f"more than the cap of {cap} seeds per arm"
            + ("" if per_run else " even with more items")  # a per-run number has no items
            + f" (the declared effect is {effect:.3f}; at the cap its power is {power:.0%}")}
    plan.update(seeds=n, items=m)
    if m is not None and m > items:
        plan.update(power=power, **_past_cap(
            effect, seed_var, item_var, items, minimum, arm_vars, sides,
            f"{m} test items per run (today {items}) at {cap} seeds per arm"
            f" (with today's items its power is {power:.0%}"))
    return plan


def _past_cap(effect: float, seed_var: float, item_var: float, items: int, minimum: int,
              arm_vars: list[float], sides: int, beyond: str) -> dict:
    """`beyond` closed with the seeds per arm that 80% power needs at today's items, were the cap
    higher (`power_seeds`; None past POWER_SEEDS_CEILING): what raising a cap would cost, for the
    one who sets caps, and only ever declared before the runs it would add (the plan-first rule)."""
    n, m = seeds_needed(effect, seed_var, item_var, items, cap=POWER_SEEDS_CEILING, minimum=minimum,
                        arm_vars=arm_vars, sides=sides)
    if n is None or m is not None:  # seeds alone cannot, even at the ceiling
        return {"power_seeds": None,
                "beyond": f"{beyond}; 80% needs more than {POWER_SEEDS_CEILING} seeds per arm)"}
    return {"power_seeds": n, "beyond": f"{beyond}; 80% needs {n} seeds per arm)"}


def _seconds(runs: Sequence[RunFiles]) -> tuple[float | None, str]:
    """Mean wall seconds of one run of an arm from the committed stage times (the evaluation's
    `eval_seconds`, the training's `train_seconds` where run.json records it, else its study's
    stage times), and what it covers."""
    evals = [v for r in runs if (v := finite((r.metrics or {}).get("eval_seconds"))) is not None]
    trains = [v for r in runs
              if (v := finite((getattr(r, "summary", None) or {}).get("train_seconds"))
                  or finite(getattr(r, "train_seconds", None))) is not None]
    if not evals and not trains:
        return None, "no stage time recorded"
    total = (float(np.mean(trains)) if trains else 0.0) + (float(np.mean(evals)) if evals else 0.0)
    covers = "train + evaluate" if trains and evals else "train only" if trains else "evaluate only"
    return total, covers


def _hours(seconds: float) -> str:
    """`0.5 CPU-h`, `12 CPU-h`.

    >>> _hours(1800), _hours(43200.0)
    ('0.5 CPU-h', '12 CPU-h')
    """
    h = seconds / 3600
    return f"{h:.1f} CPU-h" if h < 10 else f"{h:.0f} CPU-h"


def _cost(arm_runs: Mapping[str, Mapping[int, RunFiles]], want: Mapping[str, int],
          runs: Runs | None = None) -> str:
    """`6 more runs, about 1.5 CPU-h (train + evaluate, committed stage times)`, or the runs alone.
    An arm of another study with no stage time of its own (a second base's arm not yet run)
    costs what the same method's runs of the default study cost (`runs`: every run read)."""
    more = {a: max(0, n - len(arm_runs.get(a, {}))) for a, n in want.items()}
    total_runs = sum(more.values())
    if not total_runs:
        return ""
    seconds, covers, borrowed = 0.0, set(), False
    for a, k in more.items():
        if not k:
            continue
        s, what = _seconds(list(arm_runs.get(a, {}).values()))
        if s is None and runs and "/" in a:
            s, what = _seconds([r for seed, r in runs.get(a.split("/", 1)[1], {}).items() if seed is not None])
            borrowed = borrowed or s is not None
        if s is None:
            covers.add("some arms without a recorded stage time")
            continue
        seconds += s * k
        covers.add(what)
    runs_ = f"{total_runs} more run{'s' * (total_runs != 1)}"
    # An estimate, said so: another study's runs of the method (often on another machine).
    borrowed_ = "; an arm with none of its own: its method's runs in the default study" if borrowed else ""
    if not seconds:
        return f"{runs_}; cost unknown (no committed stage time)"
    if covers == {"evaluate only"}:
        return (f"{runs_}, at least {_hours(seconds)} (their evaluations alone: no training time is "
                f"committed{borrowed_})")
    # A part of the cost unrecorded (no training time, or an arm with none) makes it a lower bound.
    bound = "about" if covers == {"train + evaluate"} else "at least"
    return f"{runs_}, {bound} {_hours(seconds)} ({', '.join(sorted(covers))}: committed stage times{borrowed_})"


def seed_plan(found: Sequence[Verdict], named: Collection[str] | None = None) -> dict[str, int]:
    """Per arm, the seeds the claims' power rule plans for it (the most any comparison or
    precondition needs, the pilot at least): what the pipeline runs next. Preconditions first:
    a claim's comparisons get seeds only once every precondition holds (an undecided one gets
    its own seeds first; a failed one leaves the claim not tested, so its comparisons get
    nothing). An arm that only such waiting comparisons read is planned 0: it waits.

    `named` (the arms a `--methods` call runs): a comparison whose arms are all named plans its
    arms alone, so a control that an arm not named also reads (rlvr_long, the control of three
    intrinsic arms) gets the seeds of the comparisons this call runs, not the most any other
    needs; a named arm in no such comparison keeps the plan of every comparison."""
    needs: list[tuple[list[str], int]] = []
    for v in found:
        if v.claim.blocked:
            continue
        held = all(p.status == HOLDS for p in v.preconditions)
        for x in [*v.comparisons, *(p.comparison for p in v.preconditions if p.comparison)]:
            if not held and x in v.comparisons:  # waits for the preconditions
                n = 0
            else:
                n = int(x.plan.get("seeds", PILOT)) if x.plan else PILOT
            needs.append(([a for a in (x.treatment, x.control) if a and not is_base(a)], n))

    def most(rows: Iterable[tuple[list[str], int]]) -> dict[str, int]:
        plan: dict[str, int] = {}
        for arms, n in rows:
            for arm in arms:
                plan[arm] = max(plan.get(arm, 0), n)
        return plan

    plan = most(needs)
    if named is not None:
        inside = most((arms, n) for arms, n in needs if set(arms) <= set(named))
        plan = {a: inside.get(a, n) for a, n in plan.items()}
    return dict(sorted(plan.items()))


def short_of_plan(found: Sequence[Verdict]) -> dict[str, tuple[int, int]]:
    """The arms with fewer seeds than the power rule plans for them (`seed_plan`): arm -> (the
    seeds its comparisons found, the seeds planned); the base never (it is evaluated, not seeded).
    What a study still has to run for these claims."""
    have: dict[str, int] = {}
    for v in found:
        if v.claim.blocked:
            continue
        for x in (*v.comparisons, *(p.comparison for p in v.preconditions if p.comparison)):
            for arm, n in x.seeds.items():
                have[arm] = max(n, have.get(arm, 0))
    return {a: (have.get(a, 0), n) for a, n in seed_plan(found).items()
            if have.get(a, 0) < n and not is_base(a)}


def extra_runs(plan: Mapping[str, int], seeds: Sequence[int]) -> dict[str, dict]:
    """params `extra_runs` for a plan: each arm's seeds after the study's `seeds` (the pilot) up
    to the planned number, keyed `<arm>-<seed>` as the DVC stages are.

    >>> extra_runs({"rlme": 5, "rlvr": 3}, [0, 1, 2])
    {'rlme-3': {'method': 'rlme', 'seed': 3}, 'rlme-4': {'method': 'rlme', 'seed': 4}}
    """
    start = max(seeds) + 1
    return {f"{arm}-{s}": {"method": arm, "seed": s} for arm, n in sorted(plan.items())
            for s in range(start, start + max(0, n - len(seeds)))}
