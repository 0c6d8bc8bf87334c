"""The lab's rewards for your own TRL script: pass them to ``trl.GRPOTrainer(reward_funcs=[...])``.

docs/use_in_your_trainer.md shows it end to end on any causal LM. Every reward family of the lab
is here, in one of three kinds (:data:`FAMILIES` says which, and what each reads):

- **plain TRL reward callables**, TRL's contract (``f(prompts, completions, **columns) ->
  list[float | None]``, ``__name__`` set, so TRL logs ``rewards/<__name__>/mean``):
  :func:`rlvr_correct`, :func:`format_boxed`, :func:`incorrect_answer`, and what
  :func:`random_uniform`, :func:`ttrl`, :func:`rlvrr` and :func:`rationale` return;
- **callables that read the model being trained** (:func:`self_certainty`, :func:`entropy`,
  :func:`rlme`): build the trainer, then :func:`attach` hands it to them (and to a
  :class:`CollapseCallback`), as the lab's own training does (``models.grpo.train``);
- **methods that change the GRPO step itself** (DRO's rubric gates and variance filter, RLCER's
  two roles): :func:`dro` and :func:`rlcer` return a :class:`rewards.MethodPlan` whose
  ``trainer_cls`` (``DroGRPOTrainer``, ``RlcerGRPOTrainer``, subclasses of ``GRPOTrainer``) the
  script builds in place of ``GRPOTrainer``, with the plan's ``reward_funcs`` and
  ``trainer_kwargs``.

Nothing here scores: each factory builds the lab's own objects through the method's registered
builder (``rewards.build_plan``, the code the lab's runs train with; RLVRR's from its files
directly, its builder wants the lab's folder layout), with the settings validated by the
registry's model (``core.methods``), so a misspelt setting fails at once, named. The defaults are
params.yaml's ``reward.<method>`` values (:data:`DEFAULTS`; tests/test_trl_library.py holds them
equal, since an installed package has no params.yaml). Importing this module imports no torch; the
classes and the model-reading rewards import it when first used.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pydantic import ValidationError

from core.methods import method
from core.params import ParamsError, _format
from rewards import MethodContext, MethodPlan, build_plan
from rewards.baselines import format_boxed, incorrect_answer
from rewards.verifiable import rlvr_correct

# With the classes of `_LAZY` below.
__all__ = ["DEFAULTS", "FAMILIES", "Family", "MethodPlan", "attach", "dro", "entropy",
           "format_boxed", "incorrect_answer", "random_uniform", "rationale", "rlcer", "rlme",
           "rlvr_correct", "rlvrr", "self_certainty", "settings", "ttrl", "empo"]

# params.yaml's `reward.<method>` blocks without their `task` and `grpo` (the lab's run settings):
# the defaults of record.
DEFAULTS: dict[str, dict[str, Any]] = {
    "random": {"seed": 0},
    "ttrl": {"vote_samples": None},
    "empo": {},
    "self_certainty": {"rows_per_pass": None},
    "entropy": {"level": "token", "rows_per_pass": None},
    "rlvrr": {"content_mode": "ordered", "content_weight": 0.5, "content_only": False,
              "single_ref": False, "cpu_seconds": 0.2},
    "rlme": {"evaluators": [{"name": "live", "source": "live", "weight": 1.0}],
             "questions": [{"text": "Is the answer correct?", "target": "YES", "weight": 1.0}],
             "template": "{problem}{solution}\nLength: {length} characters.\n{anchor}"
                         "Question: {question}\nAnswer:",
             "end_marker": None, "anchor_fraction": 0.0, "anchor_seed": 0,
             "anchor_template": "The correct answer is {gold}.\n", "hybrid_rlvr": False},
    "dro": {"score": "r3", "emphasis": 10.0, "clip_low": 0.1, "clip_high": 0.9, "gate": True,
            "min_rollouts": 1, "top_frac": 0.25, "min_rubric_frac": 0.5, "variance_filter": True,
            "token_frac": 0.1, "filter_every": 8, "percentile": 20, "answer_marker": "The answer is",
            "static_top_k": None, "static_rest_frac": 0.1},
    "rlcer": {"mode": "rlcer", "alpha": 0.2, "verifier": "rule",
              "rubricator_template": "{problem}{solution}\nRubrics:", "rubricator_rollouts": 2,
              "max_rubric_tokens": 96, "seed": 0, "rows_per_generate": None},
    "rationale": {"mode": "hybrid", "matcher": "lexical"},
}


@dataclass(frozen=True)
class Family:
    """One reward family as a TRL script uses it (the table of docs/use_in_your_trainer.md)."""

    method: str   # the registry's name (core.methods.METHODS)
    api: str      # how a script gets it from this module
    kind: str     # "callable", "callable + attach(trainer)" or "trainer class"
    model: str    # the model it reads, "" for none


FAMILIES: tuple[Family, ...] = (
    Family("rlvr", "`rlvr_correct`", "callable", ""),
    Family("format", "`format_boxed`", "callable", ""),
    Family("incorrect", "`incorrect_answer`", "callable", ""),
    Family("random", "`random_uniform(seed)`", "callable", ""),
    Family("ttrl", "`ttrl(num_generations)`", "callable", ""),
    Family("empo", "`empo(num_generations)`", "callable", ""),
    Family("self_certainty", "`self_certainty(tokenizer)`", "callable + attach(trainer)",
           "the policy (one no-grad pass)"),
    Family("entropy", "`entropy(tokenizer)`", "callable + attach(trainer)",
           "the policy (one no-grad pass)"),
    Family("rlvrr", "`rlvrr(components)`", "callable", ""),
    Family("rlme", "`rlme(tokenizer)`", "callable + attach(trainer)",
           "the policy as its evaluator (or a frozen copy, a local model)"),
    Family("dro", "`dro(args)`", "trainer class `DroGRPOTrainer`",
           "the policy (one no-grad pass)"),
    Family("rlcer", "`rlcer(args)`", "trainer class `RlcerGRPOTrainer`",
           "the policy as its rubricator (and a judge model, or the rule verifier)"),
    Family("rationale", "`rationale(mode)`", "callable", ""),
)

# The classes imported on first use, by name (`__getattr__`): `from rewards.api import
# CollapseCallback` works as usual, and this module loads no torch or TRL. Named as strings, as the
# method registry names its builders: they live a layer up, in models/ (tests/test_layers.py).
_LAZY = {"CollapseCallback": "models.collapse_callback", "DroGRPOTrainer": "models.dro_trainer",
         "RlcerGRPOTrainer": "models.rlcer_trainer"}
__all__ += list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def settings(name: str, **overrides: Any) -> Any:
    """The method's settings (:data:`DEFAULTS` with ``overrides``), validated by its registry
    model: a wrong key or value raises ``ParamsError`` naming it.

    >>> settings("ttrl", vote_samples=4).vote_samples
    4
    >>> settings("random", sed=1)
    Traceback (most recent call last):
    ...
    core.params.ParamsError: rewards.api.random: sed: unknown key (its settings: seed)
    """
    entry = method(name)  # an unknown name lists the known ones
    try:
        return entry.config.model_validate({**DEFAULTS.get(name, {}), **overrides})
    except ValidationError as e:
        known = ", ".join(sorted(DEFAULTS.get(name, {}))) or "none"
        raise ParamsError(f"{_format(e, f'rewards.api.{name}')} (its settings: {known})") from None


def _plan(name: str, *, args: Any = None, task: str | None = None, num_generations: int | None = None,
          tokenizer: Any = None, model: Any = None, **overrides: Any) -> MethodPlan:
    """The method's plan from its registered builder, for a script's ``GRPOConfig`` ``args``
    (None where the method reads none of it)."""
    cfg = settings(name, **overrides)
    # What the builders read of the lab's `grpo` section, from the script's GRPOConfig.
    grpo = SimpleNamespace(
        task=task or cfg.task or "arith",
        num_generations=num_generations or getattr(args, "num_generations", None),
        loss_type=getattr(args, "loss_type", "dapo"),
        max_completion_length=getattr(args, "max_completion_length", None),
        temperature=getattr(args, "temperature", 1.0),
        score_batch_size=None)
    return build_plan(MethodContext(name=name, family=name, cfg=cfg, grpo=grpo,
                                    seed=getattr(args, "seed", 0), policy=model, tokenizer=tokenizer))


# --- plain callables ----------------------------------------------------------------------------

def random_uniform(seed: int = 0) -> Any:
    """``random_uniform``: i.i.d. Uniform(0, 1) rewards, a seeded stream (the control with no
    signal; docs/methods/random.md)."""
    return _plan("random", seed=seed).reward_funcs[0]


def ttrl(num_generations: int, *, vote_samples: int | None = None) -> Any:
    """``ttrl_majority``: TTRL's majority vote within each group (docs/methods/ttrl.md). Reads no
    label; ``num_generations`` must be the trainer's (``args.num_generations``): TRL lays a batch
    out as consecutive groups of that many completions. With an ``answer`` column it logs
    ``ttrl/label_accuracy`` (how often the vote is right; the reward never reads it)."""
    return _plan("ttrl", num_generations=num_generations, vote_samples=vote_samples).reward_funcs[0]


def empo(num_generations: int) -> Any:
    """``empo_cluster_share``: EMPO's semantic-cluster share within each group
    (docs/methods/empo.md): a completion's reward is the share of its group whose answer matches
    its own, 0.0 without an answer. Reads no label; ``num_generations`` must be the trainer's."""
    return _plan("empo", num_generations=num_generations).reward_funcs[0]


