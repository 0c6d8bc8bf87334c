"""DRO in training: the R3 reward from one teacher-forced pass, rubric gates, variance filter (paper
003).

The maths (R3, the plain aggregations, the gates, h and theta) is :mod:`rewards.reflection`, the
pure per-query scoring (CoT / answer split, rule rubrics, a group's verdict) :mod:`rewards.dro`.
This module adds the model and the trainer: P for every rollout of the generation batch from ONE
batched ``no_grad`` teacher-forced pass (:func:`score_rollouts`), and :class:`DroGRPOTrainer`, which
replaces TRL's reward loop (``_calculate_rewards``) and removes a rejected group from the loss (zero
advantages, zero completion mask, ``num_items_in_batch`` recounted). Static pre-filter mode (paper
§5.5) is :func:`static_prefilter_rows`.

Decisions and their reasons: docs/methods/dro.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np
import torch
from accelerate.utils import gather_object
from trl import GRPOTrainer

from rewards import MethodContext, MethodPlan
from rewards.chat import THINK_END, ChatFormat, is_conversational
from rewards.dro import (
    FACTS_SEPARATOR,
    GroupVerdict,
    judge_group,
    reference_answer,
    rubric_row,
    scoring_prefix,
)
from rewards.reflection import AdaptiveThreshold, group_variance_score, static_prefilter
from rewards.teacher_forcing import teacher_forced_logprobs
from rewards.verifiable import completion_text

TASKS = ("arith", "facts", "arith_ref")
# Tasks whose demonstrations write `</think>` themselves (world/arith_ref.py): the marker needs no
# chat template there.
PLAIN_THINK_TASKS = ("arith_ref",)
__all__ = ["FACTS_SEPARATOR", "DroGRPOTrainer", "DroScore", "build", "cot_ids", "prompt_ids",
           "score_rollouts", "static_prefilter_rows"]
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

def prompt_ids(tokenizer: Any, prompts: Sequence[Any],
               chat_template_kwargs: dict | None = None) -> list[list[int]]:
    """Token ids of the prompts as TRL tokenises them for generation: plain text with the
    tokenizer's special tokens; conversational prompts through the chat template with the
    generation prompt and ``chat_template_kwargs`` (TRL's ``GRPOConfig.chat_template_kwargs``)."""
    if all(isinstance(p, str) for p in prompts):
        return tokenizer(text=list(prompts))["input_ids"]
    if not all(is_conversational(p) for p in prompts):
        raise ValueError("DRO's prompts must be all plain text or all conversational")
    out = tokenizer.apply_chat_template(list(prompts), add_generation_prompt=True, tokenize=True,
                                        return_dict=True, **(chat_template_kwargs or {}))
    return [list(ids) for ids in out["input_ids"]]


def score_rollouts(model: Any, tokenizer: Any, prompts: Sequence[Any], rows: Sequence[dict],
                   completion_ids: Sequence[Sequence[int]], task: str, marker: str,
                   chat_template_kwargs: dict | None = None,
                   batch_size: int | None = None) -> list[np.ndarray]:
    """log P of the reference answer's tokens for each rollout (one array per rollout), batched:
    one pass for all rollouts, or one per ``batch_size`` rollouts (the logits of a pass are
    rows x reference length x vocabulary: GBs for a 152k vocabulary and a whole GPU batch).

    The prefix is the prompt (tokenised as TRL tokenises it for generation, chat template
    included: :func:`prompt_ids`), the rollout's own tokens up to where the reference goes
    (:func:`rewards.dro.scoring_prefix`: its CoT; with the marker ``</think>``, its reasoning
    through ``</think>``) and the separator (facts: ``"\\nAnswer:"``; after ``</think>``: a blank line).
    """
    separators: dict[str, list[int]] = {}

    def ids_of(separator: str) -> list[int]:
        if separator not in separators:
            separators[separator] = tokenizer(separator, add_special_tokens=False)["input_ids"]
        return separators[separator]

    texts = tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
    prefixes = []
    for p, ids, text in zip(prompt_ids(tokenizer, prompts, chat_template_kwargs), completion_ids,
                            texts, strict=True):
        cot, separator = scoring_prefix(text, task, marker)
        prefixes.append(list(p) + cot_ids(tokenizer, ids, cot) + ids_of(separator))
    targets = tokenizer([reference_answer(r, task, marker) for r in rows],
                        add_special_tokens=False)["input_ids"]
    out: list[np.ndarray] = []
    step = batch_size or len(prefixes) or 1
    for start in range(0, len(prefixes), step):
        logp, mask = teacher_forced_logprobs(model, prefixes[start:start + step],
                                             targets[start:start + step], tokenizer.pad_token_id)
        out.extend(row[m].cpu().numpy() for row, m in zip(logp, mask))
    return out


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
            # In micro-batches of TRL's own log-prob passes (all at once with the CPU defaults).
            logps = score_rollouts(self.model, self.processing_class, prompts, inputs,
                                   completion_ids_list, task, marker, self.chat_template_kwargs,
                                   batch_size=self.args.per_device_train_batch_size)
        S = [rubric_row(row, completion_text(c), task, marker)
             for row, c in zip(inputs, completions, strict=True)]
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
    chat = ctx.chat or ChatFormat()
    if cfg.answer_marker == THINK_END and ctx.tokenizer is not None and (
            grpo.task not in PLAIN_THINK_TASKS) and (
            not chat.applies(ctx.tokenizer) or chat.enable_thinking is False):
        raise ValueError(f"{ctx.name}: reward.dro.answer_marker {THINK_END!r} is a reasoning model's: "
                         "it needs a tokenizer with a chat template and base_model.chat."
                         "enable_thinking true (or null); with thinking off, mark the answer in the "
                         "reply instead (e.g. 'The answer is')")
    select = None
    if cfg.static_top_k is not None:
        def select(rows: list[dict]) -> list[dict]:
            kept, _ = static_prefilter_rows(
                ctx.policy, ctx.tokenizer, rows, cfg, task=grpo.task,
                num_generations=grpo.num_generations, top_k=cfg.static_top_k,
                rest_frac=cfg.static_rest_frac, max_new_tokens=grpo.max_completion_length,
                temperature=grpo.temperature, seed=ctx.seed, chat=chat)
            return kept
    return MethodPlan(reward_funcs=[DroScore(cfg.score)], trainer_cls=DroGRPOTrainer,
                      trainer_kwargs={"dro": cfg, "task": grpo.task}, select_rows=select)


# --- Static pre-filter (paper §5.5) -------------------------------------------------------------

def static_prefilter_rows(model: Any, tokenizer: Any, rows: Sequence[dict], cfg: Any, *, task: str,
                          num_generations: int, top_k: int, rest_frac: float = 0.1,
                          max_new_tokens: int = 64, temperature: float = 1.0, seed: int = 0,
                          groups_per_pass: int = 8, chat: ChatFormat | None = None
                          ) -> tuple[list[dict], np.ndarray]:
    """Score every training prompt once with the initial policy and keep the top ``top_k`` by h
    plus a seeded ``rest_frac`` of the others (``rewards.reflection.static_prefilter``).

    Returns (kept rows in their original order, h of every row). Each pass scores
    ``groups_per_pass`` prompts' rollouts together. ``chat`` (None = auto): prompts through the
    chat template, as training gives them.
    """
    from models.generation import generate

    chat = chat or ChatFormat()
    templated = chat.applies(tokenizer)
    prompts = [chat.prompt(tokenizer, r["prompt"]) for r in rows]
    samples = generate(model, tokenizer, [chat.render(tokenizer, p) for p in prompts],
                       num_samples=num_generations, temperature=temperature,
                       max_new_tokens=max_new_tokens, seed=seed)
    h: list[float] = []
    for start in range(0, len(rows), groups_per_pass):
        chunk = rows[start:start + groups_per_pass]
        flat_rows = [r for r in chunk for _ in range(num_generations)]
        texts = [c for group in samples[start:start + groups_per_pass] for c in group]
        ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
        flat_prompts = [p for p in prompts[start:start + groups_per_pass] for _ in range(num_generations)]
        logps = score_rollouts(model, tokenizer, flat_prompts, flat_rows, ids, task, cfg.answer_marker,
                               chat.template_kwargs if templated else None)
        for k in range(0, len(logps), num_generations):
            P = np.exp(np.stack(logps[k:k + num_generations]))
            h.append(group_variance_score(P, None, cfg.token_frac, cfg.clip_low, cfg.clip_high))
    scores = np.array(h)
    keep = static_prefilter(scores, top_k, rest_frac, seed)
    return [rows[i] for i in keep], scores
