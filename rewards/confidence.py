"""`self_certainty` and `entropy`: rewards from the policy's confidence in its own completion.

Both read the policy's full next-token distributions p_t at every completion position t, from
ONE batched no-grad teacher-forced pass over (prompt, completion) per generation batch
(:mod:`models.confidence_trainer`, through :func:`rewards.teacher_forcing.teacher_forced_logits`).
This module is the maths, on logits [G, T, V] and a mask [G, T] of valid positions:

- :func:`self_certainty` (Intuitor, arXiv 2505.19590): the mean over valid tokens of
  KL(U ‖ p_t) = −log|V| − (1/|V|) Σ_j log p_t(j), U uniform over the vocabulary. 0 for a
  uniform p_t, growing as p_t concentrates; it is the reward.
- :func:`token_entropy` (RENT, arXiv 2505.22660; EM-RL, arXiv 2505.15134): the mean over valid
  tokens of H(p_t) = −Σ_j p_t(j) log p_t(j), in nats (log|V| for a uniform p_t); the `entropy`
  reward is its NEGATIVE.
- :func:`sequence_logprob`: the mean log p_t of the sampled tokens, EM-RL's trajectory-level
  estimate (``reward.entropy.level: trajectory``).

A row with no valid token scores 0.0. The functions take numpy arrays or torch tensors (the
training path passes the pass's tensors on their device, so the [G, T, V] logits are never
copied to the host) and return numpy arrays [G] (float64). Decisions and where they differ from
the papers' public code: docs/methods/self_certainty.md, docs/methods/entropy.md.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

VERSION = "1"

__all__ = ["VERSION", "confidence_scores", "self_certainty", "sequence_logprob", "token_entropy"]


def _tensor(x: Any, *, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A torch tensor of ``x``: tensors kept where they are (floats promoted to at least float32),
    anything else through ``np.asarray`` (float64 stays float64)."""
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))
    if dtype is not None:
        return t.to(dtype)
    if t.is_floating_point() and t.dtype not in (torch.float32, torch.float64):
        t = t.float()  # bf16 / fp16 logits: the sums below need the precision
    return t


def _check(logits: torch.Tensor, mask: torch.Tensor) -> None:
    if logits.dim() != 3:
        raise ValueError(f"logits must be [G, T, V], got shape {tuple(logits.shape)}")
    if tuple(mask.shape) != tuple(logits.shape[:2]):
        raise ValueError(f"mask must be [G, T] = {tuple(logits.shape[:2])}, got {tuple(mask.shape)}")


def _row_mean(values: torch.Tensor, mask: torch.Tensor) -> np.ndarray:
    """Mean of ``values`` [G, T] over each row's valid positions; 0.0 for a row with none."""
    count = mask.sum(-1).to(values.dtype)
    total = values.masked_fill(~mask, 0.0).sum(-1)  # a masked inf or nan must not leak in
    out = torch.where(count > 0, total / count.clamp(min=1), torch.zeros_like(total))
    return out.detach().cpu().to(torch.float64).numpy()


def _per_token(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(KL(U ‖ p_t), H(p_t)) at every position [G, T] from logits [G, T, V]."""
    lse = torch.logsumexp(logits, dim=-1)
    # log p_t(j) = logits_j − lse; mean_j log p_t(j) = mean_j logits_j − lse.
    kl_uniform = lse - logits.mean(dim=-1) - math.log(logits.shape[-1])
    entropy = lse - (torch.softmax(logits, dim=-1) * logits).sum(-1)
    return kl_uniform, entropy


def self_certainty(logits: Any, mask: Any) -> np.ndarray:
    """Self-certainty [G]: the mean over valid tokens of KL(U ‖ p_t) (module docstring).

    >>> self_certainty(np.zeros((1, 3, 4)), np.ones((1, 3), bool)).tolist()   # uniform: 0
    [0.0]
    >>> p = [0.7, 0.1, 0.1, 0.1]   # -log 4 - (log 0.7 + 3 log 0.1) / 4
    >>> self_certainty(np.log([[p, [0.25] * 4]]), [[True, False]]).round(6).tolist()
    [0.429813]
    """
    t, m = _tensor(logits), _tensor(mask, dtype=torch.bool)
    _check(t, m)
    return _row_mean(_per_token(t)[0], m.to(t.device))


def token_entropy(logits: Any, mask: Any) -> np.ndarray:
    """Mean token entropy [G] in nats over valid tokens (≥ 0); the `entropy` reward is its negative.

    >>> token_entropy(np.zeros((1, 2, 4)), np.ones((1, 2), bool)).round(6).tolist()   # log 4
    [1.386294]
    >>> token_entropy(np.log([[[0.7, 0.1, 0.1, 0.1]]]), [[True]]).round(6).tolist()
    [0.940448]
    """
    t, m = _tensor(logits), _tensor(mask, dtype=torch.bool)
    _check(t, m)
    return _row_mean(_per_token(t)[1], m.to(t.device))


def sequence_logprob(logits: Any, ids: Any, mask: Any) -> np.ndarray:
    """Mean log-probability [G] of the tokens ``ids`` [G, T] over valid positions.

    >>> sequence_logprob(np.log([[[0.5, 0.25, 0.25], [0.1, 0.8, 0.1]]]), [[0, 1]],
    ...                  [[True, True]]).round(6).tolist()   # (log 0.5 + log 0.8) / 2
    [-0.458145]
    """
    t, m = _tensor(logits), _tensor(mask, dtype=torch.bool)
    _check(t, m)
    tokens = _tensor(ids, dtype=torch.long).to(t.device)
    if tuple(tokens.shape) != tuple(m.shape):
        raise ValueError(f"ids must be [G, T] = {tuple(m.shape)}, got {tuple(tokens.shape)}")
    logp = torch.log_softmax(t, dim=-1).gather(-1, tokens.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return _row_mean(logp, m.to(t.device))


def confidence_scores(logits: Any, ids: Any, mask: Any, score: str) -> np.ndarray:
    """The reward [G] a setting names: ``self_certainty``, ``neg_entropy`` (−:func:`token_entropy`)
    or ``logprob`` (:func:`sequence_logprob`).

    >>> confidence_scores(np.zeros((1, 1, 4)), [[0]], [[True]], "neg_entropy").round(6).tolist()
    [-1.386294]
    """
    if score == "self_certainty":
        return self_certainty(logits, mask)
    if score == "neg_entropy":
        return -token_entropy(logits, mask)
    if score == "logprob":
        return sequence_logprob(logits, ids, mask)
    raise ValueError(f"unknown confidence score {score!r}; known: self_certainty, neg_entropy, logprob")
