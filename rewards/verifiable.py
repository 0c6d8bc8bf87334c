"""`rlvr`: the verifiable-answer reward (SPEC 1): 1.0 if the boxed answer matches the gold answer.

Plain numbers (the tiny world, GSM8K) take a fast exact path after stripping commas, `$`, units and
spaces; anything else goes to `math-verify`, which handles LaTeX and symbolic equivalence. The fast
path matters: the reward runs on every completion of every step.
"""

from __future__ import annotations

import logging
import re
from decimal import Decimal, InvalidOperation

VERSION = "1"

_BOX = "\\boxed{"
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
    start = text.rfind(_BOX)
    while start != -1:
        depth, i = 1, start + len(_BOX)
        while i < len(text):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    return text[start + len(_BOX):i]
            i += 1
        # Unbalanced last box: fall back to an earlier, complete one.
        start = text.rfind(_BOX, 0, start)
    return None


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

    >>> answers_match("1,000", "1000"), answers_match("$-3$", "-3"), answers_match("12", "13")
    (True, True, False)
    """
    if pred is None or gold is None or not str(pred).strip() or not str(gold).strip():
        return False
    a, b = _plain_number(str(pred)), _plain_number(str(gold))
    if a is not None and b is not None:
        return a == b
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


def rlvr_correct(prompts, completions, answer, **kwargs) -> list[float | None]:
    """TRL reward function: `answer` is the dataset's gold column; rows without one get None."""
    return [None if gold is None else rlvr_score(_text(c), gold)
            for c, gold in zip(completions, answer)]


def _text(completion) -> str:
    """TRL passes strings for plain prompts and message lists for conversational ones."""
    if isinstance(completion, list):
        return "".join(m.get("content", "") for m in completion if isinstance(m, dict))
    return completion
