"""Where every stage reads and writes (all under data/, owned by DVC)."""

from __future__ import annotations

from pathlib import Path

from core.params import ROOT, Params

DATA = ROOT / "data"
PREPARED = DATA / "prepared"
BASE_MODEL = DATA / "base_model"
COMPONENTS = DATA / "components"
REPORTS = ROOT / "reports"


def base_model_dir(params: Params) -> Path:
    """The tiny model built by `build_base`, or the local checkpoint named in params."""
    return Path(params.base_model.path).expanduser() if params.base_model.path else BASE_MODEL


def run_key(method: str, seed: int | None) -> str:
    """`rlvr/seed0` for a trained method; `base` for the base model's evaluation at `seed`, and
    `base/draw2` for its draw 2 (params `base_draws`; `<study>/base` alike).

    >>> run_key("rlvr", 0), run_key("base", None), run_key("base", 2), run_key("ci/base", 1)
    ('rlvr/seed0', 'base', 'base/draw2', 'ci/base/draw1')
    """
    if seed is None:
        return method
    return f"{method}/{'draw' if method.rpartition('/')[2] == 'base' else 'seed'}{seed}"


def checkpoint_dir(method: str, seed: int) -> Path:
    return DATA / "checkpoints" / method / f"seed{seed}"


def policy_dir(params: Params, name: str, seed: int | None) -> Path:
    """`base` is the base model; any other name a trained method's final weights."""
    if name == "base":
        return base_model_dir(params)
    if seed is None:
        raise ValueError(f"policy_dir: trained method {name!r} needs a seed")
    return checkpoint_dir(name, seed) / "final"


def eval_dir(name: str, seed: int | None) -> Path:
    return DATA / "eval" / run_key(name, seed)


def plots_dir(name: str, seed: int) -> Path:
    return DATA / "plots" / run_key(name, seed)
