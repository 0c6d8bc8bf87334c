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
"""

from __future__ import annotations

import ast
import hashlib
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


def files_digest(files: Iterable[Path], root: Path = ROOT) -> str:
    """A short content hash of files, keyed by their path relative to `root`."""
    h = hashlib.sha256()
    for p in sorted(Path(f) for f in files):
        h.update(str(p.relative_to(root) if p.is_relative_to(root) else p).encode())
        h.update(b"\0")
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def code_digest(entries: Iterable[str], root: Path = ROOT) -> str:
    """`files_digest` of the import closure of `entries`."""
    return files_digest(closure(entries, root), root)
