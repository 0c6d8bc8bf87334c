"""RLVRR reference reward chain: keyword-LCS content and sandboxed style reward (paper 002 §3).

Instead of checking one final answer, the reward follows an ordered chain of verifiable signals
taken from high-quality references. Content (§3.2, Eq. 3-4): per key point, the keyword sequences
of rollout and reference are aligned by ``LCS(K_z, K_y) / max(|K_z|, |K_y|)``, the best reference
wins, key points are averaged; dividing by the longer sequence is what makes keyword stuffing and
shuffled order score below the reference's own order. Style (§3.3, Eq. 5): a weighted sum of
model-written ``check(response) -> bool`` functions, untrusted code that only runs in
:mod:`rewards.sandbox`. Table 3's ``direct`` ablation ignores order and repetition. Pure and fast:
keyword regexes and the references' keyword sequences are cached.

Decisions and their reasons: docs/methods/rlvrr.md.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from typing import Literal, NamedTuple

from rewards.sandbox import DEFAULT_CPU_SECONDS, run_style_checks

VERSION = "1"

ContentMode = Literal["ordered", "direct"]
_MODES: tuple[str, ...] = ("ordered", "direct")


def _normalise_keyword(keyword: str) -> str:
    """Lower-case a keyword and collapse its internal whitespace (the form matches report)."""
    return " ".join(keyword.split()).lower()


class _Matcher(NamedTuple):
    pattern: re.Pattern[str] | None
    forms: dict[str, str]


@functools.lru_cache(maxsize=4096)
def _keyword_matcher(keywords: tuple[str, ...]) -> _Matcher:
    """Compile one regex for a keyword list; cached because the same lists recur every step.

    Alternatives are ordered longest first, so the regex's leftmost-alternative rule realises
    "longest keyword wins" (the trailing look-ahead makes it backtrack to a shorter keyword when
    a longer one would end inside a word). The pattern has no capture groups, no look-behind and
    no IGNORECASE flag, and is matched against lower-cased text: that keeps the regex engine's
    literal-prefix scan, over 20x faster than the look-behind form on long completions. The
    left word boundary is checked by hand in :func:`_scan`.
    """
    forms = sorted({_normalise_keyword(k) for k in keywords if k and not k.isspace()},
                   key=lambda k: (-len(k), k))
    if not forms:
        return _Matcher(None, {})
    alternatives = "|".join(r"\s+".join(re.escape(word) for word in form.split(" ")) for form in forms)
    return _Matcher(re.compile("(?:" + alternatives + r")(?!\w)"), {form: form for form in forms})


def _is_word_char(char: str) -> bool:
    """Python's ``\\w`` for str patterns: alphanumeric in the Unicode sense, or underscore."""
    return char.isalnum() or char == "_"


def _scan(lowered: str, keywords: tuple[str, ...]) -> list[str]:
    """Keyword sequence of already lower-cased text (see :func:`keyword_sequence`)."""
    pattern, forms = _keyword_matcher(keywords)
    if pattern is None or not lowered:
        return []
    found: list[str] = []
    matches = pattern.finditer(lowered)
    while True:
        for match in matches:
            start = match.start()
            if start and _is_word_char(lowered[start - 1]):
                # A match glued to a preceding word character is not a match; a keyword may
                # still start inside it, so restart the scan one character later.
                matches = pattern.finditer(lowered, start + 1)
                break
            text = match.group()
            found.append(forms.get(text) or " ".join(text.split()))
        else:
            return found


@functools.lru_cache(maxsize=8192)
def _reference_sequence(text: str, keywords: tuple[str, ...]) -> tuple[str, ...]:
    """Keyword sequence of a reference, cached: every completion of a group re-reads it."""
    return tuple(_scan(text.lower(), keywords))


