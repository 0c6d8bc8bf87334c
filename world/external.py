"""External data from local files: GSM8K-format rows become the `arith` family's schema.

GSM8K rows carry `question` and `answer`, where the answer's final number follows `####`. JSONL is
read line by line so a malformed row is reported with its file and line; Parquet goes through
`datasets` (row index instead of line). Nothing is downloaded: paths are local.
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


def prepare_gsm8k(cfg, seed: int) -> dict[str, list[dict]]:
    """train/val/test splits: val is a seeded `val_frac` share of the train file."""
    train = gsm8k_rows(cfg.train, "train")
    test = gsm8k_rows(cfg.test, "test")
    idx = list(range(len(train)))
    random.Random(seed).shuffle(idx)
    n_val = int(len(train) * cfg.val_frac)
    val_idx = set(idx[:n_val])
    val = [dict(r, split="val") for i, r in enumerate(train) if i in val_idx]
    train = [r for i, r in enumerate(train) if i not in val_idx]
    return {"train": train, "val": val, "test": test}
