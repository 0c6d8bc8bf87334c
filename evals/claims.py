"""The papers' claims as declarations, and each claim's verdict from the study's runs.

A `Claim` names the paper and figure, the statement, the setting it is tested in, the arms it
compares (one `Pair` per comparison: a treatment, a control or none, and the expected outcome),
the metric, the preconditions the setting must meet, and a cap on the seeds per arm.
`CLAIMS` are declared in evals/claims.yaml; the report stage (flows/report.py) computes their
verdicts with `verdicts` and opens its science section with the table (reports/claims.json
holds the same numbers).

**Which runs.** An arm is a run name: a method or variant of the default study (params
`methods`), or `<preset>/<arm>` for an arm of a preset's own study (`python -m flows.pipeline
--study <preset>`, recorded in studies/<preset>/); `<preset>/base` (or `base`) is that study's
base, evaluated once. Stale runs (trained from a base that is no longer the study's, or whose
files are not the ones DVC recorded: `evals/lineage.py`) are left out and named in the notes, and
a comparison whose runs stand on different bases is refused (inconclusive, "different bases"):
a number is never pooled across bases.

**The tests** (`evals/stats.py`), per comparison, treatment − control (or treatment against 0
where there is no control):

- a metric scored item by item in every run (`evals/items.py`): the **paired bootstrap** over
  the seeds of each arm and the test items both arms scored (`RESAMPLES` resamples, numpy seed
  `SEED`), 95% percentile interval;
- one number per run (`heldout_drop`, `test_rise_fall`, `train_change`, or a metric without
  per-item scores): the **Welch t-interval** (95%; one-sample against 0 without a control), the exact permutation
  p-value recorded beside it. Never decided from fewer than `MIN_SEEDS_PER_RUN` = 5 seeds per arm.

**The decision**, per comparison (`decide`): `greater` (treatment beats control by at least
`min_effect`): *reproduced* if the interval's lower bound is above 0 and the difference is at
least `min_effect`; *not reproduced* if the upper bound is below `min_effect`; else undecided.
`less` is its mirror. `within` (|difference| ≤ `margin`): *reproduced* if the interval lies
inside ±margin, *not reproduced* if wholly outside.

**How many seeds: the power rule, planned from the pilot.** Every arm first runs the `PILOT` = 3
pilot seeds (0, 1, 2). From the pilot alone (seeds 0-2 and no other, so no seed run later can move
the plan), `evals.stats.seeds_needed` plans the seeds per arm
(and test items) that decide the comparison with 80% power at 95% (from the pilot's between-seed
and per-item spread, its difference taken as true: a normal approximation for the per-item
bootstrap, the t quantiles of the Welch interval at n seeds for a per-run measure), at least 3
(5 for a per-run measure) and at most the claim's `max_seeds`. The verdict is then computed ONCE on the
first planned seeds of each arm (0 .. n-1): seeds run beyond the plan are left out, so looking at
more data cannot change the error rate. A comparison still undecided there is *inconclusive* and
says what a decision would need (seeds, items) and what it costs (the committed stage wall times:
`eval_seconds` in metrics.json, `train_seconds` in run.json where it exists). Preconditions
first (`seed_plan`): while a claim's precondition is undecided, only the precondition's arms get
their planned seeds; the comparisons' seeds follow once it holds, and never if it fails (the claim
is then not tested, whatever the comparisons would show). An arm that only such waiting
comparisons read is planned 0 seeds: a preset study does not even run its pilot until the
precondition holds. Their numbers come from the pilot either way, so waiting changes no number,
only what is run for nothing.

**The verdict of a claim.** Each precondition is measured first (a comparison like the others, or
a `probe` computed by code: `evals/preconditions.py`), and recorded beside the verdict. A
precondition that fails makes the claim *not tested* (the setting cannot show the claim); one
that cannot be decided makes it *inconclusive*. Otherwise the claim is *reproduced* when each
comparison is, *not reproduced* when any is not, else *inconclusive*. A claim whose evidence
cannot come from runs yet (`blocked`) is inconclusive with that reason. The expected sizes
(`min_effect`, `margin`) are ours: the papers' effects are on other benchmarks and models, and
each is set below its paper's effect at the tiny world's scale.

**The second base.** Every claim is also decided on a second, independently built base: the same
study with the top-level `seed` (the base's SFT seed) set to `SECOND_BASE_SEED`, run by
`python -m flows.pipeline --study <study>.seed1` (`default.seed1` for the default study's arms)
and recorded in studies/<study>.seed1/. `on_second_base` renames the claim's arms to that study's
(`rlme` -> `default.seed1/rlme`, `hint_copier/rlme` -> `hint_copier.seed1/rlme`) and the same
`verdict` decides it on those runs alone: reports/claims.json's `second_base` (verdict, difference,
interval, whether it agrees), `not run` until they exist. The two bases are never pooled.

The pipeline runs the plan (flows/pipeline.py): the pilot first (in a preset study, only of the
arms planned before any run: the waiting ones follow when their claim's preconditions hold), then
`planned_seeds` for the study's arms, the seeds after the pilot as params `extra_runs`
(`extra_runs`), asked again until it adds nothing, then the report.

To add a claim: append an entry to evals/claims.yaml (its arms must be arms of a study;
tests/test_claims.py checks), and run its arms' pilot seeds through the study; the report then
says how many more each arm needs.
"""

