"""Reference-component synthesis (RLVRR paper 002, sections 3.2-3.3, App. A.2).

Per prompt, what RLVRR needs offline: key points p_1..p_M, a keyword list K^m per key point
(phrases of at most 3 words found in the references) and weighted style checks
(``def check(response) -> bool`` sources). Two backends make them:

- :mod:`synthesis.rule` (default, offline, deterministic): key points are reference sentences,
  keywords their top TF-IDF n-grams shared by the references, style checks instantiated from a
  small template library by the references' measurable features;
- :mod:`synthesis.llm`: the paper's three prompts (key points -> keywords -> style code) sent
  to an in-process causal LM or an OpenAI-compatible endpoint, with timeouts and retries.

:mod:`synthesis.validate` then runs every check through the sandbox and applies the paper's
filter (section 4.1: drop an example whose references score below 0.7 on both content and
style). Nothing a backend produces can crash the stage: unparseable model output, failing
checks and filtered examples are dropped and counted in :class:`SynthesisStats`.

This module stays light (no scikit-learn, no ``rewards`` import at module level): the backends
and the validation are imported when :func:`synthesize` runs. Its settings are
:class:`core.params.SynthesizeConfig` (the ``synthesize`` section of params.yaml).
The output format is documented in ``synthesis/README.md``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from core.io import DataError, write_json, write_jsonl
from core.params import SynthesizeConfig

VERSION = "1"


@dataclasses.dataclass(frozen=True)
class StyleCheck:
    """One model- or template-written ``def check(response) -> bool`` and its weight."""

    name: str
    source: str
    weight: float


@dataclasses.dataclass
class Components:
    """RLVRR components of one prompt; ``keywords[m]`` belongs to ``key_points[m]``."""

    id: str
    key_points: list[str]
    keywords: list[list[str]]
    style_checks: list[StyleCheck]
    references: list[str]

    def as_row(self) -> dict:
        """The JSONL line (schema in synthesis/README.md)."""
        return {
            "id": self.id,
            "key_points": list(self.key_points),
            "keywords": [list(k) for k in self.keywords],
            "style_checks": [{"source": c.source, "weight": c.weight, "name": c.name}
                             for c in self.style_checks],
            "references": list(self.references),
        }


@dataclasses.dataclass
class SynthesisStats:
    """What happened to a split: rows in and kept, and what was dropped at each gate.

    ``dropped_unparseable`` and ``dropped_filter`` count examples; ``dropped_sandbox`` and
    ``dropped_keywords`` count single style checks and keywords (an example survives losing some).
    """

    examples: int = 0
    kept: int = 0
    dropped_unparseable: int = 0
    dropped_sandbox: int = 0
    dropped_filter: int = 0
    dropped_keywords: int = 0
    style_checks_kept: int = 0

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


def synthesize(rows: Sequence[dict], cfg: SynthesizeConfig, client=None
               ) -> tuple[list[Components], SynthesisStats]:
    """Components for every row (``id``, ``prompt``, ``references``) that survives validation.

    ``client`` replaces the llm backend's model client (tests, or a caller that already holds
    one); it is ignored by the rule backend. Rows keep their input order.
    """
    # Imported here so that importing the package stays cheap (validation imports the sandbox).
    from synthesis import validate

    stats = SynthesisStats(examples=len(rows))
    for i, row in enumerate(rows):
        _check_row(i, row)
    if cfg.backend == "rule":
        from synthesis import rule

        drafts = rule.propose(rows, cfg)
    else:
        from synthesis import llm

        drafts = llm.propose(rows, cfg, client=client, stats=stats)
    kept = validate.validate(drafts, cfg, stats)
    stats.kept = len(kept)
    stats.style_checks_kept = sum(len(c.style_checks) for c in kept)
    return kept, stats


def _check_row(index: int, row: dict) -> None:
    """A row the backends can read, or a DataError naming it (never a bare KeyError)."""
    refs = row.get("references") if isinstance(row, dict) else None
    if not isinstance(row, dict) or "id" not in row or not isinstance(refs, list) or not refs \
            or not all(isinstance(r, str) for r in refs):
        name = row.get("id") if isinstance(row, dict) else None
        raise DataError(f"row {index} (id={name!r}): needs `id` and a non-empty list of "
                        f"string `references`")


def stats_path(components_path: str | Path) -> Path:
    """``facts_train.jsonl`` -> ``facts_train.stats.json`` (beside the components)."""
    path = Path(components_path)
    return path.with_name(path.name.removesuffix(".jsonl") + ".stats.json")


def write_components(path: str | Path, components: Sequence[Components],
                     stats: SynthesisStats) -> None:
    """Write the components JSONL and its stats JSON beside it, both atomically."""
    write_jsonl(path, (c.as_row() for c in components))
    write_json(stats_path(path), {**stats.as_dict(), "version": VERSION})


__all__ = ["Components", "StyleCheck", "SynthesisStats", "SynthesizeConfig", "VERSION",
           "stats_path", "synthesize", "write_components"]
