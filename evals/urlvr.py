"""URLVR's per-training measures (arXiv 2603.08660; docs/collapse.md, "URLVR's measures").

How far the reward a run optimises agrees with the truth, step by step: an intrinsic reward
(self-certainty, a majority vote) helps while the policy's confidence tracks correctness and
collapses the run once it no longer does. Measured on each training generation batch, on the
exact proxy reward the optimiser saw (`models.grpo`, no extra generation), against correctness:
the task's verifiable check (`rewards.verifiable.rlvr_correct`, the `rlvr` reward's).

- :func:`reward_accuracy`: the share of completions where the proxy reward, thresholded at its
  group's median, agrees with correctness.
- :func:`point_biserial`: the point-biserial correlation of proxy reward and correctness over the
  batch (scipy's `pointbiserialr`).
- :func:`collapse_step`: the Model Collapse Step, the first logged step after which the reward
  accuracy stays below :data:`THRESHOLD`.
- :func:`rise_then_fall`: whether a measure's curve rises above its first value and then falls.

Pure functions over plain numbers: no torch, so the report reads them without loading a model.
The same functions run at training time (`models.grpo`) and in the report (one home).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from statistics import median
from typing import Any

PREFIX = "urlvr/"
ACCURACY = f"{PREFIX}reward_accuracy"
CORRELATION = f"{PREFIX}point_biserial"
KEYS = (ACCURACY, CORRELATION)

# The Model Collapse Step's threshold (ours: the paper's exact threshold is not checked here).
# 0.5 is chance: a median split marks about half of a group positive whatever its share of
# correct completions, so a proxy unrelated to correctness agrees with it on half of them
# (p/2 + (1-p)/2 = 1/2). Below 0.5 the proxy ranks wrong completions above right ones.
THRESHOLD = 0.5
# How far a curve must rise above its first value, and fall below its peak, to count as "rise
# then fall" (ours): a twentieth of the range of an accuracy.
RISE_FALL_MARGIN = 0.05


def _number(x: Any) -> float | None:
    """A finite float (a bool counts as 0/1), or None for None, NaN, infinities and non-numbers."""
    if x is None or isinstance(x, str):
        return None
    try:
        value = float(x)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _pairs(rewards: Sequence[Any], correct: Sequence[Any],
           groups: Sequence[Hashable] | None = None) -> list[tuple[float, bool, Hashable]]:
    """(reward, correct, group) for the completions with a finite reward and a correctness."""
    if len(rewards) != len(correct) or (groups is not None and len(groups) != len(rewards)):
        sizes = [len(rewards), len(correct)] + ([] if groups is None else [len(groups)])
        raise ValueError(f"urlvr: rewards, correctness and groups must be one per completion; "
                         f"got lengths {sizes}")
    out = []
    for i, (r, c) in enumerate(zip(rewards, correct)):
        value, truth = _number(r), _number(c)
        if value is not None and truth is not None:
            out.append((value, truth > 0.5, None if groups is None else groups[i]))
    return out


def reward_accuracy(rewards: Sequence[Any], correct: Sequence[Any],
                    groups: Sequence[Hashable]) -> float | None:
    """The share of completions where the proxy reward, thresholded at its group's median, agrees
    with correctness; None where no group can be split.

    A completion is marked positive when its reward is at least its group's median AND above the
    group's lowest reward: ties at the median go up, but a group's floor never counts as a good
    completion. So a 0/1 reward marks exactly its 1s (for {1, 0, 0, 0} and {1, 1, 1, 0} alike),
    and the measure is then the plain agreement of reward and correctness. Left out (ours):
    completions whose reward is None/NaN or whose correctness is None (no gold answer), and
    groups whose remaining rewards are all equal, which no threshold splits and from which GRPO
    takes no advantage. A run whose every group is constant (a total consensus) logs no accuracy
    at that step.

    >>> reward_accuracy([0.9, 0.1, 0.5, 0.4], [1, 0, 0, 1], ["a", "a", "b", "b"])
    0.5
    >>> reward_accuracy([1, 0, 0, 0, 1, 1, 1, 0], [1, 0, 0, 0, 1, 1, 1, 0], [0] * 4 + [1] * 4)
    1.0
    >>> reward_accuracy([1, 1, 0.3, None], [0, 1, 1, 1], ["c", "c", "d", "d"]) is None
    True
    """
    by_group: dict[Hashable, list[tuple[float, bool]]] = {}
    for value, truth, group in _pairs(rewards, correct, groups):
        by_group.setdefault(group, []).append((value, truth))
    agree = total = 0
    for rows in by_group.values():
        values = [v for v, _ in rows]
        low, mid = min(values), median(values)
        if low == max(values):
            continue
        agree += sum((v >= mid and v > low) == truth for v, truth in rows)
        total += len(rows)
    return agree / total if total else None


def point_biserial(rewards: Sequence[Any], correct: Sequence[Any]) -> float | None:
    """The point-biserial correlation of proxy reward and correctness (scipy's `pointbiserialr`);
    None where it is undefined: fewer than two scored completions, or all rewards equal, or all
    correct, or all wrong. Completions with a None/NaN reward or None correctness are left out.

    >>> round(point_biserial([1.0, 0.5, 0.5, 0.0], [1, 1, 0, 0]), 4)  # (0.75 - 0.25) / sd * 1/2
    0.7071
    >>> point_biserial([0.5, 0.5, 0.5], [1, 0, 1]) is None, point_biserial([0.1, 0.7], [1, 1]) is None
    (True, True)
    """
    rows = _pairs(rewards, correct)
    values, truths = [v for v, _, _ in rows], [t for _, t, _ in rows]
    if len(rows) < 2 or min(values) == max(values) or len(set(truths)) < 2:
        return None
    from scipy.stats import pointbiserialr

    r = float(pointbiserialr(truths, values).statistic)
    return r if math.isfinite(r) else None


def step_measures(rewards: Sequence[Any], correct: Sequence[Any], group_size: int) -> dict[str, float]:
    """Both measures of one generation batch laid out as TRL lays it out (consecutive groups of
    `group_size` completions); an undefined measure is left out, not logged as a number.

    >>> {k: round(v, 4) for k, v in step_measures([1.0, 0.5, 0.0, 0.5], [1, 0, 0, 1], 2).items()}
    {'urlvr/reward_accuracy': 1.0, 'urlvr/point_biserial': 0.7071}
    >>> step_measures([1.0, 1.0], [0, 1], 2)
    {}
    """
    if group_size < 1:
        raise ValueError(f"urlvr: the group size must be at least 1, got {group_size}")
    groups = [i // group_size for i in range(len(rewards))]
    found = {ACCURACY: reward_accuracy(rewards, correct, groups),
             CORRELATION: point_biserial(rewards, correct)}
    return {k: v for k, v in found.items() if v is not None}


def logged(curve: Iterable[Mapping[str, Any]], key: str = ACCURACY) -> bool:
    """Whether a run's train.json rows hold the measure at all (runs recorded before the
    measures existed do not).

    >>> logged([{"step": 1, "reward": 0.2}]), logged([{"step": 1, ACCURACY: 0.7}])
    (False, True)
    """
    return any(key in row for row in curve)


def series(curve: Iterable[Mapping[str, Any]], key: str = ACCURACY) -> list[tuple[float, float]]:
    """(step, value) of the rows that logged `key` as a finite number, in the curve's order."""
    out = []
    for row in curve:
        value, step = _number(row.get(key)), _number(row.get("step"))
        if value is not None and step is not None:
            out.append((step, value))
    return out


