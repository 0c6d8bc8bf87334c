"""RLCER: rewarding chains of thought with self-proposed, self-evolving rubrics (paper 004).

One policy plays two roles (§4.2): the *reasoner* answers with a CoT and a ``\\boxed{}`` answer;
the *rubricator* reads the question and one reasoner CoT and proposes rubrics, a JSON list of
``{"criterion": str, "points": int}`` (points a non-zero integer in [-5, 5]). A rubric is *valid*
when its satisfaction over the rollouts varies and correlates with correctness (Eq. 7); the
reasoner earns the outcome plus the min-max normalised points of the valid rubrics its CoT meets
(Eq. 6, 8-9), the rubricator the valid fraction of its own rubrics plus a format reward
(Eq. 10-12). ``MODES`` holds the ablations (``rlcer``, ``no_evolve``, ``rubric_only``,
``random``). The rule verifier at the end is the tiny world's stand-in for the paper's frozen judge
(§4.3); the batch-level glue is :mod:`rewards.rlcer`.

Decisions and their reasons: docs/methods/rlcer.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from rewards.verifiable import extract_boxed

VERSION = "1"

__all__ = [
    "MODES",
    "RUBRIC_VOCABULARY",
    "VERSION",
    "ProposedRubric",
    "box_matches_last_step",
    "cot_rewards",
    "parse_rubrics",
    "parse_steps",
    "reasoner_reward",
    "rubric_correlations",
    "rubricator_reward",
    "rule_verifier",
    "valid_rubrics",
]

MODES = ("rlcer", "no_evolve", "rubric_only", "random")
MIN_POINTS, MAX_POINTS = -5, 5


@dataclass(frozen=True)
class ProposedRubric:
    """A rubric the rubricator proposed (paper 004 §4.2): a yes/no criterion in words, judged on a
    CoT by a verifier, and its signed importance (positive = merit, negative = flaw).

    Not :class:`rewards.dro.RuleRubric`, DRO's named rule check (code, not text).
    """

    criterion: str
    points: int


_JSON_CHARS = re.compile(r'[\[\]"\\]')


def _outer_bracket_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every balanced ``[...]`` not nested in another, in one linear pass.

    Brackets inside JSON strings (only tracked within a bracket) are ignored; an unmatched ``[`` in
    prose does not hide a later list. Linear time matters: a policy can emit thousands of brackets,
    and trying a JSON decode at every one of them is quadratic.
    """
    stack: list[int] = []
    matched: list[tuple[int, int]] = []
    in_string, skip = False, -1
    for found in _JSON_CHARS.finditer(text):
        ch, i = found.group(), found.start()
        if in_string:
            if i == skip:
                continue
            if ch == "\\":
                skip = i + 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = bool(stack)
        elif ch == "[":
            stack.append(i)
        elif ch == "]" and stack:
            matched.append((stack.pop(), i + 1))
    outer: list[tuple[int, int]] = []
    for start, end in sorted(matched):
        if not outer or start >= outer[-1][1]:
            outer.append((start, end))
    return outer


def _json_lists(text: str) -> Iterator[list]:
    """Each outermost bracketed span of ``text`` that decodes as a JSON array, in order."""
    for start, end in _outer_bracket_spans(text):
        try:
            value = json.loads(text[start:end])
        except (ValueError, RecursionError):
            continue
        if isinstance(value, list):
            yield value


def _rubric(item: object) -> ProposedRubric | None:
    if not isinstance(item, dict):
        return None
    criterion, points = item.get("criterion"), item.get("points")
    if not isinstance(criterion, str) or not criterion.strip():
        return None
    # bool is an int subclass in Python; `true` is not a points value.
    if isinstance(points, bool) or not isinstance(points, int):
        return None
    if points == 0 or not MIN_POINTS <= points <= MAX_POINTS:
        return None
    return ProposedRubric(criterion.strip(), points)


