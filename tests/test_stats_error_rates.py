"""The per-item verdict test's one-sided false-positive rate at the seeds the claims use
(evals/stats.py `seed_item_t`; issue 68, "What to build" 1).

Each design simulates per-item scores with the variance structure of the committed records and a
true difference of 0, runs the test's own arithmetic (`evals.stats.seed_item_interval`, which
`seed_item_t` is) on every replicate, and counts the intervals that clear 0: above it (a false
"greater") or below it (a false "less"). Each is a one-sided error at a nominal ALPHA / 2 = 2.5%;
the rule holds when the rate stays within NOMINAL + TOLERANCE = 3.0%.

**The model.** A score is the arm's item effect (the items' spread of the treatment effect:
shared by an arm's seeds) + the seed's effect (shared by a run's items) + per-item noise
(Gaussian; the committed records are per-item pass@1 over a few samples, and their per-item
noise has the variance of the residual of a two-way table). The issue's ratios: the between-seed
part of the difference's variance 1x and 40x its item part (the item part as an item bootstrap
sees it: the variance over items of the paired difference, over the items); and one structure
estimated from a real comparison, rlme against rlvr (data/eval/, skipped where absent). A base
is a fixed model: evaluated once or with as many sampling draws as the arm, it has per-item
noise and no seed effect (tests/test_stats_base_draw.py checks that on the records).

**Monte-Carlo error.** The two tails are disjoint, so their pooled count over R replicates is
Binomial(R, 2p) and the pooled rate p has standard error sqrt(p (1 - 2p) / (2R)). The assertion
is the rate's 99% upper bound (2.326 standard errors, at least at the nominal rate) within
3.0%. For a design whose true rate is 2.5% to pass with 95% probability, (2.326 + 1.645) standard
errors must fit in the 0.5 points: R >= 7,491 (`replicates_needed`); a design nearer the edge
needs more (3 seeds against a base evaluated 3 times, 40x, runs at about 2.67%: 18,299), so the
designs of up to 6 seeds in all, cheap, get REPLICATES = 20,000 and the larger ones 10,000. Fixed
seeds: the same numbers on every run; `pytest -s` prints them.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from core.params import ROOT
from evals import stats
from evals.items import item_scores

NOMINAL = stats.ALPHA / 2
TOLERANCE = 0.005
REPLICATES = 20_000        # per design of up to 6 seeds in all; 10,000 above (each costs more)
ITEMS = 200                 # the records' test items per benchmark
NOISE = 0.05                # per-item noise variance: pass@1 over 4 samples at p(1 - p) about 0.2
ARM_ITEMS = 0.02            # variance of an arm's item effect (rlme against rlvr: about 0.02)
Z99, Z95 = 2.326, 1.645


def replicates_needed(rate: float = NOMINAL, limit: float = NOMINAL + TOLERANCE) -> int:
    """Replicates for a design whose true rate is `rate` to show rate <= `limit` (the 99% bound)
    with 95% probability: (Z99 + Z95) pooled standard errors within limit - rate.

    >>> replicates_needed(), replicates_needed(0.0267)   # at the nominal rate; at 2.67%
    (7491, 18299)
    """
    return math.ceil((Z99 + Z95) ** 2 * rate * (1 - 2 * rate) / (2 * (limit - rate) ** 2))


def upper_bound(rate: float, replicates: int) -> float:
    """The pooled one-sided rate's 99% upper bound (its standard error at least the nominal's)."""
    p = max(rate, NOMINAL)
    return rate + Z99 * math.sqrt(p * (1 - 2 * p) / (2 * replicates))


def arm(rng, reps: int, seeds: int, seed_var: float, item_var: float, noise: float = NOISE) -> np.ndarray:
    """(reps, seeds, ITEMS) scores of one arm: its item effect, seed effects and per-item noise."""
    return (rng.normal(0, math.sqrt(item_var), (reps, 1, ITEMS))
            + rng.normal(0, math.sqrt(seed_var), (reps, seeds, 1))
            + rng.normal(0, math.sqrt(noise), (reps, seeds, ITEMS)))


def seed_var_for(ratio: float, n_t: int, n_c: int, base: bool) -> float:
    """The seed-effect variance whose between-seed part is `ratio` x the item part (the per-seed
    means hold NOISE / ITEMS of it already; a base has no seed effect)."""
    item_part = (ARM_ITEMS * (1 if base else 2) + NOISE / n_t + NOISE / n_c) / ITEMS
    per_arm = ratio * item_part / (1 / n_t + (0 if base else 1 / n_c))
    return max(0.0, per_arm - NOISE / ITEMS)


def false_positives(n_t: int, n_c: int, *, base: bool = False, ratio: float = 1.0,
                    arms_: tuple[tuple[float, float, float], tuple[float, float, float]] | None = None,
                    replicates: int | None = None, seed: int = 0,
                    confidence: float | None = stats.DF_CONFIDENCE, chunk: int = 2_000) -> tuple[float, float, int]:
    """(pooled one-sided rate, its 99% upper bound, replicates) at a true difference of 0. `base`: the control
    is a fixed model (per-item noise only), evaluated `n_c` times. `arms_`: each arm's (seed
    variance, item variance, noise) where a structure is estimated from records, else `ratio`."""
    rng = np.random.default_rng(seed)
    replicates = replicates or (REPLICATES if n_t + n_c <= 6 else 10_000)
    if arms_ is None:
        sv = seed_var_for(ratio, n_t, n_c, base)
        arms_ = ((sv, ARM_ITEMS, NOISE), (0.0, 0.0, NOISE) if base else (sv, ARM_ITEMS, NOISE))
    hits = 0
    for start in range(0, replicates, chunk):
        reps = min(chunk, replicates - start)
        t = arm(rng, reps, n_t, *arms_[0])
        c = arm(rng, reps, n_c, *arms_[1])
        _, low, high, _, _ = stats.seed_item_interval(t, c, confidence=confidence)
        hits += int((low > 0).sum() + (high < 0).sum())
    rate = hits / (2 * replicates)
    return rate, upper_bound(rate, replicates), replicates


DESIGNS = [  # (name, treatment seeds, control seeds or draws, the control a base)
    ("3 vs 3 seeds", 3, 3, False),
    ("5 vs 5 seeds", 5, 5, False),
    ("10 vs 10 seeds", 10, 10, False),
    ("3 seeds vs a base evaluated once", 3, 1, True),
    ("3 seeds vs a base evaluated 3 times", 3, 3, True),
    ("10 seeds vs a base evaluated once", 10, 1, True),
]


@pytest.mark.parametrize("ratio", [1.0, 40.0])
@pytest.mark.parametrize("name, n_t, n_c, base", DESIGNS)
def test_the_one_sided_rate_holds_at_the_issues_variance_ratios(name, n_t, n_c, base, ratio) -> None:
    rate, bound, reps = false_positives(n_t, n_c, base=base, ratio=ratio)
    print(f"\n{name}, between-seed part {ratio:g}x the item part: one-sided rate {rate:.2%} "
          f"(99% bound {bound:.2%}; {reps:,} replicates)")
    assert bound <= NOMINAL + TOLERANCE, (name, ratio, rate)


def records_structure() -> tuple[tuple[float, float, float], tuple[float, float, float]] | None:
    """rlme's and rlvr's (seed variance, item variance, noise) from their committed per-item
    arith pass@1 (every seed of each), or None where data/eval/ lacks them. The noise is an arm's
    residual mean square; its seed variance what its per-seed means vary beyond that noise; the
    item effects are identified only as the paired difference's (`variance_parts`), split evenly."""
    arrays = []
    for name in ("rlme", "rlvr"):
        rows = [item_scores(json.loads(f.read_text()), "arith/pass@1", str(f))
                for f in sorted((ROOT / "data" / "eval" / name).glob("seed*/items.json"))]
        if len(rows) < 3 or not all(rows):
            return None
        arrays.append(rows)
    ids = sorted(set.intersection(*(set(r) for rows in arrays for r in rows)))
    a, b = (np.array([[r[i] for i in ids] for r in rows]) for rows in arrays)
    item_var = float(stats.variance_parts(a, b).item_var)
    out = []
    for x in (a, b):
        noise = float(stats.residual_ms(x))
        out.append((max(0.0, float(x.mean(axis=1).var(ddof=1)) - noise / x.shape[1]), item_var / 2, noise))
    return out[0], out[1]


