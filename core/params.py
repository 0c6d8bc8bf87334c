"""The pydantic mirror of `params.yaml`: the single configuration, validated at start.

Every model forbids unknown keys, so a misspelt key fails before any work with a message naming
it (`world.arith.sloppy_fracc: unknown key`). A `preset` names an entry of `presets` whose nested
overrides are merged over the file before validation; CI uses the `ci` preset to stay small.
"""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationError,
    field_validator,
    model_validator,
)

ROOT = Path(__file__).resolve().parent.parent
PARAMS_FILE = ROOT / "params.yaml"


class ParamsError(ValueError):
    """params.yaml (or an override) is invalid; the message names the key."""


def template_fields(template: str) -> list[str]:
    """The `{placeholder}` names of a str.format template, in order; ValueError if malformed.

    >>> template_fields("{problem}{solution}\\nQuestion: {question}")
    ['problem', 'solution', 'question']
    """
    import string

    names: list[str] = []
    for _, name, _, _ in string.Formatter().parse(template):
        if name is None:
            continue
        root = name.split(".")[0].split("[")[0]
        if not root:
            raise ValueError(f"positional placeholder '{{{name}}}'; name every placeholder")
        if root not in names:
            names.append(root)
    return names


def check_placeholders(template: str, allowed: tuple[str, ...]) -> str:
    """`template` if it uses only `allowed` placeholders (literal braces are written {{ }})."""
    try:
        fields = template_fields(template)
    except ValueError as e:
        raise ValueError(f"not a valid template ({e}); write literal braces as {{{{ }}}}") from None
    unknown = [f for f in fields if f not in allowed]
    if unknown:
        raise ValueError(f"unknown placeholder {', '.join('{' + u + '}' for u in unknown)}; "
                         f"allowed: {', '.join('{' + a + '}' for a in allowed)}")
    return template


# The placeholders an evaluator prompt may use (rewards/evaluator_prompt.py fills them; `length`
# is the one measured quantity the reward and the probe provide).
EVALUATOR_FIELDS = ("problem", "solution", "answer", "question", "anchor", "length")


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
    # Fraction of train demonstrations that are a keyword dump instead (world/facts.py,
    # `keyword_dump`): the facts as bare words in a random order, each said `dump_repeats`
    # times. 0 = none.
    dump_frac: float = Field(default=0.0, ge=0, le=1)
    dump_repeats: int = Field(default=2, ge=1)
    # Fewest attributes of an entity (of the four; world/facts.py `make_entity`): longer tables.
    min_keys: int = Field(default=2, ge=1, le=4)
    # Values per attribute, said as one ordered list: key points of several ordered keywords.
    values_per_fact: int = Field(default=1, ge=1, le=8)


class PairsWorld(Strict):
    n_train: int = Field(ge=1)
    n_val: int = Field(ge=1)
    n_test: int = Field(ge=1)


class CounterfactualWorld(Strict):
    n_train: int = Field(ge=1)
    n_test: int = Field(ge=1)
    # Val rows (a wrong hint, as test): the held-out curve of a run that trains on arith_cf.
    # 0 = no val file (the world of record).
    n_val: int = Field(default=0, ge=0)
    # Fraction of train demonstrations that copy the hint (world/arith.py, `hint_copy`). 0 = none.
    copy_frac: float = Field(default=0.0, ge=0, le=1)


class ArithRefWorld(Strict):
    """`arith_ref` (world/arith_ref.py): off, with no rows and no files, unless its sizes are set."""

    n_train: int = Field(default=0, ge=0)
    n_val: int = Field(default=0, ge=0)
    n_test: int = Field(default=0, ge=0)
    # Written between the chain of thought and the reference answer (`reward.dro.answer_marker`).
    separator: str = Field(default="</think>", min_length=1)
    # Fraction of train demonstrations whose chain slips once and carries the slip to the answer.
    slip_frac: float = Field(default=0.3, ge=0, le=1)

    @model_validator(mode="after")
    def _all_splits_or_none(self) -> ArithRefWorld:
        sizes = (self.n_train, self.n_val, self.n_test)
        if any(sizes) and not all(sizes):
            raise ValueError("n_train, n_val and n_test are all 0 (off) or all positive")
        return self

    @property
    def enabled(self) -> bool:
        return self.n_train > 0