def rlvrr(components: str | Path | Iterable[str | Path], *, tokenizer: Any = None,
          **overrides: Any) -> Any:
    """``rlvrr_chain``: RLVRR's reference reward chain (docs/methods/rlvrr.md) against the
    components JSONL file(s) (schema: synthesis/README.md), found by each row's ``prompt_id``
    column; a row without components gets None. Settings: ``reward.rlvrr``'s (content_mode,
    content_weight, content_only, single_ref, cpu_seconds)."""
    from rewards.rlvrr import RlvrrReward

    cfg = settings("rlvrr", **overrides)
    return RlvrrReward(components, tokenizer=tokenizer, mode=cfg.content_mode,
                       **cfg.model_dump(include={"single_ref", "content_only", "content_weight",
                                                 "cpu_seconds"}))


def rationale(mode: str = "hybrid", matcher: str = "lexical") -> Any:
    """``rationale_<mode>``: the GenRM reward of paper 001 (docs/methods/rationale.md), for a
    policy that judges preference pairs; reads the ``label`` and ``checklist`` columns."""
    return _plan("rationale", mode=mode, matcher=matcher).reward_funcs[0]


# --- callables that read the model being trained -------------------------------------------------

def self_certainty(tokenizer: Any, *, rows_per_pass: int | None = None) -> Any:
    """``self_certainty``: Intuitor's reward, the policy's mean KL(uniform ‖ p_t) over each
    completion (docs/methods/self_certainty.md). Call :func:`attach` once the trainer is built."""
    return _plan("self_certainty", tokenizer=tokenizer, rows_per_pass=rows_per_pass).reward_funcs[0]