from __future__ import annotations

import importlib
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Literal, NamedTuple, Protocol

import numpy as np
import yaml

from core.io import DataError
from core.paths import run_key
from evals.items import item_scores
from evals.stats import (
    RESAMPLES,
    SEED,
    paired_bootstrap,
    permutation_p,
    power_at,
    seeds_needed,
    snap,
    t_interval,
)

__all__ = ["paired_bootstrap", "t_interval", "permutation_p"]

PILOT = 3                 # seeds every arm runs first; the plan is made from them alone
MIN_SEEDS = PILOT         # fewest seeds per arm for a per-item comparison
MIN_SEEDS_PER_RUN = 5     # fewest seeds per arm for a per-run measure (a t-interval)
MAX_SEEDS = 10            # the default cap on the planned seeds per arm (a claim's `max_seeds`)
POWER_SEEDS_CEILING = 100  # how far past a cap the rule looks for the seeds 80% power needs
REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not reproduced", "inconclusive"
NOT_TESTED = "not tested"
NOT_RUN = "not run"        # a claim's second-base verdict before any of its arms ran there
SECOND_BASE_SEED = 1      # the top-level `seed` of the second, independently built base
DEFAULT_STUDY = "default"  # the default study's name in a second base's study name
VERDICTS = (REPRODUCED, NOT_REPRODUCED, NOT_TESTED, INCONCLUSIVE)

# How one run gives the claim's number: its final test evaluation (per item where items.json has
# the metric), or a per-run scalar from its curves (seeds only).
# (`run_value` says how each is computed.)
MEASURES = {
    "test": "test set",
    "heldout_drop": "held-out drop, best − final",
    "train_change": "change over training, last − first quarter",
    "train_mean": "mean over training's logged steps",
    "test_rise_fall": "rise then fall on the test curve, the smaller of peak − first and peak − last",
}

RULE = ("Per item (a test metric scored item by item): paired bootstrap (10,000 resamples, fixed "
        "seed) of treatment − control over the seeds of each arm and the test items both arms "
        "scored, 95% percentile interval. Per run (one number per run): Welch t-interval, 95% "
        "(one-sample against 0 without a control), exact permutation p beside it, never from "
        "fewer than 5 seeds per arm. `greater` is reproduced when the interval's lower bound is "
        "above 0 and the difference reaches the expected effect, not reproduced when the upper "
        "bound is below it (`less` mirrored); `within` is reproduced when the interval lies "
        "inside ±margin, not reproduced when it lies wholly outside. Seeds per arm: 3 pilot seeds, "
        "then the number the power rule plans from the pilot alone (80% power at 95%: a normal "
        "approximation per item, the t-interval's own quantiles per run; capped per claim, and where "
        "the cap falls short of 80% the power it leaves is shown, with the seeds 80% needs); the "
        "verdict is computed once on the planned seeds. Preconditions first: a claim's "
        "comparisons get their planned seeds once its preconditions hold. A failed precondition "
        "makes a claim not tested; runs from different or stale bases are never pooled.")


class Pair(NamedTuple):
    """One comparison of a claim: treatment against control (None: against 0) and the outcome
    expected of it."""

    treatment: str
    control: str | None
    kind: str
    min_effect: float = 0.0
    margin: float = 0.0
    label: str = ""            # what this half of the claim says, where a claim has several
    metric: str = ""           # this comparison's metric where it differs from the claim's
    control_metric: str = ""   # the control's own metric (e.g. the base's arith/maj@k against
                               # the treatment's arith/pass@1); "" = the treatment's

    def expected(self) -> str:
        """The expected outcome in words, e.g. `≥ +0.05` or `within ±0.10`."""
        if self.kind == "within":
            return f"within ±{self.margin:.2f}"
        return f"≥ +{self.min_effect:.2f}" if self.kind == "greater" else f"≤ −{self.min_effect:.2f}"