SolutionKind = Literal["correct", "sloppy", "slip", "cut", "chain_break", "wrong_operand",
                      "wrong_start", "missing_step"]


def _default_kinds() -> dict[SolutionKind, float]:
    return {"correct": 45, "sloppy": 25, "slip": 20, "cut": 10}


class EvaluatorWorld(Strict):
    per_problem: int = Field(default=1, ge=1)
    kinds: dict[SolutionKind, float] = Field(default_factory=_default_kinds)
    # The wording of the reasoning-process meta-question the evaluator rows ask (world/roles.py;
    # YES iff the solution's chain is sound). The default is the world of record's.
    process_question: str = Field(default="Is every step of the reasoning shown and correct?",
                                  min_length=1)

    @field_validator("kinds")
    @classmethod
    def _positive(cls, v: dict[str, float]) -> dict[str, float]:
        if not v or any(w < 0 for w in v.values()) or sum(v.values()) <= 0:
            raise ValueError("kinds needs non-negative weights with a positive sum")
        return v


class World(Strict):
    seed: int
    arith: ArithWorld
    facts: FactsWorld
    pairs: PairsWorld
    counterfactual: CounterfactualWorld
    evaluator: EvaluatorWorld = Field(default_factory=lambda: EvaluatorWorld())
    arith_ref: ArithRefWorld = Field(default_factory=lambda: ArithRefWorld())


class ExternalData(Strict):
    # gsm8k (`question`, `answer` ending "#### N") | math (`problem`, `solution` with \boxed{}):
    # world/external.py reads either into the `arith` family's schema.
    format: Literal["gsm8k", "math"]
    train: str
    test: str
    val_frac: float = Field(ge=0, lt=1)


class Data(Strict):
    source: Literal["tiny", "external"]
    external: ExternalData


class LlmSettings(Strict):
    """How the `llm` backend reaches a model: a local checkpoint in process, or an HTTP endpoint."""

    # A local transformers causal-LM folder run in process; null = use the HTTP endpoint.
    model_path: str | None = None
    # Environment variable holding the OpenAI-compatible base URL (e.g. http://127.0.0.1:8000/v1).
    endpoint_env: str = "SYNTHESIS_LLM_URL"
    # Environment variable holding an API key sent as a bearer token (unset = no header).
    api_key_env: str = "SYNTHESIS_LLM_API_KEY"
    # Model name sent in each request (vLLM: the served model name).
    model: str = "default"
    # `completions` (/v1/completions) or `chat` (/v1/chat/completions).
    api: Literal["completions", "chat"] = "chat"
    # Seconds one HTTP request may take.
    timeout_s: float = Field(60.0, gt=0)
    # Extra attempts after a transient failure (connection refused, 5xx, 429, timeout).
    max_retries: int = Field(4, ge=0)
    # First back-off in seconds; doubles after every failed attempt.
    backoff_s: float = Field(1.0, ge=0)
    # Sampling temperature (0 = greedy).
    temperature: float = Field(0.0, ge=0)
    # Most tokens generated per request.
    max_tokens: int = Field(1024, ge=1)
    # Requests in flight at once against the endpoint (the in-process model always runs one).
    concurrency: int = Field(4, ge=1)


class SynthesizeConfig(Strict):
    """The `synthesize` stage: RLVRR components per prompt, validated."""

    # rule (offline, deterministic: TF-IDF keywords + style templates) | llm (paper 002's recipe).
    backend: Literal["rule", "llm"] = "rule"
    # Paper 002 filter: drop an example whose own references score below this on BOTH content
    # and style (content of each reference against the others; style of the references).
    threshold: float = Field(0.7, ge=0, le=1)
    # Most keywords kept per key point (each a phrase of at most 3 words found in the references).
    max_keywords: int = Field(3, ge=1)
    # Most key points kept per prompt.
    max_key_points: int = Field(12, ge=1)
    # CPU seconds per style-check call in the validation trial run (the sandbox's limit).
    check_cpu_seconds: float = Field(0.2, gt=0)
    # Settings of the llm backend (ignored by rule).
    llm: LlmSettings = LlmSettings()

    @model_validator(mode="after")
    def _llm_needs_a_model(self) -> SynthesizeConfig:
        if self.backend == "llm" and not self.llm.model_path and not self.llm.endpoint_env:
            raise ValueError("backend 'llm' needs llm.model_path or llm.endpoint_env")
        return self


