"""DRO: the Reasoning Reflection Reward (R3), rubric gating and variance filtering (paper 003).

The probability the policy gives a *reference* answer after its own chain of thought measures how
good that chain of thought was (§3.1). R3 (§3.2) clips each token probability to
``[clip_low, clip_high]`` and weights tokens by a softmax of how much their probability varies
across the group, so the few reasoning-reflective tokens are not diluted (§3.1.2, App. C). Inputs
per group: ``P[g, t]`` (teacher-forced probability of reference token t after rollout g's CoT) and
``mask[g, t]`` (real tokens). Also here: the plain aggregations paper 003 compares against
(Table 1 rows 3-4), the coverage and consistency gates (§4.1), the variance score h with its
adaptive threshold (§4.2) and the static pre-filter (§5.5).

Decisions and their reasons (the defaults that are ours, NaN for a rollout with no valid token):
docs/methods/dro.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

VERSION = "1"

__all__ = [
    "VERSION",
    "AdaptiveThreshold",
    "avg_logprob_rewards",
    "avg_prob_rewards",
    "consistency_gate",
    "coverage_gate",
    "group_variance_score",
    "r3_rewards",
    "static_prefilter",
]


def _group_arrays(P: object, mask: object | None, name: str = "P") -> tuple[np.ndarray, np.ndarray]:
    """``P`` as float [G, T] and ``mask`` as bool [G, T] (all True when None)."""
    values = np.asarray(P, dtype=float)
    if values.ndim != 2:
        raise ValueError(f"{name} must be a [G, T] array, got shape {values.shape}")
    if mask is None:
        valid = np.ones(values.shape, dtype=bool)
    else:
        valid = np.asarray(mask).astype(bool)
        if valid.shape != values.shape:
            raise ValueError(f"mask shape {valid.shape} does not match {name} shape {values.shape}")
    return values, valid


def _token_spread(Q: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Population std over rollouts of each token, using only rollouts where it is valid.

    Returns ``(sigma[T], token_valid[T])``; a token no rollout covers has sigma 0 and is invalid.
    """
    count = valid.sum(axis=0)
    token_valid = count > 0
    safe = np.maximum(count, 1)
    mean = np.where(valid, Q, 0.0).sum(axis=0) / safe
    var = np.where(valid, (Q - mean) ** 2, 0.0).sum(axis=0) / safe
    return np.sqrt(var), token_valid


def r3_rewards(
    P: object,
    mask: object | None = None,
    emphasis: float = 10.0,
    clip_low: float = 0.1,
    clip_high: float = 0.9,
) -> np.ndarray:
    """R3 reward per rollout: softmax(emphasis * sigma)-weighted mean of clipped probabilities.

    Paper 003 §3.2: Q = clip(P, clip_low, clip_high); sigma_t = std over the group of Q[:, t];
    w = softmax(emphasis * sigma) over valid tokens; R3_g = sum_t w_t Q[g, t]. ``emphasis=0`` gives
    the plain clipped average (the Appendix J ablation). A rollout with no valid token gets nan.

    Worked example: token 0 is the same for both rollouts (sigma 0), token 1 differs
    (sigma = std([0.6, 0.2]) = 0.2), so w = softmax([0, 2]) = [0.1192, 0.8808] and
    R3 = [0.8*0.1192 + 0.6*0.8808, 0.8*0.1192 + 0.2*0.8808] = [0.6238, 0.2715].

    >>> P = [[0.8, 0.6], [0.8, 0.2]]
    >>> np.round(r3_rewards(P), 4).tolist()
    [0.6238, 0.2715]
    >>> np.round(r3_rewards(P, emphasis=0.0), 4).tolist()
    [0.7, 0.5]
    """
    values, valid = _group_arrays(P, mask)
    if clip_low > clip_high:
        raise ValueError(f"clip_low ({clip_low}) must not exceed clip_high ({clip_high})")
    G, T = values.shape
    if T == 0:
        return np.full(G, np.nan)
    Q = np.clip(values, clip_low, clip_high)
    sigma, token_valid = _token_spread(Q, valid)
    logits = emphasis * sigma
    # Shift by the largest valid logit for a stable exp; masked entries are zeroed below.
    shift = logits[token_valid].max() if token_valid.any() else 0.0
    weights = np.where(valid, np.exp(logits - shift), 0.0)
    norm = weights.sum(axis=1)
    total = (weights * np.where(valid, Q, 0.0)).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(norm > 0, total / np.where(norm > 0, norm, 1.0), np.nan)


