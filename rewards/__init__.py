"""Reward methods (SPEC 1-6): one module per method, pure scoring first.

`METHODS` is the registry: a dict literal from method name to where its builder lives. A builder
takes a `MethodContext` (the resolved settings, the base policy and tokenizer, the task rows) and
returns a `MethodPlan`: the TRL reward functions plus, for methods that change the optimisation
step itself (DRO's gates, RLCER's two roles), a `GRPOTrainer` subclass. The method name is the
same string in params.yaml, DVC stages and MLflow tags; variants (`rlme_frozen`, `r3_gate`, ...)
are named runs of a method with overrides (`params.variants`).

Builders are imported lazily (`"module:function"`), so listing the methods imports no torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class UnknownMethodError(KeyError):
    def __str__(self) -> str:
        return self.args[0]


@dataclass
class MethodContext:
    """What a builder may use. `policy` is the base model as loaded for training (step 0)."""

    name: str          # method or variant name (run name, MLflow tag)
    family: str        # the method it is a run of
    cfg: Any           # params.reward.<family> with the variant's overrides merged
    grpo: Any          # params.grpo with the method's task and overrides merged
    params: Any
    seed: int
    policy: Any = None
    tokenizer: Any = None
    prepared: Path | None = None
    components: Path | None = None


@dataclass
class MethodPlan:
    """What GRPO training needs from a method."""

    reward_funcs: list[Callable]
    trainer_cls: type | None = None          # None = trl.GRPOTrainer
    trainer_kwargs: dict = field(default_factory=dict)
    reward_weights: list[float] | None = None
    # Extra objects with a `metrics() -> dict` logged at every logging step (e.g. gate rates).
    loggers: list[Any] = field(default_factory=list)
    # Chooses the training rows before training (DRO's static pre-filter); None = all rows.
    select_rows: Callable[[list[dict]], list[dict]] | None = None
    # The logged value the collapse monitor reads as "the train reward"; None = TRL's `reward`.
    # A sum of batch-standardised components has mean 0 at every step, so a hybrid names the raw
    # component it could be hacked through (e.g. `hybrid/rlme`, logged with TRL's `log_metric`).
    monitor_reward: str | None = None


# name -> (builder "module:function", module holding the reward VERSION). Strings, so listing the
# methods imports nothing and each method's code closure starts at its own modules.
METHODS: dict[str, tuple[str, str]] = {
    "rlvr": ("rewards.verifiable:build", "rewards.verifiable"),
    "random": ("rewards.baselines:build", "rewards.baselines"),
    "rlme": ("rewards.meta_eval:build", "rewards.meta_eval"),
    "rlvrr": ("rewards.rlvrr:build", "rewards.rlvrr"),
    "dro": ("models.dro_trainer:build", "rewards.reflection"),
    "rlcer": ("models.rlcer_trainer:build", "rewards.evolving_rubrics"),
    "rationale": ("rewards.genrm:build", "rewards.genrm"),
}


def entry_modules(family: str) -> list[str]:
    """The modules a method's training imports by name (its builder and its VERSION module): the
    roots of its code closure (`core.codedeps`), which decides when its stages re-run."""
    if family not in METHODS:
        raise UnknownMethodError(f"unknown method {family!r}; known methods: {', '.join(sorted(METHODS))}")
    builder, version_module = METHODS[family]
    return sorted({builder.partition(":")[0], version_module})


def get_method(name: str) -> tuple[Callable, str]:
    if name not in METHODS:
        raise UnknownMethodError(f"unknown method {name!r}; known methods: {', '.join(sorted(METHODS))}")
    spec, version_module = METHODS[name]
    module, _, fn = spec.partition(":")
    return getattr(importlib.import_module(module), fn), version_module


def build_plan(ctx: MethodContext) -> MethodPlan:
    """The method's plan; `ctx.family` picks the builder."""
    builder, _ = get_method(ctx.family)
    return builder(ctx)


def reward_version(family: str) -> str:
    return importlib.import_module(get_method(family)[1]).VERSION
