"""`rlvr`: the verifiable-answer reward: 1.0 if the boxed answer matches the gold answer.

Plain numbers (the tiny world, GSM8K) take a fast exact path after stripping commas, `$`, units and
spaces; anything else goes to `math-verify`, which handles LaTeX and symbolic equivalence. The fast
path matters: the reward runs on every completion of every step.

Hostile completions must not stall a training step: :func:`extract_boxed` is one linear pass, and
an answer longer than :data:`MAX_SYMBOLIC_CHARS` is never handed to `math-verify` (whose parse time
grows fast with length and whose timeouts are off here); it counts as wrong.

Two helpers here are every method's: :func:`extract_boxed` (the "last boxed answer" rule of
paper 000 §4.1 and App. A.4, read by RLVR, RLME's evaluator prompt, RLCER's rule verifier, DRO's
rubrics and the benchmarks) and :func:`completion_text` (a TRL completion, plain or
conversational, as one string).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

VERSION = "1"

# Longest answer (either side) that goes to math-verify; a longer non-numeric one is wrong. Real
# answers are a few dozen characters; 1,000 characters of LaTeX already take math-verify ~0.3 s,
# 100 KB ~30 s, and its own timeouts are off (see answers_match).
MAX_SYMBOLIC_CHARS = 1_000

_BOX = "\\boxed{"
_BRACES = re.compile(re.escape(_BOX) + "|[{}]")  # a box opener, or any brace
_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)$")
_UNITS = re.compile(r"\\(?:text|mathrm)\{[^{}]*\}|\\[,!;: ]|\\%|%|\$|\\\$|\s")


def extract_boxed(text: str | None) -> str | None:
    """Content of the LAST `\\boxed{...}` with balanced braces; None if there is none.

    >>> extract_boxed(r"so \\boxed{3} then \\boxed{\\frac{1}{2}}")
    '\\\\frac{1}{2}'
    >>> extract_boxed("no box") is None
    True
    """
    if not text:
        return None
    # One pass with a stack of open braces: a box's brace holds where its content starts, any other
    # brace -1. A box's brace is popped exactly where a rescan from that box would reach depth 0,
    # so this finds the box a scan back from the last `\boxed{` finds, without rescanning to the
    # end from every unclosed box (quadratic: 4,000 unclosed boxes took ~40 s).
    stack: list[int] = []
    best_start, best_end = -1, -1  # content of the latest-starting box that closed
    for match in _BRACES.finditer(text):
        if match.group() == "}":
            if stack:
                start = stack.pop()
                if start > best_start:
                    best_start, best_end = start, match.start()
        else:
            stack.append(match.end() if len(match.group()) > 1 else -1)
    return text[best_start:best_end] if best_start >= 0 else None


def _plain_number(s: str) -> Decimal | None:
    s = _UNITS.sub("", s).replace(",", "")
    if not _NUMBER.match(s):
        return None
    try:
        return Decimal(s)
    except InvalidOperation:
        return None


def answers_match(pred: str | None, gold: str | None) -> bool:
    """Numeric/mathematical equivalence of a predicted and a gold answer.

    Plain numbers of any length compare exactly; other answers longer than
    :data:`MAX_SYMBOLIC_CHARS` (either side) are not matched.

    >>> answers_match("1,000", "1000"), answers_match("$-3$", "-3"), answers_match("12", "13")
    (True, True, False)
    """
    if pred is None or gold is None or not str(pred).strip() or not str(gold).strip():
        return False
    a, b = _plain_number(str(pred)), _plain_number(str(gold))
    if a is not None and b is not None:
        return a == b
    if max(len(str(pred)), len(str(gold))) > MAX_SYMBOLIC_CHARS:
        return False  # math-verify would take seconds to minutes; no real answer is this long
    from math_verify import parse, verify  # slow import (sympy): only for non-plain answers

    # Timeouts are off (they use SIGALRM, which fails outside the main thread, e.g. in Prefect
    # tasks); math-verify warns about that on every call.
    logging.getLogger("math_verify").setLevel(logging.ERROR)

    try:
        gold_parsed = parse(f"${gold}$", parsing_timeout=None)
        pred_parsed = parse(f"${pred}$", parsing_timeout=None)
        return bool(gold_parsed and pred_parsed
                    and verify(gold_parsed, pred_parsed, timeout_seconds=None))
    except Exception:  # math-verify raises on exotic LaTeX; an unparseable answer is wrong
        return False


def rlvr_score(completion: str, gold: str) -> float:
    """1.0 if the completion's last boxed answer matches `gold`, else 0.0 (pure, verl-style)."""
    return 1.0 if answers_match(extract_boxed(completion), gold) else 0.0


def rlvr_correct(prompts: Any, completions: Sequence[Any], answer: Sequence[Any],
                 **kwargs: Any) -> list[float | None]:
    """TRL reward function: `answer` is the dataset's gold column; rows without one get None."""
    return [None if gold is None else rlvr_score(completion_text(c), gold)
            for c, gold in zip(completions, answer)]


def completion_text(completion: Any) -> str:
    """A TRL completion as text: TRL passes strings for plain prompts and message lists for
    conversational ones, whose contents are concatenated.

    A message's content may also be None (an assistant turn that only calls tools) or a list of
    OpenAI-style parts (``{"type": "text", "text": ...}``); None and non-text parts count as ""
    (:func:`content_text`). Anything that is not a list is returned as it is.

    >>> completion_text([{"role": "assistant", "content": [{"type": "text", "text": "a"},
    ...                                                    {"type": "image_url"}]},
    ...                  {"role": "assistant", "content": None}, {"role": "assistant", "content": "b"}])
    'ab'
    >>> completion_text("plain")
    'plain'
    """
    if isinstance(completion, list):
        return "".join(content_text(m.get("content")) for m in completion if isinstance(m, dict))
    return completion


def content_text(content: Any) -> str:
    """The text of one chat message's ``content``: a string as is, the text parts of an
    OpenAI-style part list joined, "" for None or anything else.

    >>> content_text(None), content_text("x"), content_text([{"type": "text", "text": "y"},
    ...                                                       {"type": "image_url"}])
    ('', 'x', 'y')
    """
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part["text"] for part in content
                       if isinstance(part, dict) and part.get("type", "text") == "text"
                       and isinstance(part.get("text"), str))
    return ""


def build(ctx: Any) -> Any:
    """RLVR's plan: the verifiable answer reward alone."""
    from rewards import MethodPlan

    return MethodPlan([rlvr_correct])
