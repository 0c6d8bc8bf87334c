"""Benchmarks read from local files: GSM8K, MATH and IFEval formats (JSONL or Parquet).

Nothing is downloaded: each loader takes a path and returns rows with a `prompt`, checking every
row up front so a malformed one fails with its file and line (Parquet: row index) before any
generation starts. Prompts are plain text, as everywhere in the lab (no chat template).

- GSM8K (Cobbe et al. 2021): `question`, `answer` ending in `#### N`; the loader is the training
  data's (`world.external.gsm8k_rows`), so train and test read the format one way.
- MATH (Hendrycks et al. 2021): `problem`, `solution` whose last `\\boxed{}` is the gold answer;
  optional `level` ("Level 5" or 5) and `type` (or MATH-500's `subject`) add per-group pass@1.
  Answers are compared by `rewards.verifiable.answers_match` (math-verify for LaTeX).
- IFEval (Zhou et al. 2023): `prompt`, `instruction_id_list`, `kwargs` as in google's
  `input_data.jsonl` (or the Parquet of the same columns, whose unused kwargs are null). Checked by
  the maintained `if-verifiable` package (Google's checkers, packaged), not by rewritten checkers.
  Reported: prompt-level (all instructions followed) and instruction-level (pooled over
  instructions) accuracy, strict (the response as is) and loose (also after stripping markdown `*`
  and the first/last line), as in the paper §3.
"""

from __future__ import annotations

import inspect
import re
from functools import lru_cache
from pathlib import Path

import numpy as np

from core.io import DataError
from evals.metrics import Ratio, answer_metrics
from rewards.verifiable import extract_boxed
from world.arith import prompt_text
from world.external import gsm8k_rows, load_located  # (where, row): "file:line" or "file: row i"

__all__ = ["gsm8k_rows", "math_rows", "ifeval_rows", "score_math", "score_ifeval"]


def _slug(value) -> str | None:
    """A metric-name fragment: 'Intermediate Algebra' -> 'intermediate_algebra'; None if empty."""
    if value is None:
        return None
    return re.sub(r"[^a-z0-9]+", "_", str(value).lower()).strip("_") or None


def _level(value) -> str | None:
    """'Level 5' (MATH), 5 (MATH-500) and '5' all become 'level_5'.

    >>> _level("Level 5"), _level(5), _level("5"), _level(None)
    ('level_5', 'level_5', 'level_5', None)
    """
    slug = _slug(value)
    return slug if slug is None or slug.startswith("level") else f"level_{slug}"


def math_rows(path: str | Path, split: str) -> list[dict]:
    """Rows with `prompt` and gold `answer` (the solution's last boxed answer) from a MATH-format file."""
    out = []
    for i, (where, r) in enumerate(load_located(Path(path))):
        problem, solution = r.get("problem"), r.get("solution")
        if not isinstance(problem, str) or not isinstance(solution, str):
            raise DataError(f"{where}: needs string fields `problem` and `solution`")
        gold = extract_boxed(solution)
        if gold is None or not gold.strip():
            raise DataError(f"{where}: `solution` has no \\boxed{{...}} answer")
        out.append({
            "id": f"math-{split}-{i:05d}", "family": "math", "split": split,
            "prompt": prompt_text(problem), "question": problem, "answer": gold.strip(),
            "level": _level(r.get("level")), "type": _slug(r.get("type") or r.get("subject")),
            "reference": solution,
        })
    return out


def score_math(row: dict, samples: list[str], greedy: str) -> dict:
    """Answer accuracy plus pass@1 per level and per type (pooled over the rows that have them)."""
    out = answer_metrics(samples, greedy, row["answer"])
    for group in (row.get("level"), row.get("type")):
        if group:
            out[f"pass@1_{group}"] = Ratio(out["pass@1"] * len(samples), len(samples))
    return out


# --- IFEval ---------------------------------------------------------------------------------

# These checkers split text with NLTK's Punkt model, whose data (`punkt_tab`) is a separate download.
_NEEDS_PUNKT = frozenset({"length_constraints:number_sentences", "change_case:capital_word_frequency"})


@lru_cache(maxsize=1)
def _ifeval_registry() -> dict:
    """if-verifiable's IFEval checkers (imported on first use: it imports `datasets`)."""
    from if_verifiable.ifeval.instructions_registry import INSTRUCTION_DICT
    from langdetect import DetectorFactory

    # `language:response_language` uses langdetect, which samples unless seeded: seed it so that
    # one completion always gets one verdict.
    DetectorFactory.seed = 0
    return INSTRUCTION_DICT


