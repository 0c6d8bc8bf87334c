"""DRO in training: the R3 reward from one teacher-forced pass, rubric gates, variance filter (SPEC 4,
paper 003).

The maths (R3, the two plain aggregations, the gates, h and theta) lives in :mod:`rewards.reflection`;
this module is what it needs from a model and a trainer:

1. **Split** each completion into CoT and final answer at the LAST ``answer_marker`` (a reasoning
   model's ``</think>``; the tiny world's ``The answer is``). The whitespace just before the marker
   belongs to the answer, so the reference answer of an arith row is e.g.
   ``" The answer is \\boxed{2}."`` and the CoT ends where a byte-level BPE word would. No marker: the
   whole completion is the CoT (the reference is then scored after an unfinished chain of thought).
2. **Score** P[g, t] = P(reference token t | prompt, CoT_g, earlier reference tokens) for every
   rollout of the generation batch in ONE batched ``torch.no_grad`` forward pass: rows are
   left-padded with an explicit attention mask and position ids, so the reference tokens of every
   row end at the right edge and only the last ``max(len(reference)) + 1`` positions are projected
   onto the vocabulary (``logits_to_keep``). The CoT is the policy's own generated tokens (cut where
   its text ends, :func:`cot_ids`), not a re-tokenisation; the reference is tokenised on its own,
   so every rollout of a group scores the same token sequence (sigma_t compares like with like).
   The scorer is the policy being trained, at its current weights (paper: "the same reference
   policy used during RL training", served by vLLM). Probabilities are the model's own
   (temperature 1), not the sampling temperature's. No end-of-sequence token is appended to the
   reference: whether the model stops says nothing about the reasoning.
3. **Reward** per group with ``r3_rewards`` / ``avg_prob_rewards`` / ``avg_logprob_rewards``
   (``reward.dro.score``); R3 is logged whatever the score, so the variants' curves compare.
4. **Gate** per group (paper §4.1, §4.2): coverage and consistency over S[g, r] from the rule rubrics
   below, and h >= theta with :class:`rewards.reflection.AdaptiveThreshold`. A rejected group keeps
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

Rubrics (ours; the paper has an LLM write a compact set of yes/no questions per query and drops
those the reference answer fails, §4.1, App. E). The tiny world's are rule checks, each judged on
(CoT, final answer) of a rollout and kept only if the reference passes it:

- arith: ``boxed_integer`` (the final answer's box holds an integer), ``boxed_once`` (exactly one
  ``\\boxed{``), ``ends_after_box`` (nothing but a period or spaces after the box),
  ``cot_matches_box`` (the last ``= N`` of the CoT equals the boxed number).
- facts: ``mentions <fact>`` per gold fact (a whole-word match, :func:`world.facts.coverage`) and
  ``style`` (:func:`world.facts.style_ok` with the row's requested style).

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

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from accelerate.utils import gather_object
from trl import GRPOTrainer

from rewards import MethodContext, MethodPlan
from rewards.reflection import (
    AdaptiveThreshold,
    avg_logprob_rewards,
    avg_prob_rewards,
    consistency_gate,
    coverage_gate,
    group_variance_score,
    r3_rewards,
    static_prefilter,
)
from rewards.verifiable import extract_boxed
from world.facts import coverage, style_ok

TASKS = ("arith", "facts")
FACTS_SEPARATOR = "\nAnswer:"
# TRL losses whose normaliser counts unmasked completion tokens, so a zeroed mask removes a group.
TOKEN_NORMALISED_LOSSES = ("dapo", "cispo", "bnpo")


# --- CoT / answer split and the reference ------------------------------------------------------

def split_answer(text: str, marker: str) -> tuple[str, str]:
    """(CoT, final answer): the answer starts at the LAST ``marker``, with the whitespace before it.

    >>> split_answer(" 4 / 2 = 2. The answer is \\\\boxed{2}.", "The answer is")
    (' 4 / 2 = 2.', ' The answer is \\\\boxed{2}.')
    >>> split_answer(" 4 / 2 = 2.", "The answer is")
    (' 4 / 2 = 2.', '')
    """
    at = text.rfind(marker) if marker else -1
    if at < 0:
        return text, ""
    cot = text[:at].rstrip()
    return cot, text[len(cot):]


def _field(row: dict, key: str, task: str):
    if key not in row:
        raise ValueError(f"row {row.get('prompt_id', '?')}: DRO on {task!r} needs the column {key!r}")
    return row[key]


def _reference_text(row: dict, task: str) -> str:
    """The row's full reference: arith's correct solution, facts' first paraphrase."""
    return _field(row, "reference", task) if task == "arith" else _field(row, "references", task)[0]