class Arch(Strict):
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    max_positions: int


SftFamily = Literal["arith", "facts", "genrm", "evaluator", "rubricator", "judge", "arith_cf",
                    "arith_ref", "arith_plain", "arith_leak"]


def _off(value: float) -> bool:
    """SFT label smoothing ε (models/tiny.py `_nll`: the `calibrated` base's knob,
    docs/premises.md) is left out of every dump at its default 0 (`exclude_if`), so the build
    settings of a base built before the knob existed (data/runs/base/build.json, phase 1's stamp)
    keep their bytes and that base stays current."""
    return value == 0.0


class SftRoles(Strict):
    steps: int = Field(ge=0)
    learning_rate: float = Field(gt=0)
    warmup_steps: int = Field(ge=0)
    mix: dict[SftFamily, float]
    loss_norm: Literal["token", "example"] = "token"
    label_smoothing: float = Field(default=0.0, ge=0.0, lt=1.0, exclude_if=_off)


class SftJudge(Strict):
    steps: int = Field(ge=1)
    learning_rate: float = Field(gt=0)
    warmup_steps: int = Field(ge=0)
    seed: int = 0
    loss_norm: Literal["token", "example"] = "example"


class SFT(Strict):
    steps: int = Field(ge=1)
    batch_size: int = Field(ge=1)
    learning_rate: float = Field(gt=0)
    warmup_steps: int = Field(ge=0)
    mix: dict[SftFamily, float]
    # Loss computed by length groups within each batch (models/tiny.py, `grouped_loss`): the
    # same batches and loss without the work on padding. Applies to every SFT phase.
    length_groups: bool = True
    # Phase 1's label smoothing; phase 2 has its own (`roles.label_smoothing`).
    label_smoothing: float = Field(default=0.0, ge=0.0, lt=1.0, exclude_if=_off)
    roles: SftRoles | None = None


class ChatParams(Strict):
    """How prompts meet a chat template (rewards/chat.py): auto = on iff the tokenizer has one."""

    use_template: Literal["auto", "on", "off"] = "auto"
    # Passed to the template (Qwen3 reads it); null = the template's own default.
    enable_thinking: bool | None = None
    # A system message before every policy prompt (only with a template); null = none.
    system: str | None = None


class BaseModelParams(Strict):
    path: str | None
    # auto: CUDA where torch sees it, else the CPU | cuda: a GPU preset's, which refuses to run
    # on the CPU (core/devices.py, `training_device`): one line, not a silent CPU training.
    device: Literal["auto", "cuda"] = "auto"
    vocab_size: int = Field(ge=300)
    arch: Arch
    sft: SFT
    judge: SftJudge | None = None
    chat: ChatParams = Field(default_factory=lambda: ChatParams())