def _has_punkt() -> bool:
    import nltk

    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
        return True
    except LookupError:
        return False


def _checker_args(instruction_id: str) -> set[str]:
    checker = _ifeval_registry()[instruction_id](instruction_id)
    return set(inspect.signature(checker.build_description).parameters)


def ifeval_rows(path: str | Path, split: str) -> list[dict]:
    """IFEval rows, validated: known instruction ids, and each instruction's kwargs exactly its arguments.

    A missing argument is an error, not a default: the checkers would otherwise draw a random value
    for it and score against an instruction the prompt never gave. Null kwargs (Parquet's unused
    struct fields) are dropped first, as if-verifiable does.
    """
    registry = _ifeval_registry()
    out, punkt_checked = [], False
    for i, (where, r) in enumerate(load_located(Path(path))):
        prompt, ids, kwargs = r.get("prompt"), r.get("instruction_id_list"), r.get("kwargs")
        if not isinstance(prompt, str) or not prompt.strip():
            raise DataError(f"{where}: needs a non-empty string field `prompt`")
        if not isinstance(ids, list) or not ids or not all(isinstance(x, str) for x in ids):
            raise DataError(f"{where}: `instruction_id_list` must be a non-empty list of strings")
        if not isinstance(kwargs, list) or len(kwargs) != len(ids) \
                or not all(isinstance(k, dict) for k in kwargs):
            raise DataError(f"{where}: `kwargs` must be a list of {len(ids)} objects, one per instruction")
        clean = []
        for iid, kw in zip(ids, kwargs):
            if iid not in registry:
                raise DataError(f"{where}: unknown instruction {iid!r}; known: {sorted(registry)}")
            kw = {k: v for k, v in kw.items() if v is not None}
            expected = _checker_args(iid)
            if set(kw) != expected:
                raise DataError(f"{where}: instruction {iid!r} takes kwargs {sorted(expected)}, "
                                f"got {sorted(kw)}")
            if iid in _NEEDS_PUNKT and not punkt_checked:
                if not _has_punkt():
                    raise LookupError(
                        f"{where}: instruction {iid!r} needs NLTK's 'punkt_tab' data, which is not "
                        "installed; run `python -m nltk.downloader punkt_tab` once (or point "
                        "NLTK_DATA at a copy)")
                punkt_checked = True
            clean.append(kw)
        out.append({"id": f"ifeval-{split}-{i:05d}", "family": "ifeval", "split": split,
                    "key": r.get("key", i), "prompt": prompt, "instruction_id_list": ids,
                    "kwargs": clean})
    return out


def ifeval_check(row: dict, response: str) -> tuple[list[bool], list[bool]]:
    """(strict, loose) pass per instruction of `row` for one response; an empty response fails all."""
    from if_verifiable import IFEvalSample, evaluate_output_for_sample

    _ifeval_registry()  # seeds langdetect
    sample = IFEvalSample(key=row.get("key", 0), prompt=row["prompt"],
                          instruction_id_list=row["instruction_id_list"], kwargs=row["kwargs"])
    results, _ = evaluate_output_for_sample("ifeval", sample, response)
    n = len(row["instruction_id_list"])
    if not results:  # if-verifiable returns no per-instruction results for an empty response
        return [False] * n, [False] * n
    if len(results) != n:
        raise RuntimeError(f"if-verifiable checked {len(results)} of {n} instructions of {row['id']}")
    return [r.strict_pass for r in results], [r.loose_pass for r in results]


def score_ifeval(row: dict, samples: list[str], greedy: str) -> dict:
    """Prompt-level (mean over samples) and instruction-level (pooled) accuracy, strict and loose."""
    n = len(row["instruction_id_list"])
    out: dict = {}
    for prefix, texts in (("", samples), ("greedy_", [greedy])):
        checks = [ifeval_check(row, t) for t in texts]
        for mode, j in (("strict", 0), ("loose", 1)):
            out[f"{prefix}prompt_level_{mode}_acc"] = float(np.mean([all(c[j]) for c in checks]))
            out[f"{prefix}inst_level_{mode}_acc"] = Ratio(sum(sum(c[j]) for c in checks),
                                                          n * len(checks))
    return out