def parse_rubrics(text: str) -> list[ProposedRubric] | None:
    """The rubricator's rubrics, or None when its output breaks the format (paper 004 Eq. 11).

    The rubric list is the first outermost JSON array of objects in the text (prose or a ```json
    fence around it is tolerated; a fenced block is read first). Every item must have a non-empty
    string ``criterion`` and an integer ``points`` in [-5, 5] other than 0; one bad item, an empty
    list, no list or bad JSON makes the whole output None (format reward 0).

    >>> parse_rubrics('Rubrics: [{"criterion": "checks each step", "points": 3}]')
    [ProposedRubric(criterion='checks each step', points=3)]
    >>> parse_rubrics('```json\\n[{"criterion": "guesses", "points": -2}]\\n```')
    [ProposedRubric(criterion='guesses', points=-2)]
    >>> parse_rubrics('[{"criterion": "x", "points": 9}]') is None
    True
    """
    if not isinstance(text, str):
        return None
    fenced = re.findall(r"```(?:json)?\s*(.*?)```", text, flags=re.DOTALL | re.IGNORECASE)
    for source in [*fenced, text]:
        saw_list = False
        for candidate in _json_lists(source):
            saw_list = True
            if candidate and all(isinstance(x, dict) for x in candidate):
                rubrics = [r for item in candidate if (r := _rubric(item)) is not None]
                return rubrics if len(rubrics) == len(candidate) else None
        if saw_list:
            return None
    return None


def rubric_correlations(V: object, z: object) -> np.ndarray:
    """Pearson corr(v_k, z) of each rubric over one question's N rollouts (paper 004 Eq. 7).

    NaN where the correlation is undefined (std(v_k) = 0 or std(z) = 0); computed without dividing
    by zero, so constant rows raise no warnings. Used by :func:`valid_rubrics` and for the paper's
    Fig. 6a curve (mean correlation of the proposed rubrics).

    >>> rubric_correlations([[1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 1, 1]], [1, 1, 0, 0]).tolist()
    [1.0, 0.0, nan]
    """
    outcome = np.asarray(z, dtype=float).reshape(-1)
    N = outcome.size
    matrix = np.asarray(V, dtype=float)
    if matrix.size == 0:
        return np.zeros(matrix.shape[0] if matrix.ndim == 2 else 0)
    if matrix.ndim != 2 or matrix.shape[1] != N:
        raise ValueError(f"V must be [K, N] with N = len(z) = {N}, got shape {matrix.shape}")
    v_dev = matrix - matrix.mean(axis=1, keepdims=True)
    z_dev = outcome - outcome.mean()
    v_std = np.sqrt((v_dev**2).mean(axis=1))
    z_std = float(np.sqrt((z_dev**2).mean()))
    eps = 1e-12
    ok = (v_std > eps) & (z_std > eps)
    cov = (v_dev * z_dev).mean(axis=1)
    return np.where(ok, cov / np.where(ok, v_std * z_std, 1.0), np.nan)


def valid_rubrics(V: object, z: object, alpha: float = 0.2) -> np.ndarray:
    """Which pooled rubrics are valid for one question (paper 004 §4.3, Eq. 7).

    ``V[k, n]`` = 1 if rollout n's CoT meets rubric k, ``z[n]`` = 1 if rollout n is correct.
    Valid iff std(v_k) > 0 and Pearson corr(v_k, z) > alpha; nothing is valid when std(z) = 0.
    Computed without dividing by zero, so constant rows raise no warnings.

    Worked example, z = [1, 1, 0, 0]: [1, 1, 0, 0] has corr 1 (valid); [1, 0, 1, 0] has corr 0
    (not valid); [1, 1, 1, 1] has std 0 (not valid); [0, 0, 1, 1] has corr -1 (not valid).

    >>> valid_rubrics([[1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 1, 1], [0, 0, 1, 1]], [1, 1, 0, 0]).tolist()
    [True, False, False, False]
    """
    corr = rubric_correlations(V, z)
    return np.nan_to_num(corr, nan=-np.inf) > alpha


def cot_rewards(V: object, points: object, valid: object) -> np.ndarray:
    """CoT reward per rollout (paper 004 Eq. 6): min-max normalised points of the valid rubrics met.

    r_cot(n) = (sum_{k valid} V[k, n] * points_k - Min) / (Max - Min), Min = sum of the negative
    valid points, Max = sum of the positive ones; all zeros when no rubric is valid or Max = Min.

    Worked example: valid points [+3, -1] (the third rubric is not valid); rollout 0 meets both
    (3 - 1 = 2), rollout 1 only the flaw (-1). Min = -1, Max = 3, so r = [(2+1)/4, (-1+1)/4].

    >>> cot_rewards([[1, 0], [1, 1], [1, 1]], [3, -1, 5], [True, True, False]).tolist()
    [0.75, 0.0]
    """
    pts = np.asarray(points, dtype=float).reshape(-1)
    keep = np.asarray(valid, dtype=bool).reshape(-1)
    matrix = np.asarray(V, dtype=float)
    K = pts.size
    if keep.size != K:
        raise ValueError(f"points has {K} entries but valid has {keep.size}")
    if matrix.size == 0:
        n = matrix.shape[1] if matrix.ndim == 2 else 0
        return np.zeros(n)
    if matrix.ndim != 2 or matrix.shape[0] != K:
        raise ValueError(f"V must be [K, N] with K = len(points) = {K}, got shape {matrix.shape}")
    used = np.where(keep, pts, 0.0)
    low, high = used[used < 0].sum(), used[used > 0].sum()
    if not keep.any() or high == low:
        return np.zeros(matrix.shape[1])
    return (used @ matrix - low) / (high - low)