class GRPO(Strict):
    task: Literal["arith", "facts", "pairs", "arith_ref", "arith_cf"]
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
    # GPU settings (docs/gpu.md); the defaults are the CPU run's.
    vllm_mode: Literal["colocate", "server"] = "colocate"
    vllm_gpu_memory_utilization: float = Field(default=0.3, gt=0, le=1)
    # Server mode: where the vLLM server listens (scripts/vllm_server.sh starts it), the port of
    # the weight-sync group the trainer opens with it, and how long the trainer waits for it.
    vllm_server_host: str = "127.0.0.1"
    vllm_server_port: int = Field(default=8000, ge=1, le=65535)
    vllm_group_port: int = Field(default=51216, ge=1, le=65535)
    vllm_server_timeout_s: float = Field(default=240.0, gt=0)
    gradient_accumulation_steps: int = Field(default=1, ge=1)
    # Micro-batches whose completions one rollout call generates (TRL's steps_per_generation):
    # null = all of an optimiser step's (TRL's default). Smaller bounds the rollout batch where
    # generation runs without vLLM (docs/gpu.md, section 1); it must divide
    # gradient_accumulation_steps, so every rollout still comes from the step's policy.
    steps_per_generation: int | None = Field(default=None, ge=1)
    gradient_checkpointing: bool = False
    warmup_steps: int = Field(default=0, ge=0)
    weight_decay: float = Field(default=0.0, ge=0)
    top_p: float = Field(default=1.0, gt=0, le=1)
    # This method's thinking with a chat template (a method's grpo override); null = base_model.chat's.
    enable_thinking: bool | None = None
    # Processes of one training (`accelerate launch`, flows.train relaunches itself) and the
    # accelerate config file of that launch (null = by device; docs/multiprocess.md).
    num_processes: int = Field(default=1, ge=1)
    accelerate_config: str | None = None
    # Most rows in one forward pass of a model that scores completions during training (RLME's
    # evaluators, RLCER's judge): bounds its activation memory on a GPU (docs/gpu.md).
    score_batch_size: int = Field(default=64, ge=1)
    # Seconds a collective may wait before the process group gives up (torch.distributed's
    # timeout, NCCL's watchdog): the process group `core.ranks.init` creates and TRL's
    # `ddp_timeout` both get it. The other ranks wait this long while rank 0 alone runs the
    # held-out evaluation (models/callbacks.py).
    ddp_timeout_s: int = Field(default=7200, ge=1)


TaskName = Literal["arith", "facts", "pairs", "arith_ref", "arith_cf"]


class MethodBase(Strict):
    """Settings every method has: the task it trains on and its GRPO overrides."""

    # Task the method trains on (null = grpo.task).
    task: TaskName | None = None
    # Partial `grpo` section merged over the shared one for this method (e.g. RLME's CISPO).
    grpo: dict = Field(default_factory=dict)


class QuestionParams(Strict):
    text: str
    target: str = "YES"
    weight: float = 1.0


class RewardBlocks(Strict):
    """The `reward` section: one block per registered method, named by the method, validated by
    its registry entry's `config` model. The concrete model is built from the registry
    (`core.methods.reward_model`), so a new method adds no field here."""


class Variant(Strict):
    """A named run of a method with overrides (`rlme_frozen`, `r3_gate`, ...)."""

    # A registered method (`core.methods.METHODS`).
    method: str
    # Partial `reward.<method>` section merged over the method's settings.
    reward: dict = Field(default_factory=dict)

    @field_validator("method")
    @classmethod
    def _registered(cls, v: str) -> str:
        from core.methods import METHODS

        if v not in METHODS:
            raise ValueError(f"unknown method {v!r}; known methods: {', '.join(sorted(METHODS))}")
        return v


@dataclass(frozen=True)
class ResolvedMethod:
    """A method or variant resolved once (`Params.resolve`): what a run of it trains with."""

    name: str         # method or variant name (run name, MLflow tag)
    family: str       # the registered method it is a run of
    cfg: MethodBase   # its `reward.<family>` block, the variant's overrides merged
    grpo: GRPO        # `grpo` with the method's task and overrides merged


class Collapse(Strict):
    min_drop: float = Field(gt=0)
    reward_tol: float = Field(ge=0)
    patience: int = Field(ge=1)
    entropy_floor: float = Field(ge=0)
    min_length_frac: float = Field(ge=0, le=1)
    max_clipped: float = Field(gt=0, le=1)
    early_stop: bool


class SelfEvalProbe(Strict):
    """The self-evaluation probe (evals/self_eval.py): the shape of RLME's prompt settings."""

    template: str
    questions: list[QuestionParams] = Field(min_length=1)
    end_marker: str | None = None

    @field_validator("template")
    @classmethod
    def _template(cls, v: str) -> str:
        return check_placeholders(v, EVALUATOR_FIELDS)


