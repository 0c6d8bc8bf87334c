"""DRO in training: the R3 reward from one teacher-forced pass, rubric gates, variance filter (paper
003).

The maths (R3, the two plain aggregations, the gates, h and theta) lives in :mod:`rewards.reflection`,
the pure per-query scoring (the CoT / answer split, the rule rubrics, a group's verdict) in
:mod:`rewards.dro`; this module is what they need from a model and a trainer:

1. **Score** P[g, t] = P(reference token t | prompt, CoT_g, earlier reference tokens) for every
   rollout of the generation batch in ONE batched ``torch.no_grad`` forward pass
   (:func:`models.teacher_forcing.teacher_forced_logprobs`: rows left-padded with an explicit
   attention mask and position ids, so the reference tokens of every row end at the right edge and
   only the last ``max(len(reference)) + 1`` positions are projected onto the vocabulary). The CoT
   is the policy's own generated tokens (cut where its text ends, :func:`cot_ids`), not a
   re-tokenisation; the reference (:func:`rewards.dro.reference_answer`) is tokenised on its own,
   so every rollout of a group scores the same token sequence (sigma_t compares like with like).
   The scorer is the policy being trained, at its current weights (paper: "the same reference
   policy used during RL training", served by vLLM). Probabilities are the model's own
   (temperature 1), not the sampling temperature's. No end-of-sequence token is appended to the
   reference: whether the model stops says nothing about the reasoning.
2. **Reward and gate** per group with :func:`rewards.dro.judge_group`. A rejected group keeps
   its logged reward, but its advantages are zeroed AND its completion mask is zeroed in the batch
   the loss reads, with ``num_items_in_batch`` recounted, so it adds no gradient and no tokens to
   the normaliser. That is exact for TRL's token-count normalisers (``dapo``, the lab's loss,
   ``cispo`` and ``bnpo``); ``grpo``/``dr_grpo`` divide by a per-sequence count or a constant that
   would still count the rejected rows, so :func:`build` refuses them while a gate is on.

TRL hook: :meth:`DroGRPOTrainer._calculate_rewards` replaces TRL's reward loop (it returns the
gathered ``[B, 1]`` reward tensor TRL turns into advantages), and
:meth:`DroGRPOTrainer._generate_and_score_completions` applies the rejection to TRL's output. The
reward function in the plan is a named placeholder (``dro_r3``, ...) so TRL logs
``rewards/dro_r3/mean``; calling it is an error. Per-rollout scores are gathered across processes
before grouping, as TRL does with rewards, so a group split over GPUs is judged whole. Metrics go
through TRL's own ``self._metrics`` (averaged per logging step, sent to MLflow): ``dro/rejected``,
``dro/reject_coverage``, ``dro/reject_consistency``, ``dro/reject_variance`` (fraction of groups
failing each gate; 0 for a gate that is off), ``dro/theta``, ``dro/h_mean``, ``dro/r3_mean``.

facts has no answer marker: the CoT is the whole description and the reference is
``references[0]`` scored after the fixed separator ``"\\nAnswer:"`` (ours, no parameter). It is the
cue that ends every facts prompt, the one place the tiny model has learned that a description
follows, so the reference reads as a second description after the rollout's draft; a bare newline
would read as the next bullet line in ``bullets`` style, and EOS is followed by nothing the model
was trained on. Caveat: the tiny model never saw two descriptions in a row, so the draft can only
raise P through in-context copying, which a 2M-parameter model may barely do; ``dro/h_mean`` on
facts shows how much signal is left.

Also ours: theta and its window restart at 0 when training resumes from a checkpoint (at most
``filter_every`` steps unfiltered); with ``scale_rewards: batch`` a rejected group still enters the
batch std. Static pre-filter mode (paper §5.5) is :func:`static_prefilter_rows`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np
import torch
from accelerate.utils import gather_object
from trl import GRPOTrainer

from models.teacher_forcing import teacher_forced_logprobs
from rewards import MethodContext, MethodPlan
from rewards.dro import GroupVerdict, cot_and_answer, judge_group, reference_answer, rubric_row
from rewards.reflection import AdaptiveThreshold, group_variance_score, static_prefilter

TASKS = ("arith", "facts")
FACTS_SEPARATOR = "\nAnswer:"
# TRL losses whose normaliser counts unmasked completion tokens, so a zeroed mask removes a group.
TOKEN_NORMALISED_LOSSES = ("dapo", "cispo", "bnpo")


# --- The CoT's tokens -------------------------------------------------------------------------

def cot_ids(tokenizer: Any, ids: Sequence[int], cot: str) -> list[int]:
    """The generated tokens that spell ``cot``: the longest prefix of ``ids`` (special tokens such
    as the final EOS dropped) whose decoded text is no longer than ``cot``.

    Scoring the policy's own tokens, not a re-tokenisation of their text, conditions P on exactly
    what the policy wrote (a sampled segmentation need not be the canonical one) and never makes the
    sequence longer. Decoded length grows with the prefix, so a binary search finds the cut.
    """
    special = set(tokenizer.all_special_ids)
    ids = [i for i in ids if i not in special]
    lo, hi = 0, len(ids)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(tokenizer.decode(ids[:mid])) <= len(cot):
            lo = mid
        else:
            hi = mid - 1
    return ids[:lo]


# --- P from one batched teacher-forced pass -----------------------------------------------------

def score_rollouts(model: Any, tokenizer: Any, prompts: Sequence[str], rows: Sequence[dict],
                   completion_ids: Sequence[Sequence[int]], task: str, marker: str) -> list[np.ndarray]:
    """log P of the reference answer's tokens for each rollout (one array per rollout), batched.

    The prefix is the prompt (tokenised as TRL tokenises it for generation), the rollout's own CoT
    tokens and, for facts, the separator.
    """
    if not all(isinstance(p, str) for p in prompts):
        raise ValueError("DRO scores plain-text prompts; conversational prompts are not supported")
    prompt_ids = tokenizer(text=list(prompts))["input_ids"]
    separator = FACTS_SEPARATOR if task == "facts" else ""
    separator_ids = tokenizer(separator, add_special_tokens=False)["input_ids"]
    texts = tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
    prefixes = [p + cot_ids(tokenizer, ids, cot_and_answer(text, task, marker)[0]) + separator_ids
                for p, ids, text in zip(prompt_ids, completion_ids, texts, strict=True)]
    targets = tokenizer([reference_answer(r, task, marker) for r in rows],
                        add_special_tokens=False)["input_ids"]
    logp, mask = teacher_forced_logprobs(model, prefixes, targets, tokenizer.pad_token_id)
    return [row[m].cpu().numpy() for row, m in zip(logp, mask)]


# --- The trainer --------------------------------------------------------------------------------

class DroScore:
    """Placeholder reward function: names the TRL reward column (``dro_r3``, ...). The reward
    itself is computed by :class:`DroGRPOTrainer`, which never calls this."""

    def __init__(self, score: str) -> None:
        self.__name__ = f"dro_{score}"

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise RuntimeError(f"{self.__name__} is computed by models.dro_trainer.DroGRPOTrainer; "
                           "train with the plan's trainer_cls")


class DroGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose reward is DRO's and which rejects groups (module docstring)."""

    def __init__(self, *args: Any, dro: Any, task: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if len(self.reward_funcs) != 1:
            raise ValueError("DroGRPOTrainer computes its own reward: pass exactly one reward "
                             "function (the placeholder from models.dro_trainer.build)")
        self.dro, self.dro_task = dro, task
        self.threshold = AdaptiveThreshold(dro.filter_every, dro.percentile)
        self._generation_batches = 0
        self._keep: torch.Tensor | None = None

    def _judge_groups(self, logps: list[np.ndarray], S: list[list[bool]],
                      G: int) -> list[GroupVerdict]:
        return [judge_group(np.stack(logps[i:i + G]), np.array(S[i:i + G], dtype=bool),
                            self.dro, self.threshold)
                for i in range(0, len(logps), G)]

    def _calculate_rewards(self, inputs: list[dict], prompts: list[Any], completions: list[Any],
                           completion_ids_list: list[list[int]]) -> torch.Tensor:
        mode = "train" if self.model.training else "eval"
        G = self.num_generations if mode == "train" else self.num_generations_eval
        marker, task = self.dro.answer_marker, self.dro_task
        with self.accelerator.autocast():
            logps = score_rollouts(self.model, self.processing_class, prompts, inputs,
                                   completion_ids_list, task, marker)
        S = [rubric_row(row, c, task, marker) for row, c in zip(inputs, completions, strict=True)]
        verdicts = self._judge_groups(gather_object(logps), gather_object(S), G)
        if mode == "train":
            if self.dro.variance_filter:
                self.threshold.update(self._generation_batches, [v.h for v in verdicts])
            self._generation_batches += 1
        self._log_verdicts(mode, verdicts)
        device = self.accelerator.device
        self._keep = torch.tensor([v.accepted for v in verdicts], device=device).repeat_interleave(G)
        rewards = np.concatenate([v.rewards for v in verdicts])
        return torch.tensor(rewards, dtype=torch.float32, device=device).unsqueeze(1)

    def _log_verdicts(self, mode: str, verdicts: list[GroupVerdict]) -> None:
        metrics = self._metrics[mode]

        def rate(failed: Callable[[GroupVerdict], bool]) -> float:
            return float(np.mean([failed(v) for v in verdicts]))

        metrics["dro/rejected"].append(rate(lambda v: not v.accepted))
        metrics["dro/reject_coverage"].append(rate(lambda v: not v.coverage_ok))
        metrics["dro/reject_consistency"].append(rate(lambda v: not v.consistency_ok))
        metrics["dro/reject_variance"].append(rate(lambda v: not v.variance_ok))
        metrics["dro/theta"].append(self.threshold.theta)
        metrics["dro/h_mean"].append(float(np.mean([v.h for v in verdicts])))
        metrics["dro/r3_mean"].append(float(np.nanmean(np.concatenate([v.r3 for v in verdicts]))))

    def _generate_and_score_completions(self, inputs: list[dict]) -> dict:
        out = super()._generate_and_score_completions(inputs)
        n = out["completion_ids"].size(0)
        start = self.accelerator.process_index * n
        keep = self._keep[start:start + n]
        out["advantages"] = out["advantages"] * keep.to(out["advantages"].dtype)
        out["completion_mask"] = out["completion_mask"] * keep.unsqueeze(1).to(out["completion_mask"].dtype)
        # TRL's token count for the dapo/cispo normaliser, recounted without the rejected rows.
        mask = out["completion_mask"] * out.get("tool_mask", 1)
        out["num_items_in_batch"] = self.accelerator.gather(mask.sum()).sum()
        return out


def build(ctx: MethodContext) -> MethodPlan:
    """The DRO plan: its trainer computes the reward; the reward function only names the column."""
    cfg, grpo = ctx.cfg, ctx.grpo
    if grpo.task not in TASKS:
        raise ValueError(f"reward.dro: task {grpo.task!r} has no reference answer; DRO trains on "
                         f"{' or '.join(TASKS)} ({ctx.name})")
    if (cfg.gate or cfg.variance_filter) and grpo.loss_type not in TOKEN_NORMALISED_LOSSES:
        raise ValueError(f"{ctx.name}: grpo.loss_type {grpo.loss_type!r} would still count rejected "
                         f"groups in its normaliser; use one of {', '.join(TOKEN_NORMALISED_LOSSES)} "
                         "or turn off reward.dro.gate and reward.dro.variance_filter")
    select = None
    if cfg.static_top_k is not None:
        def select(rows: list[dict]) -> list[dict]:
            kept, _ = static_prefilter_rows(
                ctx.policy, ctx.tokenizer, rows, cfg, task=grpo.task,
                num_generations=grpo.num_generations, top_k=cfg.static_top_k,
                rest_frac=cfg.static_rest_frac, max_new_tokens=grpo.max_completion_length,
                temperature=grpo.temperature, seed=ctx.seed)
            return kept
    return MethodPlan(reward_funcs=[DroScore(cfg.score)], trainer_cls=DroGRPOTrainer,
                      trainer_kwargs={"dro": cfg, "task": grpo.task}, select_rows=select)


# --- Static pre-filter (paper §5.5) -------------------------------------------------------------

def static_prefilter_rows(model: Any, tokenizer: Any, rows: Sequence[dict], cfg: Any, *, task: str,
                          num_generations: int, top_k: int, rest_frac: float = 0.1,
                          max_new_tokens: int = 64, temperature: float = 1.0, seed: int = 0,
                          groups_per_pass: int = 8) -> tuple[list[dict], np.ndarray]:
    """Score every training prompt once with the initial policy and keep the top ``top_k`` by h
    plus a seeded ``rest_frac`` of the others (``rewards.reflection.static_prefilter``).

    Returns (kept rows in their original order, h of every row). Each pass scores
    ``groups_per_pass`` prompts' rollouts together.
    """
    from models.generation import generate

    samples = generate(model, tokenizer, [r["prompt"] for r in rows], num_samples=num_generations,
                       temperature=temperature, max_new_tokens=max_new_tokens, seed=seed)
    h: list[float] = []
    for start in range(0, len(rows), groups_per_pass):
        chunk = rows[start:start + groups_per_pass]
        flat_rows = [r for r in chunk for _ in range(num_generations)]
        texts = [c for group in samples[start:start + groups_per_pass] for c in group]
        ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
        logps = score_rollouts(model, tokenizer, [r["prompt"] for r in flat_rows], flat_rows, ids,
                               task, cfg.answer_marker)
        for k in range(0, len(logps), num_generations):
            P = np.exp(np.stack(logps[k:k + num_generations]))
            h.append(group_variance_score(P, None, cfg.token_frac, cfg.clip_low, cfg.clip_high))
    scores = np.array(h)
    keep = static_prefilter(scores, top_k, rest_frac, seed)
    return [rows[i] for i in keep], scores
