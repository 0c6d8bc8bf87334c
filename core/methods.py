"""The method registry: the ONE place a reward method plugs in.

A reward method is three things: its module (pure scoring and a `build(ctx) -> MethodPlan`, see
`rewards/__init__.py`), one `Method` entry in `METHODS` below with the pydantic model of its
settings defined next to it, and its `reward.<name>` block in params.yaml. Everything else is
derived from this table:

- params.yaml: the `reward` section must hold one block per entry, each validated by the entry's
  `config` model (a misspelt key fails at load, named: `reward.rlme.templat: unknown key`), and a
  variant may only be a run of a registered method (`core.params.Variant`);
- training: the builder and the reward `VERSION` (`rewards.build_plan`, `rewards.reward_version`),
  the roots of the method's code closure (`rewards.entry_modules`, which decides when its stages
  re-run), the metrics its training curves keep (`metric_prefixes`, `flows.train.curves`);
- evaluation: its extra evaluation of a trained policy and the self-evaluation probe's prompt
  (`flows.evaluate`, `flows.configure`).

The table lives in `core` because params.yaml is validated against it, and `core` imports nothing
above itself. Builders and evaluation hooks are `"module:function"` strings: reading the table
imports no torch, and each method's code closure starts at its own modules.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from pydantic import Field, create_model, field_validator

from core.params import (
    EVALUATOR_FIELDS,
    MethodBase,
    QuestionParams,
    RewardBlocks,
    Strict,
    check_placeholders,
)


class UnknownMethodError(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class Method:
    """One registry entry: where a method's code is and what the rest of the lab needs to know."""

    # The model of its `reward.<name>` block (a `MethodBase`: its task and GRPO overrides, plus
    # its own settings).
    config: type[MethodBase]
    # "module:function" building its `rewards.MethodPlan` from a `rewards.MethodContext`.
    builder: str
    # The module whose `VERSION` is the MLflow tag `reward_version` of its runs.
    version: str
    # Prefixes of the metrics its rewards or trainer log themselves (`rlme/`): the per-step
    # training curves keep them.
    metrics: tuple[str, ...] = ()
    # Its training reads the synthesized reference components (data/components): their digest is
    # part of its train config, so new components re-run its training.
    reads_components: bool = False
    # The self-evaluation probe of its runs asks with the method's own `template`, `questions` and
    # `end_marker` (what its reward asked) instead of `eval.self_eval`.
    self_eval_probe: bool = False
    # "module:function" of an extra evaluation of its trained policies, or None. Called by
    # `flows.evaluate` as `fn(model, tokenizer, cfg, params, *, prepared, benchmarks, seed, chat)`
    # -> dict of metrics; `cfg` (the run's resolved settings) is then part of its evaluate config.
    evaluate: str | None = None

    def train_modules(self) -> list[str]:
        """The modules its training imports by name (builder and VERSION module)."""
        return sorted({self.builder.partition(":")[0], self.version})

    def evaluate_modules(self) -> list[str]:
        """The module its extra evaluation imports by name, if it has one."""
        return [self.evaluate.partition(":")[0]] if self.evaluate else []


# --- the settings of each method (the `reward.<name>` blocks) ---------------------------------


class RlvrReward(MethodBase):
    pass


class RandomReward(MethodBase):
    seed: int


class EvaluatorParams(Strict):
    name: str
    # live | frozen | a local model directory
    source: str
    weight: float = 1.0


class RlmeReward(MethodBase):
    evaluators: list[EvaluatorParams] = Field(min_length=1)
    questions: list[QuestionParams] = Field(min_length=1)
    template: str
    # Appended to every target; null = the evaluator's EOS token.
    end_marker: str | None = None
    anchor_fraction: float = Field(ge=0, le=1)
    anchor_seed: int = 0
    anchor_template: str
    # Add rlvr as a second component (both standardised within the batch, then summed).
    hybrid_rlvr: bool = False

    @field_validator("template")
    @classmethod
    def _template(cls, v: str) -> str:
        return check_placeholders(v, EVALUATOR_FIELDS)

    @field_validator("anchor_template")
    @classmethod
    def _anchor_template(cls, v: str) -> str:
        return check_placeholders(v, ("gold",))


class RlvrrReward(MethodBase):
    # ordered (LCS) | direct (keyword presence, the paper's ablation)
    content_mode: Literal["ordered", "direct"]
    # Weight of content in mean(content, style); 1.0 = content only.
    content_weight: float = Field(ge=0, le=1)
    content_only: bool
    single_ref: bool
    cpu_seconds: float = Field(gt=0)


class DroReward(MethodBase):
    # r3 | avg_prob | avg_logprob (paper 003 Table 1 rows) | ref_logprob (arXiv 2602.03979: the
    # mean log-probability of the reference answer, rewards/ref_logprob.py)
    score: Literal["r3", "avg_prob", "avg_logprob", "ref_logprob"]
    emphasis: float = Field(ge=0)
    clip_low: float = Field(ge=0, le=1)
    clip_high: float = Field(ge=0, le=1)
    gate: bool
    min_rollouts: int = Field(ge=1)
    top_frac: float = Field(gt=0, le=1)
    min_rubric_frac: float = Field(ge=0, le=1)
    variance_filter: bool
    token_frac: float = Field(gt=0, le=1)
    filter_every: int = Field(ge=1)
    percentile: float = Field(ge=0, le=100)
    # Text that starts the final answer; the CoT is everything before its last occurrence.
    answer_marker: str
    # Static pre-filter (paper 003 §5.5): score every train prompt once with the initial policy,
    # keep the top k by h plus static_rest_frac of the rest; null = off (the dynamic filter).
    static_top_k: int | None = Field(default=None, ge=1)
    static_rest_frac: float = Field(default=0.1, ge=0, le=1)