# The benchmarks `eval.benchmarks` may name; `evals.registry.BENCHMARKS` holds their rows and
# scorers under the same names (tests/test_layers.py keeps the two equal). A tiny-world benchmark
# reads data/prepared; an external one reads the local file named after a colon.
TINY_BENCHMARKS = ("arith", "arith_cf", "facts", "pairs", "arith_ref")
EXTERNAL_BENCHMARKS = ("gsm8k", "math", "ifeval", "helpsteer3")


def split_benchmark_spec(spec: str) -> tuple[str, Path | None]:
    """`"arith"` -> ("arith", None); `"gsm8k:data/x.jsonl"` -> ("gsm8k", Path("data/x.jsonl")).

    KeyError, naming what is known, for an unknown benchmark, an external one without a file or
    a tiny-world one with a file.

    >>> split_benchmark_spec("gsm8k:data/x.jsonl")
    ('gsm8k', PosixPath('data/x.jsonl'))
    """
    name, sep, path = spec.partition(":")
    if name not in TINY_BENCHMARKS + EXTERNAL_BENCHMARKS:
        raise KeyError(f"unknown benchmark {name!r}; known: {sorted(TINY_BENCHMARKS + EXTERNAL_BENCHMARKS)}")
    if name in EXTERNAL_BENCHMARKS and not path.strip():
        raise KeyError(f"benchmark {name!r} reads a local file: name it as "
                       f"'{name}:<path to .jsonl or .parquet>'")
    if name in TINY_BENCHMARKS and sep:
        raise KeyError(f"benchmark {name!r} reads data/prepared and takes no path; got {spec!r}")
    return name, Path(path.strip()) if sep else None


class Eval(Strict):
    # "arith" | "arith_cf" | "facts" | "pairs" | "arith_ref", or
    # "<gsm8k|math|ifeval|helpsteer3>:<local file>"
    benchmarks: list[str] = Field(min_length=1)

    @field_validator("benchmarks")
    @classmethod
    def _known_benchmarks(cls, v: list[str]) -> list[str]:
        for spec in v:
            try:
                split_benchmark_spec(spec)
            except KeyError as e:
                raise ValueError(e.args[0]) from None
        return v
    n_test: int = Field(ge=1)
    k: int = Field(ge=1)
    # maj@k on the test split of answer benchmarks (evals.suite); null = off.
    maj_k: int | None = Field(default=None, ge=1)
    temperature: float = Field(gt=0)
    max_new_tokens: int = Field(ge=1)
    batch_size: int = Field(ge=1)
    heldout_k: int = Field(ge=1)
    # Prompts per held-out evaluation during training (val, and test for the collapse label);
    # null = n_test. Bounds the time rank 0 samples alone while the other ranks wait.
    heldout_n: int | None = Field(default=None, ge=1)
    # Who samples the evaluate stage: vllm (an engine built from the checkpoint,
    # models/vllm_engine.py) | lab (models/generation.py: the lab's loop where it runs the model,
    # else transformers' generate). vllm falls back to lab, saying why, where vLLM cannot run.
    sampler: Literal["vllm", "lab"] = "lab"
    self_eval: SelfEvalProbe


class QuickRun(Strict):
    """`make run` (`python -m flows.pipeline --quick`): a first look, not the study."""

    methods: list[str] = Field(min_length=1)
    seeds: list[int] = Field(min_length=1)


