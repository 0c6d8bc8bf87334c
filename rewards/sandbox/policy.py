"""Static validation of style-check sources, in the trainer process, before anything runs.

Layer 1 of :mod:`rewards.sandbox`. A source may hold only assignments, helper functions and
exactly one ``def check(x)``. Refused: imports, classes, decorators, ``with``, ``global``,
generators, ``async``, ``match``, bare ``except``; a ``continue``, ``break`` or ``return``
anywhere inside a ``finally`` block (it discards the CPU-timeout exception in flight); names
starting with ``__``; attributes starting with ``_`` or a frame/code/traceback prefix
(``gi_ f_ co_ tb_ cr_ ag_``); ``.format``/``.format_map`` (format strings do attribute look-ups
the AST cannot see) and ``.mro``; attribute assignment or deletion; any mention of ``open exec
eval compile getattr type ...``; and any binding of the name ``check`` other than its one ``def``
(``check = bool`` would score every non-empty response True without running a line of the
check's own code).
"""

from __future__ import annotations

import ast
import functools
import warnings
from collections.abc import Iterator

MAX_SOURCE_CHARS = 20_000
CHECK_NAME = "check"

FORBIDDEN_NAMES = frozenset({
    "open", "exec", "eval", "compile", "__import__", "input", "globals", "locals", "vars",
    "getattr", "setattr", "delattr", "hasattr", "breakpoint", "help", "memoryview", "type",
    "object", "super", "classmethod", "staticmethod", "property", "dir", "id", "print",
    "exit", "quit", "copyright", "credits", "license", "format", "BaseException",
    "SystemExit", "KeyboardInterrupt", "GeneratorExit", "os", "sys", "subprocess", "socket",
    "builtins", "importlib", "shutil", "pathlib", "io", "ctypes", "pickle", "marshal",
    "signal", "resource", "threading", "multiprocessing", "gc", "inspect",
})
FORBIDDEN_ATTRIBUTES = frozenset({"format", "format_map", "mro"})
FORBIDDEN_ATTRIBUTE_PREFIXES = ("_", "gi_", "f_", "co_", "tb_", "cr_", "ag_", "func_", "im_")
_FORBIDDEN_NODES: tuple[type[ast.AST], ...] = (
    ast.Import, ast.ImportFrom, ast.ClassDef, ast.AsyncFunctionDef, ast.Await, ast.AsyncFor,
    ast.AsyncWith, ast.With, ast.Global, ast.Nonlocal, ast.Yield, ast.YieldFrom, ast.Match,
)
_TOP_LEVEL_NODES: tuple[type[ast.AST], ...] = (ast.FunctionDef, ast.Assign, ast.AnnAssign)
_TRY_NODES = (ast.Try, ast.TryStar)
_JUMP_NODES: tuple[type[ast.AST], ...] = (ast.Continue, ast.Break, ast.Return)
_SCOPE_NODES: tuple[type[ast.AST], ...] = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                           ast.ClassDef)


def static_rejection_reason(source: object) -> str | None:
    """Why a style-check source is refused before it runs, or ``None`` if it may run.

    The synthesis stage can call this to drop bad checks early; the sandbox calls it on every
    source it is given (cached, since training re-sends the same few sources every step).

    >>> static_rejection_reason("def check(response):\\n    return len(response.split()) < 50")
    >>> static_rejection_reason("import os\\ndef check(response):\\n    return True")
    'forbidden statement Import'
    >>> static_rejection_reason("def check(r):\\n    return '{0.__class__}'.format(r) != ''")
    "forbidden attribute 'format'"
    """
    if not isinstance(source, str):
        return f"source is {type(source).__name__}, not str"
    if len(source) > MAX_SOURCE_CHARS:
        return f"source longer than {MAX_SOURCE_CHARS} characters"
    return _cached_rejection_reason(source)


@functools.lru_cache(maxsize=4096)
def _cached_rejection_reason(source: str) -> str | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. invalid escapes in model-written regexes
            tree = ast.parse(source, mode="exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return f"does not parse: {type(exc).__name__}"
    for node in ast.walk(tree):
        problem = _node_problem(node)
        if problem is not None:
            return problem
    return _module_shape_problem(tree)


def _node_problem(node: ast.AST) -> str | None:
    if isinstance(node, _FORBIDDEN_NODES):
        return f"forbidden statement {type(node).__name__}"
    if isinstance(node, ast.FunctionDef) and node.decorator_list:
        return "decorators are not allowed"
    if isinstance(node, ast.ExceptHandler) and node.type is None:
        return "bare 'except:' is not allowed"
    if isinstance(node, _TRY_NODES):
        jump = _jump_in_finally(node)
        if jump is not None:
            return jump
    return _identifier_problem(node)


def _jump_in_finally(node: ast.Try | ast.TryStar) -> str | None:
    """A ``continue``/``break``/``return`` at any depth of a ``finally`` block (nested function
    bodies excepted: their ``return`` leaves only themselves)."""
    for statement in node.finalbody:
        for inner in _same_scope_nodes(statement):
            if isinstance(inner, _JUMP_NODES):
                keyword = type(inner).__name__.lower()
                return (f"'{keyword}' inside a 'finally' block is not allowed "
                        "(it discards the CPU-timeout exception)")
    return None


def _same_scope_nodes(root: ast.AST) -> Iterator[ast.AST]:
    """``root`` and its descendants in the same scope (nested function bodies left out)."""
    stack = [] if isinstance(root, _SCOPE_NODES) else [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(child for child in ast.iter_child_nodes(node)
                     if not isinstance(child, _SCOPE_NODES))


def _identifier_problem(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name) and node.id == CHECK_NAME and not isinstance(node.ctx, ast.Load):
        # `check = bool`, `(check := ...)`, `for check in ...`, `del check`: the scored function
        # would not be the def the rest of the validation looked at.
        return f"the name {CHECK_NAME!r} is bound other than by its def"
    for name in _names_of(node):
        if name.startswith("__"):
            return f"dunder or mangled name {name!r}"
        if name in FORBIDDEN_NAMES:
            return f"forbidden name {name!r}"
    if isinstance(node, ast.Attribute):
        attr = node.attr
        if attr in FORBIDDEN_ATTRIBUTES or attr.startswith(FORBIDDEN_ATTRIBUTE_PREFIXES):
            return f"forbidden attribute {attr!r}"
        if not isinstance(node.ctx, ast.Load):
            return f"attribute assignment to {attr!r}"
    return None


def _names_of(node: ast.AST) -> tuple[str, ...]:
    if isinstance(node, ast.Name):
        return (node.id,)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return (node.name,)
    if isinstance(node, ast.arg):
        return (node.arg,)
    if isinstance(node, (ast.keyword, ast.ExceptHandler)):
        name = node.arg if isinstance(node, ast.keyword) else node.name
        return () if name is None else (name,)
    return ()


def _module_shape_problem(tree: ast.Module) -> str | None:
    checks = 0
    for statement in tree.body:
        is_docstring = isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
        if not (is_docstring or isinstance(statement, _TOP_LEVEL_NODES)):
            return f"top-level {type(statement).__name__} (only assignments and defs allowed)"
        if isinstance(statement, ast.FunctionDef) and statement.name == CHECK_NAME:
            checks += 1
            args = statement.args
            if (len(args.posonlyargs) + len(args.args) != 1 or args.vararg or args.kwarg
                    or args.kwonlyargs):
                return "check must take exactly one parameter"
    if checks != 1:
        return f"expected exactly one top-level 'def check(response)', found {checks}"
    return None
