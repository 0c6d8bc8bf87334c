"""RLCER: one policy, two roles, one GRPO update per step (paper 004 §4.5, Algorithm 1).

The step is TRL's own (`GRPOTrainer`); only its generation-and-scoring hook changes:

1. TRL samples G reasoner rollouts per question and calls the reward function.
2. :class:`RlcerReward` (``rewards/rlcer_reasoner``) picks ``rubricator_rollouts`` of each
   question's CoTs, asks the same model for rubrics on each
   (:meth:`RlcerGRPOTrainer.sample_rubricator`), has the verifier judge every pooled rubric on every
   CoT of the question (one batched call per step), and scores both roles
   (:func:`rewards.rlcer.score_question`). It returns the reasoner rewards to TRL and keeps the
   rubricator rollouts with their rewards.
3. TRL turns the reasoner rewards into group-relative advantages as for any other method.
4. :meth:`RlcerGRPOTrainer._generate_and_score_completions` appends the rubricator rollouts, with
   their own advantages, to TRL's batch (:func:`assemble_two_role_batch`): one loss and one
   optimiser step cover both roles (Eq. 13).

Decisions and their reasons (the rubricator's baseline, prompt, sampling, verifier, metrics,
resume): docs/methods/rlcer.md.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from trl import GRPOTrainer
from trl.models.utils import disable_gradient_checkpointing

from core import ranks
from core.devices import model_device, place
from rewards.chat import ChatFormat, is_conversational, prompt_text, strip_thinking
from rewards.evolving_rubrics import ProposedRubric, parse_rubrics, rule_verifier
from rewards.rlcer import (
    pick_cots,
    question_groups,
    rubricator_advantages,
    score_question,
    step_metrics,
)
from rewards.teacher_forcing import next_token_logits, pad_rows
from rewards.verifiable import completion_text, rlvr_score

__all__ = [
    "VERIFIER_TEMPLATE",
    "JudgeVerifier",
    "RlcerGRPOTrainer",
    "RlcerReward",
    "RubricatorRollouts",
    "RuleVerifier",
    "assemble_two_role_batch",
    "build",
    "make_verifier",
    "rubricator_prompt",
    "yes_no_judgements",
]

# Paper 004 Fig. 10, one criterion at a time and a YES/NO answer instead of a JSON judgement list.
VERIFIER_TEMPLATE = (
    "You are an expert in evaluating student responses to math problems. Assess the response "
    "against one binary criterion.\n"
    "Question: {question}\n"
    "Response: {response}\n"
    "Criterion: {criterion} (points: {points})\n"
    "For a reward criterion (positive points) answer YES if the merit is present; for a penalty "
    "criterion (negative points) answer YES if the flaw is present. Base your judgement solely on "
    "the response and the wording of the criterion.\n"
    "Is the criterion met? Answer YES or NO.\n"
    "Answer:"
)


# --- The two-role batch ------------------------------------------------------------------------

# Keys of TRL's generation batch that RLCER knows how to merge: per-row vectors, per-token tensors
# (right-aligned with the completion) and scalars.
_PER_TOKEN = ("old_per_token_logps", "ref_per_token_logps")
_KNOWN = {"prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages",
          "num_items_in_batch", *_PER_TOKEN}


def _pad_to(t: torch.Tensor, width: int, value: float, side: str) -> torch.Tensor:
    extra = width - t.size(1)
    return F.pad(t, (extra, 0) if side == "left" else (0, extra), value=value)


def _round_up(n: int, multiple: int | None) -> int:
    return n if not multiple else -(-n // multiple) * multiple


def assemble_two_role_batch(reasoner: dict, rubricator: dict, pad_token_id: int,
                            pad_to_multiple_of: int | None = None) -> dict:
    """One TRL generation batch from the two roles: reasoner rows first, then rubricator rows.

    Prompts stay left-padded and completions right-padded (TRL's layout) at the wider of the two
    widths; per-token tensors (old/reference log-probs) are right-padded with 0 (masked out);
    ``num_items_in_batch`` (the loss normaliser of dapo/cispo) counts both roles' tokens. TRL then
    shuffles the rows and splits them into ``steps_per_generation`` micro-batches.
    """
    unknown = (set(reasoner) | set(rubricator)) - _KNOWN
    if unknown:
        raise ValueError(f"RLCER cannot merge batch keys {sorted(unknown)} (tools, images and vLLM "
                         "importance sampling are not supported)")
    P = _round_up(max(reasoner["prompt_ids"].size(1), rubricator["prompt_ids"].size(1)), pad_to_multiple_of)
    C = _round_up(max(reasoner["completion_ids"].size(1), rubricator["completion_ids"].size(1)),
                  pad_to_multiple_of)

    def merge(key: str, width: int, value: float, side: str) -> torch.Tensor:
        return torch.cat([_pad_to(reasoner[key], width, value, side),
                          _pad_to(rubricator[key].to(reasoner[key].device), width, value, side)])

    out = {
        "prompt_ids": merge("prompt_ids", P, pad_token_id, "left"),
        "prompt_mask": merge("prompt_mask", P, 0, "left"),
        "completion_ids": merge("completion_ids", C, pad_token_id, "right"),
        "completion_mask": merge("completion_mask", C, 0, "right"),
        "advantages": torch.cat([reasoner["advantages"],
                                 rubricator["advantages"].to(reasoner["advantages"])]),
        "num_items_in_batch": reasoner["num_items_in_batch"]
        + rubricator["num_items_in_batch"].to(reasoner["num_items_in_batch"].device),
    }
    for key in _PER_TOKEN:
        if (key in reasoner) != (key in rubricator):
            raise ValueError(f"{key} is in one role's batch only")
        if key in reasoner:
            out[key] = merge(key, C, 0.0, "right")
    return out


# --- Verifiers -----------------------------------------------------------------------------------
# A verifier takes (question, CoT, rubric) triples and returns one bool per triple.

class RuleVerifier:
    """The tiny world's rule verifier (``rewards.evolving_rubrics.rule_verifier``)."""

    def __call__(self, items: Sequence[tuple[str, str, ProposedRubric]]) -> list[bool]:
        return [rule_verifier(rubric.criterion, cot) for _, cot, rubric in items]

    def to(self, device: Any) -> RuleVerifier:
        return self


def yes_no_judgements(model: Any, tokenizer: Any, prompts: Sequence[str], yes_id: int, no_id: int,
                      batch_size: int | None = None, add_special_tokens: bool = True) -> np.ndarray:
    """P(YES) > P(NO) for the token after each prompt, from one batched forward pass
    (``batch_size`` chunks it when memory is short): :func:`rewards.teacher_forcing.next_token_logits`,
    whose left padding and position ids put every row's next token at the last position."""
    if not prompts:
        return np.zeros(0, dtype=bool)
    ids = tokenizer(list(prompts), add_special_tokens=add_special_tokens)["input_ids"]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    step = batch_size or len(ids)
    out = []
    for start in range(0, len(ids), step):
        logits = next_token_logits(model, ids[start:start + step], pad)
        out.append((logits[:, yes_id] > logits[:, no_id]).cpu().numpy())
    return np.concatenate(out)


class JudgeVerifier:
    """A frozen judge model from a local directory, asked :data:`VERIFIER_TEMPLATE` per rubric.

    Read-only: held on ``device`` (default: the trainer's, ``core.devices.training_device``) in
    that device's compute dtype (bf16 on CUDA), and run in forward passes of at most
    ``batch_size`` prompts (``grpo.score_batch_size``; None: one pass for the whole step, which
    for a real judge is thousands of long prompts at once)."""

    def __init__(self, path: str | Path, template: str = VERIFIER_TEMPLATE, yes: str = "YES",
                 no: str = "NO", batch_size: int | None = None, chat: ChatFormat | None = None,
                 device: Any = None) -> None:
        from models.policy import load_policy

        self.model, self.tokenizer = load_policy(path, device=device)
        # A judge with a chat template reads each prompt as a user turn (thinking off) and its
        # verdict is the reply's first token (rewards.chat.ChatFormat.user_turn).
        self.chat = chat or ChatFormat()
        self.model.requires_grad_(False)
        self.template, self.batch_size = template, batch_size
        self.yes_id, self.no_id = self._first_token(yes), self._first_token(no)
        if self.yes_id == self.no_id:
            raise ValueError(f"judge {path}: {yes!r} and {no!r} start with the same token")

    def _first_token(self, text: str) -> int:
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        if not ids:
            raise ValueError(f"{text!r} tokenises to nothing")
        return ids[0]

    def to(self, device: Any) -> JudgeVerifier:
        place(self.model, device)  # read-only: the device's compute dtype too
        return self

    def __call__(self, items: Sequence[tuple[str, str, ProposedRubric]]) -> list[bool]:
        prompts = [self.chat.user_turn(self.tokenizer, self.template.format(
                       question=q, response=cot, criterion=r.criterion, points=r.points))
                   for q, cot, r in items]
        judged = yes_no_judgements(self.model, self.tokenizer, prompts, self.yes_id, self.no_id,
                                   self.batch_size,  # a chat template writes its own specials
                                   add_special_tokens=not self.chat.wraps_scoring(self.tokenizer))
        return [bool(x) for x in judged]


def make_verifier(spec: str, chat: ChatFormat | None = None, *, batch_size: int | None = None,
                  device: Any = None) -> Callable[[Sequence[tuple[str, str, ProposedRubric]]], list[bool]]:
    """``rule`` or a local judge model directory (checked now, before any training step), loaded
    on ``device`` and run ``batch_size`` prompts at a time (:class:`JudgeVerifier`)."""
    if spec == "rule":
        return RuleVerifier()
    if not (Path(spec) / "config.json").exists():
        raise FileNotFoundError(f"reward.rlcer.verifier: {spec!r} is neither 'rule' nor a local model "
                                "folder (no config.json)")
    return JudgeVerifier(spec, chat=chat, batch_size=batch_size, device=device)


# --- The reward function (both roles' scoring) ---------------------------------------------------

@dataclass
class RubricatorRollouts:
    """The step's rubricator samples: token ids, rewards, and the question each one belongs to."""

    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]
    rewards: list[float]
    question: list[int]


