"""DRO's pure scoring (paper 003): the CoT / answer split, the rule rubrics and one group's verdict.

Between the maths of :mod:`rewards.reflection` (R3, the plain aggregations, the gates, h and theta)
and the model pass and TRL wiring of :mod:`models.dro_trainer`; nothing here needs a model.
:func:`split_answer` cuts a completion at the LAST ``answer_marker``, :func:`query_rubrics` gives
a row's rule rubrics (those its reference passes; the tiny world's stand-in for paper §4.1's
LLM-written ones), and :func:`judge_group` gives a group's rewards, high-variance score h (§4.2)
and gate verdicts (§4.1-4.2).

Decisions and their reasons: docs/methods/dro.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from rewards import reflection
from rewards.chat import THINK_END
from rewards.ref_logprob import reference_logprob_scores
from rewards.verifiable import extract_boxed
from world.facts import coverage, style_ok

__all__ = [
    "ARITH_RUBRICS",
    "FACTS_SEPARATOR",
    "GroupVerdict",
    "RuleRubric",
    "cot_and_answer",
    "facts_rubrics",
    "judge_group",
    "query_rubrics",
    "reference_answer",
    "reference_parts",
    "rubric_row",
    "scoring_prefix",
    "split_answer",
]


# --- CoT / answer split and the reference ------------------------------------------------------

# facts has no answer marker: the reference is scored after the rollout's description and this cue
# (docs/methods/dro.md).
FACTS_SEPARATOR = "\nAnswer:"


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


def _field(row: dict, key: str, task: str) -> Any:
    if key not in row:
        raise ValueError(f"row {row.get('prompt_id', '?')}: DRO on {task!r} needs the column {key!r}")
    return row[key]


def _reference_text(row: dict, task: str) -> str:
    """The row's full reference: arith's (and arith_ref's) correct solution, facts' first
    paraphrase."""
    return _field(row, "references", task)[0] if task == "facts" else _field(row, "reference", task)


def cot_and_answer(text: str, task: str, marker: str) -> tuple[str, str]:
    """(CoT, final answer) of a completion; a facts description is both. With a reasoning model's
    marker ``</think>`` (any task): the reasoning before the last ``</think>`` and the reply after
    it, or (the text, "") when the think block never closed (no answer yet).

    >>> cot_and_answer("<think>\\n2 + 3 = 5\\n</think>\\n\\nThe answer is 5.", "arith", "</think>")
    ('<think>\\n2 + 3 = 5\\n', 'The answer is 5.')
    """
    if marker == THINK_END:
        at = text.rfind(THINK_END)
        return (text, "") if at < 0 else (text[:at], text[at + len(THINK_END):].lstrip("\n"))
    return (text, text) if task == "facts" else split_answer(text, marker)


def reference_parts(row: dict, task: str, marker: str) -> tuple[str, str]:
    """(CoT, final answer) of the row's reference. With the marker ``</think>``, a reference
    without a think block (GSM8K's, a facts paraphrase) is both; one with its own (the tiny
    world's ``arith_ref``) splits at it, as a rollout does."""
    text = _reference_text(row, task)
    if marker == THINK_END and THINK_END not in text:
        return text, text
    return cot_and_answer(text, task, marker)


def scoring_prefix(text: str, task: str, marker: str) -> tuple[str, str]:
    """(the part of a rollout the reference is scored after, the text between them).

    The tiny world: the CoT before the answer marker (facts: the whole description, then
    ``"\\nAnswer:"``). A reasoning model (marker ``</think>``): the rollout through its own last
    ``</think>``, then the blank line Qwen3's template puts before the reply; a think block that
    never closed is closed (``"\\n</think>\\n\\n"``), so the reference is always the reply.

    >>> scoring_prefix("<think>\\n2 + 3 = 5\\n</think>\\n\\nThe answer is 5.", "arith", "</think>")
    ('<think>\\n2 + 3 = 5\\n</think>', '\\n\\n')
    >>> scoring_prefix(" 2 + 3 = 5. The answer is \\\\boxed{5}.", "arith", "The answer is")
    (' 2 + 3 = 5.', '')
    """
    if marker == THINK_END:
        at = text.rfind(THINK_END)
        if at < 0:
            return text, "\n" + THINK_END + "\n\n"
        return text[:at + len(THINK_END)], "\n\n"
    return cot_and_answer(text, task, marker)[0], FACTS_SEPARATOR if task == "facts" else ""


def reference_answer(row: dict, task: str, marker: str) -> str:
    """The answer tokens P is computed over.

    >>> reference_answer({"reference": " 9 - 3 = 6. The answer is \\\\boxed{6}."}, "arith", "The answer is")
    ' The answer is \\\\boxed{6}.'
    """
    if task == "facts":
        return _reference_text(row, task)
    if marker == THINK_END:  # what follows the rollout's reasoning: the reference's reply
        return reference_parts(row, task, marker)[1].lstrip()
    answer = split_answer(_reference_text(row, task), marker)[1]
    if not answer:
        raise ValueError(f"row {row.get('prompt_id', '?')}: the reference has no answer marker "
                         f"{marker!r} (reward.dro.answer_marker)")
    return answer


# --- Rubrics ------------------------------------------------------------------------------------

class RuleRubric(NamedTuple):
    """One of DRO's per-query rubrics as a rule check: a name and a test of (CoT, final answer).

    Not :class:`rewards.evolving_rubrics.ProposedRubric`, RLCER's criterion in words with points.
    """

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
    """The last ``= N`` anywhere in the CoT (commas dropped) is the boxed integer.

    Not RLCER's :func:`rewards.evolving_rubrics.box_matches_last_step`, which needs a whole
    ``a op b = c`` integer step and compares the box's text: here any ``= N`` counts and the box is
    read as an integer, so a GSM8K reference whose last calculation is ``<<0.5*10=5>>`` or whose
    box is ``1,000`` still passes (and keeps the rubric, :func:`query_rubrics`).
    """
    results = re.findall(r"=\s*(-?\d+)", cot.replace(",", ""))
    boxed = _boxed_int(answer)
    return bool(results) and boxed is not None and int(results[-1]) == boxed


ARITH_RUBRICS = (
    RuleRubric("boxed_integer", lambda cot, answer: _boxed_int(answer) is not None),
    RuleRubric("boxed_once", lambda cot, answer: answer.count("\\boxed{") == 1),
    RuleRubric("ends_after_box", lambda cot, answer: _ends_after_box(answer)),
    RuleRubric("cot_matches_box", _cot_matches_box),
)


def _mentions(fact: str) -> Callable[[str, str], bool]:
    return lambda cot, answer: coverage(answer, [fact]) == 1.0


def facts_rubrics(row: dict) -> list[RuleRubric]:
    """One ``mentions <fact>`` rubric per gold fact, then the requested style."""
    out = [RuleRubric(f"mentions {fact}", _mentions(fact)) for fact in _field(row, "gold_facts", "facts")]
    style = _field(row, "style", "facts")
    return out + [RuleRubric("style", lambda cot, answer: style_ok(answer, style))]


def query_rubrics(row: dict, task: str, marker: str) -> list[RuleRubric]:
    """The row's rubrics that its own reference satisfies (paper §4.1 drops the others).

    >>> row = {"reference": " 2 + 3 = 5. The answer is \\\\boxed{5}."}
    >>> [r.name for r in query_rubrics(row, "arith", "The answer is")]
    ['boxed_integer', 'boxed_once', 'ends_after_box', 'cot_matches_box']
    >>> row = {"reference": " 2 + 3 = 5. The answer is \\\\boxed{5.5}."}
    >>> [r.name for r in query_rubrics(row, "arith", "The answer is")]
    ['boxed_once', 'ends_after_box']
    """
    candidates = facts_rubrics(row) if task == "facts" else ARITH_RUBRICS
    cot, answer = reference_parts(row, task, marker)
    return [r for r in candidates if r.check(cot, answer)]


def rubric_row(row: dict, completion: str, task: str, marker: str) -> list[bool]:
    """S[g, :] of one rollout: which of its prompt's rubrics it satisfies."""
    cot, answer = cot_and_answer(completion, task, marker)
    return [r.check(cot, answer) for r in query_rubrics(row, task, marker)]


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


def judge_group(logP: np.ndarray, S: np.ndarray, cfg: Any,
                threshold: reflection.AdaptiveThreshold) -> GroupVerdict:
    """Rewards and gate decisions of one group from its reference log-probs [G, T] and rubric
    satisfactions [G, R] (``cfg`` is ``reward.dro``), with :mod:`rewards.reflection`'s maths."""
    P = np.exp(logP)
    r3 = reflection.r3_rewards(P, None, cfg.emphasis, cfg.clip_low, cfg.clip_high)
    scores = {"r3": r3, "avg_prob": reflection.avg_prob_rewards(P),
              "avg_logprob": reflection.avg_logprob_rewards(logP)}
    if cfg.score == "ref_logprob":  # arXiv 2602.03979; only when asked: it refuses a NaN log P
        scores["ref_logprob"] = reference_logprob_scores(logP)
    rewards = scores[cfg.score]
    h = reflection.group_variance_score(P, None, cfg.token_frac, cfg.clip_low, cfg.clip_high)
    return GroupVerdict(
        rewards=rewards, r3=r3, h=h,
        coverage_ok=not cfg.gate or reflection.coverage_gate(S, cfg.min_rollouts),
        consistency_ok=not cfg.gate or reflection.consistency_gate(S, rewards, cfg.top_frac,
                                                                   cfg.min_rubric_frac),
        variance_ok=not cfg.variance_filter or threshold.accept(h),
    )
