"""RLME: reinforcement learning from meta-evaluation (paper 000).

Without labels, the reward is an evaluator model's log-probability of answering a natural-language
meta-question ("Is the answer correct?") with a target ("YES" plus an end marker): paper 000 §3.1
(Eq. 2-3), lp[j,k,i] = log P_j(a_k | evaluator prompt for completion i) and
r_i = sum_j v_j sum_k w_k lp[j,k,i]. The pure maths comes first (aggregation, anchoring of §4.6,
standardisation for the hybrid ``rlvr+rlme`` of §4.9); the model-dependent scorer
(``MetaEvalReward``, ``HybridReward``; ``target_logprobs`` is :mod:`rewards.evaluator_prompt`'s)
follows.

Decisions and their reasons: docs/methods/rlme.md.
"""

from __future__ import annotations

import copy
import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core import ranks
from core.devices import compute_dtype, place, training_device
from core.params import template_fields
from rewards.chat import prompt_text
from rewards.evaluator_prompt import (
    DEFAULT_ANCHOR_TEMPLATE,
    render_evaluator_prompt,
    target_logprobs,
)
from rewards.teacher_forcing import model_device
from rewards.verifiable import completion_text, extract_boxed, rlvr_correct

__all__ = [
    "DEFAULT_ANCHOR_TEMPLATE",
    "Evaluator",
    "MetaEvalReward",
    "MetaQuestion",
    "VERSION",
    "aggregate_meta_rewards",
    "anchored",
    "hybrid_rewards",
    "render_evaluator_prompt",
    "standardize",
    "target_logprobs",
]

VERSION = "1"


# Placeholders every evaluator prompt may use; measured quantities (e.g. {length}) come on top.
_BASE_FIELDS = ("problem", "solution", "answer", "question", "anchor")


def aggregate_meta_rewards(
    lp: Any, question_weights: Any, evaluator_weights: Any
) -> np.ndarray:
    """Reward r_i = sum_j v_j sum_k w_k lp[j,k,i] (paper 000 §3.1, Eq. 3).

    ``lp`` is [J, K, B] log-probabilities, ``question_weights`` w is [K], ``evaluator_weights``
    v is [J]. The weights are fixed expert choices (paper §3.1), not learned.

    >>> lp = np.array([[[-0.1, -2.0], [-0.5, -1.0]],      # evaluator 0: questions 0, 1
    ...                [[-0.2, -3.0], [-0.4, -0.6]]])     # evaluator 1
    >>> aggregate_meta_rewards(lp, [1.0, 0.5], [1.0, 2.0]).round(4).tolist()
    [-1.15, -9.1]
    """
    lp = np.asarray(lp, dtype=float)
    w = np.asarray(question_weights, dtype=float)
    v = np.asarray(evaluator_weights, dtype=float)
    if lp.ndim != 3:
        raise ValueError(f"lp must be shaped [J evaluators, K questions, B completions], got shape {lp.shape}")
    J, K, _ = lp.shape
    if w.shape != (K,):
        raise ValueError(f"question_weights must have K={K} entries (lp is {lp.shape}), got shape {w.shape}")
    if v.shape != (J,):
        raise ValueError(f"evaluator_weights must have J={J} entries (lp is {lp.shape}), got shape {v.shape}")
    return np.einsum("j,k,jkb->b", v, w, lp)