class RlcerReward:
    """TRL reward function of the reasoner that also runs and scores the rubricator.

    Needs ``trainer`` (an :class:`RlcerGRPOTrainer`, which sets it) for ``group_size`` and
    ``sample_rubricator``. After each call, :meth:`pop_rubricator` hands the trainer the
    rubricator rollouts and their rewards.
    """

    def __init__(self, cfg: Any, seed: int = 0, verifier: Callable | None = None,
                 chat: ChatFormat | None = None, *, batch_size: int | None = None,
                 device: Any = None) -> None:
        self.__name__ = "rlcer_reasoner"
        self.cfg = cfg
        self.verifier = verifier if verifier is not None else make_verifier(
            cfg.verifier, chat, batch_size=batch_size, device=device)
        self.last_rubricator_prompts: list = []  # the last step's, as the rubricator got them
        self.seed = seed
        self._step, self._calls = -1, 0  # the training step of the last call, calls made at it
        self.trainer: Any = None
        self._rubricator: RubricatorRollouts | None = None

    def pop_rubricator(self) -> RubricatorRollouts:
        if self._rubricator is None:
            raise RuntimeError("no rubricator rollouts: the RLCER reward was not called this step")
        out, self._rubricator = self._rubricator, None
        return out

    def _question_rngs(self, n_questions: int, trainer_state: Any) -> tuple[list[np.random.Generator], int]:
        """One generator per question (CoT picks, ``random`` mode), and where this rank's questions
        start in the global batch. A question's generator is seeded by (``reward.rlcer.seed``,
        training seed, step, call at that step, its index in the GLOBAL generation batch): the
        same draws on 1 or N ranks, different draws on different ranks, and the same draws after
        a resume from a checkpoint as in an uninterrupted run."""
        step = int(getattr(trainer_state, "global_step", 0) or 0)
        self._calls = self._calls + 1 if step == self._step else 0
        self._step = step
        _, first = ranks.gather_rows([None] * n_questions)
        return [np.random.default_rng([self.cfg.seed, self.seed, step, self._calls, first + q])
                for q in range(n_questions)], first

    def __call__(self, prompts: list, completions: list, answer: list | None = None,
                 log_metric: Callable[[str, float], None] | None = None, trainer_state: Any = None,
                 **_: Any) -> list[float]:
        if self.trainer is None:
            raise RuntimeError("RlcerReward runs inside RlcerGRPOTrainer (reward.trainer is not set)")
        if answer is None or any(a is None for a in answer):
            raise ValueError("RLCER needs the gold `answer` column on every row (correctness z)")
        cots = [completion_text(c) for c in completions]
        z = np.array([rlvr_score(c, gold) for c, gold in zip(cots, answer)])
        groups = question_groups(prompts, self.trainer.group_size)
        R = self.cfg.rubricator_rollouts
        rngs, first = self._question_rngs(len(groups), trainer_state)

        # R rubricator rollouts per question, each reading the question and one of its CoTs.
        rub_prompts = [rubricator_prompt(self.cfg.rubricator_template, prompts[rows[0]], cots[rows[j]])
                       for rows, rng in zip(groups, rngs) for j in pick_cots(len(rows), R, rng)]
        self.last_rubricator_prompts = rub_prompts
        prompt_ids, completion_ids, texts = self.trainer.sample_rubricator(rub_prompts)
        parsed = [parse_rubrics(strip_thinking(t)) for t in texts]
        outputs = [parsed[q * R:(q + 1) * R] for q in range(len(groups))]

        V = self._judge([prompt_text(p) for p in prompts], cots, groups, outputs)
        scores = [score_question(out, v, z[rows], alpha=self.cfg.alpha, mode=self.cfg.mode, rng=rng)
                  for out, v, rows, rng in zip(outputs, V, groups, rngs)]

        rewards = np.zeros(len(prompts))
        for rows, s in zip(groups, scores):
            rewards[rows] = s.reasoner
        self._rubricator = RubricatorRollouts(
            prompt_ids, completion_ids, rewards=np.concatenate([s.rubricator for s in scores]).tolist(),
            question=[first + q for q in range(len(groups)) for _ in range(R)])  # global indices
        # The step's metrics over the global batch; every rank logs the same values.
        parts = ranks.gather_objects((scores, z))
        metrics = step_metrics([s for part, _ in parts for s in part], np.concatenate([zz for _, zz in parts]))
        if log_metric is not None:
            for name, value in metrics.items():
                log_metric(f"rlcer/{name}", value)
        return rewards.tolist()

    def _judge(self, prompts: list[str], cots: list[str], groups: list[list[int]],
               outputs: list[list[list[ProposedRubric] | None]]) -> list[np.ndarray]:
        """V[K_q, N] per question; every distinct (question, CoT, rubric) goes to the verifier once."""
        index: dict[tuple[str, str, ProposedRubric], int] = {}
        cells = []
        for rows, out in zip(groups, outputs):
            pooled = [r for rubrics in out if rubrics for r in rubrics]
            keys = [(prompts[rows[0]], cots[n], r) for r in pooled for n in rows]
            cells.append([index.setdefault(k, len(index)) for k in keys])
        verdicts = np.asarray(self.verifier(list(index)), dtype=float) if index else np.zeros(0)
        return [verdicts[c].reshape(-1, len(rows)) if c else np.zeros((0, len(rows)))
                for c, rows in zip(cells, groups)]


