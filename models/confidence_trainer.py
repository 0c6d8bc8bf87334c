"""The confidence rewards in training: self-certainty (Intuitor) and entropy (RENT, EM-RL).

The maths is :mod:`rewards.confidence`; this module adds the model. Every completion of the
generation batch is scored from ONE batched no-grad teacher-forced pass of the policy as the
trainer holds it (:func:`rewards.teacher_forcing.teacher_forced_logits`, the machinery DRO's R3
pass uses): the prompt tokenised as TRL tokenised it for generation
(:func:`models.dro_trainer.prompt_ids`), then the completion's own token ids, whose positions give
the full next-token distributions p_t the rewards read.

TRL computes no such distributions before the rewards: its old-log-prob pass runs only when
generation and optimisation steps are misaligned, returns log-probs of the sampled tokens (and
entropies from a fused head) but never the full distribution, and the loss pass comes after the
rewards, with gradients, on updated weights. So the rewards pay one extra no-grad pass, measured
by ``benchmarks/reward_overhead.py``. They are plain TRL reward callables (no trainer subclass):
the trainer is handed to them after construction (``reward.trainer = trainer``, as
``models.grpo.train`` does for every reward with a ``trainer`` attribute).

Decisions and their reasons: docs/methods/self_certainty.md, docs/methods/entropy.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from models.dro_trainer import prompt_ids
from rewards import MethodContext, MethodPlan
from rewards.confidence import confidence_scores
from rewards.teacher_forcing import pad_rows, teacher_forced_logits

__all__ = ["ConfidenceReward", "build_entropy", "build_self_certainty", "score_completions"]

# The reward column each score is logged under (TRL: rewards/<name>/mean).
NAMES = {"self_certainty": "self_certainty", "neg_entropy": "entropy_neg_token",
         "logprob": "entropy_logprob"}


def score_completions(model: Any, tokenizer: Any, prompts: Sequence[Any],
                      completion_ids: Sequence[Sequence[int]], score: str,
                      chat_template_kwargs: dict | None = None,
                      rows_per_pass: int | None = None) -> np.ndarray:
    """The confidence score [B] of each completion (``score``: a
    :func:`rewards.confidence.confidence_scores` name) from one batched pass over every row, or
    one per ``rows_per_pass`` rows (the logits of a pass are rows x completion length x
    vocabulary: GBs for a 152k vocabulary). A completion with no token scores 0.0."""
    out = np.zeros(len(completion_ids))
    rows = [i for i, ids in enumerate(completion_ids) if len(ids) > 0]
    if not rows:
        return out
    prefixes = prompt_ids(tokenizer, prompts, chat_template_kwargs)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    step = rows_per_pass or len(rows)
    for start in range(0, len(rows), step):
        chunk = rows[start:start + step]
        targets = [list(completion_ids[i]) for i in chunk]
        logits, mask = teacher_forced_logits(model, [prefixes[i] for i in chunk], targets, pad)
        ids, _ = pad_rows(targets, 0, "right")  # left-aligned like the logits
        out[chunk] = confidence_scores(logits, ids.to(logits.device), mask, score)
        del logits
    return out


class ConfidenceReward:
    """TRL reward function: one confidence score per completion (module docstring).

    ``policy`` scores when no trainer is set (tests, benchmarks); with ``reward.trainer = trainer``
    the trainer's current model scores, in the trainer's autocast, with its chat-template keywords.
    """

    def __init__(self, score: str, tokenizer: Any, *, policy: Any = None,
                 rows_per_pass: int | None = None) -> None:
        if score not in NAMES:
            raise ValueError(f"unknown confidence score {score!r}; known: {', '.join(NAMES)}")
        self.__name__ = NAMES[score]
        self.score = score
        self.tokenizer = tokenizer
        self.policy = policy
        self.rows_per_pass = rows_per_pass
        self.trainer: Any = None

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any],
                 completion_ids: Sequence[Sequence[int]] | None = None, **kwargs: Any) -> list[float]:
        if completion_ids is None:
            raise ValueError(f"{self.__name__} scores the completions' token ids: TRL passes "
                             "completion_ids to reward functions (trl 1.16)")
        if self.trainer is not None:
            trainer = self.trainer
            model = trainer.accelerator.unwrap_model(trainer.model)
            with trainer.accelerator.autocast():
                scores = score_completions(model, self.tokenizer, prompts, completion_ids, self.score,
                                           getattr(trainer, "chat_template_kwargs", None),
                                           self.rows_per_pass)
        elif self.policy is not None:
            scores = score_completions(self.policy, self.tokenizer, prompts, completion_ids, self.score,
                                       rows_per_pass=self.rows_per_pass)
        else:
            raise RuntimeError(f"{self.__name__} needs reward.trainer (or policy=) before its first call")
        return [float(s) for s in scores]


def _plan(ctx: MethodContext, score: str) -> MethodPlan:
    if ctx.tokenizer is None:
        raise ValueError(f"{ctx.name}: the confidence rewards score with the policy's tokenizer")
    return MethodPlan([ConfidenceReward(score, ctx.tokenizer, policy=ctx.policy,
                                        rows_per_pass=ctx.cfg.rows_per_pass)])


def build_self_certainty(ctx: MethodContext) -> MethodPlan:
    """Intuitor's plan: the self-certainty of each completion is its reward."""
    return _plan(ctx, "self_certainty")


def build_entropy(ctx: MethodContext) -> MethodPlan:
    """RENT / EM-RL's plan: minus the mean token entropy (``level: token``), or the mean
    log-probability of the sampled tokens (``level: trajectory``)."""
    return _plan(ctx, "neg_entropy" if ctx.cfg.level == "token" else "logprob")
