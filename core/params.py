"""The pydantic mirror of `params.yaml`: the single configuration, validated at start.

Every model forbids unknown keys, so a misspelt key fails before any work with a message naming
it (`world.arith.sloppy_fracc: unknown key`). A `preset` names an entry of `presets` whose nested
overrides are merged over the file before validation; CI uses the `ci` preset to stay small.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from synthesis.config import SynthesizeConfig  # torch- and sklearn-free

ROOT = Path(__file__).resolve().parent.parent
PARAMS_FILE = ROOT / "params.yaml"


class ParamsError(ValueError):
    """params.yaml (or an override) is invalid; the message names the key."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ArithWorld(Strict):
    n_train: int = Field(ge=1)
    n_val: int = Field(ge=1)
    n_test: int = Field(ge=1)
    min_ops: int = Field(ge=1, le=4)
    max_ops: int = Field(ge=1, le=4)
    max_value: int = Field(ge=20)
    sloppy_frac: float = Field(ge=0, le=1)


class FactsWorld(Strict):
    n_train: int = Field(ge=1)
    n_val: int = Field(ge=1)
    n_test: int = Field(ge=1)
    drop_frac: float = Field(ge=0, le=1)
    wrong_style_frac: float = Field(ge=0, le=1)


class PairsWorld(Strict):
    n_train: int = Field(ge=1)
    n_val: int = Field(ge=1)
    n_test: int = Field(ge=1)


class CounterfactualWorld(Strict):
    n_train: int = Field(ge=1)
    n_test: int = Field(ge=1)


class World(Strict):
    seed: int
    arith: ArithWorld
    facts: FactsWorld
    pairs: PairsWorld
    counterfactual: CounterfactualWorld


class ExternalData(Strict):
    format: Literal["gsm8k"]
    train: str
    test: str
    val_frac: float = Field(ge=0, lt=1)


class Data(Strict):
    source: Literal["tiny", "external"]
    external: ExternalData


class Arch(Strict):
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    max_positions: int


class SFT(Strict):
    steps: int = Field(ge=1)
    batch_size: int = Field(ge=1)
    learning_rate: float = Field(gt=0)
    warmup_steps: int = Field(ge=0)
    mix: dict[Literal["arith", "facts", "genrm"], float]


class BaseModelParams(Strict):
    path: str | None
    vocab_size: int = Field(ge=300)
    arch: Arch
    sft: SFT


class GRPO(Strict):
    task: Literal["arith", "facts", "pairs"]
    max_steps: int = Field(ge=1)
    learning_rate: float = Field(gt=0)
    prompts_per_step: int = Field(ge=1)
    num_generations: int = Field(ge=2)
    max_completion_length: int = Field(ge=1)
    temperature: float = Field(gt=0)
    beta: float = Field(ge=0)
    loss_type: Literal["dapo", "grpo", "dr_grpo", "bnpo", "cispo"]
    scale_rewards: Literal["group", "batch", "none"]
    epsilon: float = Field(gt=0)
    epsilon_high: float = Field(gt=0)
    logging_steps: int = Field(ge=1)
    save_steps: int = Field(ge=1)
    heldout_every: int = Field(ge=1)
    use_vllm: bool


class RlvrReward(Strict):
    pass


class RandomReward(Strict):
    seed: int


class Reward(Strict):
    rlvr: RlvrReward
    random: RandomReward


class Collapse(Strict):
    min_drop: float = Field(gt=0)
    reward_tol: float = Field(ge=0)
    patience: int = Field(ge=1)
    entropy_floor: float = Field(ge=0)
    min_length_frac: float = Field(ge=0, le=1)
    max_clipped: float = Field(gt=0, le=1)
    early_stop: bool


class Eval(Strict):
    # "arith" | "arith_cf" | "facts", or "<gsm8k|math|ifeval>:<local file>"
    benchmarks: list[str] = Field(min_length=1)

    @field_validator("benchmarks")
    @classmethod
    def _known_benchmarks(cls, v: list[str]) -> list[str]:
        from evals.registry import parse_spec  # torch-free

        for spec in v:
            try:
                parse_spec(spec)
            except KeyError as e:
                raise ValueError(e.args[0]) from None
        return v
    n_test: int = Field(ge=1)
    k: int = Field(ge=1)
    temperature: float = Field(gt=0)
    max_new_tokens: int = Field(ge=1)
    batch_size: int = Field(ge=1)
    heldout_k: int = Field(ge=1)


class Params(Strict):
    seed: int
    seeds: list[int] = Field(min_length=1)
    preset: str | None
    methods: list[str] = Field(min_length=1)
    world: World
    data: Data
    synthesize: SynthesizeConfig
    base_model: BaseModelParams
    grpo: GRPO
    collapse: Collapse
    reward: Reward
    eval: Eval
    presets: dict[str, dict]


def _merge(base: dict, over: dict, where: str = "") -> dict:
    """Deep-merge a preset over the file; unknown keys are errors. `mix` (SFT family weights)
    is replaced whole: its keys are data, and a preset that lists two families means two."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        path = f"{where}{key}"
        if key not in out:
            raise ParamsError(f"{path}: unknown key in preset override")
        if isinstance(value, dict) and isinstance(out[key], dict) and key not in ("mix",):
            out[key] = _merge(out[key], value, path + ".")
        else:
            out[key] = value
    return out


def _format(err: ValidationError, source: str) -> str:
    lines = []
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"])
        msg = "unknown key" if e["type"] == "extra_forbidden" else e["msg"]
        lines.append(f"{source}: {key}: {msg}")
    return "\n".join(lines)


def validate(raw: dict, source: str = "params.yaml", preset: str | None = None) -> Params:
    """Validate a raw params dict, applying `preset` (or the file's own `preset` key)."""
    if not isinstance(raw, dict):
        raise ParamsError(f"{source}: expected a mapping at the top level")
    name = preset if preset is not None else raw.get("preset")
    if name:
        presets = raw.get("presets") or {}
        if name not in presets:
            raise ParamsError(f"{source}: preset {name!r} is not defined; known: {sorted(presets)}")
        raw = _merge(raw, presets[name])
        raw["preset"] = name
    try:
        return Params.model_validate(raw)
    except ValidationError as e:
        raise ParamsError(_format(e, source)) from None


def load(path: str | Path | None = None, preset: str | None = None) -> Params:
    """Load params.yaml; `LAB_PRESET` in the environment picks a preset too (CLI flags win)."""
    path = Path(path) if path else PARAMS_FILE
    with path.open(encoding="utf-8") as f:
        try:
            raw = yaml.safe_load(f)
        except yaml.YAMLError as e:
            raise ParamsError(f"{path}: not valid YAML ({e})") from None
    return validate(raw, str(path.name), preset or os.environ.get("LAB_PRESET") or None)
