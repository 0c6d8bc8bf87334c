"""GPU memory of one training process, estimated from a run's settings (docs/gpu.md, section 7).

The issue it answers: a 1-GPU preset ran out of memory on an H100 on its first step (the record in
benchmarks/results/gpu/), because a step's rollouts were generated in one transformers `generate`
call. This module adds up what one training process holds, from the model's shape and the run's
resolved settings, so that a preset can be checked against the GPU it declares
(`pipeline.gpu_memory_gib`) before anything is loaded. tests/test_memory.py checks every shipped
GPU preset, every arm of its study, with and without vLLM, and compares the estimate with the
committed GPU records; `python -m benchmarks.tables` writes docs/gpu.md's table from it.

What is counted, per training GPU (each term's source is in the function that computes it):

- resident for the whole run (`MemoryEstimate.RESIDENT`): float32 master weights, their
  gradients, AdamW's two float32 moments, the bf16 copy autocast makes of every weight, vLLM's
  share of the GPU in colocate mode, and the read-only models a method loads in bf16 (RLME's
  frozen or path evaluators, RLCER's judge);
- the largest of the phases that come and go (`MemoryEstimate.PHASES`): sampling with
  transformers (rollouts without vLLM, RLCER's two roles, the held-out evaluation), one training micro-batch
  (checkpointed activations and the fused LM head), and the rewards' own forward passes (the
  confidence rewards' and DRO's teacher-forced logits, the evaluators' and the judge's forwards);
- a fixed reserve for the CUDA context, cuBLAS workspaces and the allocator's unallocated blocks.

Decisions:

- **The KV cache of a trained policy is float32, K and V**, 2 x layers x KV heads x head dim x 4
  bytes per token: 224 KiB at Qwen3-0.6B, not bf16's 112. Under autocast over float32 master
  weights, K leaves RoPE in float32 (its cos and sin take the dtype of the float32 residual
  stream, and Qwen3's `k_norm` returns its float32 weight's dtype), and transformers 5.23's
  `DynamicLayer.lazy_initialization` allocates V's cache with K's dtype, so `torch.cat` promotes
  every V to float32 too (tests/test_memory.py runs it on the CPU under bf16 autocast, and the
  H100 record's allocation at its failure is reproduced with this cache). A read-only model in
  bf16 (the evaluate stage's policy, a judge) caches in bf16.
- Prompt lengths are not in params.yaml: a budget (`PROMPT_TOKENS`) stands for them, so the
  estimate reads no data file.
- It is an estimate for planning, not a bound: what it leaves out (prefill activations, the
  allocator's rounding, the optimiser's few temporaries: AdamW is fused by default since torch
  2.8) is meant to fit in `RESERVE_GIB`. The test compares it with every committed measurement.

No torch here: the arithmetic is plain integers, so the estimate runs anywhere `core` runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

__all__ = ["KNOWN_SHAPES", "PROMPT_TOKENS", "RESERVE_GIB", "MemoryEstimate", "ModelShape",
           "estimate", "gpu_presets", "micro_batch_rows", "model_shape", "over_budget",
           "preset_params", "rollout_rows", "sampling_parts",
           "shape_from_config"]

GIB = 1024 ** 3
FP32, BF16 = 4, 2

# Tokens of one prompt as the policy reads it (chat template, system message, the task's text): a
# budget, not a measurement. GSM8K's questions and the tiny world's prompts (the pairs task's the
# longest) fit in it; an external data set with longer prompts needs `prompt_tokens=`.
PROMPT_TOKENS = 256
# The reference answer DRO teacher-forces after each rollout (paper 003: the whole reference
# solution for GSM8K): a budget of tokens.
REFERENCE_TOKENS = 256
# The judge prompt of RLCER (models/rlcer_trainer.py VERIFIER_TEMPLATE, the question and one
# criterion) without the response it judges: a budget of tokens.
JUDGE_PROMPT_TOKENS = 512
# The CUDA context, cuBLAS workspaces and the caching allocator's reserved-but-unallocated
# blocks: outside what the terms below count. The H100 record's out-of-memory line shows both
# (memory in use by the process beyond what PyTorch allocated); tests/test_memory.py checks the
# reserve covers them.
RESERVE_GIB = 3.0
# TRL 1.16's fused LM head (trl/kernels/chunked_logprob.py): the loss reads log-probabilities
# from logits computed in tiles of this many tokens x this many vocabulary entries, never the
# whole [tokens, vocabulary] matrix.
LM_HEAD_TILE = (4096, 32768)


@dataclass(frozen=True)
class ModelShape:
    """The dimensions that size a decoder-only transformer's memory (a config.json's)."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool = True      # input and output embeddings share one matrix
    qk_norm: bool = False  # per-head RMSNorm on queries and keys (Qwen3)

    @property
    def parameters(self) -> int:
        """Parameters: attention and SwiGLU MLP per layer, norms, embeddings (biases left out).

        >>> KNOWN_SHAPES["qwen3-0.6b"].parameters   # the model card's 0.6B (0.44B without embeddings)
        596049920
        """
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        norms = 2 * self.hidden + (2 * self.head_dim if self.qk_norm else 0)
        layer = self.hidden * (2 * q + 2 * kv) + 3 * self.hidden * self.intermediate + norms
        return self.layers * layer + self.vocab * self.hidden * (1 if self.tied else 2) + self.hidden

    def kv_bytes(self, dtype_bytes: int) -> int:
        """KV cache bytes per token: K and V of every layer's KV heads.

        >>> KNOWN_SHAPES["qwen3-0.6b"].kv_bytes(FP32) // 1024, KNOWN_SHAPES["qwen3-0.6b"].kv_bytes(BF16) // 1024
        (224, 112)
        """
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes

    def layer_bytes(self, dtype_bytes: int) -> int:
        """Bytes per token one decoder layer holds for its backward pass (or, without gradients,
        at most while it runs): the matmul inputs and outputs of attention (hidden, Q, K, V and
        the attention output, twice for in and out) and of the SwiGLU MLP (gate, up, their product
        and the down projection's input), plus the two RMSNorms' float32 inputs. Flash/SDPA
        attention keeps no [tokens, tokens] matrix (Korthikanti et al. 2022's count without its
        attention-score term, for a SwiGLU MLP)."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return (4 * self.hidden + 2 * q + 2 * kv + 4 * self.intermediate) * dtype_bytes \
            + 2 * self.hidden * FP32


def shape_from_config(config: Mapping[str, Any]) -> ModelShape:
    """A `ModelShape` from a transformers config.json dict.

    >>> shape_from_config({"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
    ...                    "num_attention_heads": 4, "vocab_size": 100}).head_dim
    16
    """
    heads = int(config["num_attention_heads"])
    return ModelShape(
        layers=int(config["num_hidden_layers"]), hidden=int(config["hidden_size"]),
        intermediate=int(config["intermediate_size"]), heads=heads,
        kv_heads=int(config.get("num_key_value_heads") or heads),
        head_dim=int(config.get("head_dim") or int(config["hidden_size"]) // heads),
        vocab=int(config["vocab_size"]), tied=bool(config.get("tie_word_embeddings", True)),
        qk_norm=config.get("model_type") == "qwen3")


def _qwen(layers: int, hidden: int, intermediate: int, heads: int, kv_heads: int, tied: bool,
          model_type: str = "qwen3") -> ModelShape:
    return shape_from_config({"num_hidden_layers": layers, "hidden_size": hidden,
                              "intermediate_size": intermediate, "num_attention_heads": heads,
                              "num_key_value_heads": kv_heads, "head_dim": 128, "vocab_size": 151936,
                              "tie_word_embeddings": tied, "model_type": model_type})


# The checkpoints the GPU presets name, from their config.json on the Hugging Face hub (a preset's
# `base_model.path` is a local folder that may not exist where the estimate runs: the folder's
# name finds its shape here).
KNOWN_SHAPES: dict[str, ModelShape] = {
    "qwen3-0.6b": _qwen(28, 1024, 3072, 16, 8, tied=True),
    "qwen3-1.7b": _qwen(28, 2048, 6144, 16, 8, tied=True),
    "qwen3-4b": _qwen(36, 2560, 9728, 32, 8, tied=True),
    "qwen3-8b": _qwen(36, 4096, 12288, 32, 8, tied=False),
    "qwen2.5-math-1.5b": _qwen(28, 1536, 8960, 12, 2, tied=True, model_type="qwen2"),
}


def model_shape(path: str) -> ModelShape:
    """The shape of the model at `path`: its config.json where the folder exists, else the known
    shape its folder's name names (`KNOWN_SHAPES`, case-insensitive); ValueError otherwise.

    >>> model_shape("/models/Qwen3-1.7B").hidden
    2048
    """
    config = Path(path) / "config.json"
    if config.exists():
        return shape_from_config(json.loads(config.read_text(encoding="utf-8")))
    name = Path(path).name.lower()
    if name in KNOWN_SHAPES:
        return KNOWN_SHAPES[name]
    raise ValueError(f"{path}: no config.json and not a known shape ({', '.join(sorted(KNOWN_SHAPES))})")


def tiny_shape(params: Any) -> ModelShape:
    """The lab's own Llama (models/tiny.py) from `base_model`: heads = KV heads, tied embeddings."""
    a = params.base_model.arch
    return ModelShape(layers=a.num_layers, hidden=a.hidden_size, intermediate=a.intermediate_size,
                      heads=a.num_heads, kv_heads=a.num_heads, head_dim=a.hidden_size // a.num_heads,
                      vocab=params.base_model.vocab_size)