def _mode(mode: str) -> str:
    name = str(mode).removeprefix("rlcer_")
    if name not in MODES:
        raise ValueError(f"unknown RLCER mode {mode!r}; valid modes: {', '.join(MODES)}")
    return name


def rubricator_reward(n_valid: int, n_total: int, format_ok: bool, mode: str = "rlcer") -> float:
    """Rubricator reward (paper 004 Eq. 10-12): valid fraction of its own rubrics + format (1 / 0).

    A malformed output scores 0 in total (format 0 and no valid fraction). In ``no_evolve`` mode
    (§5.4 ablation) only the format reward is given.

    >>> rubricator_reward(1, 4, True)
    1.25
    >>> rubricator_reward(3, 4, False), rubricator_reward(1, 4, True, mode="no_evolve")
    (0.0, 1.0)
    """
    name = _mode(mode)
    if not format_ok:
        return 0.0
    if n_valid < 0 or n_total < 0 or n_valid > n_total:
        raise ValueError(f"need 0 <= n_valid <= n_total, got {n_valid} of {n_total}")
    if name == "no_evolve" or n_total == 0:
        return 1.0
    return 1.0 + n_valid / n_total


def reasoner_reward(
    correct: bool,
    r_cot: float,
    mode: str = "rlcer",
    rng: np.random.Generator | None = None,
) -> float:
    """Reasoner reward (paper 004 Eq. 8-9): +1 / -1 for the answer plus the CoT reward.

    ``rubric_only`` drops the outcome term (§5.2); ``random`` replaces the whole reward with a
    U(0, 1) draw from ``rng`` (the paper's control; a generator is required so runs stay seeded).

    >>> reasoner_reward(True, 0.5), reasoner_reward(False, 0.5)
    (1.5, -0.5)
    >>> reasoner_reward(False, 0.25, mode="rubric_only")
    0.25
    """
    name = _mode(mode)
    if name == "random":
        if rng is None:
            raise ValueError("mode 'random' needs a seeded numpy Generator passed as rng")
        return float(rng.uniform(0.0, 1.0))
    if name == "rubric_only":
        return float(r_cot)
    return (1.0 if correct else -1.0) + float(r_cot)


# --- Rule-based verifier for the tiny arithmetic world ------------------------------------------
#
# A CoT in the tiny world is a chain of steps `a op b = c.` (integers; op one of + - * / and the
# signs x, ×, ÷) followed by `The answer is \boxed{N}.`, e.g.
#     7 + 5 = 12. 12 - 3 = 9. 9 * 2 = 18. The answer is \boxed{18}.

# At most 18 digits: bounded arithmetic, and no int() of a 5000-digit run (Python refuses those).
_NUM = r"-?\d{1,18}"
_STEP = re.compile(rf"(?<![\w.])({_NUM})\s*([-+*/x×÷])\s*({_NUM})\s*=\s*({_NUM})(?![\w])")
_AT_MOST = re.compile(r"^uses at most (\d+) steps?$")
_OPS: dict[str, Callable[[int, int], int | None]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "x": lambda a, b: a * b,
    "×": lambda a, b: a * b,
    "/": lambda a, b: a // b if b != 0 and a % b == 0 else None,
    "÷": lambda a, b: a // b if b != 0 and a % b == 0 else None,
}


#: One ``a op b = c`` step of a CoT: (a, op, b, c).
Step = tuple[int, str, int, int]