def cot_and_answer(text: str, task: str, marker: str) -> tuple[str, str]:
    """(CoT, final answer) of a completion or reference; a facts description is both."""
    return split_answer(text, marker) if task == "arith" else (text, text)


def reference_answer(row: dict, task: str, marker: str) -> str:
    """The answer tokens P is computed over.

    >>> reference_answer({"reference": " 9 - 3 = 6. The answer is \\\\boxed{6}."}, "arith", "The answer is")
    ' The answer is \\\\boxed{6}.'
    """
    if task == "facts":
        return _reference_text(row, task)
    answer = split_answer(_reference_text(row, task), marker)[1]
    if not answer:
        raise ValueError(f"row {row.get('prompt_id', '?')}: the reference has no answer marker "
                         f"{marker!r} (reward.dro.answer_marker)")
    return answer


def cot_ids(tokenizer, ids: Sequence[int], cot: str) -> list[int]:
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


# --- Rubrics ------------------------------------------------------------------------------------

class Rubric(NamedTuple):
    name: str
    check: Callable[[str, str], bool]  # (CoT, final answer) -> satisfied


def _boxed_int(answer: str) -> int | None:
    box = extract_boxed(answer)
    if box is None or not re.fullmatch(r"\s*-?\d+\s*", box.replace(",", "")):
        return None
    return int(box.replace(",", ""))


def _ends_after_box(answer: str) -> bool:
    tail = answer[answer.rfind("}") + 1:]
    return extract_boxed(answer) is not None and re.fullmatch(r"[\s.]*", tail) is not None


def _cot_matches_box(cot: str, answer: str) -> bool:
    results = re.findall(r"=\s*(-?\d+)", cot.replace(",", ""))
    boxed = _boxed_int(answer)
    return bool(results) and boxed is not None and int(results[-1]) == boxed


ARITH_RUBRICS = (
    Rubric("boxed_integer", lambda cot, answer: _boxed_int(answer) is not None),
    Rubric("boxed_once", lambda cot, answer: answer.count("\\boxed{") == 1),
    Rubric("ends_after_box", lambda cot, answer: _ends_after_box(answer)),
    Rubric("cot_matches_box", _cot_matches_box),
)


def facts_rubrics(row: dict) -> list[Rubric]:
    """One ``mentions <fact>`` rubric per gold fact, then the requested style."""
    out = [Rubric(f"mentions {fact}", lambda cot, answer, f=fact: coverage(answer, [f]) == 1.0)
           for fact in _field(row, "gold_facts", "facts")]
    style = _field(row, "style", "facts")
    return out + [Rubric("style", lambda cot, answer: style_ok(answer, style))]


def query_rubrics(row: dict, task: str, marker: str) -> list[Rubric]:
    """The row's rubrics that its own reference satisfies (paper §4.1 drops the others).

    >>> row = {"reference": " 2 + 3 = 5. The answer is \\\\boxed{5}."}
    >>> [r.name for r in query_rubrics(row, "arith", "The answer is")]
    ['boxed_integer', 'boxed_once', 'ends_after_box', 'cot_matches_box']
    >>> row = {"reference": " 2 + 3 = 5. The answer is \\\\boxed{5.5}."}
    >>> [r.name for r in query_rubrics(row, "arith", "The answer is")]
    ['boxed_once', 'ends_after_box']
    """
    candidates = ARITH_RUBRICS if task == "arith" else facts_rubrics(row)
    cot, answer = cot_and_answer(_reference_text(row, task), task, marker)
    return [r for r in candidates if r.check(cot, answer)]


def rubric_row(row: dict, completion: str, task: str, marker: str) -> list[bool]:
    """S[g, :] of one rollout: which of its prompt's rubrics it satisfies."""
    cot, answer = cot_and_answer(completion, task, marker)
    return [r.check(cot, answer) for r in query_rubrics(row, task, marker)]


# --- P from one batched teacher-forced pass -----------------------------------------------------

