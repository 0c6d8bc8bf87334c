"""The papers' claims as declarations (evals/claims.yaml), the rule's words, and the names of
their runs: what evals/claims.py decides and evals/claims_plan.py plans.

A `Claim` names the paper and figure, the statement, the setting it is tested in, the arms it
compares (one `Pair` per comparison: a treatment, a control or none, the expected outcome and,
where the metric has one, the `bound` the treatment can reach), the metric, the preconditions the
setting must meet, and a cap on the seeds per arm. `CLAIMS` and the family rule `FAMILY` are
declared in evals/claims.yaml; `RULE` is the rule in words, printed under the claims table.

**Kinds.** `greater` (treatment beats control by at least `min_effect`), `less` (its mirror),
`within` (|difference| ≤ `margin`), `no_gain` (a "no gain beyond noise" statement: one-sided,
difference ≤ +`margin`, so a reward that harms is no gain, and the verdict says harm was found).
The expected sizes are ours: the papers' effects are on other benchmarks and models, and each is
set below its paper's effect at the tiny world's scale. They are DECLARED, before any run: the
power rule plans seeds from them (evals/claims_plan.py), never from a pilot's difference.

**The family rule** (`Family`): how a claim's comparisons and its two bases combine into its
headline verdict: Holm's step-down across a claim's comparisons for "not reproduced", and the
headline the verdict both bases agree on.

**Which runs.** An arm is a run name: a method or variant of the default study (params
`methods`), or `<preset>/<arm>` for an arm of a preset's own study (`python -m flows.pipeline
--study <preset>`, recorded in studies/<preset>/); `<preset>/base` (or `base`) is that study's
base, whose sampling draws are its rows (`is_base`). The second base's study is `<study>.seed1` (`second_base_arm`,
`on_second_base`).

**Premises.** A claim about a label-free reward may name the property of the base's prior it rests
on (`premise`, a name of `evals.premises.PREMISES`: e.g. self-certainty tracking correctness); the
premises stage measures it on each study's base (data/eval/base/premises.json), and where it fails
on a base the claim is not tested there (evals/claims_runs.py, `premise_check`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, NamedTuple, Protocol

import yaml

from core.io import DataError
from evals.premises import PREMISES

PILOT = 3                 # seeds every arm runs first; the plan is made from them alone
MIN_SEEDS = PILOT         # fewest seeds per arm for a per-item comparison
MIN_SEEDS_PER_RUN = 5     # fewest seeds per arm for a per-run measure (a t-interval)
MAX_SEEDS = 10            # the default cap on the planned seeds per arm (a claim's `max_seeds`)
POWER_SEEDS_CEILING = 100  # how far past a cap the rule looks for the seeds 80% power needs
REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not reproduced", "inconclusive"
NOT_TESTED = "not tested"
NOT_RUN = "not run"        # a claim's second-base verdict before any of its arms ran there
KINDS = ("greater", "less", "within", "no_gain")
SECOND_BASE_SEED = 1      # the top-level `seed` of the second, independently built base
DEFAULT_STUDY = "default"  # the default study's name in a second base's study name
VERDICTS = (REPRODUCED, NOT_REPRODUCED, NOT_TESTED, INCONCLUSIVE)
HOLDS, FAILS, UNDECIDED = "holds", "fails", "undecided"
NOT_MEASURED = "not measured"  # a premise with no measure on record for the base (no premises.json)

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

TEST_ITEMS = "t-interval on per-seed means, items folded in"  # the per-item test (`evals.stats.seed_item_t`)
RULE_TESTS = (
    "Per item (a test metric scored item by item): a t-interval, 95%, on each arm's per-seed means "
    "with the item noise folded in (the variance over items of the paired difference beyond what "
    "the per-seed means hold), its degrees of freedom the seeds' (Welch-Satterthwaite over the "
    "arms' between-seed variances); a base evaluated once is one draw of a fixed model, whose "
    "noise is the items'. Per run (one number per run): Welch t-interval, 95% (one-sample against "
    "0 without a control), exact permutation p beside it, never from fewer than 5 seeds per arm, "
    "a precondition's included. `greater` is reproduced when the interval's lower bound is above "
    "0 and the difference reaches the expected effect, not reproduced when the upper bound is "
    "below it (`less` mirrored); `within` is reproduced when the interval lies inside ±margin, "
    "not reproduced when it lies wholly outside; `no_gain` is reproduced when the upper bound is "
    "below +margin (harm found when it is below 0), not reproduced when the lower bound is above "
    "+margin. A comparison whose difference cannot reach its expected effect on the base it runs "
    "on (its declared bound) is not tested.")
RULE_SEEDS = (
    "Seeds per arm: 3 pilot seeds, then the number the power rule plans from the declared effect "
    "(min_effect or margin) and the pilot's variances alone, never the pilot's difference (80% "
    "power at 95%, the t quantiles of the verdict's test; capped per claim, and where the cap "
    "falls short of 80% the power it leaves is shown, with the seeds 80% needs); the verdict is "
    "computed once on the planned seeds. Preconditions first: a claim's comparisons get their "
    "planned seeds once its preconditions hold. A failed precondition makes a claim not tested; "
    "runs from different or stale bases are never pooled.")


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
    bound: str = ""            # the most the treatment's metric can reach, item by item: a number,
                               # a metric, or `<number> - <metric>` (`reachable`); "" = no bound

    def expected(self) -> str:
        """The expected outcome in words, e.g. `≥ +0.05`, `within ±0.10`, `no gain beyond +0.05`."""
        if self.kind == "within":
            return f"within ±{self.margin:.2f}"
        if self.kind == "no_gain":
            return f"no gain beyond +{self.margin:.2f}"
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
    kind: Literal["greater", "less", "within", "no_gain"]  # the default of each comparison
    min_effect: float = 0.0                      # greater / less: the expected size
    margin: float = 0.0                          # within, no_gain: the tolerance
    measure: str = "test"                        # a key of MEASURES
    blocked: str = ""                            # why no run can decide it yet (verdict: inconclusive)
    setting: str = ""                            # the paper's setting and ours, one line
    preconditions: tuple = ()                    # Precondition (or mappings: normalized)
    max_seeds: int = MAX_SEEDS                   # the power rule's cap on seeds per arm
    premise: str = ""                            # the base's premise it rests on (evals.premises.PREMISES)

    def __post_init__(self) -> None:
        if not isinstance(self.premise, str) or (self.premise and self.premise not in PREMISES):
            raise ValueError(f"claim {self.id}: premise {self.premise!r} is not one of "
                             f"{', '.join(PREMISES)} (evals/premises.py, PREMISES)")
        if self.kind not in KINDS:
            raise ValueError(f"claim {self.id}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
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
            if p.kind not in KINDS:
                raise ValueError(f"claim {self.id}: kind {p.kind!r} is not one of {', '.join(KINDS)}")
            if p.kind in ("within", "no_gain") and p.margin <= 0:
                raise ValueError(f"claim {self.id}: a `{p.kind}` claim needs a margin > 0")
            if p.bound:
                parse_bound(p.bound)  # a malformed bound fails at load, naming itself
                if p.kind not in ("greater", "less"):
                    raise ValueError(f"claim {self.id}: a `bound` caps a `greater` or `less` "
                                     f"difference; {p.kind!r} has none")
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


def parse_bound(text: str) -> tuple[float, str, float]:
    """A comparison's declared `bound` (the most its treatment's metric can reach, item by item)
    as (constant, metric, sign): the bound of an item is constant + sign × that item's metric.

    >>> parse_bound("1 - arith_ref/avg_prob_corr"), parse_bound("1.0"), parse_bound("facts/coverage")
    ((1.0, 'arith_ref/avg_prob_corr', -1.0), (1.0, '', 0.0), (0.0, 'facts/coverage', 1.0))
    """
    head, minus, tail = text.partition(" - ")
    try:
        return (float(head), tail.strip(), -1.0) if minus and "/" in tail else (float(text), "", 0.0)
    except ValueError:
        if not minus and "/" in text:
            return 0.0, text.strip(), 1.0
        raise ValueError(f"bound {text!r}: expected a number, a metric `<benchmark>/<metric>` or "
                         "`<number> - <benchmark>/<metric>`") from None


@dataclass(frozen=True)
class Family:
    """The family rule (evals/claims.yaml, `family`): how a claim's comparisons and its two bases
    combine into its verdict. `comparisons`: `holm`, Holm's step-down across the claim's
    comparisons for "not reproduced" (any one of them suffices, so each alone at 2.5% would
    let k comparisons find one by chance k times as often); "reproduced" needs every comparison
    (an intersection-union test: each at 2.5% keeps the claim's error at 2.5%, no correction).
    `bases`: `agree`, the headline verdict is the one both bases give (anything else:
    inconclusive); `first`, the first base's alone (the second beside it)."""

    comparisons: Literal["holm", "none"] = "holm"
    bases: Literal["agree", "first"] = "agree"

    def __post_init__(self) -> None:
        if self.comparisons not in ("holm", "none") or self.bases not in ("agree", "first"):
            raise ValueError(f"family: comparisons must be holm or none and bases agree or first; "
                             f"got {self.comparisons!r}, {self.bases!r}")

    def text(self) -> str:
        """The family rule in words, printed with the claims table (inside `RULE`)."""
        within = ("a claim is reproduced when every comparison is (an intersection-union test, no "
                  "correction) and not reproduced when any is, at Holm's step-down level across "
                  "its comparisons" if self.comparisons == "holm" else
                  "a claim is reproduced when every comparison is and not reproduced when any is")
        across = ("the headline verdict is the one both bases give; where they differ, or either "
                  "is undecided or not run, it is inconclusive" if self.bases == "agree" else
                  "the headline verdict is the first base's; the second base's is shown beside it")
        return f"Family: {within}; {across}."


def _declarations(path: Path) -> dict:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise DataError(f"{path}: cannot read the claims: {e}") from e
    if not isinstance(raw, dict) or not isinstance(raw.get("claims"), list) or set(raw) - {"family", "claims"}:
        raise DataError(f"{path}: expected a mapping of `family` (the family rule) and `claims` (a list of claims)")
    return raw


def load_family(path: Path = DECLARATIONS) -> Family:
    """The family rule declared in `path` (evals/claims.yaml, `family`)."""
    try:
        return Family(**(_declarations(path).get("family") or {}))
    except (TypeError, ValueError) as e:
        raise DataError(f"{path}: family: {e}") from e


def load_claims(path: Path = DECLARATIONS) -> tuple[Claim, ...]:
    """The claims declared in `path` (evals/claims.yaml, `claims`); a malformed entry fails with
    one line naming it."""
    claims = []
    for i, entry in enumerate(_declarations(path)["claims"]):
        try:
            fields = dict(entry)
            fields["comparisons"] = tuple(fields["comparisons"])
            fields["preconditions"] = tuple(fields.get("preconditions") or ())
            claims.append(Claim(**fields))
        except (TypeError, KeyError, ValueError) as e:
            name = entry.get("id", f"#{i}") if isinstance(entry, dict) else f"#{i}"
            # The claim's own checks name it already: once is enough.
            raise DataError(f"{path}: claim {name}: {str(e).removeprefix(f'claim {name}: ')}") from e
    if len({c.id for c in claims}) != len(claims):
        raise DataError(f"{path}: two claims share an id")
    return tuple(claims)


CLAIMS = load_claims()
FAMILY = load_family()
RULE = RULE_TESTS + " " + FAMILY.text() + " " + RULE_SEEDS


class RunFiles(Protocol):
    """What one run left on disk (flows.report_collect.RunData): parsed JSON, None if absent;
    `base` the base it started from and `stale` why it is not a run of the current base ("" when
    it is), as `evals/lineage.py` reads them; a base's evaluation may also carry `premises`, its
    premises.json (read with getattr: absent, the premise is not measured)."""

    metrics: dict | None
    train: list[dict]
    heldout: list[dict]
    items: dict | None
    test: list[dict]


Runs = Mapping[str, Mapping[int | None, RunFiles]]


def finite(v) -> float | None:
    """`v` as a float when it is a finite number (not a bool), else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def is_base(arm: str) -> bool:
    """`base` or `<preset>/base`: a study's base (no training seeds: its evaluation, and its
    further sampling draws, params `base_draws`)."""
    return arm.rpartition("/")[2] == "base"


# ------------------------------------------------------------------------------ the second base's names


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