def parse_steps(cot: str) -> list[Step]:
    """The ``a op b = c`` steps of a CoT as (a, op, b, c), in order.

    >>> parse_steps("7 + 5 = 12. 12 - 3 = 9. The answer is \\\\boxed{9}.")
    [(7, '+', 5, 12), (12, '-', 3, 9)]
    """
    return [(int(a), op, int(b), int(c)) for a, op, b, c in _STEP.findall(cot)]


def _step_correct(step: Step) -> bool:
    a, op, b, c = step
    return _OPS[op](a, b) == c


def box_matches_last_step(cot: str, steps: list[Step] | None = None) -> bool:
    """The boxed answer is the result of the CoT's last ``a op b = c`` step (exact text, spaces
    inside the box ignored); False without a step or a box. ``steps`` are the CoT's
    :func:`parse_steps`, passed by a caller that already has them.

    >>> box_matches_last_step("7 + 5 = 12. 12 - 3 = 9. The answer is \\\\boxed{ 9 }.")
    True
    >>> box_matches_last_step("7 + 5 = 12. The answer is \\\\boxed{13}.")
    False
    >>> box_matches_last_step("\\\\boxed{9}")
    False
    """
    steps = parse_steps(cot) if steps is None else steps
    return bool(steps) and (extract_boxed(cot) or "").strip() == str(steps[-1][3])


def _shows_every_step(cot: str) -> bool:
    steps = parse_steps(cot)
    chained = all(nxt[0] == prev[3] for prev, nxt in zip(steps, steps[1:]))
    return chained and box_matches_last_step(cot, steps)


def _arithmetic_correct(cot: str) -> bool:
    steps = parse_steps(cot)
    return bool(steps) and all(_step_correct(s) for s in steps)


def _arithmetic_slip(cot: str) -> bool:
    return any(not _step_correct(s) for s in parse_steps(cot))


def _ends_with_box(cot: str) -> bool:
    return re.search(r"\\boxed\s*\{[^{}]*\}\s*\.?\s*$", cot) is not None


#: The closed rubric vocabulary the rule-based verifier understands, criterion -> check.
#: Criteria are matched case-insensitively, ignoring surrounding space and a final full stop.
#: Besides these, "uses at most N steps" (any integer N) holds when the CoT has at most N steps.
RUBRIC_VOCABULARY: dict[str, Callable[[str], bool]] = {
    # Every step starts from the previous step's result and the box holds the last result: no
    # intermediate value is skipped or replaced.
    "shows every intermediate step": _shows_every_step,
    # A non-empty \boxed{...} appears somewhere.
    "states the final answer in a box": lambda cot: bool((extract_boxed(cot) or "").strip()),
    # At least one step, and every `a op b = c` step is arithmetically right (integer division).
    "each step's arithmetic is correct": _arithmetic_correct,
    # At least one `a op b = c` step is wrong (a natural negative rubric).
    "contains an arithmetic slip": _arithmetic_slip,
    # The boxed answer equals the result of the last step.
    "the boxed answer matches the last step": box_matches_last_step,
    # Nothing but an optional full stop follows the last box.
    "ends with the boxed answer": _ends_with_box,
    # The CoT restates the question: it contains a sentence ending in a question mark.
    "repeats the question": lambda cot: "?" in cot,
}


def _normalise_criterion(criterion: str) -> str:
    text = re.sub(r"\s+", " ", criterion.strip().lower()).rstrip(".").strip()
    return text.replace("\u2019", "'")


def rule_verifier(criterion: str, cot: str) -> bool:
    """Tiny-world verifier: does ``cot`` meet ``criterion``? Unknown criteria are never met.

    Stands in for the frozen judge model of paper 004 §4.3 so RLCER runs on a CPU; the closed
    vocabulary is :data:`RUBRIC_VOCABULARY` plus "uses at most N steps".

    >>> cot = "7 + 5 = 12. 12 - 3 = 9. 9 * 2 = 18. The answer is \\\\boxed{18}."
    >>> rule_verifier("Each step's arithmetic is correct.", cot), rule_verifier("uses at most 2 steps", cot)
    (True, False)
    >>> rule_verifier("is elegant", cot)
    False
    """
    if not isinstance(criterion, str) or not isinstance(cot, str):
        return False
    key = _normalise_criterion(criterion)
    check = RUBRIC_VOCABULARY.get(key)
    if check is not None:
        return bool(check(cot))
    at_most = _AT_MOST.match(key)
    if at_most is not None:
        return len(parse_steps(cot)) <= int(at_most.group(1))
    return False