class RlcerReward(MethodBase):
    # rlcer | no_evolve | rubric_only | random
    mode: Literal["rlcer", "no_evolve", "rubric_only", "random"]
    alpha: float
    # rule (the tiny world's vocabulary) | a local judge model directory
    verifier: str
    rubricator_template: str
    # Rubricator rollouts per question (each conditioned on a different reasoner CoT).
    rubricator_rollouts: int = Field(ge=1)
    max_rubric_tokens: int = Field(ge=8)
    seed: int = 0
    # Most rows in one transformers generate call of either role (the reasoner's rollouts, the
    # rubricator's); null = each role's whole generation batch in one call.
    rows_per_generate: int | None = Field(default=None, ge=1)

    @field_validator("rubricator_template")
    @classmethod
    def _rubricator_template(cls, v: str) -> str:
        return check_placeholders(v, ("problem", "solution"))


class RationaleReward(MethodBase):
    # outcome (genrm_outcome) | hybrid (AP x outcome) | ap_only (the hacking mode)
    mode: Literal["outcome", "hybrid", "ap_only"]
    # lexical | embedding | llm
    matcher: Literal["lexical", "embedding", "llm"]


class TtrlReward(MethodBase):
    # Completions of each group that vote (the first ones); null = the whole group (ours: the
    # paper votes over more samples than it trains on).
    vote_samples: int | None = Field(default=None, ge=1)


class EmpoReward(MethodBase):
    # EMPO (arXiv 2504.05812): the share of the group in the completion's answer cluster. No
    # setting of its own.
    pass


class SelfCertaintyReward(MethodBase):
    # Completions per teacher-forced pass; null = the whole generation batch in one pass.
    rows_per_pass: int | None = Field(default=None, ge=1)


class EntropyReward(MethodBase):
    # token (RENT, EM-RL token level: minus the mean token entropy) | trajectory (EM-RL: the mean
    # log-probability of the sampled tokens)
    level: Literal["token", "trajectory"]
    rows_per_pass: int | None = Field(default=None, ge=1)


class FormatReward(MethodBase):
    pass


class IncorrectReward(MethodBase):
    pass


# --- the registry ------------------------------------------------------------------------------

METHODS: dict[str, Method] = {
    "rlvr": Method(RlvrReward, builder="rewards.verifiable:build", version="rewards.verifiable"),
    "random": Method(RandomReward, builder="rewards.baselines:build", version="rewards.baselines"),
    "rlme": Method(RlmeReward, builder="rewards.meta_eval:build", version="rewards.meta_eval",
                   metrics=("rlme/", "hybrid/"), self_eval_probe=True),
    "rlvrr": Method(RlvrrReward, builder="rewards.rlvrr:build", version="rewards.rlvrr",
                    metrics=("rlvrr/",), reads_components=True),
    "dro": Method(DroReward, builder="models.dro_trainer:build", version="rewards.reflection",
                  metrics=("dro/",)),
    "rlcer": Method(RlcerReward, builder="models.rlcer_trainer:build",
                    version="rewards.evolving_rubrics", metrics=("rlcer/",),
                    evaluate="evals.rubric_hints:evaluate"),
    "rationale": Method(RationaleReward, builder="rewards.genrm:build", version="rewards.genrm",
                        metrics=("genrm/",)),
    # Label-free rewards beyond the five papers, and the spurious-reward controls
    # (docs/methods/README.md).
    "ttrl": Method(TtrlReward, builder="rewards.majority:build", version="rewards.majority",
                   metrics=("ttrl/",)),
    "empo": Method(EmpoReward, builder="rewards.majority:build_empo", version="rewards.majority",
                   metrics=("empo/",)),
    "self_certainty": Method(SelfCertaintyReward, builder="models.confidence_trainer:build_self_certainty",
                             version="rewards.confidence"),
    "entropy": Method(EntropyReward, builder="models.confidence_trainer:build_entropy",
                      version="rewards.confidence"),
    "format": Method(FormatReward, builder="rewards.baselines:build_format", version="rewards.baselines"),
    "incorrect": Method(IncorrectReward, builder="rewards.baselines:build_incorrect",
                        version="rewards.baselines"),
}


def method(name: str) -> Method:
    """The registry entry of a method (not a variant); UnknownMethodError lists the known ones."""
    if name not in METHODS:
        raise UnknownMethodError(f"unknown method {name!r}; known methods: {', '.join(sorted(METHODS))}")
    return METHODS[name]


def load_ref(ref: str) -> Any:
    """The object a `"module:function"` reference names, its module imported on demand."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def metric_prefixes() -> tuple[str, ...]:
    """Prefixes of every metric a registered method logs itself (`dro/`, `rlme/`, ...)."""
    return tuple(p for m in METHODS.values() for p in m.metrics)


def reward_model() -> type[RewardBlocks]:
    """The model of params.yaml's `reward` section: one required block per registered method."""
    return _reward_model(tuple((name, m.config) for name, m in METHODS.items()))


@lru_cache(maxsize=8)
def _reward_model(blocks: tuple[tuple[str, type[MethodBase]], ...]) -> type[RewardBlocks]:
    fields: dict[str, Any] = {name: (config, ...) for name, config in blocks}
    return create_model("Reward", __base__=RewardBlocks, __module__=__name__, **fields)


def __getattr__(name: str) -> Any:
    # `core.methods.Reward` is the model built from the registry: how pickle finds the class of a
    # loaded `params.reward`.
    if name == "Reward":
        return reward_model()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