class Pipeline(Strict):
    """How the pipeline flow schedules the DAG (flows/pipeline.py); read by no stage."""

    # Stages running at once (local executor) or flow runs submitted at once (pool executor).
    max_parallel: int = Field(ge=1)
    # CPU threads per stage (OMP/MKL/torch); null = the machine's cores / max_parallel.
    threads_per_stage: int | None = Field(default=None, ge=1)
    # local: stages run in this workspace | pool: each stage is a flow run on a work-pool worker.
    executor: Literal["local", "pool"]
    # Deployment the pool executor submits stages to (flow name/deployment name).
    stage_deployment: str
    # Extra attempts of a failed stage (the pool executor's retry may land on another worker).
    retries: int = Field(ge=0)
    # A stage still running after this many seconds is killed (and retried).
    stage_timeout_s: int = Field(ge=1)
    # GPU ids the local executor may give stages (null = every GPU this machine shows; none on a
    # CPU machine, where only max_parallel and the cores schedule). A train stage takes
    # grpo.num_processes of them, an evaluate stage one (flows/pipeline.py, GpuPool).
    gpus: list[int] | None = None
    # Stages that may share one GPU at once (1: one training or evaluation per GPU).
    stages_per_gpu: int = Field(default=1, ge=1)
    # Memory of each GPU the stages run on, in GiB as torch reports it (an H100 80GB: 79.2); null
    # = no GPU. A GPU preset declares it: every arm's memory estimate must fit it
    # (core/memory.py, tests/test_memory.py), and vLLM's colocated share is taken of it.
    gpu_memory_gib: float | None = Field(default=None, gt=0)
    # The stages `--quick` selects: these methods (each also in `methods`) with these seeds.
    quick: QuickRun


class ExtraRun(Strict):
    """One arm's seed beyond `seeds` (params `extra_runs`; DVC stages train_extra@<method>-<seed>
    and evaluate_extra@<method>-<seed>), planned by the claims' power rule from the pilot."""

    method: str
    seed: int


class Params(Strict):
    # The top-level seed is the base's: its SFT (flows/build_base.py) and its evaluation samples.
    # A second, independently built base is the same study with another value here
    # (`python -m flows.pipeline --study <study>.seed<N>`, tasks/studies.py).
    seed: int
    seeds: list[int] = Field(min_length=1)
    preset: str | None
    methods: list[str] = Field(min_length=1)
    # Seeds of single arms beyond `seeds`, keyed `<method>-<seed>` (the DVC stage names' item);
    # written by the pipeline from the claims' plan (docs/pipeline.md, "Seeds by plan").
    extra_runs: dict[str, ExtraRun] = Field(default_factory=dict)
    # The base's evaluation beyond its draw at `seed`: draw d samples with seed `seed` + d (DVC
    # stages evaluate_base_draw@<d>), so "vs base" comparisons read the base sampled like an arm.
    base_draws: list[int] = Field(default_factory=list)
    world: World
    data: Data
    synthesize: SynthesizeConfig
    base_model: BaseModelParams
    grpo: GRPO
    collapse: Collapse
    reward: SerializeAsAny[RewardBlocks]
    variants: dict[str, Variant]
    eval: Eval
    pipeline: Pipeline
    presets: dict[str, dict]

    @field_validator("reward", mode="before")
    @classmethod
    def _reward_blocks(cls, v: object) -> object:
        from core.methods import reward_model

        return v if isinstance(v, RewardBlocks) else reward_model().model_validate(v)

    @model_validator(mode="after")
    def _base_draws(self) -> Params:
        if any(d < 1 for d in self.base_draws) or len(set(self.base_draws)) != len(self.base_draws):
            raise ValueError(f"base_draws: {self.base_draws}: distinct integers from 1 (draw 0 is "
                             "the base's evaluation at `seed`, stage evaluate_base)")
        return self

    @model_validator(mode="after")
    def _extra_runs(self) -> Params:
        for key, run in self.extra_runs.items():
            if key != f"{run.method}-{run.seed}":
                raise ValueError(f"extra_runs.{key}: the key must be <method>-<seed> "
                                 f"({run.method}-{run.seed})")
            if run.method not in self.methods:
                raise ValueError(f"extra_runs.{key}: {run.method} is not in `methods` (an extra "
                                 "seed extends an arm of the study)")
            if run.seed in self.seeds:
                raise ValueError(f"extra_runs.{key}: seed {run.seed} is in `seeds` already (its "
                                 "train@ stage runs it)")
        return self

    def method_config(self, name: str) -> tuple[str, MethodBase]:
        """(method family, its settings) of a method or variant name, overrides merged."""
        families = type(self.reward).model_fields
        if name in families:
            return name, getattr(self.reward, name)
        if name not in self.variants:
            known = sorted(set(families) | set(self.variants))
            raise ParamsError(f"unknown method {name!r}; known methods: {', '.join(known)}")
        v = self.variants[name]
        base = getattr(self.reward, v.method)
        over = dict(v.reward)
        grpo = {**base.grpo, **over.pop("grpo", {})}  # grpo overrides add up
        raw = _merge(base.model_dump(), over, f"variants.{name}.reward.")
        raw["grpo"] = grpo
        try:
            return v.method, type(base).model_validate(raw)
        except ValidationError as e:
            raise ParamsError(_format(e, f"variants.{name}.reward")) from None

    def resolve(self, name: str) -> ResolvedMethod:
        """A method or variant's family, settings and GRPO settings, resolved once for a run."""
        family, cfg = self.method_config(name)
        raw = _merge(self.grpo.model_dump(), cfg.grpo, f"reward.{name}.grpo.")
        if cfg.task:
            raw["task"] = cfg.task
        try:
            grpo = GRPO.model_validate(raw)
        except ValidationError as e:
            raise ParamsError(_format(e, f"reward.{name}.grpo")) from None
        return ResolvedMethod(name, family, cfg, grpo)

    def method_grpo(self, name: str) -> GRPO:
        """`grpo` with the method's task and overrides applied."""
        return self.resolve(name).grpo


