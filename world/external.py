"""External data from local files: GSM8K- or MATH-format rows become the `arith` family's schema.

GSM8K rows carry `question` and `answer`, where the answer's final number follows `####`. MATH
rows (Hendrycks et al. 2021; `params data.external.format: math`) carry `problem` and `solution`,
whose last `\\boxed{}` holds the answer (an `answer` column, as MATH-500 has, is used where
present). JSONL is read line by line so a malformed row is reported with its file and line; Parquet
goes through `datasets` (row index instead of line). Nothing is downloaded: paths are local
(docs/own_data.md says how to export both datasets on a machine with network).
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from core.io import DataError, read_jsonl
from world.arith import prompt_text

_FINAL = re.compile(r"####\s*(.+?)\s*$", re.S)
# GSM8K's calculator annotations, `48/2 = <<48/2=24>>24`: tool markup, not text a model writes.
_CALC = re.compile(r"<<[^<>]*>>")


def load_located(path: Path) -> list[tuple[str, dict]]:
    """The rows of a local JSONL or Parquet file, each with where it is ("file:line", "file: row i")."""
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file (data.external paths are local files)")
    if path.suffix == ".parquet":
        from datasets import Dataset

        return [(f"{path}: row {i}", dict(r)) for i, r in enumerate(Dataset.from_parquet(str(path)))]
    rows = []
    with path.open(encoding="utf-8") as f:
        lines = [i for i, line in enumerate(f, 1) if line.strip()]
    for lineno, row in zip(lines, read_jsonl(path)):
        rows.append((f"{path}:{lineno}", row))
    return rows


def strip_calculator(text: str) -> str:
    """GSM8K's solution without its calculator annotations: the reference (DRO teacher-forces it)
    reads as a model writes.

    >>> strip_calculator("She sold 48/2 = <<48/2=24>>24 clips.")
    'She sold 48/2 = 24 clips.'
    """
    return _CALC.sub("", text)


def gsm8k_rows(path: str | Path, split: str) -> list[dict]:
    """Rows in the `arith` schema (prompt, answer, reference) from a GSM8K-format file."""
    out = []
    for i, (where, r) in enumerate(load_located(Path(path))):
        q, a = r.get("question"), r.get("answer")
        if not isinstance(q, str) or not isinstance(a, str):
            raise DataError(f"{where}: needs string fields `question` and `answer`")
        m = _FINAL.search(a)
        if not m:
            raise DataError(f"{where}: `answer` has no final number after '####'")
        gold = m.group(1).replace(",", "").strip()
        cot = strip_calculator(a[:m.start()]).strip()
        out.append({
            "id": f"gsm8k-{split}-{i:05d}", "family": "arith", "split": split,
            "prompt": prompt_text(q), "question": q, "answer": gold, "difficulty": None,
            "hint": None, "reference": f" {cot} The answer is \\boxed{{{gold}}}.",
        })
    return out


_BOX = "\\boxed{"


def last_boxed(text: str) -> tuple[int, int] | None:
    """(start, end) of the LAST `\\boxed{...}` in `text` with balanced braces, its content at
    [start + 7, end - 1]; None without one. `rewards.verifiable.extract_boxed` reads completions
    the same way; this one reads a dataset's own solutions, a layer below `rewards`.

    >>> text = r"so $\\boxed{\\frac{1}{2}}$."
    >>> start, end = last_boxed(text); text[start:end]
    '\\\\boxed{\\\\frac{1}{2}}'
    >>> last_boxed("no box") is None
    True
    """
    start = text.rfind(_BOX)
    while start >= 0:
        depth = 0
        for i in range(start + len(_BOX) - 1, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                return start, i + 1
        start = text.rfind(_BOX, 0, start)  # unclosed: the box before it
    return None


def math_rows(path: str | Path, split: str) -> list[dict]:
    """Rows in the `arith` schema from a MATH-format file. The reference is the solution with its
    boxed answer written as the lab's references end, ` The answer is \\boxed{<answer>}.` (the
    box moved there, so the reference holds one box, after the marker DRO splits at), and
    `difficulty` the row's level ("Level 5" or 5) where it has one."""
    out = []
    for i, (where, r) in enumerate(load_located(Path(path))):
        problem, solution = r.get("problem"), r.get("solution")
        if not isinstance(problem, str) or not isinstance(solution, str):
            raise DataError(f"{where}: needs string fields `problem` and `solution`")
        box = last_boxed(solution)
        gold = r.get("answer") if isinstance(r.get("answer"), str) and r["answer"].strip() else (
            solution[box[0] + len(_BOX):box[1] - 1] if box else None)
        if gold is None or not gold.strip():
            raise DataError(f"{where}: `solution` has no \\boxed{{...}} answer (and no `answer`)")
        gold = gold.strip()
        cot = (solution[:box[0]] + solution[box[0] + len(_BOX):box[1] - 1] + solution[box[1]:]
               if box else solution).strip()
        level = str(r.get("level") or "").removeprefix("Level").strip()
        out.append({
            "id": f"math-{split}-{i:05d}", "family": "arith", "split": split,
            "prompt": prompt_text(problem), "question": problem, "answer": gold,
            "difficulty": int(level) if level.isdigit() else None, "hint": None,
            "reference": f" {cot} The answer is \\boxed{{{gold}}}.",
        })
    return out


# The row readers of `data.external.format` (params.yaml).
READERS = {"gsm8k": gsm8k_rows, "math": math_rows}


def prepare_external(cfg, seed: int) -> dict[str, list[dict]]:
    """train/val/test splits of `data.external` in its format: val is a seeded `val_frac` share of
    the train file."""
    read = READERS[cfg.format]
    train = read(cfg.train, "train")
    test = read(cfg.test, "test")
    idx = list(range(len(train)))
    random.Random(seed).shuffle(idx)
    n_val = int(len(train) * cfg.val_frac)
    val_idx = set(idx[:n_val])
    val = [dict(r, split="val") for i, r in enumerate(train) if i in val_idx]
    train = [r for i, r in enumerate(train) if i not in val_idx]
    return {"train": train, "val": val, "test": test}


# The name flows/prepare.py imports: every format, not GSM8K's alone.
prepare_gsm8k = prepare_external