@pytest.mark.parametrize("n", [3, 5, 10])
def test_the_one_sided_rate_holds_with_rlme_against_rlvrs_own_variances(n) -> None:
    """Unequal arms, as the records have them: rlme's seeds spread about ten times rlvr's."""
    structure = records_structure()
    if structure is None:
        pytest.skip("data/eval/ has no per-item records of rlme and rlvr")
    rate, bound, reps = false_positives(n, n, arms_=structure, seed=n)
    (sv_t, _, _), (sv_c, _, _) = structure
    print(f"\n{n} vs {n} seeds, rlme against rlvr's variances (seed sd {math.sqrt(sv_t):.3f} and "
          f"{math.sqrt(sv_c):.3f}): one-sided rate {rate:.2%} (99% bound {bound:.2%}; {reps:,} replicates)")
    assert bound <= NOMINAL + TOLERANCE, (n, rate)


def test_counting_the_seed_part_at_its_bound_is_what_keeps_a_base_once_within_the_rate() -> None:
    """Why `se_df` counts each seed part at its upper DF_CONFIDENCE bound: with the parts as
    estimated (a plain Welch-Satterthwaite over seeds and items), 3 seeds against a base
    evaluated once, seed-dominated, is liberal beyond the tolerance; the rule is not."""
    plain, _, reps = false_positives(3, 1, base=True, ratio=40.0, confidence=None, seed=7)
    rule, rule_bound, _ = false_positives(3, 1, base=True, ratio=40.0, seed=7)
    print(f"\n3 seeds vs a base evaluated once, 40x: plain Satterthwaite {plain:.2%}, "
          f"seed parts at their {stats.DF_CONFIDENCE:.0%} bound {rule:.2%} ({reps:,} replicates)")
    assert plain - Z99 * math.sqrt(plain * (1 - 2 * plain) / (2 * reps)) > NOMINAL + TOLERANCE
    assert rule_bound <= NOMINAL + TOLERANCE


