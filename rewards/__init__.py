"""Reward methods (SPEC 1-6): one module per method, pure scoring first.

`METHODS` is the registry: a dict literal from method name to a builder returning the method's TRL
reward functions. The method name is the same string in params.yaml, DVC stages and MLflow tags.
"""

from __future__ import annotations

from collections.abc import Callable

from rewards import baselines, verifiable


class UnknownMethodError(KeyError):
    def __str__(self) -> str:
        return self.args[0]


def _rlvr(cfg) -> list[Callable]:
    return [verifiable.rlvr_correct]


def _random(cfg) -> list[Callable]:
    return [baselines.RandomReward(seed=cfg.seed)]


# name -> (builder(reward_cfg) -> reward functions, module holding the VERSION)
METHODS: dict[str, tuple[Callable, object]] = {
    "rlvr": (_rlvr, verifiable),
    "random": (_random, baselines),
}


def get_method(name: str) -> tuple[Callable, object]:
    if name not in METHODS:
        raise UnknownMethodError(f"unknown method {name!r}; known methods: {', '.join(sorted(METHODS))}")
    return METHODS[name]


def reward_functions(name: str, reward_cfg) -> list[Callable]:
    """The TRL reward callables of method `name`, configured from `params.reward.<name>`."""
    builder, _ = get_method(name)
    return builder(getattr(reward_cfg, name))


def reward_version(name: str) -> str:
    return get_method(name)[1].VERSION
