"""Prompting a model as an evaluator: fill an evaluator template, score a target's log-probability.

Shared by RLME's reward (`rewards/meta_eval.py`, paper 000 §3.1) and by the self-evaluation probe
every policy is measured with (`evals/self_eval.py`). Kept apart from the reward so that editing
RLME's reward re-runs only the RLME family, while editing this shared machinery re-runs every
stage that prompts an evaluator (docs/pipeline.md, "Per-method invalidation"). The batched target pass is
`rewards/teacher_forcing.py`'s, shared with DRO and RLCER's judge.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from core.params import template_fields
from rewards.teacher_forcing import teacher_forced_logprobs

DEFAULT_ANCHOR_TEMPLATE = "The correct answer is {gold}."


def render_evaluator_prompt(
    template: str,
    *,
    problem: str,
    solution: str,
    answer: str,
    question: str,
    gold: str | None = None,
    anchor_template: str = DEFAULT_ANCHOR_TEMPLATE,
    **measured: Any,
) -> str:
    """Fill the evaluator template for one completion and one meta-question (paper 000 §3.1).

    The evaluator sees the problem, the full solution, the answer extracted from it (never the
    gold answer) and the question; measured quantities such as ``length`` support
    multi-objective questions (paper 000 §4.7). Only when ``gold`` is given (anchoring, §4.6)
    does the prompt state the correct answer: in ``{anchor}`` if the template has it, else on
    its own line just before the question. Literal braces in a template are written ``{{ }}``.

    >>> t = "Problem: {problem}\\nSolution: {solution}\\nAnswer: {answer}\\n{question} ({length} chars)"
    >>> print(render_evaluator_prompt(t, problem="1+1?", solution="\\\\boxed{2}", answer="2",
    ...                               question="Is the answer correct?", length=9))
    Problem: 1+1?
    Solution: \\boxed{2}
    Answer: 2
    Is the answer correct? (9 chars)
    >>> print(render_evaluator_prompt("{question}", problem="", solution="", answer="",
    ...                               question="Is the answer correct?", gold="2"))
    The correct answer is 2.
    Is the answer correct?
    """
    anchor = "" if gold is None else anchor_template.format(gold=gold)
    fields = template_fields(template)
    if anchor and "anchor" not in fields:
        question = f"{anchor}\n{question}"
    values = dict(measured, problem=problem, solution=solution, answer=answer, question=question, anchor=anchor)
    missing = [f for f in fields if f not in values]
    if missing:
        raise ValueError(
            f"evaluator template needs placeholder(s) {', '.join('{' + m + '}' for m in missing)} "
            f"but no value was given; available: {', '.join(sorted(values))}"
        )
    return template.format(**values)


def target_logprobs(model: Any, tokenizer: Any, prompts: Sequence[str], target: str, *,
                    chat: Any = None) -> torch.Tensor:
    """log P(target | prompt) summed over the target's tokens, for a batch in ONE forward pass.

    Paper 000 App. B: the reward uses the evaluator's prediction of the target answer sequence
    (e.g. "YES" followed by the end marker), summing the log-probabilities of all its tokens.
    Prompts and target are tokenised separately (the prompt with the tokenizer's special
    tokens, e.g. BOS; the target without) so every row scores the same target ids. The pass is
    :func:`rewards.teacher_forcing.teacher_forced_logprobs` (left-padded, explicit position ids, the
    last T + 1 positions projected), run in eval mode; the model's mode is restored afterwards.
    Returns a float32 CPU tensor of shape [B].

    ``chat`` (a :class:`rewards.chat.ChatFormat`): when ``tokenizer`` has a chat template, each
    prompt becomes one user turn of it with the generation prompt and thinking off
    (:meth:`~rewards.chat.ChatFormat.user_turn`), so the target is scored as the start of the
    assistant's reply; the template writes its own special tokens, so none are added then.
    """
    target_ids = tokenizer(target, add_special_tokens=False)["input_ids"]
    if not target_ids:
        raise ValueError(f"target {target!r} tokenises to no tokens")
    if not prompts:
        return torch.zeros(0)
    templated = chat is not None and chat.wraps_scoring(tokenizer)
    if templated:
        prompts = [chat.user_turn(tokenizer, p) for p in prompts]
    prompt_ids = tokenizer(list(prompts), add_special_tokens=not templated)["input_ids"]
    if any(len(p) == 0 for p in prompt_ids):
        raise ValueError("an evaluator prompt tokenises to no tokens; the first target token needs a context")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    was_training = model.training
    model.eval()
    try:
        logp, _ = teacher_forced_logprobs(model, prompt_ids, [target_ids] * len(prompt_ids), pad)
    finally:
        model.train(was_training)
    return logp.sum(dim=-1).cpu()
