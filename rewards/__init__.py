"""Reward methods: one module per method, pure scoring first (docs/methods/README.md).

`METHODS` is the registry (`core/methods.py`, the one place a method plugs in): method name ->
its settings model, builder, VERSION module, metric prefixes and evaluation hooks. A builder
takes a `MethodContext` (the resolved settings, the base policy and tokenizer, the synthesized components' folder) and
returns a `MethodPlan`: the TRL reward functions plus, for methods that change the optimisation
step itself (DRO's gates, RLCER's two roles), a `GRPOTrainer` subclass. The method name is the
same string in params.yaml, DVC stages and MLflow tags; variants (`rlme_frozen`, `r3_gate`, ...)
are named runs of a method with overrides (`params.variants`).

Builders are imported lazily (`"module:function"`), so listing the methods imports no torch.
The registry itself is in `core` because params.yaml is validated against it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.methods import METHODS, Method, UnknownMethodError, load_ref, method

__all__ = ["METHODS", "Method", "MethodContext", "MethodPlan", "UnknownMethodError", "build_plan",
           "entry_modules", "get_method", "reward_version"]


@dataclass
class MethodContext:
    """What a builder may use. `policy` is the base model as loaded for training (step 0)."""

    name: str          # method or variant name (run name, MLflow tag)
    family: str        # the method it is a run of
    cfg: Any           # params.reward.<family> with the variant's overrides merged
    grpo: Any          # params.grpo with the method's task and overrides merged
    seed: int
    policy: Any = None
    tokenizer: Any = None
    components: Path | None = None
    # How the policy's prompts meet its chat template (rewards.chat.ChatFormat); None = auto.
    chat: Any = None


@dataclass
class MethodPlan:
    """What GRPO training needs from a method."""

    reward_funcs: list[Callable]
    trainer_cls: type | None = None          # None = trl.GRPOTrainer
    trainer_kwargs: dict = field(default_factory=dict)
    # Extra objects with a `metrics() -> dict` logged at every logging step (e.g. gate rates).
    loggers: list[Any] = field(default_factory=list)
    # Chooses the training rows before training (DRO's static pre-filter); None = all rows.
    select_rows: Callable[[list[dict]], list[dict]] | None = None
    # The logged value the collapse monitor reads as "the train reward"; None = TRL's `reward`.
    # A sum of batch-standardised components has mean 0 at every step, so a hybrid names the raw
    # component it could be hacked through (e.g. `hybrid/rlme`, logged with TRL's `log_metric`).
    monitor_reward: str | None = None


def entry_modules(family: str) -> list[str]:
    """The modules a method's training imports by name (its builder and its VERSION module): the
    roots of its code closure (`core.codedeps`), which decides when its stages re-run."""
    return method(family).train_modules()


def get_method(name: str) -> tuple[Callable, str]:
    """(the method's builder, the name of its VERSION module)."""
    entry = method(name)
    return load_ref(entry.builder), entry.version


def build_plan(ctx: MethodContext) -> MethodPlan:
    """The method's plan; `ctx.family` picks the builder."""
    builder, _ = get_method(ctx.family)
    return builder(ctx)


def reward_version(family: str) -> str:
    return importlib.import_module(method(family).version).VERSION
