"""Which of the repository's own source files a stage runs: the static import closure of a module.

Per-method invalidation (docs/pipeline.md, "Per-method invalidation") needs a train stage to depend on the
code it runs and nothing else: editing `rewards/meta_eval.py` must retrain the RLME family, not all
seven methods. Listing those files by hand in `dvc.yaml` would go stale at the first new import,
so the closure is read from the code itself: every `import`/`from ... import` (at module level or
inside a function: a lazy import runs too) that resolves to a file of this repository, followed
recursively, plus the `__init__.py` of every package on the way (importing `a.b` runs `a`).

Static analysis over-approximates (an import in a branch that never runs still counts), which
costs at most a needless re-run; it never misses a repository file that is imported by name.
Imports built from strings (`importlib.import_module(...)`, the method registry's
`"module:function"` builders) are not followed: the caller names those entry modules itself.

The digest is of what the code does, not how it is written (`normalized_source`): comments,
docstrings, blank lines, indentation width and line wrapping inside brackets are dropped, so a
documentation or formatting edit leaves every recorded run current; any change to a token the
interpreter runs (a name, a literal, an operator, a block's nesting) changes it. The token stream
is the same on every Python the lab supports (3.12's f-string tokens are joined back into the one
string token 3.11 reads), so records made on one are current on another.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import io
import tokenize
from collections.abc import Iterable
from pathlib import Path

from core.params import ROOT


def module_file(name: str, root: Path = ROOT) -> Path | None:
    """`rewards.meta_eval` -> rewards/meta_eval.py (or a package's __init__.py); None if external."""
    base = root.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imported_names(path: Path, module: str) -> set[str]:
    """Dotted names of everything `path` imports (module-level and lazy), relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[:len(parts) - (node.level - 1)] if node.level > 1 else parts
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names.add(base)
            # `from pkg import mod` imports a module when `pkg/mod.py` exists.
            names.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return {n for n in names if n}


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _closure(entries: tuple[str, ...], root: Path) -> tuple[Path, ...]:
    seen: dict[str, Path] = {}
    todo = [n for e in entries for n in _with_parents(e)]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = module_file(name, root)
        if path is None:
            continue
        seen[name] = path
        for imported in imported_names(path, name):
            todo.extend(n for n in _with_parents(imported) if n not in seen)
    return tuple(sorted(set(seen.values())))


def closure(entries: Iterable[str], root: Path = ROOT) -> list[Path]:
    """The repository files that importing `entries` (dotted module names) runs, sorted."""
    return list(_closure(tuple(sorted(set(entries))), Path(root)))


def files_digest(files: Iterable[Path], root: Path = ROOT, normalize: bool = False) -> str:
    """A short content hash of files, keyed by their path relative to `root`; with `normalize`,
    of each Python file's `normalized_source` (other files: their bytes)."""
    h = hashlib.sha256()
    for p in sorted(Path(f) for f in files):
        h.update(str(p.relative_to(root) if p.is_relative_to(root) else p).encode())
        h.update(b"\0")
        h.update(normalized_source(p.read_bytes()) if normalize and p.suffix == ".py"
                 else p.read_bytes())
    return h.hexdigest()[:16]


def code_digest(entries: Iterable[str], root: Path = ROOT) -> str:
    """`files_digest` of the import closure of `entries`, normalised (`normalized_source`)."""
    return files_digest(closure(entries, root), root, normalize=True)


def _docstring_starts(tree: ast.AST) -> set[tuple[int, int]]:
    """(line, column) where each module, class and function docstring starts."""
    starts = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                starts.add((body[0].lineno, body[0].col_offset))
    return starts


@functools.lru_cache(maxsize=1024)
def normalized_source(source: bytes) -> bytes:
    """The tokens a Python file runs, one per line: comments, docstrings, blank lines and line
    breaks inside brackets dropped, each indentation step written the same whatever its width.

    >>> a = b"def f(x):\\n    'Doc.'\\n    # why\\n    return (x +\\n            1)  # sum\\n"
    >>> b = b"def f(x):\\n  return (x + 1)\\n"
    >>> normalized_source(a) == normalized_source(b)
    True
    >>> normalized_source(b) == normalized_source(b"def f(x):\\n  return (x + 2)\\n")
    False
    """
    text = source.decode("utf-8")
    lines = text.splitlines(keepends=True)
    skip = _docstring_starts(ast.parse(text))
    out: list[str] = []
    in_doc = False      # inside a docstring statement: drop its string tokens and its NEWLINE
    fstring: list = []  # an open 3.12+ f-string: (start position, nesting depth)
    for tok in tokenize.tokenize(io.BytesIO(source).readline):
        name = tokenize.tok_name[tok.type]
        if name in ("FSTRING_START", "TSTRING_START"):
            if not fstring:
                fstring = [tok.start, 0]
            fstring[1] += 1
            continue
        if fstring:
            if name in ("FSTRING_END", "TSTRING_END"):
                fstring[1] -= 1
                if fstring[1] == 0:
                    out.append(_slice(lines, fstring[0], tok.end))
                    fstring = []
            continue
        if tok.start in skip and tok.type == tokenize.STRING:
            in_doc = True
        if in_doc:
            if tok.type == tokenize.NEWLINE:
                in_doc = False
            continue
        if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER):
            continue
        if tok.type == tokenize.INDENT:
            out.append("<indent>")
        elif tok.type == tokenize.DEDENT:
            out.append("<dedent>")
        elif tok.type == tokenize.NEWLINE:
            out.append("<newline>")
        else:
            out.append(tok.string)
    return "\n".join(out).encode("utf-8")


def _slice(lines: list[str], start: tuple[int, int], end: tuple[int, int]) -> str:
    """The source text from `start` to `end` (tokenize's 1-based line, 0-based column)."""
    (l0, c0), (l1, c1) = start, end
    if l0 == l1:
        return lines[l0 - 1][c0:c1]
    return lines[l0 - 1][c0:] + "".join(lines[l0:l1 - 1]) + lines[l1 - 1][:c1]