@dataclass(frozen=True)
class MemoryEstimate:
    """GiB per training GPU, by part. Resident parts add up; of the phases only the largest counts
    (they run one after another); `reserve` is `RESERVE_GIB`."""

    # resident
    weights: float        # float32 master weights
    gradients: float      # float32
    optimizer: float      # AdamW's two float32 moments
    autocast_copy: float  # the bf16 copy of every weight autocast casts and caches
    vllm: float           # vLLM's share of the GPU (colocate mode)
    extra_models: float   # read-only models in bf16 (frozen or path evaluators, RLCER's judge)
    # phases
    generation: float     # rollouts sampled with transformers: KV cache, attention, sampling
    heldout: float        # the held-out evaluation's sampling with transformers
    training: float       # one micro-batch: checkpointed activations and the fused LM head
    reward_pass: float    # the rewards' forwards: teacher-forced logits chunks, evaluators, judge
    reserve: float

    RESIDENT = ("weights", "gradients", "optimizer", "autocast_copy", "vllm", "extra_models")
    PHASES = ("generation", "heldout", "training", "reward_pass")

    @property
    def resident(self) -> float:
        return sum(getattr(self, f) for f in self.RESIDENT)

    @property
    def peak_phase(self) -> str:
        """The phase that sets the peak."""
        return max(self.PHASES, key=lambda f: getattr(self, f))

    @property
    def total(self) -> float:
        return self.resident + getattr(self, self.peak_phase) + self.reserve

    def parts(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def sampling_parts(shape: ModelShape, rows: int, tokens: int, kv_dtype: int) -> dict[str, int]:
    """Bytes of one transformers `generate` call of `rows` sequences of `tokens` tokens (prompt and
    new) at its last step, beside the weights, by part:

    - `cache`: the KV cache (`ModelShape.kv_bytes` at `kv_dtype`);
    - `cat`: one layer's cache copied by `torch.cat` (transformers' `DynamicLayer.update` grows it
      a token at a time);
    - `cast`: that layer's K and V cast to bf16 for SDPA under autocast. At a decoding step
      transformers packs the query heads onto the KV heads (`sdpa_attention.pack_gqa`), so K and V
      are not repeated to the query heads;
    - `logits`: the step's logits over the vocabulary in float32, the warped scores and the
      probabilities.

    >>> {k: round(v / GIB, 2) for k, v in sampling_parts(KNOWN_SHAPES["qwen3-0.6b"], 576, 586, FP32).items()}
    {'cache': 72.11, 'cat': 2.58, 'cast': 1.29, 'logits': 0.98}
    """
    cache = rows * tokens * shape.kv_bytes(kv_dtype)
    cast = rows * tokens * 2 * shape.kv_heads * shape.head_dim * BF16 if kv_dtype != BF16 else 0
    return {"cache": cache, "cat": cache // shape.layers, "cast": cast,
            "logits": rows * shape.vocab * FP32 * 3}


def _sampling_bytes(shape: ModelShape, rows: int, tokens: int, kv_dtype: int) -> int:
    return sum(sampling_parts(shape, rows, tokens, kv_dtype).values())


def _forward_bytes(shape: ModelShape, rows: int, tokens: int, dtype_bytes: int) -> int:
    """A forward pass without gradients or cache: the residual stream and one layer at a time."""
    return rows * tokens * (shape.hidden * FP32 + shape.layer_bytes(dtype_bytes))


def _teacher_forced_bytes(shape: ModelShape, rows: int, scored: int, context: int) -> int:
    """A teacher-forced pass that keeps the logits of `scored` positions per row (the confidence
    rewards' full distributions, DRO's reference tokens): rows x scored x vocabulary x 4 bytes,
    three times (rewards/teacher_forcing.py: the model's float32 logits, their gather to the
    left and its masked copy; or the logits, softmax and product of rewards/confidence.py), plus
    the forward itself over `context` tokens per row."""
    return 3 * rows * scored * shape.vocab * FP32 + _forward_bytes(shape, rows, context, BF16)


def _training_bytes(shape: ModelShape, rows: int, tokens: int, completion: int,
                    checkpointing: bool) -> int:
    """One micro-batch's forward and backward under bf16 autocast over float32 master weights:

    - with activation checkpointing, each layer's input (the float32 residual stream: the
      embedding lookup is float32) is kept and one layer at a time is recomputed with what its
      backward needs (`ModelShape.layer_bytes`); without it, every layer keeps that;
    - the fused LM head (TRL 1.16, `LM_HEAD_TILE`): one bf16 tile of logits (its buffer is as
      wide as the tile whatever the vocabulary), the float32 gradient of the head's weight it
      accumulates, and the float32 gradient of the completion positions' hidden states."""
    n = rows * tokens
    kept = n * shape.hidden * FP32 * shape.layers
    layers = n * shape.layer_bytes(BF16) * (1 if checkpointing else shape.layers)
    tile = min(rows * completion, LM_HEAD_TILE[0]) * LM_HEAD_TILE[1] * BF16
    head = tile + shape.vocab * shape.hidden * FP32 + rows * completion * shape.hidden * FP32
    return kept + layers + head


# A method's memory terms follow from what its settings declare (its `reward.<m>` block,
# core/methods.py), not from its name: the registry stays the one place that names methods
# (tests/test_registry_plugin.py), and a new method with such a field gets the term.
def _two_roles(cfg: Any) -> bool:
    """The policy also samples a second role (RLCER's rubricator, prompted by its template)."""
    return hasattr(cfg, "rubricator_template")


def _evaluators(cfg: Any) -> bool:
    """Evaluator models score the completions (RLME's live, frozen or path evaluators)."""
    return hasattr(cfg, "evaluators")


def _teacher_forced(cfg: Any) -> bool:
    """A teacher-forced pass over every completion, `rows_per_pass` rows at a time (the
    confidence rewards: self-certainty, entropy)."""
    return hasattr(cfg, "rows_per_pass")


def _reference_pass(cfg: Any) -> bool:
    """A pass over the reference answer after the completion's marker (DRO's R3)."""
    return hasattr(cfg, "answer_marker")


def _extra_models(run: Any, params: Any, shape_of: Callable[[str], ModelShape]) -> list[ModelShape]:
    """The read-only models a method loads beside the policy (held in bf16, core/devices.py)."""
    cfg = run.cfg
    if _two_roles(cfg) and getattr(cfg, "verifier", "rule") != "rule":
        return [shape_of(cfg.verifier)]
    if _evaluators(cfg):
        policy = params.base_model.path
        return [shape_of(policy) if e.source == "frozen" else shape_of(e.source)
                for e in cfg.evaluators if e.source != "live"]
    return []


def micro_batch_rows(g: Any) -> int:
    """Rows of one training micro-batch on one process: TRL's per_device_train_batch_size as
    models/grpo.py sets it (prompts_per_step / gradient_accumulation_steps / num_processes
    prompts' groups)."""
    return max(1, g.prompts_per_step // g.gradient_accumulation_steps // g.num_processes) \
        * g.num_generations


def rollout_rows(params: Any, name: str) -> int:
    """Rows of one rollout generation call on one process: `steps_per_generation` micro-batches
    (TRL's default: all of an optimiser step's), and for RLCER at most
    `reward.rlcer.rows_per_generate` (models/rlcer_trainer.py).

    >>> from core.params import load
    >>> rollout_rows(load(), "rlvr")   # 4 prompts x 8, one micro-batch
    32
    """
    run = params.resolve(name)
    g = run.grpo
    rows = micro_batch_rows(g) * (g.steps_per_generation or g.gradient_accumulation_steps)
    bound = getattr(run.cfg, "rows_per_generate", None) if _two_roles(run.cfg) else None
    return min(rows, bound) if bound else rows


def estimate(params: Any, name: str, *, gpu_memory_gib: float | None = None,
             prompt_tokens: int = PROMPT_TOKENS,
             shape_of: Callable[[str], ModelShape] | None = None) -> MemoryEstimate:
    """GiB per training GPU of a run of method or variant `name` under `params` (a
    `core.params.Params`, preset applied), on GPUs of `gpu_memory_gib` (default
    `pipeline.gpu_memory_gib`; it sizes vLLM's colocated share). `shape_of` maps a model path to
    its shape (default `model_shape`; the tiny model when `base_model.path` is null).
    `prompt_tokens` is the prompts' length budget (`PROMPT_TOKENS`).

    The row counts are TRL's for the process (models/grpo.py `grpo_config`): a micro-batch is
    prompts_per_step / gradient_accumulation_steps / num_processes prompts' groups, and one
    rollout call generates steps_per_generation micro-batches (default: all of the step's)."""
    run = params.resolve(name)
    g, cfg = run.grpo, run.cfg
    shape_of = shape_of or model_shape
    path = params.base_model.path
    shape = shape_of(path) if path else tiny_shape(params)
    n = shape.parameters
    memory = gpu_memory_gib if gpu_memory_gib is not None else params.pipeline.gpu_memory_gib
    colocated = g.use_vllm and g.vllm_mode == "colocate"
    extra = _extra_models(run, params, shape_of)

    micro = micro_batch_rows(g)
    rollout = micro * (g.steps_per_generation or g.gradient_accumulation_steps)
    P, C = prompt_tokens, g.max_completion_length

    generation = 0
    mb_rows, mb_tokens = micro, P + C
    if not g.use_vllm:
        generation = _sampling_bytes(shape, rollout, P + C, FP32)
    if _two_roles(cfg):
        # The rubricator reads the question and one CoT and writes up to max_rubric_tokens;
        # reward.rlcer.rows_per_generate bounds both roles' generate calls (models/rlcer_trainer.py).
        bound = rollout_rows(params, name)
        rubric_rows = rollout // g.num_generations * cfg.rubricator_rollouts
        rubric_prompt = P + C + len(cfg.rubricator_template) // 2  # at most a token per 2 characters
        generation = max(_sampling_bytes(shape, bound, P + C, FP32),
                         _sampling_bytes(shape, min(bound, rubric_rows),
                                         rubric_prompt + cfg.max_rubric_tokens, FP32))
        # Both roles' rows in one micro-batch, padded to the wider prompt and completion.
        mb_rows = micro + micro // g.num_generations * cfg.rubricator_rollouts
        mb_tokens = rubric_prompt + max(C, cfg.max_rubric_tokens)
    # models/grpo.py hands the held-out sampling to the colocated vLLM engine; otherwise it is
    # transformers' generate, eval.batch_size rows at a time (models/generation.py).
    heldout = 0 if colocated else _sampling_bytes(shape, params.eval.batch_size,
                                                  P + params.eval.max_new_tokens, FP32)
    training = _training_bytes(shape, mb_rows, mb_tokens, C, g.gradient_checkpointing)

    reward = 0
    if _teacher_forced(cfg):
        rows = min(cfg.rows_per_pass or rollout, rollout)
        reward = _teacher_forced_bytes(shape, rows, C, P + C)
    elif _reference_pass(cfg):
        reward = _teacher_forced_bytes(shape, micro, REFERENCE_TOKENS, P + C + REFERENCE_TOKENS)
    elif _evaluators(cfg):
        # Each evaluator scores the generation batch, score_batch_size rows per pass.
        tokens = P + C + len(cfg.template) // 2
        reward = max(_forward_bytes(s, min(g.score_batch_size, rollout), tokens, BF16)
                     for s in [shape, *extra])
    elif _two_roles(cfg) and extra:
        # The judge reads every pooled rubric with every CoT of its question: as many prompts as
        # the rubricator wrote rubrics, so a pass of score_batch_size rows is its worst case.
        reward = _forward_bytes(extra[0], g.score_batch_size, JUDGE_PROMPT_TOKENS + C, BF16)

    # vLLM takes its share of the GPU's whole memory; with no GPU declared there is none to take.
    vllm = g.vllm_gpu_memory_utilization * memory if colocated and memory is not None else 0.0
    ref = 4 * n if g.beta > 0 else 0  # TRL's reference model, loaded like the policy
    return MemoryEstimate(
        weights=FP32 * n / GIB, gradients=FP32 * n / GIB, optimizer=2 * FP32 * n / GIB,
        autocast_copy=BF16 * n / GIB, vllm=vllm,
        extra_models=(sum(BF16 * s.parameters for s in extra) + ref) / GIB,
        generation=generation / GIB, heldout=heldout / GIB, training=training / GIB,
        reward_pass=reward / GIB, reserve=RESERVE_GIB)


def preset_params(raw: Mapping[str, Any], preset: str, **grpo: Any) -> Any:
    """Preset `preset` of a raw params.yaml with its shared `grpo` section overridden (a method's
    own `grpo` overrides still win): `use_vllm=False` is what flows/train.py's `check_vllm`
    advises where vLLM is missing."""
    import copy

    from core.params import validate

    merged = copy.deepcopy(dict(raw))
    merged["presets"][preset]["grpo"] = {**merged["presets"][preset].get("grpo", {}), **grpo}
    return validate(merged, preset=preset)


def gpu_presets(raw: Mapping[str, Any]) -> list[str]:
    """The presets of a raw params.yaml that declare a GPU (`pipeline.gpu_memory_gib`)."""
    return [name for name, p in (raw.get("presets") or {}).items()
            if isinstance(p, dict) and (p.get("pipeline") or {}).get("gpu_memory_gib") is not None]


def over_budget(params: Any, names: list[str] | None = None, *,
                gpu_memory_gib: float | None = None, **kwargs: Any) -> list[str]:
    """One line per arm (default: `params.methods`) whose estimate exceeds the GPU memory
    (default `pipeline.gpu_memory_gib`), naming the phase that sets its peak; [] when all fit."""
    memory = gpu_memory_gib if gpu_memory_gib is not None else params.pipeline.gpu_memory_gib
    if memory is None:
        return []
    out = []
    for name in names or list(params.methods):
        e = estimate(params, name, gpu_memory_gib=memory, **kwargs)
        if e.total > memory:
            out.append(f"{name}: {e.total:.1f} GiB estimated > {memory:g} GiB per GPU "
                       f"(resident {e.resident:.1f}, {e.peak_phase.replace('_', ' ')} "
                       f"{getattr(e, e.peak_phase):.1f}, reserve {e.reserve:g}; core/memory.py)")
    return out
