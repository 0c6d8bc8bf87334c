"""The statistics behind the claims' verdicts (evals/claims.py): intervals, tests, power.

Two kinds of evidence, one kind of test: a t-interval whose degrees of freedom come from the
SEEDS, because the seed is the unit a claim generalises over (a run trained again with another
seed), and a handful of seeds is all a claim has.

- **per item** (a test-set metric scored item by item in every run, `evals/items.py`):
  `seed_item_t`, a t-interval on the arms' per-seed means with the item noise folded in. The
  standard error has three parts: each arm's between-seed variance of its per-seed means over its
  seeds (the seed level: 2-4 degrees of freedom at 3-5 seeds), and the variance over items of the
  paired per-item difference beyond what those already hold (the items, 100s of degrees of
  freedom); Welch-Satterthwaite combines them. A base evaluated once is a fixed model sampled
  item by item: its draw's noise is item-level noise, which the item part carries, so it needs no
  seed level of its own (tests/test_stats_base_draw.py checks that on the committed records: the
  spread of the base's step-0 test evaluations over seeds is what its per-item noise predicts).
  A trained arm always has at least the `evals.claims.PILOT` seeds.
- **per run** (one number per run: a training-curve measure, a metric with no per-item scores):
  `t_interval` (Welch's two-sample t-interval, or the one-sample t-interval against 0 when there
  is no control) for the decision, and `permutation_p` (the exact permutation test: every
  relabelling of the pooled values, or every sign flip for one sample) beside it. With 3 runs
  against 3 the exact test cannot go below p = 0.05 one-sided (1 of the 20 relabellings), which
  is why per-run claims need more seeds (`evals.claims.MIN_SEEDS_PER_RUN`).

`paired_bootstrap` (items and seeds resampled, percentile interval) is kept for where it is
valid, and only there: many seeds per arm (`BOOTSTRAP_MIN_SEEDS`). At 3-10 seeds it is not: the
between-seed part of the variance equals or exceeds the item part in the lab's arm-against-arm
comparisons, and resampling 3 seeds with replacement shrinks that part by a third and reads it
with normal quantiles where t with 2-4 degrees of freedom applies, so its one-sided
false-positive rate is several times the nominal 2.5% (issue 68 simulated it; the seed-dominated
limit is `bootstrap_limit` in tests/test_stats_error_rates.py). Thousands of values per arm make
the ITEM level of such an interval sound, not its seed level. tests/test_stats_error_rates.py
simulates the false-positive rate of `seed_item_t` at the seeds the claims use.

**Decisions and their error rate.** Every verdict reads a 95% interval's ends, i.e. two
one-sided tests at `ALPHA` / 2 = 2.5%; `one_sided_p` gives the same decision as a p-value, which
the family rule (`holm`, across a claim's comparisons) needs.

**Planning seeds** (`seeds_needed`, `power_at`): from a DECLARED effect (the claim's min_effect
or margin) and the pilot's variances only, never the pilot's difference (an internal pilot: a
plan that trusts an optimistic pilot difference under-plans and, with the pilot seeds reused,
inflates the error rate; tests/test_stats_plan.py simulates plan-then-test). The t quantiles of
the test the verdict uses at n seeds, its Welch-Satterthwaite degrees of freedom included (with
3 to 6 runs per arm a normal approximation plans far too few: at 3 seeds against 0 the
interval's half-width is 4.30 standard errors, not 1.96).

Every number these functions return is snapped to `SNAP` decimals (`snap`), so that the float
noise of one machine's summation order (BLAS, SIMD) cannot move a printed rounding: an interval
end that is exactly +0.0125 prints the same on every machine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations, product
from typing import NamedTuple

import numpy as np
from scipy import stats as st

RESAMPLES = 10_000
SEED = 0
ALPHA = 0.05      # two-sided: 95% intervals, so each one-sided decision is at ALPHA / 2
POWER = 0.80      # the power rule's target
SNAP = 9          # decimals every returned statistic is rounded to (float noise is ~1e-16)
EXACT_LIMIT = 200_000  # relabellings enumerated exactly; above, a seeded Monte Carlo of this many
# Seeds per arm from which the percentile bootstrap's seed level is sound: resampling n seeds
# shrinks their variance by (n - 1) / n and reads it with normal quantiles; where the seeds
# dominate, its one-sided rate falls within half a point of 2.5% only from here on
# (tests/test_stats_error_rates.py, `bootstrap_limit`).
BOOTSTRAP_MIN_SEEDS = 40
# The degrees of freedom of a per-item t-interval count each seed part at its upper bound at
# this confidence (`se_df`): a seed variance small by chance cannot buy the items' degrees of
# freedom. Set by simulation (tests/test_stats_error_rates.py), not tuned per claim.
DF_CONFIDENCE = 0.90


def snap(x: float) -> float:
    """`x` rounded to SNAP decimals: machine-independent before any printed rounding.

    >>> snap(0.012499999999999999) == snap(0.0125000000000000007) == 0.0125
    True
    """
    return float(round(float(x), SNAP)) + 0.0  # + 0.0: no -0.0


def paired_bootstrap(treatment: np.ndarray, control: np.ndarray, resamples: int = RESAMPLES,
                     seed: int = SEED) -> tuple[float, float, float]:
    """(difference, low, high): treatment − control and its 95% percentile interval.

    `treatment` and `control` are (seeds, items) arrays whose columns are the same items in the
    same order; one column is a per-seed scalar (seeds only). Each resample draws the items once,
    with replacement, for both arms, and each arm's seeds with replacement; an arm's value is the
    mean over its drawn seeds of each seed's mean over the drawn items. The generator is numpy's
    PCG64 seeded with `seed`, the same draws on every machine.

    Sound only where the seed level is: `BOOTSTRAP_MIN_SEEDS` seeds per arm or more (the claims
    use it only there; below, `seed_item_t`). Many items per arm do not make it sound at 3 seeds:
    the items are resampled well, the 3 seeds are not (the module's docstring).

    >>> t, c = np.array([[1.0, 1.0], [1.0, 0.0]]), np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> paired_bootstrap(t, c, resamples=2000)[0]
    0.5
    """
    t, c = np.atleast_2d(np.asarray(treatment, float)), np.atleast_2d(np.asarray(control, float))
    if t.shape[1] != c.shape[1]:
        raise ValueError(f"paired_bootstrap: {t.shape[1]} treatment items vs {c.shape[1]} control items")
    rng = np.random.default_rng(seed)
    n_items = t.shape[1]
    weights = rng.multinomial(n_items, np.full(n_items, 1.0 / n_items), size=resamples) / n_items
    rows = np.arange(resamples)[:, None]

    def arm(x: np.ndarray) -> np.ndarray:
        per_seed = x @ weights.T                                   # (seeds, resamples)
        picks = rng.integers(0, x.shape[0], size=(resamples, x.shape[0]))
        return per_seed[picks, rows].mean(axis=1)

    diffs = np.round(arm(t) - arm(c), 12)  # the summation order's noise off before sorting
    low, high = np.percentile(diffs, [2.5, 97.5])
    return snap(t.mean() - c.mean()), snap(low), snap(high)


class Estimate(NamedTuple):
    """A difference, its interval at 1 − alpha, and the standard error and degrees of freedom
    the interval came from (what `one_sided_p` reads)."""

    difference: float
    low: float
    high: float
    se: float
    df: float


class Parts(NamedTuple):
    """The variance parts of a per-item difference (`variance_parts`), numpy arrays over any
    leading axes (a simulation's replicates): `seed_vars`, per arm with two or more seeds, the
    variance of its per-seed means over its seeds and that arm's seed count; `item_var`, the
    variance over items of the paired per-item difference beyond what the seed parts already
    hold (one item's share: divide by `items`)."""

    difference: np.ndarray
    seed_vars: tuple[tuple[np.ndarray, int], ...]
    item_var: np.ndarray
    items: int


def residual_ms(x: np.ndarray) -> np.ndarray:
    """The seed × item residual mean square of (..., seeds, items) scores (two-way ANOVA): the
    per-item noise of one run, which each per-seed mean already carries (divided by the items)."""
    n, m = x.shape[-2:]
    r = x - x.mean(-1, keepdims=True) - x.mean(-2, keepdims=True) + x.mean((-2, -1), keepdims=True)
    return (r * r).sum((-2, -1)) / ((n - 1) * (m - 1))


def variance_parts(treatment, control=None) -> Parts:
    """The parts of the variance of mean(treatment) − mean(control) for (..., seeds, items)
    arrays whose last axes are the same items in the same order (`control` None: against 0).

    The model: a score is the arm's mean + the item's difficulty (common to the arms, so it
    cancels in the paired difference) + the arm's item effect + the seed's effect + per-item
    noise. The difference's variance is each arm's (seed effect + its noise averaged over the
    items) / seeds, estimated by the variance of its per-seed means over its seeds (its seed part),
    plus the arm × item effects / items, estimated by the variance over items of the paired
    per-item difference less the noise the seed parts already hold (each arm's residual mean
    square / its seeds). An arm of ONE row is a fixed model evaluated once (the base): its draw's
    noise is per-item noise, left in the item part, and it has no seed part.

    >>> t = np.array([[0.6, 0.4, 0.8], [0.8, 0.6, 1.0]])   # seed 1 is 0.2 above seed 0 everywhere
    >>> p = variance_parts(t, np.array([[0.5, 0.3, 0.7]]))
    >>> round(float(p.difference), 3), [(round(float(v), 3), n) for v, n in p.seed_vars], float(p.item_var)
    (0.2, [(0.02, 2)], 0.0)
    """
    t = np.asarray(treatment, float)
    c = None if control is None else np.asarray(control, float)
    if c is not None and c.shape[-1] != t.shape[-1]:
        raise ValueError(f"variance_parts: {t.shape[-1]} treatment items vs {c.shape[-1]} control items")
    items = t.shape[-1]
    per_item = t.mean(-2) if c is None else t.mean(-2) - c.mean(-2)
    difference = per_item.mean(-1)
    seed_vars, noise = [], np.zeros(difference.shape)
    for x in (t,) if c is None else (t, c):
        n = x.shape[-2]
        if n > 1:
            seed_vars.append((x.mean(-1).var(-1, ddof=1), n))
            if items > 1:
                noise = noise + residual_ms(x) / n
    item_var = (np.maximum(0.0, per_item.var(-1, ddof=1) - noise) if items > 1
                else np.zeros(difference.shape))
    return Parts(difference, tuple(seed_vars), item_var, items)


def se_df(seed_vars: Sequence[tuple], item_var, items: int, n: int | None = None,
          confidence: float | None = DF_CONFIDENCE):
    """(standard error², degrees of freedom) from variance parts (`variance_parts`): each seed
    part var / seeds, plus the item part item_var / items (`n`: as if every seeded arm had n
    seeds, the plan's question). Works elementwise on arrays.

    The degrees of freedom are Welch-Satterthwaite's over the parts (a seed part has seeds − 1,
    the item part items − 1), with each seed part counted at its upper `confidence` bound
    (var · (seeds − 1) / χ²_{1 − confidence, seeds − 1}; None: as estimated): at 3 seeds a
    between-seed variance that came out small by chance would otherwise shrink the standard
    error AND buy the item part's hundreds of degrees of freedom at once, which is liberal beyond
    the tolerance for 3 seeds against a base evaluated once, seed-dominated
    (tests/test_stats_error_rates.py measures both).
    Counted at its bound, a seed part that matters keeps the degrees of freedom near its own,
    and one that is negligible even at its bound leaves the items' (a base's per-item noise
    against a trained arm whose seeds agree). The standard error itself uses the unbiased
    estimates.

    >>> se2, df = se_df([(0.01, 3), (0.01, 3)], 0.0, 200)   # two arms of 3 seeds: Welch's 4
    >>> round(float(se2), 5), round(float(df), 6)
    (0.00667, 4.0)
    >>> [round(float(x), 6) for x in se_df([], 0.2, 200)]  # a fixed model against 0: the items'
    [0.001, 199.0]
    >>> round(float(se_df([(1e-6, 3)], 0.2, 200)[1]), 1)    # seeds that agree: about the items'
    200.1
    """
    seeds = [(np.asarray(v, float) / (n or k), (n or k) - 1) for v, k in seed_vars]
    item = np.asarray(item_var, float) / items if items > 1 else np.float64(0.0)
    if not seeds and items <= 1:
        return np.float64(0.0), np.float64(np.inf)
    se2 = sum(v for v, _ in seeds) + item
    bound = seeds if confidence is None else [(v * d / st.chi2.ppf(1 - confidence, d), d) for v, d in seeds]
    parts = bound + ([(item, items - 1)] if items > 1 else [])
    top = sum(v for v, _ in parts)
    den = sum(v * v / d for v, d in parts)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(den > 0, top * top / np.where(den > 0, den, 1.0), np.inf)
    return se2, df


def _t_ppf(q: float, df):
    """t quantile, the normal one at infinite degrees of freedom (elementwise)."""
    return np.where(np.isfinite(df), st.t.ppf(q, np.where(np.isfinite(df), df, 1.0)), st.norm.ppf(q))


def seed_item_interval(treatment, control=None, alpha: float = ALPHA,
                       confidence: float | None = DF_CONFIDENCE):
    """`seed_item_t`'s (difference, low, high, se, df) as arrays over any leading axes of
    (..., seeds, items) inputs: the same arithmetic for one comparison and for a simulation's
    replicates (tests/test_stats_error_rates.py). `confidence`: `se_df`'s."""
    parts = variance_parts(treatment, control)
    se2, df = se_df(parts.seed_vars, parts.item_var, parts.items, confidence=confidence)
    se = np.sqrt(se2)
    half = _t_ppf(1 - alpha / 2, df) * se
    return parts.difference, parts.difference - half, parts.difference + half, se, df


def seed_item_t(treatment, control=None, alpha: float = ALPHA) -> Estimate:
    """treatment − control (or treatment against 0) of per-item scores, (seeds, items) arrays
    with the same items in the same columns, and its t-interval at 1 − alpha with the seed
    level accounted for (`variance_parts`, `se_df`): the verdict test of a per-item comparison.

    Three seeds of the treatment 0.2, 0.1 and 0.3 above a control whose seeds agree, every item
    moved alike: the treatment's seed level is the only spread, 2 degrees of freedom, and the
    interval is 4.30 standard errors wide each side (a normal one would be 1.96):

    >>> t = np.array([[0.6, 0.8], [0.5, 0.7], [0.7, 0.9]])
    >>> c = np.array([[0.4, 0.6], [0.4, 0.6], [0.4, 0.6]])
    >>> e = seed_item_t(t, c)
    >>> round(e.difference, 3), round(e.low, 3), round(e.high, 3), e.df
    (0.2, -0.048, 0.448, 2.0)
    """
    t = np.atleast_2d(np.asarray(treatment, float))
    c = None if control is None else np.atleast_2d(np.asarray(control, float))
    d, lo, hi, se, df = (float(x) for x in seed_item_interval(t, c, alpha))
    return Estimate(snap(d), snap(lo), snap(hi), snap(se), df if math.isinf(df) else snap(df))


def one_sided_p(e: Estimate, bound: float, side: str) -> float:
    """The one-sided p-value that the true difference lies beyond `bound` on the other side:
    `side` "above" tests difference > bound (small when the estimate is well above it), "below"
    tests difference < bound. The interval's end clears `bound` exactly when this p is below
    ALPHA / 2, so a decision read from the interval and one read from p agree.

    >>> e = Estimate(0.10, 0.02, 0.18, 0.04, math.inf)
    >>> one_sided_p(e, 0.0, "above") < ALPHA / 2 < one_sided_p(e, 0.05, "above")
    True
    """
    if e.se <= 0:
        return 0.0 if (e.difference > bound if side == "above" else e.difference < bound) else 1.0
    z = (e.difference - bound) / e.se
    dist = st.norm if math.isinf(e.df) else st.t(e.df)
    return snap(float(dist.sf(z) if side == "above" else dist.cdf(z)))


def holm(pvalues: Sequence[float | None], alpha: float = ALPHA / 2) -> list[bool]:
    """Holm's step-down rejections at family-wise level `alpha` (None: not a test of the family,
    never rejected): the smallest p against alpha / k, the next against alpha / (k − 1), ...,
    stopping at the first that fails.

    >>> holm([0.01, 0.02, 0.004]), holm([0.02, 0.02]), holm([0.001, None])
    ([True, True, True], [False, False], [True, False])
    >>> holm([0.012, 0.03])   # 0.012 clears 0.025 / 2; 0.03 is above 0.025: stop
    [True, False]
    """
    tested = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    out = [False] * len(pvalues)
    for j, (p, i) in enumerate(tested):
        if p > alpha / (len(tested) - j):
            break
        out[i] = True
    return out


def t_estimate(treatment, control=None, alpha: float = ALPHA) -> Estimate:
    """`t_interval` with its standard error and degrees of freedom (`Estimate`)."""
    t = np.asarray(treatment, float)
    c = None if control is None else np.asarray(control, float)
    if len(t) < 1 or (c is not None and len(c) < 1):
        raise ValueError("t_interval: an arm without values")

    def one_sample(x: np.ndarray, shift: float, sign: float) -> Estimate:
        m = sign * (float(x.mean()) - shift)
        if len(x) < 2:
            return Estimate(snap(m), snap(m), snap(m), 0.0, math.inf)
        se = float(x.std(ddof=1)) / math.sqrt(len(x))
        half = float(st.t.ppf(1 - alpha / 2, len(x) - 1)) * se
        return Estimate(snap(m), snap(m - half), snap(m + half), snap(se), float(len(x) - 1))

    if c is None:
        return one_sample(t, 0.0, 1.0)
    if len(c) == 1:
        return one_sample(t, float(c[0]), 1.0)
    if len(t) == 1:
        return one_sample(c, float(t[0]), -1.0)
    vt, vc = float(t.var(ddof=1)) / len(t), float(c.var(ddof=1)) / len(c)
    d = float(t.mean() - c.mean())
    se2 = vt + vc
    if se2 == 0:
        return Estimate(snap(d), snap(d), snap(d), 0.0, math.inf)
    df = se2 ** 2 / (vt ** 2 / (len(t) - 1) + vc ** 2 / (len(c) - 1))
    half = float(st.t.ppf(1 - alpha / 2, df)) * math.sqrt(se2)
    return Estimate(snap(d), snap(d - half), snap(d + half), snap(math.sqrt(se2)), snap(df))


def t_interval(treatment, control=None, alpha: float = ALPHA) -> tuple[float, float, float]:
    """(difference, low, high): mean(treatment) − mean(control) and its Welch t-interval
    (1 − alpha); with `control` None, the one-sample t-interval of mean(treatment) around 0.

    An arm of one value (a base evaluated once) has no spread of its own: the interval is then the
    other arm's one-sample interval shifted by that value. Zero spread in both arms gives a
    zero-width interval.

    >>> d, lo, hi = t_interval([0.30, 0.32, 0.34], [0.10, 0.12, 0.14])
    >>> round(d, 3), round(lo, 3), round(hi, 3)
    (0.2, 0.155, 0.245)
    >>> [round(x, 3) for x in t_interval([0.1, 0.3, 0.2])]
    [0.2, -0.048, 0.448]
    """
    e = t_estimate(treatment, control, alpha)
    return e.difference, e.low, e.high


def permutation_p(treatment, control=None, alternative: str = "two-sided", seed: int = SEED) -> float:
    """The permutation test's p-value for mean(treatment) − mean(control) (or mean(treatment)
    against 0 by sign flips when `control` is None): exact over every relabelling up to
    EXACT_LIMIT of them, else a seeded Monte Carlo of EXACT_LIMIT. `alternative`: `greater`,
    `less` or `two-sided`.

    >>> permutation_p([3.0, 4.0, 5.0], [0.0, 1.0, 2.0], "greater")  # 1 of the 20 relabellings
    0.05
    >>> permutation_p([1.0, 2.0, 3.0], None, "greater")  # 1 of the 8 sign flips
    0.125
    """
    t = np.asarray(treatment, float)
    if control is None:
        n = len(t)
        if 2 ** n <= EXACT_LIMIT:
            signs = np.array(list(product((1.0, -1.0), repeat=n)))
        else:
            signs = np.random.default_rng(seed).choice((1.0, -1.0), size=(EXACT_LIMIT, n))
        stats_ = np.round(signs @ t / n, 12)
        observed = round(float(t.mean()), 12)
    else:
        c = np.asarray(control, float)
        pooled = np.concatenate([t, c])
        n, total = len(t), len(t) + len(c)
        if math.comb(total, n) <= EXACT_LIMIT:
            groups = np.array(list(combinations(range(total), n)))
        else:
            rng = np.random.default_rng(seed)
            groups = np.array([rng.permutation(total)[:n] for _ in range(EXACT_LIMIT)])
        mask = np.zeros((len(groups), total), bool)
        mask[np.arange(len(groups))[:, None], groups] = True
        sums = mask @ pooled
        stats_ = np.round(sums / n - (pooled.sum() - sums) / len(c), 12)
        observed = round(float(t.mean() - c.mean()), 12)
    if alternative == "greater":
        p = np.mean(stats_ >= observed)
    elif alternative == "less":
        p = np.mean(stats_ <= observed)
    else:
        p = np.mean(np.abs(stats_) >= abs(observed))
    return snap(p)


Z = float(st.norm.ppf(1 - ALPHA / 2) + st.norm.ppf(POWER))  # 1.96 + 0.84 = 2.80


def welch_df(arm_vars: list[float], n: int) -> float:
    """The Welch-Satterthwaite degrees of freedom of `n` runs per arm whose between-seed
    variances are `arm_vars` (the arms with no spread add nothing; none with spread: infinite).

    >>> welch_df([0.1], 3), welch_df([0.1, 0.1], 5), welch_df([0.1, 0.0], 5), welch_df([0.0], 4)
    (2.0, 8.0, 4.0, inf)
    """
    spread = [v for v in arm_vars if v > 0]
    return (n - 1) * sum(spread) ** 2 / sum(v * v for v in spread) if spread else math.inf


def t_quantiles(arm_vars: list[float], n: int) -> float:
    """t_{1-alpha/2} + t_{power} at the Welch-Satterthwaite degrees of freedom of `n` runs per arm
    whose between-seed variances are `arm_vars` (the arms with spread: one for a one-sample
    interval or a control evaluated once, two for Welch's): the per-run counterpart of `Z`.

    >>> round(t_quantiles([0.1], 3), 2), round(t_quantiles([0.1, 0.1], 5), 2), round(Z, 2)
    (5.36, 3.19, 2.8)
    """
    df = welch_df(arm_vars, n)
    return float(st.t.ppf(1 - ALPHA / 2, df) + st.t.ppf(POWER, df))


def _power_quantile(sides: int) -> float:
    """The power quantile: POWER for a one-sided decision; for `within`'s two (the interval must
    clear both edges at once), each side's 1 − (1 − POWER) / 2, so both clear with POWER."""
    return POWER if sides == 1 else 1 - (1 - POWER) / 2


def _enough(arm_vars, item_var, items: int, n: int, gap, sides: int):
    """Whether n seeds per arm decide `gap` with the rule's power: q · SE ≤ gap, q the t
    quantiles at the degrees of freedom `se_df` gives the verdict's test (elementwise)."""
    se2, df = se_df([(v, n) for v in arm_vars], item_var, items)
    q = _t_ppf(1 - ALPHA / 2, df) + _t_ppf(_power_quantile(sides), df)
    return q * np.sqrt(se2) <= np.asarray(gap) + 1e-12


def planned_n(arm_vars, item_var, items: int, gap, cap: int, minimum: int = 3, sides: int = 1):
    """The power rule's seeds per arm, elementwise over arrays of pilots (a simulation's
    replicates; `seeds_needed` calls it for one): the smallest n from `minimum` to `cap` whose
    interval decides the declared `gap` with 80% power, 0 where none up to the cap does.

    >>> int(planned_n([0.1136], 0.0, 0, 0.5506, 10))
    6
    >>> planned_n([np.array([0.01, 0.5])], np.zeros(2), 0, np.array([0.3, 0.3]), 10).tolist()
    [4, 0]
    """
    n = np.zeros(np.broadcast(*[np.asarray(v) for v in arm_vars], np.asarray(item_var),
                              np.asarray(gap)).shape, int)
    for k in range(cap, minimum - 1, -1):  # downwards: the smallest that is enough wins
        n = np.where(_enough(arm_vars, item_var, items, k, gap, sides), k, n)
    return n


def seeds_needed(gap: float, seed_var: float, item_var: float = 0.0, items: int = 0,
                 cap: int = 10, minimum: int = 3, arm_vars: list[float] | None = None,
                 sides: int = 1) -> tuple[int | None, int | None]:
    """(seeds per arm, test items) a decision needs under the power rule, or None where no number
    of them up to the cap can give one.

    `gap` is the DECLARED effect the decision must resolve (the claim's min_effect, or its margin
    for `within` and `no_gain`), never the pilot's difference; the variances are the pilot's. The
    standard error of the difference with n seeds per arm and m items is
    SE² = seed_var / n + item_var / m (seed_var: the sum of the arms' variances of their per-seed
    means; item_var: the per-item variance of the paired difference beyond them, `variance_parts`;
    0 for a per-run measure), and a decision at 95% with 80% power needs q · SE ≤ gap. Seeds
    first, at the current items; if even `cap` seeds cannot do it, the items needed at `cap`
    seeds (None if no number can). `sides` 2: a `within` decision, both edges at once.

    Without `arm_vars`, q is the normal approximation's Z = 1.96 + 0.84:

    >>> seeds_needed(0.1, seed_var=0.01)          # SE² = 0.01 / n ≤ (0.1 / 2.8)²: n ≥ 7.84
    (8, None)
    >>> seeds_needed(0.1, seed_var=0.01, cap=5)   # over the cap, and items cannot help
    (None, None)
    >>> seeds_needed(0.05, seed_var=0.001, item_var=0.2, items=200, cap=10)
    (10, 916)

    With `arm_vars` (each seeded arm's variance of its per-seed means; what the verdict's t-test
    reads), q is the t quantiles at the Welch-Satterthwaite degrees of freedom of n seeds per arm
    and the items (`se_df`): the smallest n up to the cap whose q · SE ≤ gap. The claims always
    plan this way, per item and per run:

    >>> seeds_needed(0.5506, seed_var=0.1136), seeds_needed(0.5506, 0.1136, arm_vars=[0.1136])
    ((3, None), (6, None))
    >>> seeds_needed(0.05, 0.001, item_var=0.02, items=200, arm_vars=[0.0005, 0.0005])  # normal: 5
    (6, None)
    >>> seeds_needed(0.05, 0.001, item_var=0.2, items=200, arm_vars=[0.0005, 0.0005])   # normal: 916
    (10, 955)
    """
    if gap <= 0:
        return None, None
    power_q = _power_quantile(sides)
    if arm_vars is None:
        budget = (gap / float(st.norm.ppf(1 - ALPHA / 2) + st.norm.ppf(power_q))) ** 2
        item_part = item_var / items if items else 0.0
        if seed_var <= 0 and item_part <= budget:
            return minimum, None
        if budget > item_part:
            n = max(minimum, math.ceil(seed_var / (budget - item_part) - 1e-9))
            if n <= cap:
                return n, None
        left = budget - seed_var / cap
        if item_var <= 0 or left <= 0:
            return None, None
        return cap, math.ceil(item_var / left - 1e-9)

    def enough(n: int, m: int) -> bool:
        return bool(_enough(arm_vars, item_var, m, n, gap, sides))

    n = int(planned_n(arm_vars, item_var, items, gap, cap, minimum, sides))
    if n:
        return n, None
    if item_var <= 0 or not items or not enough(cap, 10 ** 9):
        return None, None
    low, high = items, 10 ** 9          # enough(cap, high), not enough(cap, low)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(cap, mid) else (mid, high)
    return cap, high


def power_at(gap: float, seed_var: float, n: int, item_var: float = 0.0, items: int = 0,
             arm_vars: list[float] | None = None, sides: int = 1) -> float:
    """The power rule read the other way: the chance that `n` seeds per arm (and `items` items)
    give an interval clearing the bound `gap` away when the truth is the declared effect
    (`seeds_needed`'s normal approximation; with `arm_vars`, the t distribution at the
    Welch-Satterthwaite degrees of freedom, `se_df`). `sides` 2 (`within`): both edges cleared
    at once. What a plan stopped by its cap can still expect.

    >>> round(power_at(0.1, seed_var=0.01, n=8), 2)             # seeds_needed's 8: 80% or more
    0.81
    >>> round(power_at(0.0033, 0.00224, 10, item_var=0.010075, items=200), 2)  # a hopeless cap
    0.04
    >>> round(power_at(0.1139, 0.014076, 10, arm_vars=[0.014076]), 2)  # per run, 9 d.f.
    0.77
    """
    if gap <= 0:
        return 0.0
    se = math.sqrt(seed_var / n + (item_var / items if items else 0.0))
    if se == 0:
        return 1.0
    if arm_vars is None:
        one = float(st.norm.cdf(gap / se - st.norm.ppf(1 - ALPHA / 2)))
    else:
        _, df = se_df([(v, n) for v in arm_vars], item_var, items)
        df = float(df)
        dist = st.norm if math.isinf(df) else st.t(df)
        one = float(dist.cdf(gap / se - dist.ppf(1 - ALPHA / 2)))
    return one if sides == 1 else max(0.0, 2 * one - 1)
