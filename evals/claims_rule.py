"""The rule that turns numbers into verdicts: one comparison's (`decide`, its p-value for the
family rule `p_not_reproduced`), a claim's on one base (`combine`, with Holm's step-down across its
comparisons, `family`), and the headline across the two bases (`headline`), with the records they
produce (`Comparison`, `Checked`, `Verdict`). evals/claims.py reads the runs and calls them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace

from evals.claims_spec import (
    FAILS,
    FAMILY,
    INCONCLUSIVE,
    NOT_REPRODUCED,
    NOT_RUN,
    NOT_TESTED,
    REPRODUCED,
    UNDECIDED,
    Claim,
    Family,
)
from evals.stats import ALPHA, Estimate, holm, one_sided_p, snap


@dataclass(frozen=True)
class Comparison:
    """One comparison of a claim (or of a precondition) and its verdict."""

    treatment: str
    control: str | None
    seeds: dict[str, int]              # arm -> seeds found with the metric (current base)
    difference: float | None           # treatment − control (or treatment, without a control)
    low: float | None                  # 95% interval
    high: float | None
    basis: str                         # what was resampled, and which seeds
    verdict: str
    reason: str
    test: str = ""                     # TEST_ITEMS, "Welch t-interval" or "paired bootstrap"
    p: float | None = None             # the exact permutation p (per-run measures)
    plan: dict = field(default_factory=dict)   # the power rule's plan from the pilot
    needs: str = ""                    # what a decision would need, when undecided
    expected: str = ""
    label: str = ""
    base: str = ""                     # the base every run of the comparison started from
    values: dict[str, dict[int, float]] = field(default_factory=dict)  # per-run measures: arm -> seed -> value
    se: float | None = None            # the t-interval's standard error and degrees of freedom
    df: float | None = None            # (None: infinite), what the family rule's p-values read
    side: str = ""                     # "below" / "above": the interval excludes 0 on that side


@dataclass(frozen=True)
class Checked:
    """A precondition, measured: holds, fails or undecided, with its numbers."""

    what: str
    status: str                        # "holds", "fails", "undecided"
    detail: str
    comparison: Comparison | None = None
    value: float | None = None


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    comparisons: tuple[Comparison, ...]
    verdict: str
    reason: str
    preconditions: tuple[Checked, ...] = ()
    needs: str = ""
    second: dict = field(default_factory=dict)   # the same claim on the second base (`second_base`)
    first: dict = field(default_factory=dict)    # the first base's own verdict, where the headline
                                                 # (`headline`, the family rule) differs from it

    def as_json(self) -> dict:
        c = self.claim
        return {"id": c.id, "paper": c.paper, "figure": c.figure, "statement": c.statement,
                "setting": c.setting, "metric": c.metric, "measure": c.measure, "kind": c.kind,
                "min_effect": c.min_effect, "margin": c.margin, "expected": c.expected(),
                "max_seeds": c.max_seeds, "verdict": self.verdict, "reason": self.reason,
                "needs": self.needs,
                "preconditions": [{"what": p.what, "status": p.status, "detail": p.detail,
                                   "value": _round(p.value),
                                   "comparison": _comparison_json(p.comparison)}
                                  for p in self.preconditions],
                "comparisons": [_comparison_json(x) for x in self.comparisons],
                "first_base": self.first or {"verdict": self.verdict, "reason": self.reason},
                "second_base": self.second or {"verdict": NOT_RUN}}


def _comparison_json(x: Comparison | None) -> dict | None:
    if x is None:
        return None
    return {**asdict(x), **{k: _round(getattr(x, k)) for k in ("difference", "low", "high", "p", "se")},
            "df": None if x.df is None else round(x.df, 2)}


def _round(x: float | None) -> float | None:
    return None if x is None else round(snap(x), 4)


def decide(rule, difference: float, low: float, high: float) -> tuple[str, str]:
    """(verdict, reason) of one comparison's difference and interval under its rule (a Pair, or
    anything with kind, min_effect and margin: a Claim, a Precondition).

    >>> c = Claim("x", "000", "Fig. 1", "s", (("a", "b"),), "m", "greater", min_effect=0.05)
    >>> decide(c, 0.10, 0.06, 0.14)[0], decide(c, 0.01, -0.02, 0.04)[0], decide(c, 0.04, 0.01, 0.07)[0]
    ('reproduced', 'not reproduced', 'inconclusive')

    `no_gain` (a "no gain beyond noise" statement): one-sided, so harm reproduces it, and says so.

    >>> from evals.claims_spec import Pair
    >>> g = Pair("a", "b", "no_gain", margin=0.05)
    >>> decide(g, -0.11, -0.16, -0.06), decide(g, 0.01, -0.02, 0.04)[0], decide(g, 0.09, 0.06, 0.12)[0]
    (('reproduced', 'no gain: the interval lies below 0 (harm found)'), 'reproduced', 'not reproduced')
    """
    if rule.kind == "within":
        m = rule.margin
        if -m <= low and high <= m:
            return REPRODUCED, f"interval inside ±{m:.2f}"
        if high < -m or low > m:
            return NOT_REPRODUCED, f"interval wholly outside ±{m:.2f}"
        if high < 0 or low > 0:
            return INCONCLUSIVE, (f"the interval excludes 0 ({'below' if high < 0 else 'above'} it); "
                                  f"the ±{m:.2f} margin undecided")
        return INCONCLUSIVE, f"interval overlaps the edge of ±{m:.2f}"
    if rule.kind == "no_gain":
        m = rule.margin
        if high < 0:
            return REPRODUCED, "no gain: the interval lies below 0 (harm found)"
        if high < m:
            return REPRODUCED, f"no gain beyond +{m:.2f}: the interval's upper bound is below it"
        if low > m:
            return NOT_REPRODUCED, f"a gain beyond +{m:.2f}: the interval lies above it"
        return INCONCLUSIVE, f"the interval includes +{m:.2f}"
    sign = 1.0 if rule.kind == "greater" else -1.0  # `less` is `greater` on the negated difference
    d, lo, hi = sign * difference, *sorted((sign * low, sign * high))
    effect = f"{'+' if sign > 0 else '−'}{rule.min_effect:.2f}"
    side = "above" if sign > 0 else "below"
    if lo > 0 and d >= rule.min_effect:
        return REPRODUCED, f"interval {side} 0 and the difference reaches {effect}"
    if hi < rule.min_effect:
        return NOT_REPRODUCED, f"the interval excludes {effect}"
    if lo <= 0:
        return INCONCLUSIVE, "the interval includes 0"
    return INCONCLUSIVE, f"interval {side} 0 but the difference is short of {effect}"


def p_not_reproduced(rule, e: Estimate) -> float:
    """The one-sided p-value of the test whose rejection reads "not reproduced" (`decide`): below
    ALPHA / 2 exactly when the interval says so. What Holm's step-down (the family rule) reads.

    >>> from evals.claims_spec import Pair
    >>> e = Estimate(-0.19, -0.32, -0.07, 0.045, 4.0)
    >>> p_not_reproduced(Pair("a", None, "greater", min_effect=0.05), e) < ALPHA / 2
    True
    """
    if rule.kind == "within":
        return min(one_sided_p(e, -rule.margin, "below"), one_sided_p(e, rule.margin, "above"))
    if rule.kind == "no_gain":
        return one_sided_p(e, rule.margin, "above")
    if rule.kind == "greater":
        return one_sided_p(e, rule.min_effect, "below")
    return one_sided_p(e, -rule.min_effect, "above")


def _short(arm: str | None) -> str:
    """An arm's name without its study (`hint_copier/rlme` -> `rlme`)."""
    return "" if arm is None else arm.rpartition("/")[2]


