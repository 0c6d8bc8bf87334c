"""`random`: Uniform(0, 1) reward, seeded (docs/methods/random.md).

The control for "does the reward carry any signal", and the denominator of every reward-overhead
figure (docs/methods/shared.md). Seeded per call count so a rerun with the same seed sees the same
reward stream.
"""

from __future__ import annotations

from typing import Any

import numpy as np

VERSION = "1"


class RandomReward:
    """TRL reward function returning i.i.d. Uniform(0,1) rewards from a seeded generator."""

    def __init__(self, seed: int = 0):
        self.__name__ = "random_uniform"
        self.seed = seed
        self._rng = np.random.default_rng(seed)

    def __call__(self, prompts, completions, **kwargs) -> list[float]:
        # On N ranks every rank draws the whole generation batch's rewards and keeps its own slice:
        # the stream is the one a single process draws, and no two ranks share rewards.
        from core import ranks

        sizes = ranks.gather_objects(len(completions))
        start = sum(sizes[:ranks.rank()]) if len(sizes) > 1 else 0
        return self._rng.random(sum(sizes))[start:start + len(completions)].tolist()


def build(ctx: Any) -> Any:
    """The random baseline's plan: a uniform reward stream seeded by `reward.random.seed`."""
    from rewards import MethodPlan

    return MethodPlan([RandomReward(seed=ctx.cfg.seed)])
