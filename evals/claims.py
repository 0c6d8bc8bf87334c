"""The papers' claims as declarations, and each claim's verdict from the study's runs.

A `Claim` names the paper and figure, the statement, the arms it compares (method or variant
names, one (treatment, control) pair per comparison), the metric, the kind of comparison and the
expected size. `CLAIMS` are the eight the lab tests, declared in evals/claims.yaml; the report
stage (flows/report.py) computes their verdicts with `verdicts` and opens its science section
with the table (reports/claims.json holds the same numbers).

The verdict rule, per comparison:

- the **difference** is treatment − control of the metric's mean over seeds (and test items);
- a **paired bootstrap** (`paired_bootstrap`: `RESAMPLES` = 10,000 resamples, numpy seed `SEED`)
  resamples the seeds within each arm, and the test items, the same resampled items for both
  arms (paired by row id, over the items every run of both arms scored: `evals/items.py`). A
  metric with no per-item scores (a per-run scalar from a training curve, or a run evaluated
  before items.json existed) is resampled over seeds only, and its row says so. The **95%
  interval** is the 2.5 and 97.5 percentiles of the resampled differences;
- `greater` (treatment beats control by at least `min_effect`): *reproduced* if the interval's
  lower bound is above 0 and the difference is at least `min_effect`; *not reproduced* if the
  upper bound is below `min_effect`; else *inconclusive*. `less` is its mirror (treatment below
  control by at least `min_effect`);
- `within` (|treatment − control| ≤ `margin`): *reproduced* if the interval lies inside
  [−margin, margin]; *not reproduced* if it lies entirely outside; else *inconclusive*;
- an arm with fewer than `MIN_SEEDS` = 3 seeds (runs found on disk with the metric) is
  *inconclusive*, "arm X: n seeds of 3": never a verdict from fewer seeds.

A claim with several comparisons is reproduced when each is, not reproduced when any is not, else
inconclusive. A claim whose evidence cannot come from runs yet (`blocked`) is inconclusive with
that reason. The expected sizes (`min_effect`, `margin`) are ours: the papers' effects are on
other benchmarks and models, and each is set below its paper's effect at the tiny world's scale.

An arm is a run name: a method or variant of the default study (params `methods`), or
`<preset>/<arm>` for an arm of a preset's own study (params `presets.<preset>.methods`, on that
preset's base: `python -m flows.pipeline --study <preset>` records it in studies/<preset>/).

To add a claim: append an entry to evals/claims.yaml (its arms must be arms of a study;
tests/test_claims.py checks), and run its arms with 3 seeds through the study.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal, Protocol

import numpy as np
import yaml

from core.io import DataError
from core.paths import run_key
from evals.items import item_scores

RESAMPLES = 10_000
SEED = 0
MIN_SEEDS = 3
REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not reproduced", "inconclusive"

# How one run gives the claim's number: its final test evaluation (per item where items.json has
# the metric), or a per-run scalar from its curves (seeds only).
# (`run_value` says how each is computed.)
MEASURES = {
    "test": "test set",
    "heldout_drop": "held-out drop, best − final",
    "train_change": "change over training, last − first quarter",
}

RULE = ("Paired bootstrap (10,000 resamples, fixed seed) of treatment − control over the seeds "
        "of each arm and the test items both arms scored (paired by id; seeds only where the "
        "metric has no per-item scores), 95% percentile interval: `greater` is reproduced when "
        "the interval's lower bound is above 0 and the difference reaches the expected effect, "
        "not reproduced when the upper bound is below it (`less` mirrored); `within` is "
        "reproduced when the interval lies inside ±margin, not reproduced when it lies wholly "
        "outside; anything else, and any arm with fewer than 3 seeds, is inconclusive.")


@dataclass(frozen=True)
class Claim:
    """One paper's claim, as the lab tests it."""

    id: str
    paper: str                                   # the lab's paper number, e.g. "000"
    figure: str                                  # e.g. "Fig. 2", "Table 3"
    statement: str                               # one line
    comparisons: tuple[tuple[str, str], ...]     # (treatment, control) arms
    metric: str                                  # `<benchmark>/<metric>` or a curve's column
    kind: Literal["greater", "less", "within"]
    min_effect: float = 0.0                      # greater / less: the expected size
    margin: float = 0.0                          # within: the tolerance
    measure: str = "test"                        # a key of MEASURES
    blocked: str = ""                            # why no run can decide it yet (verdict: inconclusive)

    def __post_init__(self) -> None:
        if not self.comparisons or any(len(c) != 2 for c in self.comparisons):
            raise ValueError(f"claim {self.id}: comparisons must be (treatment, control) pairs")
        if self.kind not in ("greater", "less", "within"):
            raise ValueError(f"claim {self.id}: kind {self.kind!r} is not greater, less or within")
        if self.kind == "within" and self.margin <= 0:
            raise ValueError(f"claim {self.id}: a `within` claim needs a margin > 0")
        if self.measure not in MEASURES:
            raise ValueError(f"claim {self.id}: measure {self.measure!r} is not one of {list(MEASURES)}")

    @property
    def arms(self) -> list[str]:
        """Every arm the claim needs, in order of first mention."""
        return list(dict.fromkeys(a for pair in self.comparisons for a in pair))

    def expected(self) -> str:
        """The expected outcome in words, e.g. `≥ +0.05` or `within ±0.10`."""
        if self.kind == "within":
            return f"within ±{self.margin:.2f}"
        return f"≥ +{self.min_effect:.2f}" if self.kind == "greater" else f"≤ −{self.min_effect:.2f}"