def _interval_text(x: Comparison) -> str:
    arms = x.treatment + (f" − {x.control}" if x.control else "")
    seeds = per_seed(x)
    if x.difference is None:
        return arms + (f" ({seeds})" if seeds else "")
    return f"{arms} {x.difference:+.3f} [{x.low:+.3f}, {x.high:+.3f}]" + (f" ({seeds})" if seeds else "")


def per_seed(x: Comparison) -> str:
    """A per-run measure's values seed by seed, and how many lie on the expected side of 0:
    `per seed +0.134 +0.221 -0.013; 2 of 3 above 0` ('' for a per-item comparison).

    >>> per_seed(Comparison("t", None, {"t": 3}, None, None, None, "", "inconclusive", "",
    ...     values={"t": {0: 0.134, 1: 0.221, 2: -0.013}}))
    'per seed +0.134 +0.221 -0.013; 2 of 3 above 0'
    """
    parts = []
    for arm, by_seed in x.values.items():
        vals = [v for _, v in sorted(by_seed.items()) if v is not None]
        if not vals:
            continue
        above = sum(v > 0 for v in vals)
        name = f"{arm}: " if x.control else ""
        parts.append(f"{name}per seed " + " ".join(f"{v:+.3f}" for v in vals)
                     + ("" if x.control else f"; {above} of {len(vals)} above 0"))
    return "; ".join(parts)


