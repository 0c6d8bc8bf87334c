"""The packages form layers, and imports point down only.

    core  <-  world  <-  rewards  <-  models, evals, synthesis  <-  tasks  <-  flows

A module may import from its own package, from a package on its own layer (`evals` uses
`models.generation`) and from any layer below; never from a layer above. Every import statement
counts: module-level, inside a function (a lazy import runs too) and under `TYPE_CHECKING` (the
type checker follows it). `world` sits below `rewards`: `rewards` reads the tiny world's
vocabulary (`rewards.dro` uses `world.facts`), the world generators use no reward code.

Names resolved at run time from strings are not imports: the method registry
(`core/methods.py`) names each method's builder as `"module:function"`, which is how a method in
`models/` (DRO's and RLCER's trainers) plugs into a registry that `core` validates params.yaml
against.
"""

from pathlib import Path

import pytest

from core.codedeps import imported_names
from core.params import ROOT

LAYERS = {"core": 0, "world": 1, "rewards": 2, "models": 3, "evals": 3, "synthesis": 3,
          "tasks": 4, "flows": 5}


def modules() -> dict[str, Path]:
    """Dotted name -> file of every module in the layered packages."""
    out = {}
    for package in LAYERS:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = modules()


def upward_imports(module: str, path: Path) -> list[str]:
    """The names `module` imports from a package on a higher layer than its own."""
    own = LAYERS[module.split(".")[0]]
    return sorted(name for name in imported_names(path, module)
                  if LAYERS.get(name.split(".")[0], -1) > own)


def test_every_package_is_in_a_layer():
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert packages - {"tests", "benchmarks", "scripts"} <= set(LAYERS), packages


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module):
    path = MODULES[module]
    up = upward_imports(module, path)
    assert not up, f"{path.relative_to(ROOT)} imports from a higher layer: {', '.join(up)}"


def test_an_upward_import_is_caught(tmp_path):
    (tmp_path / "core").mkdir()
    bad = tmp_path / "core" / "bad.py"
    bad.write_text("from core.io import read_jsonl\n\ndef f():\n    from flows.train import train\n")
    assert upward_imports("core.bad", bad) == ["flows.train", "flows.train.train"]


def test_core_benchmark_names_are_the_evals_registry():
    """`core.params` checks benchmark specs without importing `evals`; the two lists agree."""
    from core.params import EXTERNAL_BENCHMARKS, TINY_BENCHMARKS
    from evals.registry import BENCHMARKS, ExternalBenchmark

    assert {n for n, b in BENCHMARKS.items() if isinstance(b, ExternalBenchmark)} == set(EXTERNAL_BENCHMARKS)
    assert {n for n, b in BENCHMARKS.items() if not isinstance(b, ExternalBenchmark)} == set(TINY_BENCHMARKS)