DECLARATIONS = Path(__file__).with_name("claims.yaml")


def load_claims(path: Path = DECLARATIONS) -> tuple[Claim, ...]:
    """The claims declared in `path` (evals/claims.yaml); a malformed entry fails with one line
    naming it."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise DataError(f"{path}: cannot read the claims: {e}") from e
    if not isinstance(raw, list):
        raise DataError(f"{path}: expected a list of claims")
    claims = []
    for i, entry in enumerate(raw):
        try:
            fields = dict(entry)
            fields["comparisons"] = tuple(tuple(pair) for pair in fields["comparisons"])
            claims.append(Claim(**fields))
        except (TypeError, KeyError, ValueError) as e:
            name = entry.get("id", f"#{i}") if isinstance(entry, dict) else f"#{i}"
            raise DataError(f"{path}: claim {name}: {e}") from e
    if len({c.id for c in claims}) != len(claims):
        raise DataError(f"{path}: two claims share an id")
    return tuple(claims)


CLAIMS = load_claims()


class RunFiles(Protocol):
    """What one run left on disk (flows.report_collect.RunData): parsed JSON, None if absent."""

    metrics: dict | None
    train: list[dict]
    heldout: list[dict]
    items: dict | None


Runs = Mapping[str, Mapping[int | None, RunFiles]]


@dataclass(frozen=True)
class Comparison:
    """One (treatment, control) comparison of a claim and its verdict."""

    treatment: str
    control: str
    seeds: dict[str, int]              # arm -> seeds found with the metric
    difference: float | None           # treatment − control
    low: float | None                  # 95% interval
    high: float | None
    basis: str                         # what was resampled
    verdict: str
    reason: str


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    comparisons: tuple[Comparison, ...]
    verdict: str
    reason: str

    def as_json(self) -> dict:
        c = self.claim
        return {"id": c.id, "paper": c.paper, "figure": c.figure, "statement": c.statement,
                "metric": c.metric, "measure": c.measure, "kind": c.kind,
                "min_effect": c.min_effect, "margin": c.margin, "expected": c.expected(),
                "verdict": self.verdict, "reason": self.reason,
                "comparisons": [{**asdict(x), **{k: _round(getattr(x, k))
                                                 for k in ("difference", "low", "high")}}
                                for x in self.comparisons]}


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


# ------------------------------------------------------------------------------ the statistics

def paired_bootstrap(treatment: np.ndarray, control: np.ndarray, resamples: int = RESAMPLES,
                     seed: int = SEED) -> tuple[float, float, float]:
    """(difference, low, high): treatment − control and its 95% percentile interval.

    `treatment` and `control` are (seeds, items) arrays whose columns are the same items in the
    same order; one column is a per-seed scalar (seeds only). Each resample draws the items once,
    with replacement, for both arms, and each arm's seeds with replacement; an arm's value is the
    mean over its drawn seeds of each seed's mean over the drawn items.

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

    diffs = arm(t) - arm(c)
    low, high = np.percentile(diffs, [2.5, 97.5])
    return float(t.mean() - c.mean()), float(low), float(high)


