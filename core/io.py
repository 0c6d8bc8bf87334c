"""File I/O shared by every stage: JSONL with row-level errors, atomic writes.

Atomic writes (temp file in the same folder, then `os.replace`) mean a killed stage never leaves a
half-written file that DVC or the next stage would trust.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path


class DataError(ValueError):
    """A malformed input row; the message names the file and line."""


def read_jsonl(path: str | Path, required: Iterable[str] = ()) -> list[dict]:
    return list(iter_jsonl(path, required))


def iter_jsonl(path: str | Path, required: Iterable[str] = ()) -> Iterator[dict]:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file (did the stage that writes it run?)")
    required = tuple(required)
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{path}:{lineno}: not valid JSON ({e.msg})") from None
            if not isinstance(row, dict):
                raise DataError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
            missing = [k for k in required if k not in row]
            if missing:
                raise DataError(f"{path}:{lineno}: missing field(s) {missing}")
            yield row


def _atomic_write(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_jsonl(path: str | Path, rows: Iterable[dict]) -> None:
    _atomic_write(Path(path), lambda f: f.writelines(json.dumps(r, ensure_ascii=False) + "\n"
                                                      for r in rows))


def write_json(path: str | Path, obj) -> None:
    _atomic_write(Path(path), lambda f: json.dump(obj, f, indent=2, sort_keys=True))


def read_json(path: str | Path):
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file (did the stage that writes it run?)")
    with path.open(encoding="utf-8") as f:
        return json.load(f)
