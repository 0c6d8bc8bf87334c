"""Collapse detection: reward hacking, entropy collapse, length collapse.

Why this exists: label-free rewards are proxies, and the RLME paper (000, §4.4, Fig. 5) shows the
typical failure: the train reward keeps rising while accuracy on held-out data falls after a
peak, because the generator learns to fool its evaluator. The paper's remedies are early
stopping or ground-truth anchoring (§4.6, §5); this module supplies the early-stopping half by
turning an evaluation history into dated events. The same monitor watches two other ways a
policy degenerates under GRPO: the sampling entropy collapses (every completion in a group is
the same, so group-relative advantages vanish) and the completion length collapses (empty
answers) or saturates (completions clipped at the generation limit).

Everything here is numpy and plain Python: the module is imported by a trainer callback, by the
evaluation flow and by offline analysis, so it must not pull in mlflow, prefect or transformers.

Choices that are **ours**, all parameters of ``CollapseConfig`` (docs/methods/shared.md, Collapse
detection):

- The "best held-out step" is the first evaluation that reaches the running maximum (a later
  tie does not move it), so the checkpoint kept is the earliest one with the best score.
- Comparisons allow a float slack of ``1e-9`` so that a drop of exactly ``min_drop`` (e.g.
  0.8 -> 0.7) counts, as "at least ``min_drop``" intends, despite binary rounding.
- Length collapse uses the same ``patience`` as the other detectors: one short evaluation in a
  noisy run is not a collapse.
- A missing value (``NaN``, or ``None`` given to the monitor) never satisfies a condition and
  never becomes the best score; in the pure detectors it breaks a streak, in the monitor the
  evaluation is skipped for that signal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "CollapseConfig",
    "CollapseEvent",
    "CollapseMonitor",
    "detect_entropy_collapse",
    "detect_length_collapse",
    "detect_reward_hacking",
]

KINDS = ("reward_hacking", "entropy", "length")

# Slack for float comparisons: a drop of exactly min_drop must count ("at least").
_EPS = 1e-9


def _as_float_arrays(steps: Sequence[int], *series: Sequence[float] | None) -> list[np.ndarray]:
    """Convert the series to float arrays and check they are as long as ``steps``."""
    n = len(steps)
    out = []
    for s in series:
        if s is None:
            out.append(None)
            continue
        a = np.asarray(s, dtype=float)
        if a.ndim != 1 or a.shape[0] != n:
            raise ValueError(f"every series must have one value per step: {n} steps, got shape {a.shape}")
        out.append(a)
    return out


def _check_patience(patience: int) -> None:
    if patience < 1:
        raise ValueError(f"patience must be at least 1, got {patience}")


def _first_streak(steps: Sequence[int], condition: Sequence[bool], patience: int) -> int | None:
    """Step of the ``patience``-th consecutive True in ``condition``, or None."""
    run = 0
    for step, ok in zip(steps, condition):
        run = run + 1 if ok else 0
        if run >= patience:
            return int(step)
    return None


def detect_reward_hacking(
    steps: Sequence[int],
    reward: Sequence[float],
    heldout: Sequence[float],
    min_drop: float = 0.1,
    reward_tol: float = 0.0,
    patience: int = 2,
) -> int | None:
    """Step at which reward hacking is confirmed, or None (paper 000 §4.4).

    An evaluation satisfies the condition when the held-out score is at least ``min_drop`` below
    its best so far while the train reward is at least its value at that best step minus
    ``reward_tol``: the proxy still says "better" while the truth says "worse", the signature of
    Fig. 5. Hacking is confirmed at the ``patience``-th consecutive such evaluation, so a single
    noisy held-out dip is not enough.

    >>> steps = [0, 10, 20, 30, 40, 50]
    >>> reward = [0.1, 0.3, 0.5, 0.6, 0.7, 0.8]
    >>> heldout = [0.3, 0.5, 0.6, 0.45, 0.40, 0.35]
    >>> detect_reward_hacking(steps, reward, heldout)
    40
    >>> detect_reward_hacking(steps, reward, [0.3, 0.5, 0.6, 0.62, 0.64, 0.7]) is None
    True
    """
    _check_patience(patience)
    r, h = _as_float_arrays(steps, reward, heldout)
    best_h, best_r = -math.inf, math.nan
    condition = []
    for hi, ri in zip(h, r):
        if hi > best_h:
            best_h, best_r = hi, ri
        condition.append(bool(hi <= best_h - min_drop + _EPS and ri >= best_r - reward_tol - _EPS))
    return _first_streak(steps, condition, patience)


def detect_entropy_collapse(
    steps: Sequence[int], entropy: Sequence[float], floor: float, patience: int = 2
) -> int | None:
    """Step at which entropy collapse is confirmed, or None.

    When the policy's token entropy stays below ``floor`` the G samples of a group become
    identical, their rewards tie, and the group-relative advantage (paper 000 §3.2) is zero:
    training stops learning while still spending compute.

    >>> detect_entropy_collapse([0, 1, 2, 3], [1.2, 0.05, 0.9, 0.04], floor=0.1, patience=2) is None
    True
    >>> detect_entropy_collapse([0, 1, 2, 3], [1.2, 0.9, 0.05, 0.04], floor=0.1, patience=2)
    3
    """
    _check_patience(patience)
    (e,) = _as_float_arrays(steps, entropy)
    return _first_streak(steps, [bool(x < floor) for x in e], patience)


def detect_length_collapse(
    steps: Sequence[int],
    lengths: Sequence[float],
    clipped_ratio: Sequence[float] | None = None,
    min_length_frac: float = 0.2,
    max_clipped: float = 0.5,
    patience: int = 2,
) -> int | None:
    """Step at which length collapse is confirmed, or None.

    Two degenerate ends: completions shrink below ``min_length_frac`` of the first evaluation's
    mean length (the policy found that saying little is rewarded; paper 000 §4.7 shows length is
    steerable through meta-questions, hence also exploitable), or more than ``max_clipped`` of
    completions hit the generation limit (rambling that never reaches an answer). Either one
    for ``patience`` consecutive evaluations confirms it.

    >>> detect_length_collapse([0, 1, 2, 3], [500, 300, 90, 80], min_length_frac=0.2)
    3
    >>> detect_length_collapse([0, 1, 2], [500, 480, 510], [0.1, 0.6, 0.7])
    2
    """
    _check_patience(patience)
    n, c = _as_float_arrays(steps, lengths, clipped_ratio)
    if len(n) == 0:
        return None
    reference = n[0]
    condition = []
    for i, ni in enumerate(n):
        short = bool(ni < min_length_frac * reference)
        clipped = bool(c is not None and c[i] > max_clipped)
        condition.append(short or clipped)
    return _first_streak(steps, condition, patience)


@dataclass(frozen=True)
class CollapseConfig:
    """Thresholds for the detectors; mirrors the ``collapse`` section of params.yaml.

    ``entropy_floor`` (nats per token) and ``min_length_frac``/``max_clipped`` are **(ours)**;
    ``min_drop``, ``reward_tol`` and ``patience`` are the documented defaults
    (docs/methods/shared.md).
    """

    min_drop: float = 0.1
    reward_tol: float = 0.0
    patience: int = 2
    entropy_floor: float = 0.005
    min_length_frac: float = 0.2
    max_clipped: float = 0.5
    early_stop: bool = False

    def __post_init__(self) -> None:
        _check_patience(self.patience)


@dataclass(frozen=True)
class CollapseEvent:
    """One confirmed collapse: its kind (one of ``KINDS``), the step and a readable message."""

    kind: str
    step: int
    message: str = ""


@dataclass
class CollapseMonitor:
    """Evaluation history fed one evaluation at a time; emits each kind of event once.

    The trainer callback calls ``update`` at every evaluation, logs ``metrics()``, tags the run on
    each returned event, stops training when ``should_stop`` (only if ``early_stop``), and keeps
    the checkpoint of ``best_step``: the paper's early-stopping remedy (000 §4.4, §5).
    The detectors are re-run on the whole history at each call, so the monitor and the pure
    functions cannot disagree about when an event happened.

    >>> m = CollapseMonitor(CollapseConfig(early_stop=True))
    >>> for s, r, h in [(0, 0.1, 0.5), (1, 0.4, 0.7), (2, 0.6, 0.5)]:
    ...     m.update(s, r, h)
    []
    []
    []
    >>> [(e.kind, e.step) for e in m.update(3, 0.8, 0.4)]
    [('reward_hacking', 3)]
    >>> m.events[-1].message
    'held-out 0.4 is 0.3 below its best 0.7 (step 1) while train reward 0.8 >= 0.4'
    >>> m.best_step, m.should_stop, m.metrics()["collapse/reward_hacking"]
    (1, True, 1)
    """

    config: CollapseConfig = field(default_factory=CollapseConfig)
    steps: list[int] = field(default_factory=list)
    reward: list[float] = field(default_factory=list)
    heldout: list[float] = field(default_factory=list)
    entropy: list[float] = field(default_factory=list)
    length: list[float] = field(default_factory=list)
    clipped_ratio: list[float] = field(default_factory=list)
    events: list[CollapseEvent] = field(default_factory=list)
    best_step: int | None = None
    best_heldout: float | None = None

    def update(
        self,
        step: int,
        reward: float | None,
        heldout: float | None,
        entropy: float | None = None,
        length: float | None = None,
        clipped_ratio: float | None = None,
    ) -> list[CollapseEvent]:
        """Record one evaluation and return the events first confirmed at this step."""
        if self.steps and step <= self.steps[-1]:
            raise ValueError(f"evaluation steps must increase: got {step} after {self.steps[-1]}")
        self.steps.append(int(step))
        for name, value in (
            ("reward", reward),
            ("heldout", heldout),
            ("entropy", entropy),
            ("length", length),
            ("clipped_ratio", clipped_ratio),
        ):
            getattr(self, name).append(math.nan if value is None else float(value))
        if heldout is not None and not math.isnan(heldout):
            if self.best_heldout is None or heldout > self.best_heldout:
                self.best_step, self.best_heldout = int(step), float(heldout)

        fired = {e.kind for e in self.events}
        new = []
        for kind, detect in (
            ("reward_hacking", self._hacking),
            ("entropy", self._entropy),
            ("length", self._length),
        ):
            if kind in fired:
                continue
            hit = detect()
            if hit is not None:
                new.append(hit)
        self.events.extend(new)
        return new

    def _present(self, *names: str, extra: tuple[str, ...] = ()) -> tuple[list[int], list[np.ndarray]]:
        """Steps where every series in ``names`` was measured, with those series and ``extra``."""
        arrays = [np.asarray(getattr(self, n), dtype=float) for n in names + extra]
        keep = np.all([~np.isnan(a) for a in arrays[: len(names)]], axis=0)
        steps = [s for s, k in zip(self.steps, keep) if k]
        return steps, [a[keep] for a in arrays]

    def _rewards_with_start(self) -> list[float]:
        """Train rewards, the leading evaluations without one (the evaluation before training)
        taking the first window's reward: the reward of (almost) the initial policy. Without this
        a run whose held-out score falls within the first window is never compared with its start."""
        r = list(self.reward)
        first = next((x for x in r if not math.isnan(x)), math.nan)
        for i, x in enumerate(r):
            if not math.isnan(x):
                break
            r[i] = first
        return r

    def _hacking(self) -> CollapseEvent | None:
        c = self.config
        saved, self.reward = self.reward, self._rewards_with_start()
        try:
            steps, (r, h) = self._present("reward", "heldout")
        finally:
            self.reward = saved
        at = detect_reward_hacking(steps, r, h, c.min_drop, c.reward_tol, c.patience)
        if at is None:
            return None
        # Describe against the best held-out step within the history the detector saw.
        i = steps.index(at)
        b = int(np.argmax(h[: i + 1]))
        return CollapseEvent(
            "reward_hacking",
            at,
            f"held-out {h[i]:.3g} is {h[b] - h[i]:.3g} below its best {h[b]:.3g} (step {steps[b]}) "
            f"while train reward {r[i]:.3g} >= {r[b]:.3g}",
        )

    def _entropy(self) -> CollapseEvent | None:
        c = self.config
        steps, (e,) = self._present("entropy")
        at = detect_entropy_collapse(steps, e, c.entropy_floor, c.patience)
        if at is None:
            return None
        last = e[steps.index(at)]
        return CollapseEvent(
            "entropy", at,
            f"entropy below {c.entropy_floor:g} for {c.patience} evaluations (last {last:.3g})",
        )

    def _length(self) -> CollapseEvent | None:
        c = self.config
        # A missing clipped ratio (NaN) never exceeds max_clipped, so it cannot trigger alone.
        steps, (n, clipped) = self._present("length", extra=("clipped_ratio",))
        at = detect_length_collapse(steps, n, clipped, c.min_length_frac, c.max_clipped, c.patience)
        if at is None:
            return None
        i = steps.index(at)
        return CollapseEvent(
            "length",
            at,
            f"mean length {n[i]:.4g} (first {n[0]:.4g}, floor frac {c.min_length_frac:g}), "
            f"clipped ratio {clipped[i]:.3g} (max {c.max_clipped:g}) for {c.patience} evaluations",
        )

    @property
    def should_stop(self) -> bool:
        """True once any event fired and the config asks for early stopping."""
        return self.config.early_stop and bool(self.events)

    def metrics(self) -> dict[str, float | int]:
        """``collapse/<kind>`` flags (0 or 1), plus the best held-out step and score when known."""
        fired = {e.kind for e in self.events}
        out: dict[str, float | int] = {f"collapse/{k}": int(k in fired) for k in KINDS}
        if self.best_step is not None:
            out["collapse/best_step"] = self.best_step
            out["collapse/best_heldout"] = self.best_heldout
        return out
