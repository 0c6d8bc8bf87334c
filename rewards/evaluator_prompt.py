"""Prompting a model as an evaluator: fill an evaluator template, score a target's log-probability.

Shared by RLME's reward (`rewards/meta_eval.py`, paper 000 §3.1) and by the self-evaluation probe
every policy is measured with (`evals/self_eval.py`). Kept apart from the reward so that editing
RLME's reward re-runs only the RLME family, while editing this shared machinery re-runs every
stage that prompts an evaluator (README, "The study pipeline": per-method invalidation). The
design of the batched target pass is explained in `rewards/meta_eval.py`'s module docstring.
"""

from __future__ import annotations

import inspect
import string
from collections.abc import Callable, Sequence
from typing import Any

import torch

DEFAULT_ANCHOR_TEMPLATE = "The correct answer is {gold}."


def _template_fields(template: str) -> list[str]:
    """Root names of the ``{placeholders}`` in a str.format template, in order."""
    names = []
    for _, name, _, _ in string.Formatter().parse(template):
        if name is None:
            continue
        root = name.split(".")[0].split("[")[0]
        if not root:
            raise ValueError(f"evaluator template uses a positional placeholder '{{{name}}}'; name every placeholder")
        if root not in names:
            names.append(root)
    return names


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
    """Fill the evaluator template for one completion and one meta-question (SPEC 2).

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
    fields = _template_fields(template)
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


def _model_device(model: Any) -> torch.device:
    device = getattr(model, "device", None)
    if isinstance(device, torch.device):
        return device
    return next(model.parameters()).device


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    params = inspect.signature(fn).parameters
    return name in params


def target_logprobs(model: Any, tokenizer: Any, prompts: Sequence[str], target: str) -> torch.Tensor:
    """log P(target | prompt) summed over the target's tokens, for a batch in ONE forward pass.

    Paper 000 App. B: the reward uses the evaluator's prediction of the target answer sequence
    (e.g. "YES" followed by the end marker), summing the log-probabilities of all its tokens.
    Prompts and target are tokenised separately (the prompt with the tokenizer's special
    tokens, e.g. BOS; the target without) so every row scores the same target ids. Rows are
    left-padded with explicit position ids, so each row's positions equal its unpadded ones and
    all targets sit in the last T positions. Returns a float32 CPU tensor of shape [B].
    """
    target_ids = tokenizer(target, add_special_tokens=False)["input_ids"]
    if not target_ids:
        raise ValueError(f"target {target!r} tokenises to no tokens")
    if not prompts:
        return torch.zeros(0)
    prompt_ids = tokenizer(list(prompts), add_special_tokens=True)["input_ids"]
    if any(len(p) == 0 for p in prompt_ids):
        raise ValueError("an evaluator prompt tokenises to no tokens; the first target token needs a context")
    rows = [list(p) + list(target_ids) for p in prompt_ids]
    B, T, L = len(rows), len(target_ids), max(len(r) for r in rows)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    device = _model_device(model)

    input_ids = torch.full((B, L), pad, dtype=torch.long)
    attention_mask = torch.zeros((B, L), dtype=torch.long)
    for i, r in enumerate(rows):
        input_ids[i, L - len(r) :] = torch.tensor(r, dtype=torch.long)
        attention_mask[i, L - len(r) :] = 1
    position_ids = (attention_mask.cumsum(dim=1) - 1).clamp(min=0)

    kwargs: dict[str, Any] = {
        "input_ids": input_ids.to(device),
        "attention_mask": attention_mask.to(device),
        "position_ids": position_ids.to(device),
        "use_cache": False,
    }
    # Logits for positions L-T-1 .. L-2 predict the T target tokens; project only those.
    if _accepts(model.forward, "logits_to_keep"):
        kwargs["logits_to_keep"] = T + 1

    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            logits = model(**kwargs).logits
    finally:
        model.train(was_training)
    logits = logits[:, -(T + 1) : -1, :].float()
    logp = torch.log_softmax(logits, dim=-1)
    targets = torch.tensor(target_ids, dtype=torch.long, device=logp.device).expand(B, T)
    return logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1).sum(dim=-1).cpu()