def avg_prob_rewards(P: object, mask: object | None = None) -> np.ndarray:
    """Baseline: mean token probability of the reference per rollout (paper 003 Table 1, "Avg Prob").

    Unclipped and unweighted, so every near-constant token dilutes the reflective ones (§3.1.2).
    A rollout with no valid token gets nan.

    >>> avg_prob_rewards([[0.5, 1.0], [0.2, 0.0]], [[1, 1], [1, 0]]).tolist()
    [0.75, 0.2]
    """
    values, valid = _group_arrays(P, mask)
    count = valid.sum(axis=1)
    total = np.where(valid, values, 0.0).sum(axis=1)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def avg_logprob_rewards(logP: object, mask: object | None = None) -> np.ndarray:
    """Baseline: mean token log-probability per rollout (paper 003 Table 1, "Avg Logprob").

    On the log scale near-impossible tokens (style mismatches) swing by whole nats for negligible
    probability changes, which is why the paper finds this the noisiest aggregation (Fig. 3).
    Masked entries may hold anything (even -inf); a rollout with no valid token gets nan.

    >>> avg_logprob_rewards([[-1.0, -3.0], [-2.0, float("-inf")]], [[1, 1], [1, 0]]).tolist()
    [-2.0, -2.0]
    """
    values, valid = _group_arrays(logP, mask, name="logP")
    count = valid.sum(axis=1)
    total = np.where(valid, values, 0.0).sum(axis=1)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _rubric_matrix(S: object) -> np.ndarray:
    matrix = np.asarray(S).astype(bool)
    if matrix.ndim != 2:
        raise ValueError(f"S must be a [G, R] array of rubric satisfactions, got shape {matrix.shape}")
    return matrix


def coverage_gate(S: object, min_rollouts: int = 1) -> bool:
    """Coverage gate (paper 003 §4.1): every rubric is met by at least ``min_rollouts`` rollouts.

    A rubric no rollout can meet means the group carries no feasible example to learn from, so the
    whole group is rejected rather than rewarded for constraint-violating answers. No rubrics: pass.

    >>> coverage_gate([[1, 0], [0, 1]])
    True
    >>> coverage_gate([[1, 0], [1, 0]])
    False
    >>> coverage_gate([[1, 1], [1, 0]], min_rollouts=2)
    False
    """
    matrix = _rubric_matrix(S)
    return bool(np.all(matrix.sum(axis=0) >= min_rollouts))


def _n_top(G: int, frac: float) -> int:
    """ceil(frac * G), robust to float error (0.1 * 30 is 3.0000000000000004, not 4 rollouts)."""
    return min(G, max(0, math.ceil(round(frac * G, 9))))


def consistency_gate(
    S: object,
    scores: object,
    top_frac: float = 0.25,
    min_rubric_frac: float = 0.5,
) -> bool:
    """Consistency gate (paper 003 §4.1): the top ceil(top_frac*G) rollouts by R3 each meet at least
    ``min_rubric_frac`` of the rubrics.

    The top-scored rollouts carry the largest positive advantages, so they must not be answers that
    violate the essential constraints. Ties in ``scores`` keep rollout order; nan scores rank last.
    No rubrics or no rollouts: pass.

    Worked example: G = 4 so one top rollout; rollout 2 has the best score and meets 1 of 2 rubrics
    (0.5 >= 0.5, pass); with ``min_rubric_frac=0.75`` it fails.

    >>> S = [[1, 1], [1, 1], [0, 1], [0, 0]]
    >>> consistency_gate(S, [0.1, 0.2, 0.9, 0.3])
    True
    >>> consistency_gate(S, [0.1, 0.2, 0.9, 0.3], min_rubric_frac=0.75)
    False
    """
    matrix = _rubric_matrix(S)
    ranks = np.asarray(scores, dtype=float).reshape(-1)
    G, R = matrix.shape
    if ranks.shape[0] != G:
        raise ValueError(f"scores has {ranks.shape[0]} entries for a group of {G} rollouts")
    if R == 0 or G == 0:
        return True
    ranks = np.where(np.isnan(ranks), -np.inf, ranks)
    top = np.argsort(-ranks, kind="stable")[: _n_top(G, top_frac)]
    # Compare counts, not fractions, so 0.5 of 2 rubrics is exactly one rubric.
    needed = min_rubric_frac * R - 1e-9
    return bool(np.all(matrix[top].sum(axis=1) >= needed))


