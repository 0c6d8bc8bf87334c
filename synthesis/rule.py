"""The `rule` synthesis backend: offline, deterministic RLVRR components.

It follows the paper's two-level recipe (paper 002, section 3.2) with rules in place of the LLM:

1. Key points = the sentences of the first reference (bullet markers and headings removed).
   Every other reference is aligned sentence by sentence: by position when it has as many
   sentences as the first, else each key point takes that reference's most similar sentence
   (TF-IDF cosine).
2. Keywords of a key point = its best TF-IDF n-grams (1-3 words). The vectorizer is fitted on
   every reference sentence of the split, so a word that every prompt uses ("is", "it") weighs
   little and a fact ("green", "digging") a lot. A candidate's score is the sum of its TF-IDF
   weights over the aligned sentences, and it must occur, as a whole word/phrase exactly as
   :func:`rewards.reference_chain.keyword_sequence` matches it, in a majority of them. Shared
   words are what makes the paraphrases agree, so each reference then scores well against the
   others, which is the paper's own acceptance test (section 4.1).
3. Style checks are instantiated from :data:`TEMPLATES` by the references' measurable features
   (bullet lines vs prose, sentence/line/word count ranges, common first word, final
   punctuation, heading), each a ``def check(response)`` source plus a weight.

Choices that are ours (the paper's rule-based baselines in Table 3 are "TF-IDF, 15% of the
words"; the text does not define a rule-based style generator):

- Majority support (at least half of the aligned sentences, rounded up) keeps paraphrase-only
  words ("coat", "small") out; if no candidate has it, the key point falls back to the first
  reference's own best candidates. A candidate whose first or last word is a function word
  (:data:`FUNCTION_WORDS`, a short list of articles, pronouns, prepositions and auxiliaries;
  scikit-learn's list also drops content words such as numbers and "fire") is skipped, and so
  is one that contains, or is contained in, a keyword already chosen.
- Count ranges are widened by :data:`COUNT_SLACK` (sentences, lines) and :data:`WORD_SLACK`
  (words) either side, so a faithful answer with one sentence more still passes.
- Template weights (:data:`TEMPLATE_WEIGHTS`): layout 3, sentence and line counts 2, the rest 1.
- A prompt with more sentences than ``max_key_points`` keeps its first ``max_key_points``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

from core.params import SynthesizeConfig
from synthesis import Components, StyleCheck

FUNCTION_WORDS = frozenset("""
a an the and or but nor so yet if then than as of at by for from in into on onto to with without
about over under up down out off per via is am are was were be been being do does did has have had
it its it's this that these those there here he she they them his her their we us our you your i me
my which who whom whose what when where while also very not no can could will would shall should
may might must just
""".split())

# Relative widening of count ranges either side: sentences/lines, and words.
COUNT_SLACK = 0.2
WORD_SLACK = 0.25

TEMPLATE_WEIGHTS = {
    "bullet_lines": 3.0,
    "no_bullets": 3.0,
    "sentence_count": 2.0,
    "line_count": 2.0,
    "word_count": 1.0,
    "starts_with": 1.0,
    "ends_with_punctuation": 1.0,
    "has_heading": 1.0,
}

_BULLET = re.compile(r"^\s*(?:[-*\u2022+]|\d+[.)])\s+")
_HEADING = re.compile(r"^\s*#{1,6}\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
_WORD = re.compile(r"\w+")
_TOKEN_PATTERN = r"(?u)\b\w+\b"


def split_sentences(text: str) -> list[str]:
    """Sentences of a text: one per bullet/line at least, markers and headings removed.

    >>> split_sentences(" - Lune is a frog.\\n- It is gray.")
    ['Lune is a frog.', 'It is gray.']
    >>> split_sentences("Zorb is a crab. It is green!  It eats fish")
    ['Zorb is a crab.', 'It is green!', 'It eats fish']
    """
    out: list[str] = []
    for line in text.splitlines():
        line = _HEADING.sub("", _BULLET.sub("", line)).strip()
        out.extend(s for s in _SENTENCE_END.split(line) if _WORD.search(s))
    return out


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().splitlines() if line.strip()]


def _find(phrase: str, normalised: str) -> int:
    """Start of the first whole-word occurrence of a lower-case, single-spaced phrase, or -1
    (the rule :func:`rewards.reference_chain.keyword_sequence` matches by)."""
    start = normalised.find(phrase)
    while start >= 0:
        end = start + len(phrase)
        before = normalised[start - 1] if start else " "
        after = normalised[end] if end < len(normalised) else " "
        if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
            return start
        start = normalised.find(phrase, start + 1)
    return -1


def _occurs(phrase: str, normalised: str) -> bool:
    return _find(phrase, normalised) >= 0


def _normalise(text: str) -> str:
    return " ".join(text.split()).lower()


def _overlaps(words: tuple[str, ...], chosen: list[tuple[str, ...]]) -> bool:
    """True if ``words`` contains, or is contained in, a chosen keyword (as a word run)."""
    for other in chosen:
        short, long_ = (words, other) if len(words) <= len(other) else (other, words)
        if any(long_[i:i + len(short)] == short for i in range(len(long_) - len(short) + 1)):
            return True
    return False


def select_keywords(sentences: Sequence[str], scores: dict[str, float], max_keywords: int
                    ) -> list[str]:
    """Best candidates of one key point: majority support in ``sentences``, then TF-IDF score.

    ``sentences`` are the aligned reference sentences (the first reference's first);
    ``scores`` maps candidate n-grams to their summed TF-IDF weight.

    >>> select_keywords(["It is green.", "Its coat is green.", "Its color is green."],
    ...                 {"green": 1.5, "coat": 0.6, "is green": 0.9, "it": 0.1}, 3)
    ['green']
    """
    normalised = [_normalise(s) for s in sentences]
    need = math.ceil(len(normalised) / 2)
    ranked: list[tuple[int, float, str, bool]] = []  # support, score, candidate, in first
    for candidate, score in scores.items():
        words = candidate.split()
        if words[0] in FUNCTION_WORDS or words[-1] in FUNCTION_WORDS:
            continue
        support = sum(_occurs(candidate, s) for s in normalised)
        if support:
            in_first = _occurs(candidate, normalised[0])
            ranked.append((support, score, candidate, in_first))
    ranked.sort(key=lambda r: (-r[0], -r[1], len(r[2]), r[2]))
    pools = ([r for r in ranked if r[0] >= need],
             [r for r in ranked if r[3]])  # fallback: the first reference's own best
    for pool in pools:
        chosen: list[tuple[str, ...]] = []
        for _, _, candidate, _ in pool:
            words = tuple(candidate.split())
            if not _overlaps(words, chosen):
                chosen.append(words)
            if len(chosen) == max_keywords:
                break
        if chosen:
            # Reading order of the first reference (keyword order does not change the score).
            found = [" ".join(words) for words in chosen]
            positions = {k: _find(k, normalised[0]) for k in found}
            return sorted(found, key=lambda k: (positions[k] < 0, positions[k]))
    return []


def _style_checks(references: Sequence[str]) -> list[StyleCheck]:
    """Checks every reference passes, from the templates their features call for."""
    refs = [r.strip() for r in references]
    lines = [_lines(r) for r in refs]
    bullets = [[bool(_BULLET.match(line)) for line in ls] for ls in lines]
    checks: list[tuple[str, str]] = []
    if all(b and all(b) for b in bullets):
        markers = {line[:2] for ls in lines for line in ls}
        if len(markers) == 1 and markers <= {"- ", "* ", "+ "}:
            marker = markers.pop()
            test = f"line.startswith({marker!r})"
        else:
            test = r"re.match(r'(?:[-*+\u2022]|\d+[.)])\s', line) is not None"
        checks.append(("bullet_lines", (
            "def check(response):\n"
            "    lines = [line.strip() for line in response.strip().splitlines() if line.strip()]\n"
            f"    return len(lines) > 0 and all({test} for line in lines)\n")))
    elif not any(any(b) for b in bullets):
        checks.append(("no_bullets", (
            "def check(response):\n"
            "    lines = [line for line in response.splitlines() if line.strip()]\n"
            "    return len(lines) > 0 and not any("
            r"re.match(r'\s*(?:[-*+\u2022]|\d+[.)])\s', line) for line in lines)" "\n")))
    sentence_counts = [len(split_sentences(r)) for r in refs]
    lo, hi = _widen(sentence_counts, COUNT_SLACK)
    checks.append(("sentence_count", (
        "def check(response):\n"
        "    n = 0\n"
        "    for line in response.splitlines():\n"
        r"        line = re.sub(r'^\s*(?:#{1,6}|[-*+\u2022]|\d+[.)])\s+', '', line).strip()" "\n"
        "        if re.search(r'\\w', line):\n"
        r"            parts = re.split(r'(?<=[.!?])\s+(?=\S)', line)" "\n"
        r"            n += len([s for s in parts if re.search(r'\w', s)])" "\n"
        f"    return {lo} <= n <= {hi}\n")))
    line_counts = [len(ls) for ls in lines]
    if max(line_counts) > 1:
        lo, hi = _widen(line_counts, COUNT_SLACK)
        checks.append(("line_count", (
            "def check(response):\n"
            "    n = len([line for line in response.splitlines() if line.strip()])\n"
            f"    return {lo} <= n <= {hi}\n")))
    lo, hi = _widen([len(r.split()) for r in refs], WORD_SLACK)
    checks.append(("word_count", (
        "def check(response):\n"
        f"    return {lo} <= len(response.split()) <= {hi}\n")))
    firsts = {_first_word(r) for r in refs}
    if len(refs) > 1 and len(firsts) == 1 and None not in firsts:
        word = firsts.pop()
        checks.append(("starts_with", (
            "def check(response):\n"
            r"    text = re.sub(r'^\s*(?:#{1,6}|[-*+\u2022]|\d+[.)])?\s*', '', response)" "\n"
            f"    return text.lower().startswith({word!r})\n")))
    if all(r and r[-1] in ".!?" for r in refs):
        checks.append(("ends_with_punctuation", (
            "def check(response):\n"
            "    text = response.rstrip()\n"
            "    return len(text) > 0 and text[-1] in '.!?'\n")))
    if all(_HEADING.match(r) for r in refs):
        checks.append(("has_heading", (
            "def check(response):\n"
            r"    return re.search(r'^\s*#{1,6}\s+\S', response, re.MULTILINE) is not None" "\n")))
    return [StyleCheck(name, source, TEMPLATE_WEIGHTS[name]) for name, source in checks]


def _widen(values: Sequence[int], slack: float) -> tuple[int, int]:
    """[min, max] of the references widened by ``slack`` (relative, at least 1 when > 0)."""
    lo, hi = min(values), max(values)
    return max(0, math.floor(lo * (1 - slack))), math.ceil(hi * (1 + slack))


def _first_word(text: str) -> str | None:
    text = _HEADING.sub("", _BULLET.sub("", text, count=1), count=1)
    match = _WORD.search(text)
    return match.group().lower() if match and match.start() == 0 else None


def propose(rows: Sequence[dict], cfg: SynthesizeConfig) -> list[Components]:
    """Unvalidated components for every row (validation is :mod:`synthesis.validate`'s)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    sentences: list[str] = []
    spans: list[list[tuple[int, int]]] = []  # per row, per reference: (start, count)
    for row in rows:
        row_spans = []
        for ref in row["references"]:
            split = split_sentences(ref)
            row_spans.append((len(sentences), len(split)))
            sentences.extend(split)
        spans.append(row_spans)
    if not sentences:
        return [Components(str(row["id"]), [], [], _style_checks(row["references"]),
                           list(row["references"])) for row in rows]
    vectorizer = TfidfVectorizer(lowercase=True, token_pattern=_TOKEN_PATTERN, ngram_range=(1, 3))
    matrix = vectorizer.fit_transform(sentences).tocsr()
    names = vectorizer.get_feature_names_out()
    out: list[Components] = []
    for row, row_spans in zip(rows, spans):
        first, count = row_spans[0]
        count = min(count, cfg.max_key_points)
        aligned: list[list[int]] = [[first + m] for m in range(count)]
        others = [(start, n) for start, n in row_spans[1:] if n]
        for start, n in others:
            if n != row_spans[0][1]:
                # Unequal sentence counts: the most similar sentence (TF-IDF cosine, rows are
                # L2-normalised) stands in for positional alignment.
                block = matrix[first:first + count] @ matrix[start:start + n].T
                picks = [start + int(np.argmax(block[m].toarray())) for m in range(count)]
            else:
                picks = [start + m for m in range(count)]
            for m, pick in enumerate(picks):
                aligned[m].append(pick)
        key_points, keywords = [], []
        for group in aligned:
            scores: dict[str, float] = {}
            for s in group:
                lo, hi = matrix.indptr[s], matrix.indptr[s + 1]
                for f, w in zip(matrix.indices[lo:hi], matrix.data[lo:hi]):
                    scores[names[f]] = scores.get(names[f], 0.0) + float(w)
            key_points.append(sentences[group[0]])
            keywords.append(select_keywords([sentences[s] for s in group], scores, cfg.max_keywords))
        out.append(Components(str(row["id"]), key_points, keywords,
                              _style_checks(row["references"]), list(row["references"])))
    return out
