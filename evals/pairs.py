"""GenRM benchmarks (paper 001 §2.3): the tiny world's `pairs` and HelpSteer3-style files.

The policy under test is a generative reward model. Per row, its sampled outputs are scored by
:func:`rewards.genrm.score_outputs`, the same parsing and malformed rule as the training reward:

- ``outcome_acc`` (headline): share of samples whose verdict direction matches the label;
- ``rc``: rationale consistency, matched total / |R_h| with only the first ``top_k`` = 5 reasons
  (the paper's Top-5 evaluation rule), lexical matcher by default, averaged over samples then rows
  (paper Eq. 2 is a mean over examples);
- ``ap``: AP (the training reward's rationale part, paper Eq. 3, one-to-one) on the same top-5
  reasons;
- ``ap_script``, ``precision``, ``recall``, ``f1``: the same reasons scored as the paper's public
  analysis script does (best score per model reason, not one-to-one; AP averaged over the matched
  reasons only), so the lab's numbers can be set beside published ones
  (:func:`rewards.rationale.script_metrics`). The reward keeps Eq. 3: one vague reason cannot
  collect credit for several human reasons, and an unmatched reason ranked first costs AP;
- ``malformed_rate``: share of samples with no verdict or no reasons (they score 0 above);
- ``greedy_*``: the same for the greedy output.

**Ours**: the matcher and top_k of the registered scorer are fixed (lexical, 5) so that every run's
numbers are comparable and the registry stays torch-free; :func:`make_pairs_scorer` builds a scorer
with another matcher (an embedding or LLM judge) for a separate evaluation.

HelpSteer3-style local files (``helpsteer3:<path>``, JSONL or Parquet) map into the `pairs` row
schema with the GenRM prompt of :func:`world.pairs.genrm_prompt`:

- ``context``: a string, or a list of ``{"role", "content"}`` turns (HelpSteer3's format), shown as
  ``role: content`` lines;
- ``response1``/``response2`` (HelpSteer3) or ``response_a``/``response_b``;
- ``checklist``: non-empty list of non-empty strings (the atomic human reasons, HelpSteer3-Atomic);
  the paper's 3-7 item filter is a dataset-building step and is not re-applied here;
- ``overall_preference`` (HelpSteer3: -3..3, negative = response 1 better, 0 tie) or ``label``
  ('A' / 'B' / 'tie'). |preference| >= 2 gives a strong verdict (``A>>B``), 1 a weak one.

A malformed row is a :class:`core.io.DataError` naming ``file:line`` (Parquet: the row index).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from core.io import DataError

# (where, row) pairs, where = "file:line" (JSONL) or "file: row i" (Parquet)
from world.external import load_located
from world.pairs import genrm_prompt

if TYPE_CHECKING:
    from rewards.matchers import Matcher

__all__ = ["TOP_K", "helpsteer3_rows", "make_pairs_scorer", "score_pairs"]

#: Reasons kept at evaluation (paper 001 §2.3, "Top-5").
TOP_K = 5


def make_pairs_scorer(matcher: Matcher | None = None, top_k: int | None = TOP_K
                      ) -> Callable[[dict, list[str], str], dict]:
    """A registry scorer (row, samples, greedy) -> metrics for GenRM rows with this matcher.

    The scoring modules are imported on the first call: they import scipy, which importing the
    benchmark registry (hence this module) should not.
    """

    def score(row: dict, samples: list[str], greedy: str) -> dict:
        from rewards.genrm import SCRIPT_KEYS, score_outputs
        from rewards.matchers import LexicalMatcher

        checklist, label = row["checklist"], row["label"]
        scores = score_outputs([*samples, greedy], [checklist] * (len(samples) + 1),
                               [label] * (len(samples) + 1), matcher or LexicalMatcher(),
                               top_k=top_k)
        sampled, best = scores[:-1], scores[-1]
        return {
            "outcome_acc": float(np.mean([s.outcome for s in sampled])),
            "rc": float(np.mean([s.rc for s in sampled])),
            "ap": float(np.mean([s.ap for s in sampled])),
            # The same reasons scored as the paper's analysis script does (not one-to-one, AP over
            # matched reasons only): comparable with published MetaJudge numbers.
            **{k: float(np.mean([(s.script or {}).get(k, 0.0) for s in sampled]))
               for k in SCRIPT_KEYS},
            "malformed_rate": float(np.mean([s.malformed for s in sampled])),
            "greedy_outcome_acc": best.outcome,
            "greedy_rc": best.rc,
        }

    return score


score_pairs = make_pairs_scorer()


# --- HelpSteer3-style files --------------------------------------------------------------------

_LABELS = {"A": "A", "B": "B", "TIE": "tie"}


def _context_text(context: object, where: str) -> str:
    if isinstance(context, str) and context.strip():
        return context.strip()
    if isinstance(context, list) and context and all(
            isinstance(t, dict) and isinstance(t.get("content"), str) for t in context):
        return "\n".join(f"{t.get('role', 'user')}: {t['content'].strip()}" for t in context)
    raise DataError(f"{where}: `context` must be a non-empty string or a list of "
                    "{'role', 'content'} turns")


def _label_and_verdict(row: dict, where: str) -> tuple[str, str]:
    pref = row.get("overall_preference")
    if pref is not None:
        if isinstance(pref, bool) or not isinstance(pref, (int, float)) or pref != int(pref) \
                or not -3 <= pref <= 3:
            raise DataError(f"{where}: `overall_preference` must be an integer from -3 to 3, "
                            f"got {pref!r}")
        pref = int(pref)
        if pref == 0:
            return "tie", "A=B"
        strength = ">>" if abs(pref) >= 2 else ">"
        return ("A", f"A{strength}B") if pref < 0 else ("B", f"B{strength}A")
    label = row.get("label")
    key = label.strip().upper() if isinstance(label, str) else None
    if key not in _LABELS:
        raise DataError(f"{where}: needs `overall_preference` (-3..3) or `label` ('A', 'B' or "
                        f"'tie'), got label={label!r}")
    return _LABELS[key], {"A": "A>B", "B": "B>A", "TIE": "A=B"}[key]


def helpsteer3_rows(path: str | Path, split: str) -> list[dict]:
    """Rows in the `pairs` schema from a HelpSteer3-style JSONL or Parquet file (checked up front)."""
    out = []
    for i, (where, r) in enumerate(load_located(Path(path))):
        question = _context_text(r.get("context"), where)
        a = r.get("response1", r.get("response_a"))
        b = r.get("response2", r.get("response_b"))
        if not isinstance(a, str) or not isinstance(b, str) or not a.strip() or not b.strip():
            raise DataError(f"{where}: needs non-empty string fields `response1` and `response2` "
                            "(or `response_a` and `response_b`)")
        checklist = r.get("checklist")
        if not isinstance(checklist, list) or not checklist or not all(
                isinstance(c, str) and c.strip() for c in checklist):
            raise DataError(f"{where}: `checklist` must be a non-empty list of non-empty strings "
                            "(the human atomic reasons)")
        label, verdict = _label_and_verdict(r, where)
        a, b = " " + a.strip(), " " + b.strip()
        checklist = [c.strip() for c in checklist]
        listed = "".join(f"\n{j + 1}. {c}" for j, c in enumerate(checklist))
        out.append({
            "id": f"helpsteer3-{split}-{i:05d}", "family": "pairs", "split": split,
            "prompt": genrm_prompt(question, a, b), "question": question,
            "response_a": a, "response_b": b, "label": label, "verdict": verdict,
            "checklist": checklist, "demonstration": f"{listed}\nVerdict: \\boxed{{{verdict}}}",
        })
    return out