def entropy(tokenizer: Any, *, level: str = "token", rows_per_pass: int | None = None) -> Any:
    """``entropy_neg_token`` (``level="token"``: minus the mean token entropy, RENT) or
    ``entropy_logprob`` (``"trajectory"``: the mean log-probability of the sampled tokens, EM-RL);
    docs/methods/entropy.md. Call :func:`attach` once the trainer is built."""
    return _plan("entropy", tokenizer=tokenizer, level=level, rows_per_pass=rows_per_pass).reward_funcs[0]


def rlme(tokenizer: Any, *, model: Any = None, **overrides: Any) -> Any:
    """``rlme_meta``: RLME's meta-evaluation reward, log P("YES" | evaluator prompt) with the
    policy as its evaluator (docs/methods/rlme.md); ``hybrid_rlvr=True`` gives the hybrid with
    ``rlvr_correct``. Settings: ``reward.rlme``'s (evaluators, questions, template, ...); a
    ``frozen`` evaluator snapshots ``model`` now. Call :func:`attach` once the trainer is built."""
    return _plan("rlme", tokenizer=tokenizer, model=model, **overrides).reward_funcs[0]


def attach(trainer: Any) -> Any:
    """Hand ``trainer`` to its reward functions and callbacks that read it (those with a
    ``trainer`` attribute: the model-reading rewards, :class:`CollapseCallback`), as the lab's
    own training does after building its trainer; returns the trainer."""
    for obj in [*trainer.reward_funcs, *trainer.callback_handler.callbacks]:
        if hasattr(obj, "trainer"):
            obj.trainer = trainer
    return trainer


# --- methods with a trainer class ----------------------------------------------------------------

def dro(args: Any, *, task: str = "arith", tokenizer: Any = None, model: Any = None,
        **overrides: Any) -> MethodPlan:
    """DRO (paper 003, docs/methods/dro.md): R3 from the policy's probability of each row's
    ``reference`` answer after its own CoT, rubric gates and the variance filter. The plan's
    ``trainer_cls`` is ``DroGRPOTrainer`` and its ``trainer_kwargs`` the settings; ``args`` is
    the script's ``GRPOConfig`` (the gates need a token-normalised ``loss_type``: dapo, the
    default, cispo or bnpo). ``task``: ``arith`` (a ``reference`` solution whose answer follows
    ``answer_marker``) or ``facts``. ``static_top_k`` needs ``model`` and ``tokenizer`` (the
    plan's ``select_rows`` then picks the training rows)."""
    return _plan("dro", args=args, task=task, tokenizer=tokenizer, model=model, **overrides)


def rlcer(args: Any, *, model: Any = None, **overrides: Any) -> MethodPlan:
    """RLCER (paper 004, docs/methods/rlcer.md): the policy also writes rubrics for its own CoTs;
    both roles train in one GRPO step. The plan's ``trainer_cls`` is ``RlcerGRPOTrainer``; reads
    the gold ``answer`` column. ``verifier``: ``rule`` (the tiny world's) or a local judge model
    folder, placed on ``model``'s device. Needs ``args.use_vllm`` off. Its draws are seeded by
    ``seed`` (``reward.rlcer.seed``) and ``args.seed``."""
    return _plan("rlcer", args=args, model=model, **overrides)