def combine(claim: Claim, comparisons: Sequence[Comparison], checked: Sequence[Checked] = ()) -> Verdict:
    """Preconditions first (one failed: not tested; one undecided: inconclusive); a comparison
    that cannot succeed on its base (its declared bound) makes the claim not tested; then the
    claim holds when each comparison does, fails when any fails (`family`: at Holm's level),
    else is inconclusive."""
    failed = [c for c in comparisons if c.verdict == NOT_REPRODUCED]
    open_ = [c for c in comparisons if c.verdict == INCONCLUSIVE]
    several = len(comparisons) > 1

    def why(cs: Sequence[Comparison]) -> str:
        reasons = list(dict.fromkeys((f"{c.treatment} vs {c.control or '0'}: " if several else "")
                                     + c.reason for c in cs))
        return "; ".join(reasons)

    def needs(cs: Sequence[Comparison]) -> str:
        return "; ".join(dict.fromkeys(((f"{c.treatment} vs {c.control or '0'}: " if several else "")
                                        + c.needs) for c in cs if c.needs))

    untestable = [c for c in comparisons if c.verdict == NOT_TESTED]
    pre_failed = [p for p in checked if p.status == FAILS]
    pre_open = [p for p in checked if p.status == UNDECIDED]
    args = (claim, tuple(comparisons))
    if claim.blocked:
        return Verdict(*args, INCONCLUSIVE, claim.blocked, tuple(checked))
    if pre_failed:
        return Verdict(*args, NOT_TESTED, "precondition failed: " + "; ".join(
            p.what for p in pre_failed), tuple(checked))
    if pre_open:
        pre_needs = "; ".join(p.comparison.needs for p in pre_open if p.comparison and p.comparison.needs)
        then = needs(open_)  # planned once the precondition holds (`seed_plan`)
        return Verdict(*args, INCONCLUSIVE, "precondition undecided: " + "; ".join(
            p.what for p in pre_open), tuple(checked),
            "; ".join(x for x in (pre_needs, f"then, if it holds: {then}" if then else "") if x))
    if untestable:
        return Verdict(*args, NOT_TESTED, why(untestable), tuple(checked))
    if failed:
        return Verdict(*args, NOT_REPRODUCED, why(failed), tuple(checked))
    if open_:
        return Verdict(*args, INCONCLUSIVE, why(open_), tuple(checked), needs(open_))
    return Verdict(*args, REPRODUCED, why(comparisons), tuple(checked))