def decide(claim: Claim, difference: float, low: float, high: float) -> tuple[str, str]:
    """(verdict, reason) of one comparison's difference and interval under the claim's rule.

    >>> c = Claim("x", "000", "Fig. 1", "s", (("a", "b"),), "m", "greater", min_effect=0.05)
    >>> decide(c, 0.10, 0.06, 0.14)[0], decide(c, 0.01, -0.02, 0.04)[0], decide(c, 0.04, 0.01, 0.07)[0]
    ('reproduced', 'not reproduced', 'inconclusive')
    """
    if claim.kind == "within":
        m = claim.margin
        if -m <= low and high <= m:
            return REPRODUCED, f"interval inside ±{m:.2f}"
        if high < -m or low > m:
            return NOT_REPRODUCED, f"interval wholly outside ±{m:.2f}"
        return INCONCLUSIVE, f"interval overlaps the edge of ±{m:.2f}"
    sign = 1.0 if claim.kind == "greater" else -1.0  # `less` is `greater` on the negated difference
    d, lo, hi = sign * difference, *sorted((sign * low, sign * high))
    effect = f"{'+' if sign > 0 else '−'}{claim.min_effect:.2f}"
    side = "above" if sign > 0 else "below"
    if lo > 0 and d >= claim.min_effect:
        return REPRODUCED, f"interval {side} 0 and the difference reaches {effect}"
    if hi < claim.min_effect:
        return NOT_REPRODUCED, f"the interval excludes {effect}"
    if lo <= 0:
        return INCONCLUSIVE, "the interval includes 0"
    return INCONCLUSIVE, f"interval {side} 0 but the difference is short of {effect}"


# ------------------------------------------------------------------------------ reading the runs