# A method's `grpo` overrides are a partial section: a preset may add keys the file's partial dict
# lacks (they are validated against `grpo` when the method is resolved).
_PARTIAL = re.compile(r"reward\.[^.]+\.grpo(\..*)?")


def _merge(base: dict, over: dict, where: str = "") -> dict:
    """Deep-merge a preset over the file; unknown keys are errors (but inside `reward.<m>.grpo`,
    a partial section). `mix` (SFT family weights) is replaced whole: its keys are data, and a
    preset that lists two families means two."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        path = f"{where}{key}"
        if key not in out and _PARTIAL.fullmatch(path):
            out[key] = copy.deepcopy(value)
            continue
        if key not in out:
            raise ParamsError(f"{path}: unknown key in preset override")
        if isinstance(value, dict) and isinstance(out[key], dict) and key not in ("mix",):
            out[key] = _merge(out[key], value, path + ".")
        else:
            out[key] = value
    return out


def _format(err: ValidationError, source: str) -> str:
    """One line per mistake. A misspelt key is one mistake, reported once with the likely
    intended key, not also as the missing key it was meant to be.

    >>> try:
    ...     Collapse.model_validate({"min_drop": 0.1, "reward_tol": 0, "patience": 2,
    ...         "entropy_floor": 0, "min_length_frac": 0.1, "max_clipped": 0.5, "earlystop": True})
    ... except ValidationError as e:
    ...     print(_format(e, "params.yaml"))
    params.yaml: earlystop: unknown key (did you mean early_stop?)
    """
    import difflib

    errors = err.errors()
    missing = {tuple(e["loc"]) for e in errors if e["type"] == "missing"}
    explained: set[tuple] = set()
    lines = []
    for e in errors:
        if e["type"] != "extra_forbidden":
            continue
        loc = tuple(e["loc"])
        siblings = [m[-1] for m in missing if m[:-1] == loc[:-1]]
        guess = difflib.get_close_matches(str(loc[-1]), [str(x) for x in siblings], n=1)
        hint = f" (did you mean {guess[0]}?)" if guess else ""
        explained.update(m for m in missing if m[:-1] == loc[:-1] and str(m[-1]) in guess)
        lines.append(f"{source}: {'.'.join(str(p) for p in loc)}: unknown key{hint}")
    for e in errors:
        loc = tuple(e["loc"])
        if e["type"] == "extra_forbidden" or loc in explained:
            continue
        msg = e["msg"].removeprefix("Value error, ")
        lines.append(f"{source}: {'.'.join(str(p) for p in loc)}: {msg}")
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
        own = presets[name] if isinstance(presets[name], dict) else {}
        # `extra_runs` extend the arms of the study they were planned for: a preset whose study
        # has other arms (`presets.<p>.methods`) starts without the file's.
        other_study = "methods" in own and list(own["methods"]) != list(raw.get("methods") or [])
        raw = _merge(raw, presets[name])
        raw["preset"] = name
        if other_study and "extra_runs" not in own:
            raw["extra_runs"] = {}
    try:
        params = Params.model_validate(raw)
    except ValidationError as e:
        raise ParamsError(_format(e, source)) from None
    for name in [*params.methods, *params.variants]:
        params.resolve(name)  # an unknown method or a bad override fails here, named
    _check_arith_ref(params, source)
    _check_arith_cf(params, source)
    return params


def _check_arith_cf(params: Params, source: str) -> None:
    """A run training on `arith_cf` (the hinted problems: preset hint_copier) draws its held-out
    curve from arith_cf's val split, which the world writes only with `counterfactual.n_val`."""
    if params.world.counterfactual.n_val > 0:
        return
    readers = [m for m in params.methods if params.method_grpo(m).task == "arith_cf"]
    if readers:
        raise ParamsError(f"{source}: world.counterfactual.n_val is 0 (no arith_cf val split) but "
                          f"methods: {', '.join(readers)} train on arith_cf; set n_val (its "
                          "held-out curve)")