def rubricator_prompt(template: str, prompt: Any, cot: str) -> Any:
    """The rubricator's prompt for a reasoner ``prompt`` and one of its CoTs: ``template`` filled
    with the question's text; for a conversational reasoner prompt, a conversation of the same
    kind (its system messages, then the filled template as the user turn), which TRL renders with
    the policy's chat template and thinking setting.

    >>> rubricator_prompt("{problem}{solution}\\nRubrics:", "Q?", " A.")
    'Q? A.\\nRubrics:'
    >>> rubricator_prompt("{problem}|{solution}", [{"role": "system", "content": "S"},
    ...                                            {"role": "user", "content": "Q?"}], "A")
    [{'role': 'system', 'content': 'S'}, {'role': 'user', 'content': 'Q?|A'}]
    """
    text = template.format(problem=prompt_text(prompt), solution=cot)
    if not is_conversational(prompt):
        return text
    return [*(m for m in prompt if m.get("role") == "system"), {"role": "user", "content": text}]


# --- The trainer ---------------------------------------------------------------------------------

class RlcerGRPOTrainer(GRPOTrainer):
    """`GRPOTrainer` whose every step trains the reasoner and the rubricator (one set of weights).

    One of the reward functions must be an :class:`RlcerReward`; this trainer wires itself into it.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        found = [f for f in self.reward_funcs if isinstance(f, RlcerReward)]
        if len(found) != 1:
            raise ValueError("RlcerGRPOTrainer needs exactly one RlcerReward among its reward functions")
        self.rlcer = found[0]
        self.rlcer.trainer = self
        if hasattr(self.rlcer.verifier, "to"):
            self.rlcer.verifier.to(self.accelerator.device)
        self._check_layout()

    def _check_layout(self) -> None:
        args, G, R = self.args, self.num_generations, self.rlcer.cfg.rubricator_rollouts
        if args.use_vllm:
            # With vLLM, TRL adds its sampling log-probs and importance-sampling ratios to the
            # reasoner rows; the rubricator rows would need the same, computed from vLLM's
            # log-probs of the rubrics, which this trainer does not do (docs/gpu.md).
            raise ValueError("RLCER samples the rubricator with transformers generation: set "
                             "grpo.use_vllm: false (reward.rlcer.grpo)")
        if args.per_device_train_batch_size % G:
            raise ValueError(f"RLCER scores whole questions: per_device_train_batch_size "
                             f"({args.per_device_train_batch_size}) must be a multiple of num_generations ({G})")
        rubricator_rows = args.per_device_train_batch_size * args.steps_per_generation // G * R
        if rubricator_rows % args.steps_per_generation:
            raise ValueError(f"{rubricator_rows} rubricator rows per generation do not split evenly into "
                             f"steps_per_generation={args.steps_per_generation} micro-batches (TRL would drop rows)")

    @property
    def group_size(self) -> int:
        return self.num_generations if self.model.training else self.num_generations_eval

    @contextlib.contextmanager
    def _rubric_length(self) -> Iterator[None]:
        """TRL's sampling settings with the rubricator's token budget."""
        saved = self.generation_config, self.generation_kwargs
        self.generation_kwargs = {**saved[1], "max_new_tokens": self.rlcer.cfg.max_rubric_tokens}
        self.generation_config = copy.deepcopy(saved[0])
        self.generation_config.max_new_tokens = self.rlcer.cfg.max_rubric_tokens
        try:
            yield
        finally:
            self.generation_config, self.generation_kwargs = saved

    def _generate_single_turn(self, prompt_ids: list, images: Any, multimodal_fields: dict,
                              num_generations: int, has_tool_images: bool = False) -> tuple:
        """TRL's transformers generation in calls of at most ``reward.rlcer.rows_per_generate``
        rows. Both roles come through here: TRL's reasoner rollouts (the generation batch,
        ``steps_per_generation`` micro-batches) and :meth:`sample_rubricator`. RLCER samples
        without vLLM (``_check_layout``), so a call's KV cache is rows x (prompt + completion)
        tokens, and a rubricator prompt holds a whole CoT: unbounded, one call of a step's rows
        at the GPU presets' sizes holds tens of GB (core/memory.py). None: one call, as TRL."""
        bound = getattr(self.rlcer.cfg, "rows_per_generate", None)  # None also for a bare namespace cfg
        if not bound or len(prompt_ids) <= bound or images is not None or multimodal_fields:
            return super()._generate_single_turn(prompt_ids, images, multimodal_fields,
                                                 num_generations, has_tool_images)
        completions: list = []
        logprobs: list | None = []
        for start in range(0, len(prompt_ids), bound):
            ids, lps = super()._generate_single_turn(prompt_ids[start:start + bound], None, {},
                                                     num_generations, has_tool_images)
            completions.extend(ids)
            logprobs = None if lps is None or logprobs is None else [*logprobs, *lps]
        return completions, logprobs

    def sample_rubricator(self, prompts: list[str]) -> tuple[list[list[int]], list[list[int]], list[str]]:
        """(prompt ids, completion ids up to and including EOS, decoded text) per rubricator prompt."""
        prompt_ids, _, _ = self._tokenize_prompts(prompts)
        with self._rubric_length():
            completion_ids, _ = self._generate_single_turn(prompt_ids, None, {}, 1)
        texts = self.processing_class.batch_decode(completion_ids, skip_special_tokens=True)
        return [list(p) for p in prompt_ids], [list(c) for c in completion_ids], texts

    def _generate_and_score_completions(self, inputs: list[dict]) -> dict:
        reasoner = super()._generate_and_score_completions(inputs)
        rubricator = self._rubricator_batch(self.rlcer.pop_rubricator(), reasoner)
        return assemble_two_role_batch(reasoner, rubricator, self._tokenizer.pad_token_id,
                                       self.pad_to_multiple_of)

    def _rubricator_batch(self, rollouts: RubricatorRollouts, reasoner: dict) -> dict:
        """TRL-layout tensors for the rubricator rows (left-padded prompts, right-padded completions)."""
        device, pad = self.accelerator.device, self._tokenizer.pad_token_id
        mode = "train" if self.model.training else "eval"
        prompt_ids, prompt_mask = pad_rows(rollouts.prompt_ids, pad, "left")
        completion_ids, completion_mask = pad_rows(rollouts.completion_ids, pad, "right")
        if self.mask_truncated_completions:
            ends = [*self.eos_token_ids, pad]
            finished = torch.tensor([bool(c) and c[-1] in ends for c in rollouts.completion_ids])
            completion_mask = completion_mask * finished.unsqueeze(1).long()
        batch = {
            "prompt_ids": prompt_ids.to(device), "prompt_mask": prompt_mask.to(device),
            "completion_ids": completion_ids.to(device), "completion_mask": completion_mask.to(device),
            "advantages": self._rubricator_advantages(rollouts).to(device),
            "num_items_in_batch": self.accelerator.gather(completion_mask.sum().to(device)).sum(),
        }
        for key in _PER_TOKEN:
            if key in reasoner:
                batch[key] = self._rubricator_logps(key, batch)
        lengths, _ = ranks.gather_rows([len(c) for c in rollouts.completion_ids])  # all ranks' rows
        self._metrics[mode]["rlcer/rubricator_length"].append(float(np.mean(lengths)))
        return batch

    def _rubricator_advantages(self, rollouts: RubricatorRollouts) -> torch.Tensor:
        """This rank's rubricator advantages, computed over every rank's rubricator rows (question
        indices are global): the ``batch`` std and the single-rollout fallback see the global batch,
        as TRL's reasoner advantages do."""
        rows, start = ranks.gather_rows(list(zip(rollouts.rewards, rollouts.question)))
        advantages = rubricator_advantages([r for r, _ in rows], [q for _, q in rows], self.scale_rewards)
        return advantages[start:start + len(rollouts.rewards)]

    def _rubricator_logps(self, key: str, batch: dict) -> torch.Tensor:
        """Old-policy or reference log-probs of the rubricator completions, as TRL computes them."""
        model = self.model if key == "old_per_token_logps" else self.ref_model
        if model is None:
            raise NotImplementedError("RLCER with beta > 0 needs a separate reference model (no PEFT adapters)")
        ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        with torch.no_grad(), disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs):
            logps, _, _ = self._get_per_token_logps_and_entropies(
                model, ids, mask, batch["completion_ids"].size(1),
                batch_size=self.args.per_device_train_batch_size)
        return logps


# --- The method's plan ---------------------------------------------------------------------------

def build(ctx: Any) -> Any:
    """RLCER's `MethodPlan`: the two-role reward function and the trainer that runs both roles."""
    from rewards import MethodPlan

    # The judge goes where the policy is (flows/train.py puts it on the trainer's device first).
    device = model_device(ctx.policy) if ctx.policy is not None else None
    reward = RlcerReward(ctx.cfg, seed=ctx.seed, chat=ctx.chat or ChatFormat(),
                         batch_size=getattr(ctx.grpo, "score_batch_size", None), device=device)
    return MethodPlan([reward], trainer_cls=RlcerGRPOTrainer)
