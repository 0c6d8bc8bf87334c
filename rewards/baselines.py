"""The controls: `random` (docs/methods/random.md), `format` and `incorrect` (docs/methods/spurious.md).

`random`: Uniform(0, 1) reward, seeded. The control for "does the reward carry any signal", and the
denominator of every reward-overhead figure (docs/methods/shared.md). Each training seed draws its
own stream (seeded by `reward.random.seed` and the run's seed), so a study's seeds are independent
replicates of the control, and a rerun of one seed sees the same stream.

`format` and `incorrect` are the spurious-reward controls (arXiv 2506.10947): `format` pays 1.0
for any boxed answer, `incorrect` pays 1.0 for a boxed answer that is WRONG (it reads the label, as
a control). With `random` they measure how much of a "gain" a reward with no signal about
correctness produces on this base. An answer is a non-blank last ``\\boxed{}``
(:func:`rewards.majority.has_answer`, the rule TTRL votes by).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rewards.majority import has_answer
from rewards.verifiable import answers_match, completion_text, extract_boxed

VERSION = "2"  # 2: one random stream per training seed (was one for every seed)


class RandomReward:
    """TRL reward function returning i.i.d. Uniform(0,1) rewards from a seeded generator."""

    def __init__(self, seed: int = 0, run_seed: int | None = None):
        self.__name__ = "random_uniform"
        self.seed = seed
        # (seed, run_seed) seeds numpy's SeedSequence: one independent stream per training seed.
        self._rng = np.random.default_rng(seed if run_seed is None else [seed, run_seed])

    def __call__(self, prompts, completions, **kwargs) -> list[float]:
        # On N ranks every rank draws the whole generation batch's rewards and keeps its own slice:
        # the stream is the one a single process draws, and no two ranks share rewards.
        from core import ranks

        sizes = ranks.gather_objects(len(completions))
        start = sum(sizes[:ranks.rank()]) if len(sizes) > 1 else 0
        return self._rng.random(sum(sizes))[start:start + len(completions)].tolist()


def format_rewards(completions: Sequence[Any]) -> np.ndarray:
    """1.0 for each completion with a boxed answer, else 0.0.

    >>> format_rewards(["so \\\\boxed{7}.", "no box", "\\\\boxed{ }"]).tolist()
    [1.0, 0.0, 0.0]
    """
    return np.array([1.0 if has_answer(extract_boxed(completion_text(c))) else 0.0
                     for c in completions])


def incorrect_rewards(completions: Sequence[Any], gold: Sequence[Any]) -> np.ndarray:
    """1.0 for each completion whose boxed answer exists and does not match its gold answer, else
    0.0 (a correct answer and a missing one both score 0.0).

    >>> incorrect_rewards(["\\\\boxed{7}", "\\\\boxed{8}", "no box"], ["7", "7", "7"]).tolist()
    [0.0, 1.0, 0.0]
    """
    if len(completions) != len(gold):
        raise ValueError(f"{len(completions)} completions but {len(gold)} gold answers")
    out = []
    for c, g in zip(completions, gold):
        answer = extract_boxed(completion_text(c))
        out.append(1.0 if has_answer(answer) and not answers_match(answer, str(g)) else 0.0)
    return np.array(out)


def format_boxed(prompts: Any, completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """TRL reward function of `format`."""
    return format_rewards(completions).tolist()


def incorrect_answer(prompts: Any, completions: Sequence[Any], answer: Sequence[Any],
                     **kwargs: Any) -> list[float | None]:
    """TRL reward function of `incorrect`: `answer` is the dataset's gold column; rows without one
    get None (the reward does not apply), as `rlvr`'s."""
    return [None if g is None else float(incorrect_rewards([c], [g])[0])
            for c, g in zip(completions, answer)]


def build(ctx: Any) -> Any:
    """The random baseline's plan: a uniform reward stream seeded by `reward.random.seed` and the
    run's seed (each seed of a study its own stream)."""
    from rewards import MethodPlan

    return MethodPlan([RandomReward(seed=ctx.cfg.seed, run_seed=ctx.seed)])


def build_format(ctx: Any) -> Any:
    """The `format` control's plan: 1.0 for a boxed answer."""
    from rewards import MethodPlan

    return MethodPlan([format_boxed])


def build_incorrect(ctx: Any) -> Any:
    """The `incorrect` control's plan: 1.0 for a boxed answer that is wrong."""
    from rewards import MethodPlan

    return MethodPlan([incorrect_answer])
