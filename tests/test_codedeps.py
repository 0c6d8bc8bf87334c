"""The run digest (core/codedeps.py) follows what the code does, not how it is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.codedeps import code_digest, normalized_source

BASE = '''"""Module doc."""
import math


class C:
    """Class doc."""

    def f(self, x):
        """Doc."""
        return math.floor(x + 1)  # why


def g(x, y):
    s = f"{x}-{y!r:>4}"
    return s
'''

SAME = {
    "comments and blank lines": BASE.replace("  # why", "").replace("\n\n\nclass", "\n# note\nclass"),
    "docstrings": BASE.replace('"""Module doc."""', '"""Other words, two\nlines."""')
                      .replace('"""Doc."""', "'''Rewritten.'''"),
    "no docstrings at all": BASE.replace('"""Module doc."""\n', "").replace('        """Doc."""\n', ""),
    "indent width": BASE.replace("    ", "  "),
    "wrapping inside brackets": BASE.replace("math.floor(x + 1)", "math.floor(\n            x\n            + 1)"),
}
DIFFERENT = {
    "a literal": BASE.replace("x + 1", "x + 2"),
    "a name": BASE.replace("math.floor", "math.ceil"),
    "an f-string's text": BASE.replace('f"{x}-{y!r:>4}"', 'f"{x}+{y!r:>4}"'),
    "an f-string's format": BASE.replace("{y!r:>4}", "{y!r:>5}"),
    "nesting": BASE.replace("        return math.floor(x + 1)  # why\n",
                            "        return math.floor(x + 1)  # why\n\n    y = 1\n"),
    "a string that is not a docstring": BASE.replace("return s", "'not a doc'\n    return s"),
}


@pytest.mark.parametrize("edit", sorted(SAME))
def test_documentation_and_formatting_edits_keep_the_digest(edit):
    assert normalized_source(SAME[edit].encode()) == normalized_source(BASE.encode())


@pytest.mark.parametrize("edit", sorted(DIFFERENT))
def test_edits_the_interpreter_runs_change_the_digest(edit):
    assert normalized_source(DIFFERENT[edit].encode()) != normalized_source(BASE.encode())


def test_code_digest_of_a_closure(tmp_path: Path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text("from pkg import b\nX = b.Y\n")
    (tmp_path / "pkg" / "b.py").write_text(BASE)
    before = code_digest(["pkg.a"], tmp_path)
    (tmp_path / "pkg" / "b.py").write_text(SAME["docstrings"])
    assert code_digest(["pkg.a"], tmp_path) == before
    (tmp_path / "pkg" / "b.py").write_text(DIFFERENT["a name"])
    assert code_digest(["pkg.a"], tmp_path) != before