def keyword_sequence(text: str, keywords: Sequence[str]) -> list[str]:
    """Keywords found in ``text``, left to right, repeats kept (paper section 3.2).

    Matching is case-insensitive and whole-word (no word character on either side); at each
    position the longest keyword wins and matches never overlap. Each match is returned as the
    keyword's lower-case form; empty keywords are ignored.

    >>> keyword_sequence("New York City is big; new york, NEW YORK!", ["new york", "New York City"])
    ['new york city', 'new york', 'new york']
    >>> keyword_sequence("The category of cat.", ["cat", ""])
    ['cat']
    >>> keyword_sequence("anything", [])
    []
    """
    return _scan(text.lower(), tuple(keywords))


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token lists.

    LCS rewards keywords in the reference's order and counts each repeat once at most, which
    is why the paper (section 3.2) prefers it to a bag-of-keywords overlap. Computed with the
    bit-parallel recurrence of Hyyro (2004) on Python ints: one addition per token of ``b``
    instead of a Python-level DP table, which made LCS the hot spot of the content reward.

    >>> lcs_length(["a", "b", "c", "d"], ["b", "d", "a"])
    2
    >>> lcs_length([], ["a"])
    0
    """
    if not a or not b:
        return 0
    masks: dict[str, int] = {}
    for i, token in enumerate(a):
        masks[token] = masks.get(token, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for token in b:
        m = masks.get(token)
        if m:
            u = v & m
            v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def _ordered_score(ref_seq: Sequence[str], resp_seq: Sequence[str]) -> float:
    longest = max(len(ref_seq), len(resp_seq))
    if longest == 0:
        return 0.0
    return lcs_length(ref_seq, resp_seq) / longest


def _direct_score(ref_seq: Sequence[str], resp_seq: Sequence[str]) -> float:
    wanted = set(ref_seq)
    if not wanted:
        return 0.0
    return len(wanted.intersection(resp_seq)) / len(wanted)


def content_reward(
    response: str,
    references: Sequence[str],
    keypoint_keywords: Sequence[Sequence[str]],
    mode: ContentMode = "ordered",
) -> float | None:
    """Content reward r_c (paper section 3.2, equation 4; ``direct`` is the Table 3 ablation).

    ``r_c = (1/M) sum_m max_i LCS(K_zi, K_y) / max(|K_zi|, |K_y|)``, 0 for a key point where
    both sequences are empty. Returns ``None`` when there is no reference or no key point with
    a non-empty keyword, because then the reward does not apply to this sample.

    >>> refs = ["Paris is the capital of France."]
    >>> content_reward("France's capital is Paris.", refs, [["paris", "capital", "france"]])
    0.3333333333333333
    >>> content_reward("Paris, the capital of France.", refs, [["paris", "capital", "france"]])
    1.0
    >>> content_reward("France capital Paris", refs, [["paris", "capital", "france"]], mode="direct")
    1.0
    """
    if mode not in _MODES:
        raise ValueError(f"unknown content mode {mode!r}; valid modes: {', '.join(_MODES)}")
    score = _ordered_score if mode == "ordered" else _direct_score
    refs = list(references)
    if not refs:
        return None
    lowered = response.lower()
    total = 0.0
    scored = 0
    for keywords in keypoint_keywords:
        key = tuple(keywords)
        if not _keyword_matcher(key).forms:
            continue
        resp_seq = _scan(lowered, key)
        best = 0.0
        for ref in refs:
            best = max(best, score(_reference_sequence(ref, key), resp_seq))
            if best >= 1.0:
                break
        total += best
        scored += 1
    if scored == 0:
        return None
    return total / scored


def _checked_weights(weights: Sequence[float]) -> list[float]:
    """Weights as floats; a negative, non-finite or all-zero set is a data error, said loudly.

    Finite weights can still sum to inf (two of 1e308), and inf/inf would make the reward NaN;
    such a set is divided by its largest weight first (only then, so that ordinary weights keep
    their exact float results).

    >>> _checked_weights([1e308, 1e308])
    [1.0, 1.0]
    """
    values = [float(w) for w in weights]
    if any(not math.isfinite(w) or w < 0 for w in values):
        raise ValueError(f"style check weights must be finite and >= 0, got {values}")
    if sum(values) <= 0:
        raise ValueError(f"style check weights must not all be zero, got {values}")
    if not math.isfinite(sum(values)):
        largest = max(values)
        values = [w / largest for w in values]
    return values


def style_reward(
    response: str,
    checks: Sequence[tuple[str, float]],
    results: Sequence[bool] | None = None,
    cpu_seconds: float = DEFAULT_CPU_SECONDS,
) -> float | None:
    """Style reward r_s = sum_n w_n * check_n(response), weights normalised (paper section 3.3).

    ``checks`` are ``(source, weight)`` pairs of model-written ``def check(response)`` code.
    A caller that already ran the checks in one batched sandbox call (the training path: all
    completions x all checks in one round trip) passes ``results`` aligned with ``checks``;
    otherwise the checks run here through :func:`rewards.sandbox.run_style_checks`. Only an
    ``is True`` result counts; a rejected, raising, timed-out or non-bool check scores 0 (the
    sandbox logs and counts it). ``None`` when there are no checks.

    >>> checks = [("def check(response):\\n    return True", 3.0), ("...", 1.0)]
    >>> style_reward("any text", checks, results=[True, False])
    0.75
    >>> style_reward("any text", checks, results=[True, 1])
    0.75
    """
    if not checks:
        return None
    weights = _checked_weights([weight for _, weight in checks])
    if results is None:
        matrix = run_style_checks([source for source, _ in checks], [response], cpu_seconds)
        results = [row[0] for row in matrix]
    if len(results) != len(checks):
        raise ValueError(f"got {len(results)} style results for {len(checks)} checks")
    return sum(w for w, passed in zip(weights, results) if passed is True) / sum(weights)


def chain_reward(content: float | None, style: float | None, content_weight: float = 0.5) -> float | None:
    """RLVRR reward: ``content_weight * r_c + (1 - content_weight) * r_s`` (mean by default).

    The paper (section 3.1, equation 2) aggregates the two parts by simple averaging; the
    weight is a parameter so the w/o-style and w/o-content ablations of Table 3 are
    ``content_weight`` 1 and 0. If one
    part does not apply (``None``) the other is returned alone; if neither does, ``None``.

    >>> chain_reward(0.5, 1.0)
    0.75
    >>> chain_reward(0.5, None)
    0.5
    """
    if not 0.0 <= content_weight <= 1.0:
        raise ValueError(f"content_weight must be in [0, 1], got {content_weight}")
    if content is None:
        return style
    if style is None:
        return content
    return content_weight * content + (1.0 - content_weight) * style
