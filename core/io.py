"""File I/O shared by every stage: JSONL with row-level errors, atomic writes.

Atomic writes (temp file in the same folder, then `os.replace`) mean a killed stage never leaves a
half-written file that DVC or the next stage would trust. The temp file is created like `open()`
creates files (mode 0o666 less the umask), not with `tempfile.mkstemp`'s private 0o600, so every
output stays readable by whoever could read it before.

Reading decodes with ``surrogateescape`` so that a byte that is not UTF-8 is reported as a
:class:`DataError` naming its file and line, like any other malformed row; a strict decoder
fails on a whole buffered chunk, with no line to name.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Iterable, Iterator
from pathlib import Path

# surrogateescape decodes each byte that is not UTF-8 to U+DC80..U+DCFF; valid UTF-8 never
# decodes to a lone surrogate, so one of these in a line means a bad byte.
_UNDECODABLE = re.compile("[\udc80-\udcff]")


class DataError(ValueError):
    """A malformed input row; the message names the file and line."""


def read_jsonl(path: str | Path, required: Iterable[str] = ()) -> list[dict]:
    return list(iter_jsonl(path, required))


def iter_jsonl(path: str | Path, required: Iterable[str] = ()) -> Iterator[dict]:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file (did the stage that writes it run?)")
    required = tuple(required)
    with path.open(encoding="utf-8", errors="surrogateescape") as f:
        for lineno, line in enumerate(f, 1):
            bad = None if line.isascii() else _UNDECODABLE.search(line)
            if bad:
                raise DataError(f"{path}:{lineno}: not valid UTF-8 (byte 0x{ord(bad.group()) - 0xDC00:02x} "
                                f"at character {bad.start() + 1})")
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


def _new_temp_file(path: Path) -> tuple[int, Path]:
    """A new, exclusively created file beside ``path``; the kernel applies the umask to 0o666."""
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"{path.parent}: could not create a temporary file for {path.name}")


def _atomic_write(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _new_temp_file(path)
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


def write_text(path: str | Path, text: str) -> None:
    _atomic_write(Path(path), lambda f: f.write(text))


def write_json(path: str | Path, obj) -> None:
    _atomic_write(Path(path), lambda f: json.dump(obj, f, indent=2, sort_keys=True))


def read_json(path: str | Path):
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file (did the stage that writes it run?)")
    with path.open(encoding="utf-8") as f:
        return json.load(f)