def anchored(prompt_id: str, p: float, seed: int = 0) -> bool:
    """Whether this prompt's evaluator prompt states the gold answer (paper 000 §4.6).

    Deterministic from a SHA-256 hash of ``seed:prompt_id``, so the same prompts are anchored in
    every epoch, process and rerun, and raising p only adds prompts (nested sets).

    >>> anchored("q-17", 0.0), anchored("q-17", 1.0)
    (False, True)
    >>> anchored("q-17", 0.3) == anchored("q-17", 0.3)
    True
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"anchoring fraction p must be in [0, 1], got {p}")
    digest = hashlib.sha256(f"{seed}:{prompt_id}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    return u < p


def standardize(x: Any) -> np.ndarray:
    """Mean 0, std 1 within the batch; zeros when the batch has no spread (paper 000 §4.9).

    Used by the hybrid ``rlvr+rlme`` reward (paper 000 §4.9) so that a 0/1 verifier and a
    log-probability on a very different scale contribute equally. NaN entries (rewards that
    did not apply) are ignored by the statistics and stay NaN.

    >>> standardize([1.0, 2.0, 3.0]).round(4).tolist()
    [-1.2247, 0.0, 1.2247]
    >>> standardize([5.0, 5.0]).tolist()
    [0.0, 0.0]
    """
    x = np.asarray(x, dtype=float)
    if x.size == 0 or np.all(np.isnan(x)):
        return np.zeros_like(x) if x.size == 0 else x.copy()
    std = np.nanstd(x)
    if not std > 1e-12:
        return np.where(np.isnan(x), np.nan, 0.0)
    return (x - np.nanmean(x)) / std


def hybrid_rewards(components: Mapping[str, Any]) -> np.ndarray:
    """Sum of the batch-standardised components, e.g. ``{"rlvr": ..., "rlme": ...}`` (paper 000 §4.9).

    >>> hybrid_rewards({"rlvr": [1.0, 0.0, 1.0, 0.0], "rlme": [-0.1, -0.1, -2.0, -2.0]}).round(6).tolist()
    [2.0, 0.0, 0.0, -2.0]
    """
    if not components:
        raise ValueError("hybrid_rewards needs at least one component")
    arrays = {name: np.asarray(v, dtype=float) for name, v in components.items()}
    shapes = {name: a.shape for name, a in arrays.items()}
    if len(set(shapes.values())) != 1:
        raise ValueError(f"hybrid components must have the same shape, got {shapes}")
    return np.sum([standardize(a) for a in arrays.values()], axis=0)


@dataclass(frozen=True)
class MetaQuestion:
    """A dataset-level meta-question, its target answer a_k and weight w_k (paper 000 §3.1)."""

    text: str
    target: str = "YES"
    weight: float = 1.0


@dataclass(frozen=True)
class Evaluator:
    """An evaluator j with weight v_j: ``source`` is "live", "frozen" or a local model directory."""

    name: str
    source: str = "live"
    weight: float = 1.0


class MetaEvalReward:
    """TRL reward function for RLME: one float per completion (paper 000 §3).

    Holds the evaluators (J), meta-questions (K) and the template; each call renders the K
    evaluator prompts for the generation batch and scores them per (evaluator, question) in
    forward passes of at most ``batch_size`` rows (None: one pass for the whole batch), then
    aggregates with ``aggregate_meta_rewards``. The last lp[J, K, B] is kept in
    ``last_logprobs`` for per-question logging.

    ``policy``/``tokenizer`` are the model being trained and its tokenizer: needed for ``live``
    and ``frozen`` evaluators. The ``frozen`` snapshot and a path evaluator are read-only models
    held on the policy's device (the trainer's: flows/train.py places the policy first) in that
    device's compute dtype (:func:`core.devices.compute_dtype`: bf16 on CUDA, float32 on a CPU).
    Set ``reward.trainer = trainer`` after building the trainer so ``live`` follows the
    trainer's (possibly wrapped) model. ``end_marker`` is appended to every target (paper
    App. B uses a rare single token); None means each evaluator's EOS token (nothing if it has
    none).
    Anchoring (``anchor_fraction`` p > 0) reads the dataset columns ``prompt_id_column`` and
    ``gold_column`` from the TRL keyword arguments.
    """

    def __init__(
        self,
        evaluators: Sequence[Evaluator],
        questions: Sequence[MetaQuestion],
        template: str,
        *,
        policy: Any = None,
        tokenizer: Any = None,
        end_marker: str | None = None,
        answer_extractor: Callable[[str], str | None] = extract_boxed,
        anchor_fraction: float = 0.0,
        anchor_seed: int = 0,
        anchor_template: str = DEFAULT_ANCHOR_TEMPLATE,
        measures: Mapping[str, Callable[[str], Any]] | None = None,
        prompt_id_column: str = "prompt_id",
        gold_column: str = "answer",
        chat: Any = None,
        batch_size: int | None = None,
    ) -> None:
        self.__name__ = "rlme_meta"
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be at least 1 (or None), got {batch_size}")
        self.batch_size = batch_size
        if not evaluators:
            raise ValueError("RLME needs at least one evaluator")
        if not questions:
            raise ValueError("RLME needs at least one meta-question")
        if not 0.0 <= anchor_fraction <= 1.0:
            raise ValueError(f"anchor_fraction must be in [0, 1], got {anchor_fraction}")
        names = [ev.name for ev in evaluators]
        if len(set(names)) != len(names):
            raise ValueError(f"evaluator names must be unique, got {names}")
        self.evaluators = list(evaluators)
        self.questions = list(questions)
        self.template = template
        self.end_marker = end_marker
        self.answer_extractor = answer_extractor
        self.anchor_fraction = anchor_fraction
        self.anchor_seed = anchor_seed
        self.anchor_template = anchor_template
        self.measures = dict(measures) if measures is not None else {"length": len}
        self.prompt_id_column = prompt_id_column
        self.gold_column = gold_column
        self.policy = policy
        self.tokenizer = tokenizer
        # rewards.chat.ChatFormat: an evaluator whose tokenizer has a chat template gets each
        # prompt as a user turn and "YES" scored as its reply's start (None = plain prompts).
        self.chat = chat
        self.trainer: Any = None
        self.last_logprobs: np.ndarray | None = None

        allowed = set(_BASE_FIELDS) | set(self.measures)
        unknown = [f for f in template_fields(template) if f not in allowed]
        if unknown:
            raise ValueError(
                f"evaluator template has unknown placeholder(s) {', '.join('{' + u + '}' for u in unknown)}; "
                f"allowed: {', '.join(sorted(allowed))}"
            )
        self._handles: dict[str, tuple[Any, Any]] = {}
        for ev in self.evaluators:
            self._handles[ev.name] = self._load(ev)

    def _load(self, ev: Evaluator) -> tuple[Any, Any]:
        """Resolve an evaluator at construction so that errors surface before training."""
        if ev.source in ("live", "frozen"):
            if self.tokenizer is None:
                raise ValueError(f"evaluator {ev.name!r} ({ev.source}) needs the policy's tokenizer")
            if ev.source == "frozen":
                if self.policy is None:
                    raise ValueError(f"evaluator {ev.name!r} (frozen) needs the policy model to snapshot")
                snapshot = place(copy.deepcopy(self.policy), model_device(self.policy)).eval()
                snapshot.requires_grad_(False)
                return snapshot, self.tokenizer
            return None, self.tokenizer
        if not os.path.isdir(ev.source):
            raise FileNotFoundError(
                f"evaluator {ev.name!r}: model directory {ev.source!r} does not exist "
                f"(use 'live', 'frozen' or a local directory holding a transformers model)"
            )
        if not os.path.isfile(os.path.join(ev.source, "config.json")):
            raise FileNotFoundError(
                f"evaluator {ev.name!r}: {ev.source!r} holds no transformers model (no config.json)"
            )
        from transformers import AutoModelForCausalLM, AutoTokenizer

        device = model_device(self.policy) if self.policy is not None else training_device()
        model = AutoModelForCausalLM.from_pretrained(ev.source, local_files_only=True,
                                                     dtype=compute_dtype(device)).eval()
        model.to(device)
        model.requires_grad_(False)
        return model, AutoTokenizer.from_pretrained(ev.source, local_files_only=True)

    def _live_model(self) -> Any:
        if self.trainer is not None:
            model = self.trainer.model
            accelerator = getattr(self.trainer, "accelerator", None)
            return accelerator.unwrap_model(model) if accelerator is not None else model
        if self.policy is None:
            raise RuntimeError("the 'live' evaluator needs reward.trainer (or policy=) to be set before the first call")
        return self.policy

    def _model_and_tokenizer(self, ev: Evaluator) -> tuple[Any, Any]:
        model, tokenizer = self._handles[ev.name]
        if ev.source == "live":
            return self._live_model(), tokenizer
        if self.trainer is not None or self.policy is not None:
            # Frozen and path evaluators start on the policy's device; they follow it if it moved.
            device = model_device(self._live_model())
            if model_device(model) != device:
                place(model, device)
        return model, tokenizer

    def _golds(self, n: int, kwargs: Mapping[str, Any]) -> list[str | None]:
        """Gold answer for anchored rows, None elsewhere (paper 000 §4.6)."""
        if self.anchor_fraction == 0.0:
            return [None] * n
        for column in (self.prompt_id_column, self.gold_column):
            if column not in kwargs:
                raise KeyError(
                    f"RLME anchoring (p={self.anchor_fraction}) needs the dataset column {column!r}; "
                    f"columns passed: {sorted(kwargs)}"
                )
        ids, golds = kwargs[self.prompt_id_column], kwargs[self.gold_column]
        return [
            None if g is None or not anchored(str(pid), self.anchor_fraction, self.anchor_seed) else str(g)
            for pid, g in zip(ids, golds)
        ]

    def render(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[list[str]]:
        """Evaluator prompts [K][B] for a generation batch."""
        problems = [prompt_text(p) for p in prompts]
        solutions = [completion_text(c) for c in completions]
        answers = [self.answer_extractor(s) or "" for s in solutions]
        golds = self._golds(len(solutions), kwargs)
        measured = [{name: fn(s) for name, fn in self.measures.items()} for s in solutions]
        return [
            [
                render_evaluator_prompt(
                    self.template,
                    problem=problems[i],
                    solution=solutions[i],
                    answer=answers[i],
                    question=q.text,
                    gold=golds[i],
                    anchor_template=self.anchor_template,
                    **measured[i],
                )
                for i in range(len(solutions))
            ]
            for q in self.questions
        ]

    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        completion_ids: Sequence[Sequence[int]] | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        """TRL contract: one reward per completion."""
        if len(prompts) != len(completions):
            raise ValueError(f"{len(prompts)} prompts but {len(completions)} completions")
        rendered = self.render(prompts, completions, **kwargs)
        J, K, B = len(self.evaluators), len(self.questions), len(completions)
        lp = np.zeros((J, K, B))
        for j, ev in enumerate(self.evaluators):
            model, tokenizer = self._model_and_tokenizer(ev)
            end = self.end_marker if self.end_marker is not None else (tokenizer.eos_token or "")
            for k, q in enumerate(self.questions):
                step = self.batch_size or max(B, 1)
                lp[j, k] = np.concatenate([
                    target_logprobs(model, tokenizer, rendered[k][i:i + step], q.target + end,
                                    chat=self.chat).numpy()
                    for i in range(0, B, step)]) if B else np.zeros(0)
        # Kept for the rlme/* metrics over the global batch (every rank's completions, rank order).
        self.last_logprobs = np.concatenate(ranks.gather_objects(lp), axis=2)
        # The share of the global batch whose evaluator prompt stated the gold (paper 000 §4.6),
        # through TRL's `log_metric` (averaged per logging step, so it lands in train.json's
        # curves): how often anchoring actually applied, 0.0 when it is off.
        counts = ranks.gather_objects([sum(1 for g in self._golds(B, kwargs) if g is not None), B])
        hit, total = int(sum(c[0] for c in counts)), int(sum(c[1] for c in counts))
        log_metric = kwargs.get("log_metric")
        if log_metric is not None and total:
            log_metric("rlme/anchor_rate", hit / total)
        rewards = aggregate_meta_rewards(
            lp, [q.weight for q in self.questions], [ev.weight for ev in self.evaluators]
        )
        return [float(r) for r in rewards]

    def metrics(self) -> dict[str, float]:
        """Mean log-probability and P(target) of the last batch per (evaluator, question)."""
        if self.last_logprobs is None:
            return {}
        out = {}
        for j, ev in enumerate(self.evaluators):
            for k in range(len(self.questions)):
                lp = self.last_logprobs[j, k]
                out[f"rlme/{ev.name}_q{k}_logprob"] = float(np.mean(lp))
                out[f"rlme/{ev.name}_q{k}_prob"] = float(np.mean(np.exp(lp)))
        return out


class HybridReward:
    """Sum of batch-standardised components (paper 000 §4.9: ``rlvr+rlme``).

    ``components`` maps a name to a TRL reward callable; each is called on the same batch, its
    rewards standardised within the batch (``standardize``), and the results summed. The raw
    components of the last batch are kept in ``last``, and each raw mean is logged through TRL's
    ``log_metric`` as ``hybrid/<name>`` (averaged per logging step like TRL's own ``reward``): the
    summed reward is 0 on average by construction, so these are what a reward curve, and the
    collapse monitor, read.
    """

    def __init__(self, components: Mapping[str, Callable[..., Sequence[float | None]]]) -> None:
        if not components:
            raise ValueError("HybridReward needs at least one component")
        self.__name__ = "hybrid_" + "_".join(components)
        self.components = dict(components)
        self.last: dict[str, np.ndarray] = {}

    @property
    def trainer(self) -> Any:
        return None

    @trainer.setter
    def trainer(self, trainer: Any) -> None:
        for fn in self.components.values():
            if hasattr(fn, "trainer"):
                fn.trainer = trainer

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        raw = {name: np.array([np.nan if r is None else r
                               for r in fn(prompts=prompts, completions=completions, **kwargs)],
                              dtype=float)
               for name, fn in self.components.items()}
        self.last = raw
        # Standardised over the GLOBAL generation batch: on N ranks each holds a slice of it, and a
        # per-slice mean and std would give the same completion a different reward on 1 and N ranks.
        parts, me = ranks.gather_rows([raw])  # one dict per rank, and this rank's index
        batch = {name: np.concatenate([part[name] for part in parts]) for name in raw}
        log_metric = kwargs.get("log_metric")
        if log_metric is not None:
            for name, v in batch.items():
                if np.isfinite(v).any():  # the global mean, the same value on every rank
                    log_metric(f"hybrid/{name}", float(np.nanmean(v)))
        offset = sum(len(part[next(iter(raw))]) for part in parts[:me])
        summed = hybrid_rewards(batch)[offset:offset + len(completions)]
        return [float(r) for r in np.nan_to_num(summed, nan=0.0)]


def build(ctx: Any) -> Any:
    """The RLME plan from ``params.reward.rlme`` (a `rewards.MethodContext`): the meta-evaluation
    reward, or the hybrid with the verifiable reward when ``hybrid_rlvr`` is set."""
    from rewards import MethodPlan
    from rewards.chat import ChatFormat

    cfg = ctx.cfg
    reward = MetaEvalReward(
        [Evaluator(e.name, e.source, e.weight) for e in cfg.evaluators],
        [MetaQuestion(q.text, q.target, q.weight) for q in cfg.questions],
        cfg.template, policy=ctx.policy, tokenizer=ctx.tokenizer, end_marker=cfg.end_marker,
        anchor_fraction=cfg.anchor_fraction, anchor_seed=cfg.anchor_seed,
        anchor_template=cfg.anchor_template, chat=ctx.chat or ChatFormat(),
        batch_size=getattr(ctx.grpo, "score_batch_size", None),
    )
    if cfg.hybrid_rlvr:
        hybrid = HybridReward({"rlvr": rlvr_correct, "rlme": reward})
        return MethodPlan([hybrid], loggers=[reward], monitor_reward="hybrid/rlme")
    return MethodPlan([reward], loggers=[reward])
