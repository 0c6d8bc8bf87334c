"""Where every stage reads and writes (all under data/, owned by DVC)."""

from __future__ import annotations

from pathlib import Path

from core.params import ROOT

DATA = ROOT / "data"
PREPARED = DATA / "prepared"
BASE_MODEL = DATA / "base_model"
REPORTS = ROOT / "reports"


def base_model_dir(params) -> Path:
    """The tiny model built by `build_base`, or the local checkpoint named in params."""
    return Path(params.base_model.path).expanduser() if params.base_model.path else BASE_MODEL


def checkpoint_dir(method: str) -> Path:
    return DATA / "checkpoints" / method


def policy_dir(params, name: str) -> Path:
    """`base` is the base model; any other name a trained method's final weights."""
    return base_model_dir(params) if name == "base" else checkpoint_dir(name) / "final"


def eval_dir(name: str) -> Path:
    return DATA / "eval" / name


def plots_dir(name: str) -> Path:
    return DATA / "plots" / name
