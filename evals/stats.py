"""The statistics behind the claims' verdicts (evals/claims.py): intervals, exact tests, power.

Two kinds of evidence, two tests:

- **per item** (a test-set metric scored item by item in every run, `evals/items.py`): the
  `paired_bootstrap` over the seeds of each arm and the test items, the same resampled items for
  both arms (thousands of values per arm, so the percentile interval is sound);
- **per run** (one number per run: a training-curve measure, a metric with no per-item scores):
  a handful of values per arm, where a percentile bootstrap over 3 seeds is not an interval (it
  can never be wider than the 3 values allow). These use `t_interval` (Welch's two-sample
  t-interval, or the one-sample t-interval against 0 when there is no control) for the decision
  and report `permutation_p` (the exact permutation test: every relabelling of the pooled values,
  or every sign flip for one sample) beside it. With 3 runs against 3 the exact test cannot go
  below p = 0.05 one-sided (1 of the 20 relabellings), which is why per-run claims need more seeds
  (`evals.claims.MIN_SEEDS_PER_RUN`).

`seeds_needed` is the power rule that plans how many seeds (and items) a claim needs from the
pilot seeds' spread, the pilot's observed difference taken as true: a normal approximation for
the per-item bootstrap, and for a per-run measure the t quantiles of the Welch interval the
verdict uses at that many seeds (with 3 to 6 runs per arm the normal approximation plans far too
few: at 3 seeds against 0 the interval's half-width is 4.30 standard errors, not 1.96).

Every number these functions return is snapped to `SNAP` decimals (`snap`), so that the float
noise of one machine's summation order (BLAS, SIMD) cannot move a printed rounding: an interval
end that is exactly +0.0125 prints the same on every machine.
"""

from __future__ import annotations

import math
from itertools import combinations, product

import numpy as np
from scipy import stats as st

RESAMPLES = 10_000
SEED = 0
ALPHA = 0.05      # two-sided: 95% intervals
POWER = 0.80      # the power rule's target
SNAP = 9          # decimals every returned statistic is rounded to (float noise is ~1e-16)
EXACT_LIMIT = 200_000  # relabellings enumerated exactly; above, a seeded Monte Carlo of this many


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
    t = np.asarray(treatment, float)
    c = None if control is None else np.asarray(control, float)
    if len(t) < 1 or (c is not None and len(c) < 1):
        raise ValueError("t_interval: an arm without values")

    def one_sample(x: np.ndarray) -> tuple[float, float, float]:
        m = float(x.mean())
        if len(x) < 2:
            return m, m, m
        half = float(st.t.ppf(1 - alpha / 2, len(x) - 1)) * float(x.std(ddof=1)) / math.sqrt(len(x))
        return m, m - half, m + half

    if c is None:
        return tuple(snap(v) for v in one_sample(t))  # type: ignore[return-value]
    if len(c) == 1:
        m, lo, hi = one_sample(t)
        return snap(m - c[0]), snap(lo - c[0]), snap(hi - c[0])
    if len(t) == 1:
        m, lo, hi = one_sample(c)
        return snap(t[0] - m), snap(t[0] - hi), snap(t[0] - lo)
    vt, vc = float(t.var(ddof=1)) / len(t), float(c.var(ddof=1)) / len(c)
    d = float(t.mean() - c.mean())
    se2 = vt + vc
    if se2 == 0:
        return snap(d), snap(d), snap(d)
    df = se2 ** 2 / (vt ** 2 / (len(t) - 1) + vc ** 2 / (len(c) - 1))
    half = float(st.t.ppf(1 - alpha / 2, df)) * math.sqrt(se2)
    return snap(d), snap(d - half), snap(d + half)


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


def seeds_needed(gap: float, seed_var: float, item_var: float = 0.0, items: int = 0,
                 cap: int = 10, minimum: int = 3,
                 arm_vars: list[float] | None = None) -> tuple[int | None, int | None]:
    """(seeds per arm, test items) a decision needs under the power rule, or None where no number
    of them up to the cap can give one.

    The rule (a normal approximation, the pilot's observed difference taken as true): the
    standard error of the difference with n seeds per arm and m items is
    SE² = seed_var / n + item_var / m (seed_var: the sum of the arms' between-seed variances;
    item_var: the variance over items of the paired per-item difference; 0 for a per-run
    measure), and a decision at 95% with 80% power needs Z · SE ≤ gap, Z = 1.96 + 0.84, where gap
    is the distance from the difference to the bound the verdict needs the interval to clear.
    Seeds first, at the current items; if even `cap` seeds cannot do it, the items needed at
    `cap` seeds (None if no number can).

    >>> seeds_needed(0.1, seed_var=0.01)          # SE² = 0.01 / n ≤ (0.1 / 2.8)²: n ≥ 7.84
    (8, None)
    >>> seeds_needed(0.1, seed_var=0.01, cap=5)   # over the cap, and items cannot help
    (None, None)
    >>> seeds_needed(0.05, seed_var=0.001, item_var=0.2, items=200, cap=10)
    (10, 916)

    A per-run measure (`arm_vars`: each arm's between-seed variance; the verdict is a t-interval)
    replaces Z by `t_quantiles` at n seeds, the smallest n up to the cap whose
    t · sqrt(seed_var / n) ≤ gap (items play no part):

    >>> seeds_needed(0.5506, seed_var=0.1136), seeds_needed(0.5506, 0.1136, arm_vars=[0.1136])
    ((3, None), (6, None))
    """
    if gap <= 0:
        return None, None
    if arm_vars is not None:
        if seed_var <= 0:
            return minimum, None
        for n in range(minimum, cap + 1):
            if t_quantiles(arm_vars, n) * math.sqrt(seed_var / n) <= gap:
                return n, None
        return None, None
    budget = (gap / Z) ** 2
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


def power_at(gap: float, seed_var: float, n: int, item_var: float = 0.0, items: int = 0,
             arm_vars: list[float] | None = None) -> float:
    """The power rule read the other way: the chance, the pilot's difference taken as true, that
    `n` seeds per arm (and `items` items) give an interval clearing the bound `gap` away
    (`seeds_needed`'s normal approximation; with `arm_vars`, a per-run measure, the t
    distribution at the Welch-Satterthwaite degrees of freedom). What a plan stopped by its cap
    can still expect.

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
        return float(st.norm.cdf(gap / se - st.norm.ppf(1 - ALPHA / 2)))
    df = welch_df(arm_vars, n)
    return float(st.t.cdf(gap / se - st.t.ppf(1 - ALPHA / 2, df), df))