def _finite(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
        return None
    return float(v)


def _curve(rows: Sequence[dict], key: str) -> list[float]:
    """The finite values of `key` in step order."""
    pts = sorted((s, v) for r in rows if isinstance(r, dict)
                 and (s := _finite(r.get("step"))) is not None and (v := _finite(r.get(key))) is not None)
    return [v for _, v in pts]


def run_value(run: RunFiles, claim: Claim) -> float | None:
    """The run's number for the claim (None if its files lack it).

    `test`: the metric in metrics.json. `heldout_drop`: the best value of the held-out curve minus
    its last. `train_change`: the mean of the last quarter of the training curve's logged steps
    minus the mean of the first quarter (at least one step each; 2 points needed).
    """
    if claim.measure == "test":
        return _finite((run.metrics or {}).get(claim.metric))
    values = _curve(run.heldout if claim.measure == "heldout_drop" else run.train, claim.metric)
    if len(values) < 2:
        return None
    if claim.measure == "heldout_drop":
        return max(values) - values[-1]
    q = max(1, len(values) // 4)
    return float(np.mean(values[-q:]) - np.mean(values[:q]))


def _seeded(runs: Runs, arm: str, claim: Claim) -> dict[int, RunFiles]:
    """The arm's runs (by seed) that give the claim a number."""
    return {s: r for s, r in runs.get(arm, {}).items()
            if s is not None and run_value(r, claim) is not None}


def _items(arm_runs: dict[str, dict[int, RunFiles]], key: str, notes: list[str]
           ) -> tuple[dict[tuple[str, int], dict[str, float]], list[str]]:
    """Per-item scores of every run that has them, and the runs that do not (missing or malformed:
    noted once per file)."""
    found, lacking = {}, []
    for arm, seeds in arm_runs.items():
        for seed, run in seeds.items():
            where = f"data/eval/{run_key(arm, seed)}/items.json"
            try:
                scores = None if run.items is None else item_scores(run.items, key, where)
            except DataError as e:
                if str(e) not in notes:
                    notes.append(f"{e}; skipped, its comparisons use seeds only")
                scores = None
            if scores:
                found[(arm, seed)] = scores
            else:
                lacking.append(run_key(arm, seed))
    return found, lacking


def compare(runs: Runs, claim: Claim, treatment: str, control: str, notes: list[str],
            resamples: int = RESAMPLES, seed: int = SEED) -> Comparison:
    """One comparison of a claim, read from the runs and decided by the rule."""
    if claim.blocked:  # the runs found, for the record; no number is read from them
        found = {arm: sum(s is not None for s in runs.get(arm, {})) for arm in (treatment, control)}
        return Comparison(treatment, control, found, None, None, None, "", INCONCLUSIVE, claim.blocked)
    arm_runs = {arm: _seeded(runs, arm, claim) for arm in (treatment, control)}
    seeds = {arm: len(r) for arm, r in arm_runs.items()}

    def result(verdict: str, reason: str, basis: str = "", diff=None, lo=None, hi=None) -> Comparison:
        return Comparison(treatment, control, seeds, diff, lo, hi, basis, verdict, reason)

    short = [f"arm {a}: {n} seed{'s' * (n != 1)} of {MIN_SEEDS}" for a, n in seeds.items() if n < MIN_SEEDS]
    if short:
        return result(INCONCLUSIVE, "; ".join(short))
    per_item: dict[tuple[str, int], dict[str, float]] = {}
    lacking: list[str] = []
    if claim.measure == "test":
        per_item, lacking = _items(arm_runs, claim.metric, notes)
    if claim.measure == "test" and not lacking:
        common = sorted(set.intersection(*(set(s) for s in per_item.values())))
        if not common:
            return result(INCONCLUSIVE, "no test item is scored in every run of both arms")
        most = max(len(s) for s in per_item.values())
        basis = (f"{len(common)} items paired by id × seeds"
                 + (f" (common to every run; up to {most} per run)" if len(common) < most else ""))
        t, c = (np.array([[per_item[(arm, s)][i] for i in common] for s in sorted(arm_runs[arm])])
                for arm in (treatment, control))
    else:
        if claim.measure != "test":
            basis = f"seeds only (the {MEASURES[claim.measure].split(',')[0]} is one number per run)"
        else:
            basis = (f"seeds only (no per-item scores in {len(lacking)} of "
                     f"{sum(seeds.values())} runs)")
        t, c = (np.array([[run_value(r, claim)] for _, r in sorted(arm_runs[arm].items())])
                for arm in (treatment, control))
    diff, lo, hi = paired_bootstrap(t, c, resamples, seed)
    verdict, reason = decide(claim, diff, lo, hi)
    return result(verdict, reason, basis, diff, lo, hi)


def combine(claim: Claim, comparisons: Sequence[Comparison]) -> Verdict:
    """A claim holds when each comparison does; it fails when any fails; else inconclusive."""
    failed = [c for c in comparisons if c.verdict == NOT_REPRODUCED]
    open_ = [c for c in comparisons if c.verdict == INCONCLUSIVE]
    several = len(comparisons) > 1

    def why(cs: Sequence[Comparison]) -> str:
        reasons = list(dict.fromkeys((f"{c.treatment} vs {c.control}: " if several else "") + c.reason
                                     for c in cs))
        return "; ".join(reasons)

    if failed:
        return Verdict(claim, tuple(comparisons), NOT_REPRODUCED, why(failed))
    if open_:
        return Verdict(claim, tuple(comparisons), INCONCLUSIVE,
                       claim.blocked if claim.blocked else why(open_))
    return Verdict(claim, tuple(comparisons), REPRODUCED, why(comparisons))


def verdicts(runs: Runs, claims: Sequence[Claim] = CLAIMS, resamples: int = RESAMPLES,
             seed: int = SEED) -> tuple[list[Verdict], list[str]]:
    """Every claim's verdict from `runs` (method -> seed -> its files), and notes on the per-item
    files that were skipped (malformed: the run counts as having no per-item scores)."""
    notes: list[str] = []
    out = [combine(claim, [compare(runs, claim, t, c, notes, resamples, seed)
                           for t, c in claim.comparisons]) for claim in claims]
    return out, notes


def claims_json(found: Sequence[Verdict], notes: Sequence[str]) -> dict:
    """reports/claims.json: the rule, its constants, each claim's verdict and numbers, the notes."""
    return {"rule": RULE, "resamples": RESAMPLES, "seed": SEED, "min_seeds": MIN_SEEDS,
            "claims": [v.as_json() for v in found], "notes": list(notes)}