@dataclass(frozen=True)
class Precondition:
    """What the claim's setting must show before the claim can be tested there: a comparison of
    runs (treatment, control, metric, measure, kind, min_effect / margin), or a `probe`
    (`module:function` returning {"value", "holds", "detail"}, computed from code and the world,
    not from runs)."""

    what: str
    treatment: str = ""
    control: str | None = None
    metric: str = ""
    measure: str = "test"
    kind: str = "greater"
    min_effect: float = 0.0
    margin: float = 0.0
    probe: str = ""
    min_seeds: int = PILOT     # a setting's fact (e.g. "the filter never fires") needs only the pilot

    def __post_init__(self) -> None:
        if bool(self.probe) == bool(self.treatment):
            raise ValueError(f"precondition {self.what!r}: give either a probe or a treatment arm")
        if self.treatment and (not self.metric or self.measure not in MEASURES
                               or self.kind not in ("greater", "less", "within")):
            raise ValueError(f"precondition {self.what!r}: needs a metric, a measure of "
                             f"{list(MEASURES)} and a kind greater/less/within")


@dataclass(frozen=True)
class Claim:
    """One paper's claim, as the lab tests it."""

    id: str
    paper: str                                   # the lab's paper number, e.g. "000"
    figure: str                                  # e.g. "Fig. 2", "Table 3"
    statement: str                               # one line
    comparisons: tuple                           # Pair (or (treatment, control) / a mapping: normalized)
    metric: str                                  # `<benchmark>/<metric>` or a curve's column
    kind: Literal["greater", "less", "within"]   # the default of each comparison
    min_effect: float = 0.0                      # greater / less: the expected size
    margin: float = 0.0                          # within: the tolerance
    measure: str = "test"                        # a key of MEASURES
    blocked: str = ""                            # why no run can decide it yet (verdict: inconclusive)
    setting: str = ""                            # the paper's setting and ours, one line
    preconditions: tuple = ()                    # Precondition (or mappings: normalized)
    max_seeds: int = MAX_SEEDS                   # the power rule's cap on seeds per arm

    def __post_init__(self) -> None:
        if self.kind not in ("greater", "less", "within"):
            raise ValueError(f"claim {self.id}: kind {self.kind!r} is not greater, less or within")
        if self.measure not in MEASURES:
            raise ValueError(f"claim {self.id}: measure {self.measure!r} is not one of {list(MEASURES)}")
        if not self.comparisons:
            raise ValueError(f"claim {self.id}: comparisons must be (treatment, control) pairs")
        pairs = []
        for c in self.comparisons:
            if isinstance(c, Pair):
                pairs.append(c)
            elif isinstance(c, Mapping):
                spec = {"kind": self.kind, "min_effect": self.min_effect, "margin": self.margin,
                        "control": None, **c}
                unknown = set(spec) - set(Pair._fields)
                if unknown or "treatment" not in spec:
                    raise ValueError(f"claim {self.id}: a comparison needs `treatment` and may set "
                                     f"{list(Pair._fields[1:])}; got {sorted(c)}")
                pairs.append(Pair(**spec))
            elif isinstance(c, (tuple, list)) and len(c) == 2:
                pairs.append(Pair(c[0], c[1], self.kind, self.min_effect, self.margin))
            else:
                raise ValueError(f"claim {self.id}: comparisons must be (treatment, control) pairs")
        for p in pairs:
            if p.kind not in ("greater", "less", "within"):
                raise ValueError(f"claim {self.id}: kind {p.kind!r} is not greater, less or within")
            if p.kind == "within" and p.margin <= 0:
                raise ValueError(f"claim {self.id}: a `within` claim needs a margin > 0")
        object.__setattr__(self, "comparisons", tuple(pairs))
        pre = tuple(p if isinstance(p, Precondition) else Precondition(**p) for p in self.preconditions)
        object.__setattr__(self, "preconditions", pre)
        if self.max_seeds < PILOT:
            raise ValueError(f"claim {self.id}: max_seeds must be at least the {PILOT} pilot seeds")

    @property
    def arms(self) -> list[str]:
        """Every arm the claim's comparisons need, in order of first mention."""
        return list(dict.fromkeys(a for p in self.comparisons for a in (p.treatment, p.control) if a))

    @property
    def precondition_arms(self) -> list[str]:
        """The arms its preconditions read (a study's base among them)."""
        return list(dict.fromkeys(a for p in self.preconditions for a in (p.treatment, p.control) if a))

    def expected(self) -> str:
        """The expected outcome in words (each comparison's, where they differ)."""
        words = list(dict.fromkeys(p.expected() for p in self.comparisons))
        return "; ".join(words)


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
            fields["comparisons"] = tuple(fields["comparisons"])
            fields["preconditions"] = tuple(fields.get("preconditions") or ())
            claims.append(Claim(**fields))
        except (TypeError, KeyError, ValueError) as e:
            name = entry.get("id", f"#{i}") if isinstance(entry, dict) else f"#{i}"
            raise DataError(f"{path}: claim {name}: {e}") from e
    if len({c.id for c in claims}) != len(claims):
        raise DataError(f"{path}: two claims share an id")
    return tuple(claims)