def group_variance_score(
    P: object,
    mask: object | None = None,
    token_frac: float = 0.1,
    clip_low: float = 0.1,
    clip_high: float = 0.9,
) -> float:
    """High-variance score h of a group (paper 003 §4.2): mean of the top ``token_frac`` of sigma_t.

    sigma_t is the same clipped spread R3 uses; the top ceil(token_frac * T_valid) tokens (at least
    one) are averaged. A low h means the group's R3 differences are mostly noise that groupwise
    z-scoring would amplify, so the filter rejects it. All-masked group: 0.0.

    Worked example: sigmas of the three tokens are [0, 0.2, 0.05] (clipped values [0.9, 0.9] ->
    0; [0.6, 0.2] -> 0.2; [0.5, 0.4] -> 0.05); the top ceil(0.1 * 3) = 1 token gives h = 0.2,
    the top ceil(0.5 * 3) = 2 tokens give (0.2 + 0.05) / 2 = 0.125.

    >>> P = [[0.95, 0.6, 0.5], [0.99, 0.2, 0.4]]
    >>> round(group_variance_score(P), 6)
    0.2
    >>> round(group_variance_score(P, token_frac=0.5), 6)
    0.125
    """
    values, valid = _group_arrays(P, mask)
    Q = np.clip(values, clip_low, clip_high)
    sigma, token_valid = _token_spread(Q, valid)
    spread = sigma[token_valid]
    if spread.size == 0:
        return 0.0
    k = max(1, _n_top(spread.size, token_frac))
    return float(np.sort(spread)[-k:].mean())


class AdaptiveThreshold:
    """The dynamic variance-filter threshold theta of paper 003 §4.2 (state, so a class).

    theta starts at 0 (accept everything). Steps are counted from 0; after the step that closes a
    window of ``period`` steps (``(step + 1) % period == 0``), theta becomes the
    ``percentile``-th percentile of the h values recorded during that window, and applies to the
    following steps. A group is accepted iff ``h >= theta``. Defaults **(ours)**: period 8,
    percentile 20. The paper picks the percentile per dataset "to target a desired acceptance
    band" (no value survives in its text); a 20th percentile rejects about a fifth of the next
    window's groups only where their h values are spread out (a group at theta is accepted, so
    ties at the bottom keep the share lower). On the tiny world's bases it rejects far fewer: never
    on ``arith``, a small share on ``arith_ref`` (the report's claims table, claim
    ``gates_and_filter_add``: its precondition on ``dro/reject_variance``).

    >>> th = AdaptiveThreshold(period=2, percentile=50)
    >>> th.accept(0.0)
    True
    >>> th.update(0, [0.1, 0.3])
    0.0
    >>> th.update(1, [0.2, 0.4])
    0.25
    >>> th.accept(0.2), th.accept(0.25)
    (False, True)
    """

    def __init__(self, period: int = 8, percentile: float = 20.0) -> None:
        if period < 1:
            raise ValueError(f"period must be >= 1, got {period}")
        if not 0.0 <= percentile <= 100.0:
            raise ValueError(f"percentile must be in [0, 100], got {percentile}")
        self.period = int(period)
        self.percentile = float(percentile)
        self.theta = 0.0
        self._window: list[float] = []

    def update(self, step: int, h_values: Iterable[float]) -> float:
        """Record this step's h values; at a window boundary recompute theta. Returns theta."""
        values = np.asarray(list(h_values), dtype=float).reshape(-1)
        self._window.extend(values[np.isfinite(values)].tolist())
        if (int(step) + 1) % self.period == 0:
            if self._window:
                self.theta = float(np.percentile(self._window, self.percentile))
            self._window = []
        return self.theta

    def accept(self, h: float) -> bool:
        """Keep the group unless its high-variance score is below theta (nan is rejected)."""
        return bool(h >= self.theta)


def static_prefilter(
    h_scores: object,
    top_k: int,
    rest_frac: float = 0.1,
    seed: int = 0,
) -> np.ndarray:
    """Static variance pre-filter (paper 003 §5.5): indices of the top_k prompts by h, plus a seeded
    random ``rest_frac`` of the others (rounded half up) to keep some hard cases.

    The paper scores every training prompt once with the initial policy and trains on this subset;
    quality (high-variance groups) beats quantity. Ties keep input order. Returned sorted.

    >>> static_prefilter([0.1, 0.9, 0.5, 0.7], top_k=2, rest_frac=0.0).tolist()
    [1, 3]
    >>> len(static_prefilter(np.arange(30) / 30, top_k=10, rest_frac=0.1))
    12
    """
    h = np.asarray(h_scores, dtype=float).reshape(-1)
    if top_k < 0:
        raise ValueError(f"top_k must be >= 0, got {top_k}")
    if not 0.0 <= rest_frac <= 1.0:
        raise ValueError(f"rest_frac must be in [0, 1], got {rest_frac}")
    order = np.argsort(-np.where(np.isnan(h), -np.inf, h), kind="stable")
    top, rest = order[:top_k], order[top_k:]
    n_extra = min(rest.size, math.floor(rest_frac * rest.size + 0.5))
    extra = np.random.default_rng(seed).choice(rest, size=n_extra, replace=False)
    return np.sort(np.concatenate([top, extra]).astype(int))