def collapse_step(curve: Iterable[Mapping[str, Any]], threshold: float = THRESHOLD,
                  key: str = ACCURACY) -> int | None:
    """The Model Collapse Step: the first logged step from which the reward accuracy stays below
    `threshold` up to the run's last logged value; None if it never does (or was never logged:
    tell the two apart with :func:`logged`). A dip that recovers does not count; a dip at the last
    logged step does (no later value says otherwise). See :data:`THRESHOLD` for the 0.5.

    >>> curve = [{"step": s, ACCURACY: a} for s, a in ((10, 0.7), (20, 0.4), (30, 0.6),
    ...                                                (40, 0.45), (50, 0.3))]
    >>> collapse_step(curve)
    40
    >>> collapse_step(curve[:3]) is None, collapse_step([{"step": 1, "reward": 0.1}]) is None
    (True, True)
    """
    points = series(curve, key)
    step = None
    for s, value in reversed(points):
        if value >= threshold:
            break
        step = int(s)
    return step


def rise_then_fall(values: Sequence[Any], margin: float = RISE_FALL_MARGIN) -> bool:
    """Whether a curve rises above its first value and then falls: its peak is more than `margin`
    above its first value and its last value more than `margin` below the peak (so the peak is
    neither the first nor the last point). None/NaN values are skipped; a curve of fewer than
    three values is not a rise then a fall.

    >>> rise_then_fall([0.6, 0.7, 0.8, 0.55]), rise_then_fall([0.6, 0.7, 0.8, 0.78])
    (True, False)
    >>> rise_then_fall([0.8, 0.7, 0.5]), rise_then_fall([0.5, None, 0.9, float("nan"), 0.5])
    (False, True)
    """
    points = [v for v in (_number(x) for x in values) if v is not None]
    if len(points) < 3:
        return False
    peak = max(points)
    return peak - points[0] > margin and peak - points[-1] > margin
