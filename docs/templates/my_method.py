"""`my_method`: a boxed-answer format reward, the template of a new reward method.

Copy this file to `rewards/<your_method>.py`, rename `my_method` everywhere, replace the scoring
function with your reward, and follow the checklist in docs/adding_a_method.md (registry entry,
params block, `methods:`, claims, golden fixture, docs page). `tests/test_method_template.py`
registers this very file the way a real method is registered and trains nothing: it checks that
params validation, the plan, the reward version and the run configs pick it up.

The reward (ours, an example only): `weight` if the completion boxes an answer, else 0. It needs
no label, and a policy can satisfy it without solving anything: exactly the kind of reward the
lab exists to test against `rlvr`.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from core.params import MethodBase

# Bump when the reward's meaning changes: it is the MLflow tag `reward_version` of every run, and
# part of the code digest that decides when the method's stages re-run.
VERSION = "1"


class MyMethodReward(MethodBase):
    """The settings of `reward.my_method` in params.yaml (their validation model).

    In the lab this class lives in core/methods.py, next to the method's `Method` entry (params
    are validated against the registry before any method module is imported). `task` and `grpo`
    (the task it trains on, its GRPO overrides) come from `MethodBase`.
    """

    # Reward of a completion that boxes an answer (ours).
    weight: float = Field(default=1.0, ge=0)


def boxed_format_scores(completions: list[str], weight: float) -> list[float]:
    """The pure scoring function: `weight` for each completion with a `\\boxed{...}` answer.

    >>> boxed_format_scores(["2 + 2 = 4, so \\\\boxed{4}", "the answer is 4", "\\\\boxed{}"], 0.5)
    [0.5, 0.0, 0.0]
    """
    from rewards.verifiable import extract_boxed

    return [weight if extract_boxed(c) else 0.0 for c in completions]


def build(ctx: Any) -> Any:
    """The method's plan for TRL's GRPOTrainer (`rewards.MethodPlan`): its reward functions, and
    optionally loggers, a trainer subclass or a row filter (rewards/__init__.py)."""
    from rewards import MethodPlan
    from rewards.verifiable import completion_text

    weight = ctx.cfg.weight

    def my_method_reward(prompts, completions, **kwargs) -> list[float]:
        return boxed_format_scores([completion_text(c) for c in completions], weight)

    return MethodPlan(reward_funcs=[my_method_reward])