CLAIMS = load_claims()


class RunFiles(Protocol):
    """What one run left on disk (flows.report_collect.RunData): parsed JSON, None if absent;
    `base` the base it started from and `stale` why it is not a run of the current base ("" when
    it is), as `evals/lineage.py` reads them."""

    metrics: dict | None
    train: list[dict]
    heldout: list[dict]
    items: dict | None
    test: list[dict]


Runs = Mapping[str, Mapping[int | None, RunFiles]]


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
    test: str = ""                     # "paired bootstrap" or "Welch t-interval"
    p: float | None = None             # the exact permutation p (per-run measures)
    plan: dict = field(default_factory=dict)   # the power rule's plan from the pilot
    needs: str = ""                    # what a decision would need, when undecided
    expected: str = ""
    label: str = ""
    base: str = ""                     # the base every run of the comparison started from
    values: dict[str, dict[int, float]] = field(default_factory=dict)  # per-run measures: arm -> seed -> value


@dataclass(frozen=True)
class Checked:
    """A precondition, measured: holds, fails or undecided, with its numbers."""

    what: str
    status: str                        # "holds", "fails", "undecided"
    detail: str
    comparison: Comparison | None = None
    value: float | None = None


HOLDS, FAILS, UNDECIDED = "holds", "fails", "undecided"


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    comparisons: tuple[Comparison, ...]
    verdict: str
    reason: str
    preconditions: tuple[Checked, ...] = ()
    needs: str = ""
    second: dict = field(default_factory=dict)   # the same claim on the second base (`second_base`)

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
                "second_base": self.second or {"verdict": NOT_RUN}}


def _comparison_json(x: Comparison | None) -> dict | None:
    if x is None:
        return None
    return {**asdict(x), **{k: _round(getattr(x, k)) for k in ("difference", "low", "high", "p")}}


def _round(x: float | None) -> float | None:
    return None if x is None else round(snap(x), 4)


# ------------------------------------------------------------------------------ the statistics

def decide(rule, difference: float, low: float, high: float) -> tuple[str, str]:
    """(verdict, reason) of one comparison's difference and interval under its rule (a Pair, or
    anything with kind, min_effect and margin: a Claim, a Precondition).

    >>> c = Claim("x", "000", "Fig. 1", "s", (("a", "b"),), "m", "greater", min_effect=0.05)
    >>> decide(c, 0.10, 0.06, 0.14)[0], decide(c, 0.01, -0.02, 0.04)[0], decide(c, 0.04, 0.01, 0.07)[0]
    ('reproduced', 'not reproduced', 'inconclusive')
    """
    if rule.kind == "within":
        m = rule.margin
        if -m <= low and high <= m:
            return REPRODUCED, f"interval inside ±{m:.2f}"
        if high < -m or low > m:
            return NOT_REPRODUCED, f"interval wholly outside ±{m:.2f}"
        return INCONCLUSIVE, f"interval overlaps the edge of ±{m:.2f}"
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


def gap(rule, difference: float) -> float:
    """How far the difference stands from the bound its likely verdict needs the interval to
    clear (the power rule's effect): 0 for `greater` when it reaches min_effect (the lower bound
    must clear 0), else min_effect (the upper bound must fall below it); the margin for `within`.

    >>> r = Pair("a", "b", "greater", min_effect=0.05)
    >>> gap(r, 0.08), round(gap(r, 0.02), 3), round(gap(Pair("a", "b", "within", margin=0.1), -0.23), 3)
    (0.08, 0.03, 0.13)
    """
    if rule.kind == "within":
        return abs(rule.margin - abs(difference))
    d = difference if rule.kind == "greater" else -difference
    return d if d >= rule.min_effect else rule.min_effect - d


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


class _Spec(NamedTuple):
    """What a comparison reads: the metric and how one run gives it."""

    metric: str
    measure: str