def test_the_simulated_arithmetic_is_the_verdicts() -> None:
    """The vectorised interval on one replicate is `seed_item_t`'s, which `evals.claims.compare`
    decides by: the rates above are the verdict test's."""
    rng = np.random.default_rng(1)
    t, c = arm(rng, 2, 3, 0.002, ARM_ITEMS), arm(rng, 2, 1, 0.0, 0.0)
    d, low, high, se, df = stats.seed_item_interval(t, c)
    e = stats.seed_item_t(t[1], c[1])
    assert (e.difference, e.low, e.high, e.se) == pytest.approx((d[1], low[1], high[1], se[1]), abs=1e-8)
    assert e.df == pytest.approx(float(df[1]), abs=1e-6)


def bootstrap_limit(n: int) -> float:
    """The percentile bootstrap's one-sided rate at n seeds per arm where the seed level
    dominates: resampling n seeds shrinks their variance by (n - 1) / n, and the percentiles
    read it with normal quantiles, where the truth is t at Welch's 2(n - 1) degrees of freedom."""
    z = float(stats.st.norm.ppf(1 - NOMINAL)) * math.sqrt((n - 1) / n)
    return float(stats.st.t.sf(z, 2 * (n - 1)))


def test_the_bootstrap_is_kept_only_where_its_seed_level_holds() -> None:
    """Why the claims decide by `seed_item_t` and keep `paired_bootstrap` for
    BOOTSTRAP_MIN_SEEDS seeds per arm and more. The bootstrap's seed-dominated limit matches the
    issue's simulated rates at 3 and 5 seeds (10.0%, 5.6%; and the bootstrap itself, simulated
    by the slow test below); it falls within the tolerance only from BOOTSTRAP_MIN_SEEDS on."""
    limits = {n: bootstrap_limit(n) for n in (3, 5, 10, stats.BOOTSTRAP_MIN_SEEDS)}
    print("\npercentile bootstrap, seed-dominated limit: "
          + ", ".join(f"{n} vs {n} seeds {r:.2%}" for n, r in limits.items()))
    assert abs(limits[3] - 0.100) < 0.01 and abs(limits[5] - 0.056) < 0.01
    assert limits[10] > NOMINAL + TOLERANCE >= limits[stats.BOOTSTRAP_MIN_SEEDS]
    assert bootstrap_limit(stats.BOOTSTRAP_MIN_SEEDS - 10) > limits[stats.BOOTSTRAP_MIN_SEEDS]


@pytest.mark.slow
def test_the_bootstrap_itself_is_liberal_at_3_seeds() -> None:
    """The bootstrap itself at 3 against 3, seed-dominated (300 replicates of 1,000 resamples,
    about 20 s: enough to see a rate near the limit's 9% apart from 2.5%, not to measure it)."""
    rng = np.random.default_rng(11)
    sv, reps, hits = seed_var_for(40.0, 3, 3, False), 300, 0
    for _ in range(reps):
        t, c = arm(rng, 1, 3, sv, ARM_ITEMS)[0], arm(rng, 1, 3, sv, ARM_ITEMS)[0]
        _, low, high = stats.paired_bootstrap(t, c, resamples=1_000, seed=int(rng.integers(1 << 30)))
        hits += (low > 0) + (high < 0)
    rate = hits / (2 * reps)
    print(f"percentile bootstrap simulated, 3 vs 3 seeds, 40x: {rate:.1%} ({reps} replicates)")
    assert rate > NOMINAL + TOLERANCE + 0.02