def family(claim: Claim, comparisons: Sequence[Comparison], rule: Family = FAMILY) -> list[Comparison]:
    """The family rule across a claim's comparisons (`Family`): with `holm`, a comparison's
    "not reproduced" stands only at Holm's step-down level over the claim's declared comparisons
    (one without a decided interval counts, as p = 1: the family is declared, not what came out);
    one that falls short is inconclusive and says so. "Reproduced" needs no correction: the claim
    needs every comparison (`combine`)."""
    if rule.comparisons != "holm" or len(comparisons) < 2:
        return list(comparisons)
    ps = [p_not_reproduced(pair, Estimate(x.difference, x.low, x.high, x.se,
                                          math.inf if x.df is None else x.df))
          if x.se is not None and x.difference is not None and x.low is not None and x.high is not None
          else 1.0 for x, pair in zip(comparisons, claim.comparisons)]
    out = []
    for x, p, rejected in zip(comparisons, ps, holm(ps, ALPHA / 2)):
        if x.verdict == NOT_REPRODUCED and not rejected:
            x = replace(x, verdict=INCONCLUSIVE, reason=(
                f"{x.reason}, but not at Holm's level across the claim's {len(ps)} comparisons "
                f"(one-sided p = {p:.4f})"))
        out.append(x)
    return out


def headline(v: Verdict, rule: Family = FAMILY) -> Verdict:
    """The claim's headline verdict under the family rule across its bases (`Family.bases`):
    with `agree`, the verdict both bases give; where they differ, or either is undecided or not
    run, inconclusive, the first base's own verdict kept in `first` and named in the reason. Both
    undecided with the interval off 0 on the same side on both (`within`): the reason says
    that much, which is what the numbers support (rlme_tracks_rlvr: below RLVR on both bases, the
    margin undecided at the declared cap)."""
    second = v.second or {}
    if rule.bases != "agree" or not second:
        return v
    own = {"verdict": v.verdict, "reason": v.reason}
    if second.get("verdict") == v.verdict or v.verdict == INCONCLUSIVE:
        # Agreed, or undecided on the first base already: the first base's reason stands.
        both = _one_side_on_both(v) if second.get("verdict") == v.verdict == INCONCLUSIVE else ""
        return replace(v, reason=both, first=own) if both else v
    where = ("the second base not run" if second.get("verdict") == NOT_RUN
             else f"second base {second.get('verdict')}")
    return replace(v, verdict=INCONCLUSIVE, first=own, reason=(
        f"first base {v.verdict}, {where}: a headline verdict needs both bases to agree "
        f"(first base: {v.reason})"))


def _one_side_on_both(v: Verdict) -> str:
    """What a one-comparison `within` claim undecided on both bases still shows, where its
    interval is off 0 on either: `rlme below rlvr on both bases (the interval excludes 0); the
    ±0.10 margin undecided at the declared cap`, or `... on the first base (the interval excludes
    0; on the second it includes 0); ...`; '' where neither base's interval is off 0 (or they
    are off it on opposite sides)."""
    theirs = (v.second or {}).get("comparisons") or []
    if len(v.comparisons) != 1 or len(theirs) != 1 or v.claim.comparisons[0].kind != "within":
        return ""
    x, y = v.comparisons[0], theirs[0]
    mine, other = x.side, y.get("side", "")
    if not (mine or other) or (mine and other and mine != other):
        return ""
    arms = f"{_short(x.treatment)} {mine or other} {_short(x.control) if x.control else '0'}"
    where = ("on both bases (the interval excludes 0)" if mine and other else
             "on the first base (the interval excludes 0; on the second it includes 0)" if mine else
             "on the second base (the interval excludes 0; on the first it includes 0)")
    at = "at the declared cap" if "beyond" in x.plan and y.get("capped") else "at the planned seeds"
    return f"{arms} {where}; the ±{v.claim.comparisons[0].margin:.2f} margin undecided {at}"