def run_value(run: RunFiles, claim) -> float | None:
    """The run's number for the claim (None if its files lack it).

    `test`: the metric in metrics.json. `heldout_drop`: the best value of the held-out curve minus
    its last. `train_mean`: the mean of the training curve's logged steps. `train_change`: the
    mean of the last quarter of the training curve's logged steps minus the mean of the first
    quarter (at least one step each; 2 points needed). `test_rise_fall`: on the test split
    evaluated at each checkpoint (test.json, the curve the independent collapse label reads and no
    alarm does; flows/alarms.py), how far the curve rose above its first point (the base) AND then
    fell below its peak: min(peak − first, peak − last). At least the label's DELTA (0.10) when the
    run improved and then collapsed; near 0 for a run that never improved (it only fell) and for
    one that kept its gain.
    """
    if claim.measure == "test":
        return _finite((run.metrics or {}).get(claim.metric))
    source = {"heldout_drop": run.heldout, "test_rise_fall": getattr(run, "test", None) or []}
    values = _curve(source.get(claim.measure, run.train), claim.metric)
    if len(values) < 2:
        return None
    if claim.measure == "heldout_drop":
        return max(values) - values[-1]
    if claim.measure == "test_rise_fall":
        return min(max(values) - values[0], max(values) - values[-1])
    if claim.measure == "train_mean":
        return float(np.mean(values))
    q = max(1, len(values) // 4)
    return float(np.mean(values[-q:]) - np.mean(values[:q]))


def is_base(arm: str) -> bool:
    """`base` or `<preset>/base`: a study's base, evaluated once (no seeds)."""
    return arm.rpartition("/")[2] == "base"


def _seeded(runs: Runs, arm: str, spec, notes: list[str]) -> dict[int, RunFiles]:
    """The arm's runs of the current base (by seed; a base's one evaluation as seed 0) that give
    the comparison a number; stale runs are left out with a note."""
    out = {}
    for s, r in runs.get(arm, {}).items():
        if (s is None) != is_base(arm):
            continue
        stale = getattr(r, "stale", "")
        if stale:
            note = f"{run_key(arm, s) if s is not None else arm}: left out, {stale}"
            if note not in notes:
                notes.append(note)
            continue
        if run_value(r, spec) is not None:
            out[0 if s is None else s] = r
    return out


def _items(arm_runs: dict[str, dict[int, RunFiles]], keys: Mapping[str, str], notes: list[str]
           ) -> tuple[dict[tuple[str, int], dict[str, float]], list[str]]:
    """Per-item scores (of each arm's metric, `keys`) of every run that has them, and the runs that
    do not (missing or malformed: noted once per file)."""
    found, lacking = {}, []
    for arm, seeds in arm_runs.items():
        for seed, run in seeds.items():
            name = arm if is_base(arm) else run_key(arm, seed)
            where = f"data/eval/{name}/items.json"
            try:
                scores = None if run.items is None else item_scores(run.items, keys[arm], where)
            except DataError as e:
                if str(e) not in notes:
                    notes.append(f"{e}; skipped, its comparisons use seeds only")
                scores = None
            if scores:
                found[(arm, seed)] = scores
            else:
                lacking.append(name)
    return found, lacking


def _seconds(runs: Sequence[RunFiles]) -> tuple[float | None, str]:
    """Mean wall seconds of one run of an arm from the committed stage times (the evaluation's
    `eval_seconds`, the training's `train_seconds` where run.json records it, else its study's
    stage times), and what it covers."""
    evals = [v for r in runs if (v := _finite((r.metrics or {}).get("eval_seconds"))) is not None]
    trains = [v for r in runs
              if (v := _finite((getattr(r, "summary", None) or {}).get("train_seconds"))
                  or _finite(getattr(r, "train_seconds", None))) is not None]
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


def _base_of(arm_runs: Mapping[str, Mapping[int, RunFiles]]) -> tuple[str, list[str]]:
    """The one base every run stands on (`""` when unrecorded), or the list of bases found."""
    bases = sorted({getattr(r, "base", "") or "" for runs in arm_runs.values() for r in runs.values()})
    return (bases[0] if len(bases) == 1 else ""), bases


def compare(runs: Runs, claim: Claim, treatment: str, control: str | None, notes: list[str],
            resamples: int = RESAMPLES, seed: int = SEED, rule=None, spec=None,
            min_per_run: int = MIN_SEEDS_PER_RUN) -> Comparison:
    """One comparison (of a claim, or of a precondition with `rule` and `spec`), read from the
    runs, planned from the pilot seeds and decided once on the planned seeds."""
    rule = rule or next((p for p in claim.comparisons if (p.treatment, p.control) == (treatment, control)),
                        Pair(treatment, control, claim.kind, claim.min_effect, claim.margin))
    spec = spec or _Spec(getattr(rule, "metric", "") or claim.metric, claim.measure)
    arms = [a for a in (treatment, control) if a is not None]
    expected, label = rule.expected(), getattr(rule, "label", "")
    if claim.blocked:  # the runs found, for the record; no number is read from them
        found = {arm: sum(s is not None for s in runs.get(arm, {})) for arm in arms}
        return Comparison(treatment, control, found, None, None, None, "", INCONCLUSIVE, claim.blocked,
                          expected=expected, label=label)
    specs = {arm: spec for arm in arms}
    if control is not None and getattr(rule, "control_metric", ""):
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
    # The pilot: seeds 0 .. PILOT-1 of each arm and no other (a base: its one evaluation), so
    # no seed run after the plan can move the plan.
    pilot = {arm: sorted(r)[:1] if is_base(arm) else [s for s in sorted(r) if 0 <= s < PILOT]
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

    common: list[str] = []
    if not per_run:
        common = sorted(set.intersection(*(set(s) for s in per_item.values())))
        if not common:
            return result(INCONCLUSIVE, "no test item is scored in every run of both arms")

    def arrays(chosen: Mapping[str, Sequence[int]]) -> list[np.ndarray]:
        if per_run:
            return [np.array([[run_value(arm_runs[a][s], specs[a])] for s in chosen[a]]) for a in arms]
        return [np.array([[per_item[(a, s)][i] for i in common] for s in chosen[a]]) for a in arms]

    plan = _plan(rule, arrays(pilot), per_run, minimum, claim.max_seeds, len(common))
    want = plan["seeds"]
    chosen = {a: sorted(r)[:1 if is_base(a) else want] for a, r in arm_runs.items()}
    behind = {a: want for a in arms if not is_base(a) and seeds[a] < want}
    extra = sum(max(0, seeds[a] - want) for a in arms if not is_base(a))
    test = "Welch t-interval" if per_run else "paired bootstrap"
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
    if behind:
        cost = _cost(arm_runs, behind, runs)
        # A plan at the cap is run all the same (the verdict is computed once, on the planned
        # seeds), but a reader is told the odds: the rule wanted more than the cap allows.
        short_of_power = "beyond" in plan
        need = (f"{want} seeds per arm (" + ", ".join(f"{a} has {seeds[a]}" for a in behind) + ")"
                + (f", {cost}" if cost else "")
                + (f"; the power rule wants {plan['beyond']}" if short_of_power else ""))
        return result(INCONCLUSIVE, f"{want} seeds per arm needed (the power rule, from the pilot"
                      + (f"; the cap, where its power is {plan['power']:.0%}" if short_of_power else "")
                      + ")",
                      basis=basis, plan=plan, needs=need, test=test, values=values)
    t, c = arrays(chosen) if control is not None else (arrays(chosen)[0], None)
    p = None
    if per_run:
        tv, cv = t[:, 0], None if c is None else c[:, 0]
        diff, lo, hi = t_interval(tv, cv)
        alt = {"greater": "greater", "less": "less"}.get(rule.kind, "two-sided")
        p = permutation_p(tv, cv, alt) if cv is None or len(cv) > 1 else None
    else:
        diff, lo, hi = paired_bootstrap(t, np.zeros((1, t.shape[1])) if c is None else c, resamples, seed)
    verdict, reason = decide(rule, diff, lo, hi)
    needs = ""
    if verdict == INCONCLUSIVE:
        reason += f" at the planned {want} seeds per arm"
        needs = plan.get("beyond", "")
        if plan.get("power_seeds"):  # what a cap raised to 80% power would run, and its cost
            cost = _cost(arm_runs, {a: plan["power_seeds"] for a in arms if not is_base(a)}, runs)
            needs += f"; at {plan['power_seeds']} seeds per arm: {cost}" if cost else ""
    return result(verdict, reason, diff=diff, lo=lo, hi=hi, basis=basis, plan=plan, needs=needs,
                  test=test, p=p, values=values)


def _plan(rule, pilot: Sequence[np.ndarray], per_run: bool, minimum: int, cap: int,
          items: int) -> dict:
    """The power rule on the pilot's arrays (each (seeds, items); a base has one row): the seeds
    per arm to run, the items a decision would need if more than today's, and why."""
    t = pilot[0]
    c = pilot[1] if len(pilot) > 1 else np.zeros((1, t.shape[1]))
    diff = float(t.mean() - c.mean())
    arm_vars = [float(x.mean(axis=1).var(ddof=1)) for x in (t, c) if x.shape[0] > 1]
    seed_var = sum(arm_vars)
    item_var = 0.0 if per_run or t.shape[1] < 2 else float((t.mean(axis=0) - c.mean(axis=0)).var(ddof=1))
    g = gap(rule, diff)
    n, m = seeds_needed(g, seed_var, item_var, items, cap=cap, minimum=minimum,
                        arm_vars=arm_vars if per_run else None)
    plan = {"pilot_difference": round(snap(diff), 4), "gap": round(snap(g), 4),
            "seed_var": round(snap(seed_var), 6), "item_var": round(snap(item_var), 6)}
    # What the cap can still expect, when the rule wanted more (the odds a reader weighs
    # before spending the planned runs): at today's items.
    power = round(power_at(g, seed_var, cap, item_var, items, arm_vars if per_run else None), 2)
    if n is None:
        return {**plan, "seeds": cap, "items": None, "power": power, **_past_cap(
            g, seed_var, item_var, items, minimum, arm_vars if per_run else None,
            f"more than the cap of {cap} seeds per arm"
            + ("" if per_run else " even with more items")  # a per-run number has no items
            + f" (the pilot's difference is {g:.3f} from the bound it must clear;"
            + f" at the cap its power is {power:.0%}")}
    plan.update(seeds=n, items=m)
    if m is not None and m > items:
        plan.update(power=power, **_past_cap(
            g, seed_var, item_var, items, minimum, None,
            f"{m} test items per run (today {items}) at {cap} seeds per arm"
            f" (with today's items its power is {power:.0%}"))
    return plan


def _past_cap(g: float, seed_var: float, item_var: float, items: int, minimum: int,
              arm_vars: list[float] | None, beyond: str) -> dict:
    """`beyond` closed with the seeds per arm that 80% power needs at today's items, were the cap
    higher (`power_seeds`; None past POWER_SEEDS_CEILING): what raising a cap would cost, for the
    one who sets caps, and only ever declared before the runs it would add (the plan-first rule)."""
    n, m = seeds_needed(g, seed_var, item_var, items, cap=POWER_SEEDS_CEILING, minimum=minimum,
                        arm_vars=arm_vars)
    if n is None or m is not None:  # seeds alone cannot, even at the ceiling
        return {"power_seeds": None,
                "beyond": f"{beyond}; 80% needs more than {POWER_SEEDS_CEILING} seeds per arm)"}
    return {"power_seeds": n, "beyond": f"{beyond}; 80% needs {n} seeds per arm)"}


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
        return Checked(pre.what, status, str(out.get("detail", "")), value=_finite(out.get("value")))
    x = compare(runs, claim, pre.treatment, pre.control, notes, resamples, seed,
                rule=Pair(pre.treatment, pre.control, pre.kind, pre.min_effect, pre.margin),
                spec=_Spec(pre.metric, pre.measure), min_per_run=pre.min_seeds)
    status = {REPRODUCED: HOLDS, NOT_REPRODUCED: FAILS}.get(x.verdict, UNDECIDED)
    if not any(x.seeds.values()):
        detail = f"not measured: no run of {', '.join(x.seeds)} records {pre.metric}"
    else:
        detail = f"{_interval_text(x)}: {x.reason}"
    return Checked(pre.what, status, detail, x)


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
    """Preconditions first (one failed: not tested; one undecided: inconclusive); then the claim
    holds when each comparison does, fails when any fails, else is inconclusive."""
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
    if failed:
        return Verdict(*args, NOT_REPRODUCED, why(failed), tuple(checked))
    if open_:
        return Verdict(*args, INCONCLUSIVE, why(open_), tuple(checked), needs(open_))
    return Verdict(*args, REPRODUCED, why(comparisons), tuple(checked))


def verdict(runs: Runs, claim: Claim, notes: list[str], resamples: int = RESAMPLES,
            seed: int = SEED) -> Verdict:
    """One claim's verdict from `runs`: its preconditions measured, then its comparisons."""
    checked = [check(runs, claim, pre, notes, resamples, seed) for pre in claim.preconditions]
    comps = [compare(runs, claim, p.treatment, p.control, notes, resamples, seed, rule=p)
             for p in claim.comparisons]
    return combine(claim, comps, checked)


def verdicts(runs: Runs, claims: Sequence[Claim] = CLAIMS, resamples: int = RESAMPLES,
             seed: int = SEED, second: int | None = SECOND_BASE_SEED) -> tuple[list[Verdict], list[str]]:
    """Every claim's verdict from `runs` (method -> seed -> its files), each with the same claim
    decided on the second base's runs (`second_base`; `second` None: not computed), and notes on
    the runs left out (stale) and the per-item files skipped (malformed: the run counts as having
    no per-item scores)."""
    notes: list[str] = []
    out = []
    for claim in claims:
        v = verdict(runs, claim, notes, resamples, seed)
        if second is not None:
            v = replace(v, second=second_base(runs, v, notes, resamples, seed, second))
        out.append(v)
    return out, notes


# ------------------------------------------------------------------------------ the second base


def study_of(arm: str) -> str:
    """The study an arm belongs to: `""` for the default study, else its record's name.

    >>> study_of("rlme"), study_of("hint_copier/rlme"), study_of("default.seed1/base")
    ('', 'hint_copier', 'default.seed1')
    """
    return arm.rpartition("/")[0]


def second_base_study(study: str, base_seed: int = SECOND_BASE_SEED) -> str:
    """The study of the same arms on the base built with top-level `seed` = `base_seed`
    (`python -m flows.pipeline --study <it>`, recorded in studies/<it>/).

    >>> second_base_study(""), second_base_study("hint_copier", 2)
    ('default.seed1', 'hint_copier.seed2')
    """
    return f"{study or DEFAULT_STUDY}.seed{base_seed}"


def parse_study(name: str) -> tuple[str, int | None]:
    """(preset, base seed) of a study name: `hint_copier` -> ('hint_copier', None), a second
    base's `hint_copier.seed1` -> ('hint_copier', 1), `default.seed1` -> ('', 1), `default` or
    `` -> ('', None).

    >>> parse_study("hint_copier.seed1"), parse_study("default.seed2"), parse_study("keyword_dump")
    (('hint_copier', 1), ('', 2), ('keyword_dump', None))
    """
    head, dot, tail = name.rpartition(".seed")
    if dot and tail.isdigit() and head:
        return ("" if head == DEFAULT_STUDY else head), int(tail)
    return ("" if name == DEFAULT_STUDY else name), None


def second_base_arm(arm: str, base_seed: int = SECOND_BASE_SEED) -> str:
    """The same arm on the second base.

    >>> second_base_arm("rlme"), second_base_arm("hint_copier/base")
    ('default.seed1/rlme', 'hint_copier.seed1/base')
    """
    return f"{second_base_study(study_of(arm), base_seed)}/{arm.rpartition('/')[2]}"


def on_second_base(claim: Claim, base_seed: int = SECOND_BASE_SEED) -> Claim:
    """The claim with every arm (comparisons and preconditions) renamed to the second base's: the
    same machinery then decides it on those runs alone, never pooled with the first base's."""
    def arm(a: str | None) -> str | None:
        return None if a is None else second_base_arm(a, base_seed)

    comps = tuple(p._replace(treatment=arm(p.treatment), control=arm(p.control))
                  for p in claim.comparisons)
    pres = tuple(replace(p, treatment=arm(p.treatment), control=arm(p.control)) if p.treatment else p
                 for p in claim.preconditions)
    return replace(claim, comparisons=comps, preconditions=pres)


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
    # A claim's trained arms decide whether it ran there (the base is evaluated first); a claim
    # on the base alone (r3_resists_dilution) ran once that base is evaluated.
    arms = [a for a in mapped.arms if not is_base(a)] or list(mapped.arms)
    ran = any(runs.get(a) for a in arms)
    # Preconditions first, as on the first base: one read from that base's evaluation alone
    # (lcs_beats_direct's "the base produces keyword dumps") can fail before any arm trains
    # there, and then the claim is not tested there and its arms need no pilot.
    v = verdict(runs, mapped, notes, resamples, seed) if ran or any(
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
                             "ci": None if c.low is None else [_round(c.low), _round(c.high)]}
                            for c in v.comparisons],
            "preconditions": [{"what": p.what, "status": p.status, "detail": p.detail}
                              for p in v.preconditions]}


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