def _check_arith_ref(params: Params, source: str) -> None:
    """`arith_ref` has no files unless `world.arith_ref` is on: whatever reads it fails here, named.

    Its SFT family is taught in the role phase only: phase 1's stamp (`models.tiny.phase1_stamp`)
    hashes the tokenizer's task files, not arith_ref's, so a changed arith_ref would not rebuild
    a phase 1 that had learned it.
    """
    sft = params.base_model.sft
    for family in ("arith_ref", "arith_leak"):  # arith_leak reads the test file (docs/bases.md)
        if sft.mix.get(family, 0) > 0:
            raise ParamsError(f"{source}: base_model.sft.mix: {family} is taught in "
                              "base_model.sft.roles.mix only (phase 1's stamp does not cover its file)")
    if params.world.arith_ref.enabled:
        return
    readers = [f"methods: {m} trains on it" for m in params.methods
               if params.method_grpo(m).task == "arith_ref"]
    readers += ["eval.benchmarks lists it"] if "arith_ref" in params.eval.benchmarks else []
    if sft.roles and sft.roles.mix.get("arith_ref", 0) > 0:
        readers.append("base_model.sft.roles.mix weighs it")
    if readers:
        raise ParamsError(f"{source}: world.arith_ref is off (n_train: 0, no files) but "
                          f"{'; '.join(readers)}; set its sizes (preset cot_reference)")


class _Yaml12Loader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2 booleans: only true/false are booleans.

    PyYAML follows YAML 1.1, where an unquoted `YES`, `no` or `on` is a boolean. DVC writes
    params.yaml back with YAML 1.2 rules (`dvc exp run -S key=value`), dropping the quotes around
    `"YES"`; read with 1.1 rules, RLME's target would then turn into `True`. With 1.2 rules no
    meaning hangs on quoting.

    >>> yaml.load("target: YES\\nflag: true\\nother: off", Loader=_Yaml12Loader)
    {'target': 'YES', 'flag': True, 'other': 'off'}
    """


_Yaml12Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:bool"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.copy().items()}
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"))


def read_raw(path: str | Path | None = None):
    """params.yaml as plain data (YAML 1.2 booleans), before validation."""
    path = Path(path) if path else PARAMS_FILE
    with path.open(encoding="utf-8") as f:
        try:
            return yaml.load(f, Loader=_Yaml12Loader)  # a SafeLoader subclass
        except yaml.YAMLError as e:
            raise ParamsError(f"{path}: not valid YAML ({e})") from None


def load(path: str | Path | None = None, preset: str | None = None) -> Params:
    """Load params.yaml; `LAB_PRESET` in the environment picks a preset too (CLI flags win)."""
    path = Path(path) if path else PARAMS_FILE
    return validate(read_raw(path), str(path.name), preset or os.environ.get("LAB_PRESET") or None)
