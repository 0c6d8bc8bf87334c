"""`ref_logprob`: the policy's mean log-probability of the reference answer, read after its own
reasoning (arXiv 2602.03979; docs/methods/ref_logprob.md).

Likelihood-based rewards for chain-of-thought RL (Kwiatkowski et al., *Likelihood-Based Reward
Designs for General LLM Reasoning*): a rollout keeps its reasoning, the reference answer takes the
place of its own answer, and the policy's log-probability of the reference tokens, teacher-forced
after that reasoning, is the rollout's reward. DRO's R3 (:mod:`rewards.reflection`, paper 003) reads
the very same token probabilities and aggregates them on the probability scale (clipped, weighted
by their spread over the group); this is the log-scale, unweighted counterpart: the direct ablation
of R3's aggregation.

The log-probabilities come from DRO's path unchanged (``models.dro_trainer.score_rollouts``: the
CoT / answer split of :mod:`rewards.dro` and ONE batched no-grad teacher-forced pass per
generation batch, :func:`rewards.teacher_forcing.teacher_forced_logprobs`); the arm is the DRO
family with ``score: ref_logprob`` (``rewards.dro.judge_group``), so it trains through
``DroGRPOTrainer`` exactly as ``avg_prob`` does, only the aggregation changed.

Inputs per group: ``logp[g, t]`` (log P of reference token t after rollout g's reasoning and the
earlier reference tokens) and ``mask[g, t]`` (True for a real token; padding may hold anything,
even -inf). Formula: ``r_g = (1 / |M_g|) * sum over t in M_g of logp[g, t]``, None where M_g is
empty. The choices that are ours (the mean, not the paper's sum): docs/methods/ref_logprob.md.
"""

from __future__ import annotations

import numpy as np

__all__ = ["reference_logprob_rewards", "reference_logprob_scores"]

# A log-probability above this is not one (float32's log-softmax never exceeds 0): most likely
# probabilities were passed in place of log-probabilities.
_MAX_LOGP = 1e-6


def _checked(logp: object, mask: object | None) -> tuple[np.ndarray, np.ndarray]:
    """``logp`` as float [G, T] and ``mask`` as bool [G, T] (all True when None), or a ValueError
    naming what is wrong: not [G, T], an empty group, a mask of another shape or with values other
    than 0/1, a valid token whose log-probability is NaN, infinite or above 0."""
    try:
        values = np.asarray(logp, dtype=float)
    except (TypeError, ValueError) as e:
        raise ValueError(f"logp must be a [G, T] array of log-probabilities: {e}") from None
    if values.ndim != 2:
        raise ValueError(f"logp must be a [G, T] array of log-probabilities, got shape {values.shape}")
    if values.shape[0] == 0:
        raise ValueError("logp holds an empty group (G = 0): a group has at least one rollout")
    if mask is None:
        valid = np.ones(values.shape, dtype=bool)
    else:
        raw = np.asarray(mask)
        if raw.shape != values.shape:
            raise ValueError(f"mask shape {raw.shape} does not match logp shape {values.shape}")
        if raw.dtype != bool and not np.isin(raw, (0, 1)).all():
            raise ValueError("mask must hold 0/1 or booleans (1 = a real reference token)")
        valid = raw.astype(bool)
    bad = valid & ~(np.isfinite(values) & (values <= _MAX_LOGP))
    if bad.any():
        g, t = (int(i) for i in np.argwhere(bad)[0])
        what = values[g, t]
        why = ("is NaN" if np.isnan(what) else "is infinite" if np.isinf(what)
               else "is above 0: a log-probability is at most 0 (probabilities passed in?)")
        raise ValueError(f"logp[{g}, {t}] = {what} at a valid token {why}")
    return values, valid


def reference_logprob_rewards(logp: object, mask: object) -> list[float | None]:
    """The reward [G] of one group: each rollout's mean log-probability over its valid reference
    tokens; None for a rollout with no valid token (the reward does not apply, never a silent 0.0).

    Worked example: row 0 has both tokens, (-1 + -3) / 2 = -2; row 1 only its first,
    (-0.5) / 1; row 2 none (its padding may hold -inf).

    >>> reference_logprob_rewards([[-1.0, -3.0], [-0.5, -9.0], [float("-inf"), 0.0]],
    ...                           [[1, 1], [1, 0], [0, 0]])
    [-2.0, -0.5, None]
    """
    values, valid = _checked(logp, mask)
    count = valid.sum(axis=1)
    total = np.where(valid, values, 0.0).sum(axis=1)
    return [float(s / n) if n else None for s, n in zip(total, count, strict=True)]


def reference_logprob_scores(logp: object, mask: object | None = None) -> np.ndarray:
    """:func:`reference_logprob_rewards` as a float array, NaN where it is None (DRO's convention
    for "does not apply", ``rewards.dro.judge_group``); ``mask`` None = every token valid.

    >>> reference_logprob_scores([[-1.0, -3.0], [-2.0, -2.0]]).tolist()
    [-2.0, -2.0]
    """
    values, valid = _checked(logp, mask)
    rewards = reference_logprob_rewards(values, valid)
    return np.array([np.nan if r is None else r for r in rewards], dtype=float)
