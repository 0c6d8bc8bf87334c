"""Rationale consistency (MetaJudge) and the hybrid GenRM reward (paper 001).

A generative reward model (GenRM) compares responses A and B, lists its reasons in order of
importance and ends with a verdict ``\\boxed{A>>B}`` / ``A>B`` / ``A=B`` / ``B>A`` / ``B>>A``.
Outcome accuracy alone cannot tell a judge that is right for the right reasons from one that is
right by surface cues ("deceptive alignment", paper 001 §1 and Table 1), so each example carries a
human atomic checklist R_h and a matcher scores S[i, j] in [0, 1]: how well model reason j achieves
human reason i.

- ``optimal_matching`` is a strict one-to-one assignment (§2.3): one broad model reason cannot
  collect credit for several human reasons.
- Rationale consistency (RC, §2.3) = mean over examples of matched total / |R_h|; evaluation
  keeps the model's first five reasons (§2.3, "Top-5").
- ``rationale_ap`` (§4.1, Eq. 3) rewards putting the human-aligned reasons first, with the soft
  indicator I(k) = S[i, k] of the matched pair (ours; the paper's I(k) is 0/1).
- ``hybrid_reward`` = AP x outcome (§4.1, Eq. 4): AP alone is hackable (§4.3 ablation note).

``parse_verdict`` also reads mirrored spellings (``A<B``, ``B<<A``, ``B=A``, ...) and returns the
canonical form; ``lexical_matcher`` is the tiny-world matcher backend. Decisions and their reasons:
docs/methods/rationale.md.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

VERSION = "1"

__all__ = [
    "VERDICTS",
    "VERSION",
    "hybrid_reward",
    "lexical_matcher",
    "optimal_matching",
    "outcome_reward",
    "parse_reasons",
    "parse_verdict",
    "rationale_ap",
    "rationale_consistency",
    "verdict_direction",
]

#: Canonical verdicts and their direction: +1 A is better, 0 tie, -1 B is better.
VERDICTS: dict[str, int] = {"A>>B": 1, "A>B": 1, "A=B": 0, "B>A": -1, "B>>A": -1}
_ALIASES = {"A<B": "B>A", "A<<B": "B>>A", "B<A": "A>B", "B<<A": "A>>B", "B=A": "A=B"}
_LABELS = {"A": 1, "B": -1, "TIE": 0}
_BOX = re.compile(r"\\boxed\s*\{([^{}]*)\}")


def _score_matrix(S: object) -> np.ndarray:
    matrix = np.asarray(S, dtype=float)
    if matrix.ndim != 2:
        raise ValueError(f"S must be a [n_human, n_model] matrix, got shape {matrix.shape}")
    if np.isnan(matrix).any():
        raise ValueError("S contains nan; a matcher must score every (human, model) pair")
    return matrix


def optimal_matching(S: object) -> tuple[float, list[tuple[int, int]]]:
    """One-to-one assignment of model reasons to human reasons maximising the total score.

    Paper 001 §2.3: each human and each model reason is used at most once, so one vague reason
    cannot match several specific human reasons. ``pairs`` lists (human i, model j) with a
    non-zero score, by human index.

    Worked example: model reason 0 fits both human reasons, but only once; the best assignment
    is (0, 1) + (1, 0) = 0.5 + 1.0 = 1.5, beating (0, 0) + (1, 1) = 1.0 + 0.0.

    >>> optimal_matching([[1.0, 0.5], [1.0, 0.0]])
    (1.5, [(0, 1), (1, 0)])
    """
    matrix = _score_matrix(S)
    if matrix.size == 0:
        return 0.0, []
    rows, cols = linear_sum_assignment(matrix, maximize=True)
    total = float(matrix[rows, cols].sum())
    pairs = [(int(i), int(j)) for i, j in zip(rows, cols) if matrix[i, j] != 0]
    return total, pairs


def _n_human(matrix: np.ndarray) -> int:
    if matrix.shape[0] == 0:
        raise ValueError("the human checklist R_h is empty; rationale scores need |R_h| >= 1")
    return matrix.shape[0]


def rationale_ap(S: object) -> float:
    """Average precision of the model's ordered reasons against the human checklist (paper 001 Eq. 3).

    I(k) = S[i, k] if model reason k is matched to human reason i in the optimal matching, else 0;
    P@k = sum_{k' <= k} I(k') / k; AP = sum_k P@k * I(k) / |R_h|.

    Worked example, two human reasons, three model reasons. Matched reasons first, I = [1, 1, 0]:
    AP = (1 * 1 + 1 * 1) / 2 = 1.0. The same matches listed last, I = [0, 1, 1]:
    AP = (1/2 * 1 + 2/3 * 1) / 2 = 7/12.

    >>> rationale_ap([[1, 0, 0], [0, 1, 0]])
    1.0
    >>> round(rationale_ap([[0, 1, 0], [0, 0, 1]]), 4)
    0.5833
    """
    matrix = _score_matrix(S)
    n_human = _n_human(matrix)
    n_model = matrix.shape[1]
    if n_model == 0:
        return 0.0
    _, pairs = optimal_matching(matrix)
    hits = np.zeros(n_model)
    for i, j in pairs:
        hits[j] = matrix[i, j]
    precision = np.cumsum(hits) / np.arange(1, n_model + 1)
    return float((precision * hits).sum() / n_human)


def script_metrics(S: object) -> dict[str, float]:
    """AP, precision, recall and F1 as the rationale paper's public analysis script computes them
    (``metajudge_analysis.py``, ``calculate_metrics``), to set our numbers beside published ones.

    The script differs from the paper's Eq. 3 (:func:`rationale_ap`, what the GenRM reward uses):
    each model reason j gets its best score over the human reasons, b_j = max_i S[i, j] (several
    model reasons may take the same human reason: not one-to-one); only matched reasons (b_j > 0)
    are kept, in output order, and AP averages P@i over them alone:
    ``ap_script = sum_i (sum_{j <= i} b_j / i) / |matched|``, so unmatched reasons do not dilute
    the positions. Precision = sum_j b_j / |R_model|, recall = sum_i max_j S[i, j] / |R_h|, F1
    their harmonic mean (0 when both are 0). This follows the script's rule as the lab read it;
    the script itself is not shipped here.

    Worked example (two human reasons matched by model reasons 2 and 3): Eq. 3 gives 7/12 = 0.583,
    the script 1.0.

    >>> m = script_metrics([[0, 1, 0], [0, 0, 1]])
    >>> m["ap_script"], round(rationale_ap([[0, 1, 0], [0, 0, 1]]), 3)
    (1.0, 0.583)
    >>> round(m["precision"], 3), m["recall"], m["f1"]
    (0.667, 1.0, 0.8)
    >>> script_metrics([[1, 1]])["ap_script"], script_metrics([[1, 1]])["recall"]  # one human reason, twice
    (1.0, 1.0)
    """
    matrix = _score_matrix(S)
    n_human = _n_human(matrix)
    n_model = matrix.shape[1]
    if n_model == 0:
        return {"ap_script": 0.0, "precision": 0.0, "recall": 0.0, "f1": 0.0}
    best = matrix.max(axis=0)
    matched = best[best > 0]
    ap = float(np.mean(np.cumsum(matched) / np.arange(1, len(matched) + 1))) if len(matched) else 0.0
    precision = float(best.sum() / n_model)
    recall = float(matrix.max(axis=1).sum() / n_human)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return {"ap_script": ap, "precision": precision, "recall": recall, "f1": float(f1)}


def rationale_consistency(list_of_S: Sequence[object], top_k: int | None = 5) -> float:
    """Rationale consistency (paper 001 §2.3): mean over examples of matched total / |R_h|.

    Each S is [n_human, n_model] with model reasons in output order; only the first ``top_k``
    model reasons count (the paper evaluates the top 5; ``None`` keeps all).

    Worked example: 3 of 4 human reasons fully matched gives 0.75, none gives 0; mean 0.375.

    >>> eye = np.eye(4)[:, :3]
    >>> rationale_consistency([eye, np.zeros((4, 2))])
    0.375
    """
    if len(list_of_S) == 0:
        raise ValueError("rationale_consistency needs at least one example")
    if top_k is not None and top_k < 0:
        raise ValueError(f"top_k must be >= 0 or None, got {top_k}")
    recalls = []
    for S in list_of_S:
        matrix = _score_matrix(S)
        kept = matrix if top_k is None else matrix[:, :top_k]
        total, _ = optimal_matching(kept)
        recalls.append(total / _n_human(matrix))
    return float(np.mean(recalls))


def hybrid_reward(ap: float, outcome: float) -> float:
    """GenRM training reward (paper 001 §3.1): AP x outcome, paid only for the right verdict.

    >>> hybrid_reward(0.6, 1.0), hybrid_reward(0.6, 0.0)
    (0.6, 0.0)
    """
    return float(ap) * float(outcome)


def _canonical(verdict: str) -> str | None:
    compact = re.sub(r"\s+", "", verdict).upper()
    compact = _ALIASES.get(compact, compact)
    return compact if compact in VERDICTS else None


def parse_verdict(text: str) -> str | None:
    """The verdict of a GenRM output: the last ``\\boxed{...}`` that holds one, canonicalised.

    Whitespace inside the box is ignored; boxes holding anything else are skipped; no verdict
    box gives None.

    >>> parse_verdict("1. B slips.\\nFinal: \\\\boxed{ A > B }")
    'A>B'
    >>> parse_verdict("\\\\boxed{A>B} then \\\\boxed{B>>A} then \\\\boxed{42}")
    'B>>A'
    >>> parse_verdict("A is better.") is None
    True
    """
    if not isinstance(text, str):
        return None
    for content in reversed(_BOX.findall(text)):
        verdict = _canonical(content)
        if verdict is not None:
            return verdict
    return None


def verdict_direction(v: str) -> int:
    """+1 when the verdict says A is better, 0 for a tie, -1 when B is better.

    >>> verdict_direction("A>>B"), verdict_direction("A=B"), verdict_direction("A<B")
    (1, 0, -1)
    """
    verdict = _canonical(v) if isinstance(v, str) else None
    if verdict is None:
        raise ValueError(f"not a verdict: {v!r}; valid verdicts: {', '.join(VERDICTS)}")
    return VERDICTS[verdict]


def _label_direction(label: object) -> int:
    if isinstance(label, (int, np.integer)) and not isinstance(label, bool) and label in (-1, 0, 1):
        return int(label)
    if isinstance(label, str):
        key = label.strip().upper()
        if key in _LABELS:
            return _LABELS[key]
        if _canonical(key) is not None:
            return verdict_direction(key)
    raise ValueError(f"not a preference label: {label!r}; use 'A', 'B', 'tie', -1/0/+1 or a verdict")


def outcome_reward(verdict: str | None, label: object) -> float:
    """R_outcome (paper 001 §3.1): 1.0 if the verdict's direction matches the label, else 0.0.

    ``label`` is 'A', 'B' or 'tie', a direction (+1 / 0 / -1), or a verdict string. A missing
    verdict (None, e.g. from an unparsable output) scores 0.

    >>> outcome_reward("A>>B", "A"), outcome_reward("B>A", "A"), outcome_reward(None, "B")
    (1.0, 0.0, 0.0)
    """
    expected = _label_direction(label)
    if verdict is None or _canonical(verdict) is None:
        return 0.0
    return 1.0 if verdict_direction(verdict) == expected else 0.0


_REASON = re.compile(r"^\s*(?:(?:\d+\s*[.):]|\[R?\d+\])\s*|(?:[-*•]|\\bullet)\s+)(.*\S)")


def parse_reasons(text: str) -> list[str]:
    """The GenRM's reasons, in output order: numbered or bulleted lines before the verdict.

    Reads ``1.`` / ``1)`` / ``1:`` / ``-`` / ``*`` / ``•`` / ``\\bullet`` / ``[R1]`` markers, one
    reason per line; only text before the last verdict box counts (reasons after the verdict
    cannot have informed it).

    >>> parse_reasons("Reasons:\\n1. B slips in step 2.\\n2) A is tidy.\\nVerdict \\\\boxed{A>B}\\n3. late")
    ['B slips in step 2.', 'A is tidy.']
    """
    if not isinstance(text, str):
        return []
    cut = len(text)
    for match in reversed(list(_BOX.finditer(text))):
        if _canonical(match.group(1)) is not None:
            cut = match.start()
            break
    reasons = []
    for line in text[:cut].splitlines():
        reason = _REASON.match(line)
        if reason is not None:
            reasons.append(reason.group(1).strip())
    return reasons


# Function words carry no evidence; dropping them keeps "the", "is", ... from producing matches.
_STOPWORDS = frozenset(
    "a an and are as at be but by for from has have in is it its of on or so that the their then "
    "there these this to was were which with response".split()
)


def _tokens(text: str) -> frozenset[str]:
    return frozenset(re.findall(r"[a-z]{2,}|\d+", text.lower())) - _STOPWORDS


def lexical_matcher(human: Sequence[str], model: Sequence[str]) -> np.ndarray:
    """Lexical backend of the reason matcher (backend ``lexical``): token-set F1 in [0, 1].

    S[i, j] = 2 |H_i & M_j| / (|H_i| + |M_j|), where H_i and M_j are the sets of lowercase words
    (two letters or more) and whole numbers of human reason i and model reason j, minus a few
    function words. "Response B" is dropped that way (the word is a stopword, the letter too short):
    every GenRM reason names a response while checklist items do not. 1 = same content words,
    0 = nothing shared or an empty reason. Numbers count as words so "12 - 3 is 9, not 10" only
    matches the right step.

    Worked example: {first, step, wrong} vs {first, step, correct}: 2 * 2 / (3 + 3) = 0.6667.

    >>> np.round(lexical_matcher(["The first step is wrong"], ["First step is correct", ""]), 4).tolist()
    [[0.6667, 0.0]]
    """
    human_sets = [_tokens(h) for h in human]
    model_sets = [_tokens(m) for m in model]
    S = np.zeros((len(human_sets), len(model_sets)))
    for i, h in enumerate(human_sets):
        for j, m in enumerate(model_sets):
            if h and m:
                S[i, j] = 2 * len(h & m) / (len(h) + len(m))
    return S