@torch.no_grad()
def reference_logprobs(model, prefixes: Sequence[Sequence[int]], targets: Sequence[Sequence[int]],
                       pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """log P of each target token after its prefix, for all rows in ONE forward pass.

    Returns ``(logp [B, T], mask [B, T])``, left-aligned (row b's tokens in its first
    ``len(targets[b])`` columns, zeros after). Rows are left-padded so every target ends at the
    right edge; only the last ``T + 1`` positions go through the LM head.
    """
    if any(len(p) == 0 for p in prefixes) or any(len(t) == 0 for t in targets):
        raise ValueError("every row needs a non-empty prefix and a non-empty target")
    device = next(model.parameters()).device
    seqs = [list(p) + list(t) for p, t in zip(prefixes, targets, strict=True)]
    width, keep = max(map(len, seqs)), max(map(len, targets))
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(seqs), width), dtype=torch.long)
    for b, seq in enumerate(seqs):
        ids[b, width - len(seq):] = torch.tensor(seq)
        attention[b, width - len(seq):] = 1
    ids, attention = ids.to(device), attention.to(device)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=ids, attention_mask=attention, position_ids=positions,
                   logits_to_keep=keep + 1).logits[:, :-1].float()
    # logits[:, j] predicts ids[:, width - keep + j]: the targets, right-aligned.
    tokens = ids[:, width - keep:]
    logp = logits.gather(-1, tokens.unsqueeze(-1)).squeeze(-1) - logits.logsumexp(-1)
    lengths = torch.tensor([len(t) for t in targets], device=device).unsqueeze(1)
    cols = torch.arange(keep, device=device).unsqueeze(0)
    mask = cols < lengths
    left = logp.gather(1, (cols + keep - lengths).clamp(max=keep - 1))
    return left.masked_fill(~mask, 0.0), mask


def score_rollouts(model, tokenizer, prompts: Sequence[str], rows: Sequence[dict],
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
    logp, mask = reference_logprobs(model, prefixes, targets, tokenizer.pad_token_id)
    return [row[m].cpu().numpy() for row, m in zip(logp, mask)]


# --- Per-group verdict --------------------------------------------------------------------------

@dataclass(frozen=True)
class GroupVerdict:
    rewards: np.ndarray  # [G] the configured score
    r3: np.ndarray       # [G] R3 (logged whatever the score)
    h: float             # high-variance score (§4.2)
    coverage_ok: bool    # True when the gate is off
    consistency_ok: bool
    variance_ok: bool

    @property
    def accepted(self) -> bool:
        return self.coverage_ok and self.consistency_ok and self.variance_ok


def judge_group(logP: np.ndarray, S: np.ndarray, cfg, threshold: AdaptiveThreshold) -> GroupVerdict:
    """Rewards and gate decisions of one group from its reference log-probs [G, T] and rubric
    satisfactions [G, R] (``cfg`` is ``reward.dro``)."""
    P = np.exp(logP)
    r3 = r3_rewards(P, None, cfg.emphasis, cfg.clip_low, cfg.clip_high)
    scores = {"r3": r3, "avg_prob": avg_prob_rewards(P), "avg_logprob": avg_logprob_rewards(logP)}
    rewards = scores[cfg.score]
    h = group_variance_score(P, None, cfg.token_frac, cfg.clip_low, cfg.clip_high)
    return GroupVerdict(
        rewards=rewards, r3=r3, h=h,
        coverage_ok=not cfg.gate or coverage_gate(S, cfg.min_rollouts),
        consistency_ok=not cfg.gate or consistency_gate(S, rewards, cfg.top_frac,
                                                        cfg.min_rubric_frac),
        variance_ok=not cfg.variance_filter or threshold.accept(h),
    )


# --- The trainer --------------------------------------------------------------------------------

class DroScore:
    """Placeholder reward function: names the TRL reward column (``dro_r3``, ...). The reward
    itself is computed by :class:`DroGRPOTrainer`, which never calls this."""

    def __init__(self, score: str) -> None:
        self.__name__ = f"dro_{score}"

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.__name__} is computed by models.dro_trainer.DroGRPOTrainer; "
                           "train with the plan's trainer_cls")


class DroGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose reward is DRO's and which rejects groups (module docstring)."""

    def __init__(self, *args, dro, task: str, **kwargs) -> None:
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

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
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

        def rate(failed) -> float:
            return float(np.mean([failed(v) for v in verdicts]))

        metrics["dro/rejected"].append(rate(lambda v: not v.accepted))
        metrics["dro/reject_coverage"].append(rate(lambda v: not v.coverage_ok))
        metrics["dro/reject_consistency"].append(rate(lambda v: not v.consistency_ok))
        metrics["dro/reject_variance"].append(rate(lambda v: not v.variance_ok))
        metrics["dro/theta"].append(self.threshold.theta)
        metrics["dro/h_mean"].append(float(np.mean([v.h for v in verdicts])))
        metrics["dro/r3_mean"].append(float(np.nanmean(np.concatenate([v.r3 for v in verdicts]))))

    def _generate_and_score_completions(self, inputs):
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

def static_prefilter_rows(model, tokenizer, rows: Sequence[dict], cfg, *, task: str,
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
    h = []
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
    h = np.array(h)
    keep = static_prefilter(h, top_k, rest_frac, seed)
    return [rows[i] for i in keep], h