def extra_runs(plan: Mapping[str, int], seeds: Sequence[int]) -> dict[str, dict]:
    """params `extra_runs` for a plan: each arm's seeds after the study's `seeds` (the pilot) up
    to the planned number, keyed `<arm>-<seed>` as the DVC stages are.

    >>> extra_runs({"rlme": 5, "rlvr": 3}, [0, 1, 2])
    {'rlme-3': {'method': 'rlme', 'seed': 3}, 'rlme-4': {'method': 'rlme', 'seed': 4}}
    """
    start = max(seeds) + 1
    return {f"{arm}-{s}": {"method": arm, "seed": s} for arm, n in sorted(plan.items())
            for s in range(start, start + max(0, n - len(seeds)))}


def plan_cost(runs: Runs, study: str, plan: Mapping[str, int]) -> str:
    """What the plan's runs not yet made cost, from the arms' committed stage times."""
    prefix = f"{study}/" if study else ""
    arm_runs = {a: {s: r for s, r in runs.get(prefix + a, {}).items() if s is not None} for a in plan}
    return _cost(arm_runs, plan, runs) or "nothing to run"


def claims_json(found: Sequence[Verdict], notes: Sequence[str]) -> dict:
    """reports/claims.json: the rule, its constants, each claim's verdict and numbers, the seeds
    the power rule plans per arm, the notes."""
    return {"rule": RULE, "resamples": RESAMPLES, "seed": SEED, "pilot_seeds": PILOT,
            "min_seeds": MIN_SEEDS, "min_seeds_per_run": MIN_SEEDS_PER_RUN,
            "claims": [v.as_json() for v in found], "plan": seed_plan(found), "notes": list(notes)}
