"""Validation of synthesised RLVRR components (paper 002, section 4.1).

Three gates, each dropping and counting instead of raising:

1. Keywords (:func:`clean_keywords`): each must be a non-empty phrase of at most 3 words that
   occurs in at least one reference (keywords are "taken from the references"), matched exactly as
   the reward will match it; a key point left without keywords is removed.
2. Style checks (:func:`validate_checks`): static rejection (:func:`rewards.sandbox.static_rejection_reason`),
   then a trial run of every check on its own references, all examples in ONE sandbox round
   trip. A check that returns ``True`` on none of its references is dropped: it is broken
   (raises, times out, returns a non-bool) or contradicts every reference. One that passes
   some references is kept; the example-level filter below judges the whole set (ours: the
   paper states no per-check rule).
3. The paper's filter (:func:`reference_scores`, section 4.1): the references are scored with
   the reward itself, content of each reference against the other references and style of each
   reference, both averaged over references; an example is dropped when BOTH fall below
   ``threshold``. A missing part (no key point, no check) counts as 0. With a single reference
   the content check compares it with itself (ours: nothing else exists to compare with).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

from core.params import SynthesizeConfig
from rewards.reference_chain import content_reward, keyword_sequence, style_reward
from rewards.sandbox import StyleSandbox, static_rejection_reason
from synthesis import Components, StyleCheck, SynthesisStats

log = logging.getLogger(__name__)

MAX_KEYWORD_WORDS = 3


def clean_keywords(components: Components, max_keywords: int | None = None) -> int:
    """Drop keywords that are empty, too long or absent from the references; return how many.

    Duplicates within a key point (case-insensitive) are dropped too, uncounted, and so are
    valid keywords beyond the first ``max_keywords`` (a cap, not a failure).

    >>> c = Components("x", ["p1", "p2"], [["Paris", "paris", "big red bus line", "Rome"], ["moon"]],
    ...                [], ["Paris is in France."])
    >>> clean_keywords(c), c.key_points, c.keywords
    (3, ['p1'], [['Paris']])
    """
    dropped = 0
    points, lists = [], []
    for point, keywords in zip(components.key_points, components.keywords):
        kept: list[str] = []
        seen: set[str] = set()
        for keyword in keywords:
            form = " ".join(keyword.split()).lower() if isinstance(keyword, str) else ""
            if form in seen and form:
                continue
            ok = bool(form) and len(form.split()) <= MAX_KEYWORD_WORDS and any(
                keyword_sequence(ref, [form]) for ref in components.references)
            if not ok:
                dropped += 1
            elif max_keywords is None or len(kept) < max_keywords:
                kept.append(keyword)
                seen.add(form)
        if kept:
            points.append(point)
            lists.append(kept)
    components.key_points, components.keywords = points, lists
    return dropped


def _well_formed(check: object) -> bool:
    return (isinstance(check, StyleCheck) and isinstance(check.source, str)
            and isinstance(check.weight, (int, float)) and not isinstance(check.weight, bool)
            and math.isfinite(check.weight) and check.weight > 0)


def validate_checks(drafts: Sequence[Components], sandbox: StyleSandbox
                    ) -> tuple[list[list[list[bool]]], int]:
    """Keep the checks that pass static validation and at least one reference; return the
    trial results of the kept checks (``[example][check][reference]``) and the number dropped."""
    dropped = 0
    for draft in drafts:
        good = [c for c in draft.style_checks
                if _well_formed(c) and static_rejection_reason(c.source) is None]
        dropped += len(draft.style_checks) - len(good)
        draft.style_checks = good
    trial = sandbox.run_groups([([c.source for c in d.style_checks], d.references) for d in drafts])
    results: list[list[list[bool]]] = []
    for draft, matrix in zip(drafts, trial):
        keep = [i for i, row in enumerate(matrix) if any(row)]
        dropped += len(draft.style_checks) - len(keep)
        draft.style_checks = [draft.style_checks[i] for i in keep]
        results.append([matrix[i] for i in keep])
    return results, dropped


def reference_scores(components: Components, results: Sequence[Sequence[bool]]
                     ) -> tuple[float, float]:
    """(content, style) of the example's own references, each averaged over references.

    ``results[n][i]`` is check n on reference i (from :func:`validate_checks`).

    >>> c = Components("x", ["p"], [["paris", "france"]], [StyleCheck("s", "...", 1.0)],
    ...                ["Paris is in France.", "France holds Paris."])
    >>> reference_scores(c, [[True, False]])
    (0.5, 0.5)
    """
    refs = components.references
    contents, styles = [], []
    checks = [(c.source, c.weight) for c in components.style_checks]
    for i, ref in enumerate(refs):
        others = [r for j, r in enumerate(refs) if j != i] or [ref]
        contents.append(content_reward(ref, others, components.keywords) or 0.0)
        style = style_reward(ref, checks, results=[row[i] for row in results]) if checks else None
        styles.append(style or 0.0)
    return sum(contents) / len(refs), sum(styles) / len(refs)


def validate(drafts: Sequence[Components], cfg: SynthesizeConfig, stats: SynthesisStats,
             sandbox: StyleSandbox | None = None) -> list[Components]:
    """Apply the three gates to backend drafts; update ``stats``; return the kept examples."""
    for draft in drafts:
        stats.dropped_keywords += clean_keywords(draft, cfg.max_keywords)
    owned = sandbox is None
    box = StyleSandbox(cpu_seconds=cfg.check_cpu_seconds) if owned else sandbox
    try:
        results, dropped = validate_checks(drafts, box)
    finally:
        if owned:
            box.close()
    stats.dropped_sandbox += dropped
    kept = []
    for draft, trial in zip(drafts, results):
        content, style = reference_scores(draft, trial)
        if content < cfg.threshold and style < cfg.threshold:
            stats.dropped_filter += 1
            log.debug("%s: dropped by the reference filter (content %.2f, style %.2f)",
                      draft.id, content, style)
            continue
        kept.append(draft)
    return kept
