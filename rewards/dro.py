"""DRO's pure scoring (paper 003): the CoT / answer split, the rule rubrics and one group's verdict.

The maths (R3, the two plain aggregations, the gates, h and theta) lives in
:mod:`rewards.reflection`; the teacher-forced pass that gives P and the TRL wiring live in
:mod:`models.dro_trainer`. This module is what sits between them and needs no model:

1. **Split** each completion into CoT and final answer at the LAST ``answer_marker`` (a reasoning
   model's ``</think>``; the tiny world's ``The answer is``). The whitespace just before the marker
   belongs to the answer, so the reference answer of an arith row is e.g.
   ``" The answer is \\boxed{2}."`` and the CoT ends where a byte-level BPE word would. No marker: the
   whole completion is the CoT (the reference is then scored after an unfinished chain of thought).
   facts has no answer marker: a description is both its CoT and its answer, and the reference is
   ``references[0]``.
2. **Rubrics** (ours; the paper has an LLM write a compact set of yes/no questions per query and
   drops those the reference answer fails, §4.1, App. E). The tiny world's are rule checks
   (:class:`RuleRubric`), each judged on (CoT, final answer) of a rollout and kept only if the
   reference passes it:

   - arith: ``boxed_integer`` (the final answer's box holds an integer), ``boxed_once`` (exactly one
     ``\\boxed{``), ``ends_after_box`` (nothing but a period or spaces after the box),
     ``cot_matches_box`` (the last ``= N`` of the CoT equals the boxed number).
   - facts: ``mentions <fact>`` per gold fact (a whole-word match, :func:`world.facts.coverage`) and
     ``style`` (:func:`world.facts.style_ok` with the row's requested style).

3. **Verdict** per group (:func:`judge_group`): the configured reward (``reward.dro.score``: R3,
   avg_prob or avg_logprob; R3 is kept whatever the score, so the variants' curves compare), the
   high-variance score h (§4.2) and the three gates (coverage and consistency over S[g, r], §4.1;
   h >= theta with :class:`rewards.reflection.AdaptiveThreshold`, §4.2).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from rewards import reflection
from rewards.verifiable import extract_boxed
from world.facts import coverage, style_ok

__all__ = [
    "ARITH_RUBRICS",
    "GroupVerdict",
    "RuleRubric",
    "cot_and_answer",
    "facts_rubrics",
    "judge_group",
    "query_rubrics",
    "reference_answer",
    "rubric_row",
    "split_answer",
]


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


def _field(row: dict, key: str, task: str) -> Any:
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


def facts_rubrics(row: dict) -> list[RuleRubric]:
    """One ``mentions <fact>`` rubric per gold fact, then the requested style."""
    out = [RuleRubric(f"mentions {fact}", lambda cot, answer, f=fact: coverage(answer, [f]) == 1.0)
           for fact in _field(row, "gold_facts", "facts")]
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
    candidates = ARITH_RUBRICS if task == "arith" else facts_rubrics(row)
    cot, answer = cot_and_answer(_reference_text(row, task), task, marker)
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
    rewards = scores[cfg.score]
    h = reflection.group_variance_score(P, None, cfg.token_frac, cfg.clip_low, cfg.clip_high)
    return GroupVerdict(
        rewards=rewards, r3=r3, h=h,
        coverage_ok=not cfg.gate or reflection.coverage_gate(S, cfg.min_rollouts),
        consistency_ok=not cfg.gate or reflection.consistency_gate(S, rewards, cfg.top_frac,
                                                                   cfg.min_rubric_frac),
        variance_ok=not cfg.variance_filter or threshold.accept(h),
    )
