"""Sampling for the lab's own Llama models at the CPU's pace: a preallocated KV cache written in
place and one decode step of plain tensor operations.

Why not transformers' `generate`: on the 1.9M-parameter tiny model a decoding step is about
0.1 GFLOP for 32 rows, well under a millisecond of arithmetic, and `generate` spends most of its
time around it (per-token Python in the generation loop and the model's forward, and a cache that
grows by `torch.cat` every step; `benchmarks/profile_run.py`). Here the prompt goes through the
model's own forward once (the prefill: the very computation `generate` does), its keys and values
are copied into a cache sized for the whole completion, and each new token costs one pass over
the layers with the model's own weights (no copy, so a policy that GRPO just updated samples with
its new weights).

Same distribution as `generate`: the logits processors are transformers' own classes
(temperature, top-k, top-p, min-p), the token is drawn with `torch.multinomial` from the global
RNG exactly as `generate` draws it (one draw of shape [rows, 1] per step, finished rows included),
finished rows are padded, and the loop stops when every row has ended or at `max_new_tokens`. So
with the same seed the samples match `generate`'s (up to float rounding in a near-tie), and greedy
decoding matches it token for token (`tests/test_sampler.py`, `python -m benchmarks.sampling`).

Where it samples now: vLLM (models/vllm_engine.py) is the default sampler of GRPO's rollouts and of
the evaluate stage, where `python -m benchmarks.sampling` measures it fastest per stage with
greedy output identical (benchmarks/results/sampling.json, docs/speed.md). This loop, measured
there too, is the lab's sampler where vLLM does not sample: a machine without vLLM's CPU build,
RLCER's two roles, a run with `grpo.use_vllm: false` or `eval.sampler: lab` (the `ci` preset's
short stages), and calls made before any engine exists (DRO's pre-filter).

`lab_generate` falls back to `model.generate` for anything else: another architecture, a model not
on the CPU (real models keep vLLM on GPUs), or a generation setting this loop does not implement
(repetition penalty, beams, ...). `supports` says which.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

# Generation settings this loop implements; any other non-default one falls back to `generate`.
_IMPLEMENTED = {"max_new_tokens", "do_sample", "temperature", "top_p", "top_k", "min_p",
                "eos_token_id", "pad_token_id", "bos_token_id"}


def supports(model) -> bool:
    """Whether `model` is a Llama-shaped causal LM on the CPU that this sampler runs exactly:
    the tiny base and its checkpoints (models/tiny.py), and a Llama/Qwen2-shaped model without
    attention biases, sliding windows or scaled RoPE."""
    config = getattr(model, "config", None)
    if config is None or getattr(config, "model_type", None) != "llama":
        return False
    if next(model.parameters()).device.type != "cpu":
        return False
    if getattr(config, "attention_bias", False) or getattr(config, "mlp_bias", False):
        return False
    if getattr(config, "hidden_act", "silu") != "silu":
        return False
    if getattr(config, "attention_dropout", 0.0):  # the loop has no dropout (a policy may be in train mode)
        return False
    rope = getattr(config, "rope_scaling", None) or {}
    if rope.get("rope_type", rope.get("type", "default")) not in ("default", None):
        return False
    return True


def _eos_ids(eos_token_id) -> list[int]:
    if eos_token_id is None:
        return []
    return [eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id)


def _processors(do_sample: bool, temperature, top_k, top_p, min_p):
    """transformers' own warpers, in `generate`'s order, for the settings that are on."""
    from transformers.generation.logits_process import (
        LogitsProcessorList,
        MinPLogitsWarper,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    out = LogitsProcessorList()
    if not do_sample:
        return out
    if temperature is not None and temperature != 1.0:
        out.append(TemperatureLogitsWarper(temperature))
    if top_k is not None and top_k != 0:
        out.append(TopKLogitsWarper(top_k=top_k, min_tokens_to_keep=1))
    if top_p is not None and top_p < 1.0:
        out.append(TopPLogitsWarper(top_p=top_p, min_tokens_to_keep=1))
    if min_p is not None:
        out.append(MinPLogitsWarper(min_p=min_p, min_tokens_to_keep=1))
    return out


# Settings that do not change which tokens are drawn.
_NEUTRAL = {"transformers_version", "disable_compile", "cache_implementation", "use_cache",
            "return_dict_in_generate", "output_scores", "output_logits", "output_attentions",
            "output_hidden_states", "num_return_sequences", "num_beams", "repetition_penalty"}
_NEUTRAL_VALUES = {"num_return_sequences": (None, 1), "num_beams": (None, 1),
                   "repetition_penalty": (None, 1.0), "return_dict_in_generate": (None, False),
                   "output_scores": (None, False), "output_logits": (None, False),
                   "output_attentions": (None, False), "output_hidden_states": (None, False)}


def _settings(generation_config, kwargs: dict) -> dict | None:
    """The effective settings of a `generate` call (a GenerationConfig and keyword overrides),
    or None when one of them is outside what this loop implements (a repetition penalty, beams,
    several sequences per row, ...)."""
    from transformers import GenerationConfig

    config = generation_config or GenerationConfig()
    merged = {**config.to_diff_dict(), **kwargs}
    defaults = GenerationConfig().to_dict()
    for key, value in merged.items():
        if key in _IMPLEMENTED or key.startswith("_"):
            continue
        if key in _NEUTRAL:
            if key in _NEUTRAL_VALUES and value not in _NEUTRAL_VALUES[key]:
                return None
            continue
        if value != defaults.get(key):
            return None
    return {k: merged.get(k) for k in _IMPLEMENTED}


class _Step:
    """One decoding step over the layers of a Llama model. The weights are the model's own,
    read when the step is built (one `sample` call): q/k/v and gate/up are concatenated so a
    layer costs three matrix products, and RoPE's cos/sin are computed once for every position
    by the model's own rotary module."""

    def __init__(self, model, total: int):
        inner = model.model
        config = model.config
        self.embed = inner.embed_tokens.weight
        self.lm_head = model.lm_head.weight
        self.norm = (inner.norm.weight, inner.norm.variance_epsilon)
        attn = inner.layers[0].self_attn
        self.head_dim = attn.head_dim
        self.scaling = attn.scaling
        self.n_heads = config.num_attention_heads
        self.n_kv = config.num_key_value_heads
        self.layers = []
        for layer in inner.layers:
            a, mlp = layer.self_attn, layer.mlp
            self.layers.append((
                layer.input_layernorm.weight, layer.input_layernorm.variance_epsilon,
                torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]),
                a.o_proj.weight,
                layer.post_attention_layernorm.weight, layer.post_attention_layernorm.variance_epsilon,
                torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]), mlp.down_proj.weight))
        positions = torch.arange(total)[None]
        cos, sin = inner.rotary_emb(self.embed[None, :1], positions)
        self.cos, self.sin = cos[0], sin[0]  # [total, Dh]

    @staticmethod
    def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        # LlamaRMSNorm's arithmetic, in its order (float32 models: no casts).
        return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

    def __call__(self, tokens: torch.Tensor, position: torch.Tensor, keys: list[torch.Tensor],
                 values: list[torch.Tensor], slot: int, mask: torch.Tensor) -> torch.Tensor:
        """Logits [B, V] of the next token after `tokens` [B], written at cache `slot`; `mask`
        [B, total] is True where a row may attend (not its left padding)."""
        b = tokens.shape[0]
        hd, nh, nkv = self.head_dim, self.n_heads, self.n_kv
        h = F.embedding(tokens, self.embed)  # [B, D]
        cos = self.cos[position][:, None, :]  # [B, 1, Dh]
        sin = self.sin[position][:, None, :]
        half = hd // 2
        allowed = mask[:, None, None, :slot + 1]
        for (w_in, eps_in, w_qkv, w_o, w_post, eps_post, w_gu, w_down), k_cache, v_cache in zip(
                self.layers, keys, values):
            qkv = F.linear(self._rms(h, w_in, eps_in), w_qkv)
            q = qkv[:, :nh * hd].view(b, nh, hd)
            k = qkv[:, nh * hd:(nh + nkv) * hd].view(b, nkv, hd)
            v = qkv[:, (nh + nkv) * hd:].view(b, nkv, hd)
            q = q * cos + torch.cat((-q[..., half:], q[..., :half]), dim=-1) * sin
            k = k * cos + torch.cat((-k[..., half:], k[..., :half]), dim=-1) * sin
            k_cache[:, :, slot] = k
            v_cache[:, :, slot] = v
            o = F.scaled_dot_product_attention(
                q[:, :, None, :], k_cache[:, :, :slot + 1], v_cache[:, :, :slot + 1],
                attn_mask=allowed, scale=self.scaling, enable_gqa=nkv != nh)  # [B, H, 1, Dh]
            h = h + F.linear(o.reshape(b, nh * hd), w_o)
            gu = F.linear(self._rms(h, w_post, eps_post), w_gu)
            gate, up = gu.chunk(2, dim=-1)
            h = h + F.linear(F.silu(gate) * up, w_down)
        return F.linear(self._rms(h, *self.norm), self.lm_head).float()


@torch.no_grad()
def sample(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *,
           max_new_tokens: int, do_sample: bool = True, temperature: float | None = 1.0,
           top_p: float | None = None, top_k: int | None = None, min_p: float | None = None,
           eos_token_id: int | Sequence[int] | None = None, pad_token_id: int | None = None
           ) -> torch.Tensor:
    """Prompt and completion ids [B, P + n] as `model.generate` returns them for left-padded
    `input_ids` (n: steps until every row ended, at most `max_new_tokens`; pad after a row's EOS).
    Draws from the global torch RNG, like `generate`."""
    from transformers import DynamicCache

    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    eos = _eos_ids(eos_token_id)
    if pad_token_id is None:
        pad_token_id = eos[0] if eos else 0
    processors = _processors(do_sample, temperature, top_k, top_p, min_p)
    b, p = input_ids.shape
    total = p + max_new_tokens
    step = _Step(model, total)
    # Prefill with the model's own forward, positions as `generate` sets them for left padding.
    positions = (attention_mask.long().cumsum(-1) - 1).masked_fill(attention_mask == 0, 0)
    cache = DynamicCache(config=model.config)
    out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=positions,
                past_key_values=cache, use_cache=True, logits_to_keep=1)
    logits = out.logits[:, -1, :].float()
    keys, values = [], []
    for layer in cache.layers:
        k, v = layer.keys, layer.values  # [B, H_kv, P, Dh]
        kc = k.new_empty(b, k.shape[1], total, k.shape[3])
        vc = v.new_empty(b, v.shape[1], total, v.shape[3])
        kc[:, :, :p] = k
        vc[:, :, :p] = v
        keys.append(kc)
        values.append(vc)
    del cache, out
    mask = torch.ones(b, total, dtype=torch.bool)
    mask[:, :p] = attention_mask.bool()
    position = positions[:, -1] + 1
    eos_t = torch.tensor(eos, dtype=torch.long) if eos else None
    unfinished = torch.ones(b, dtype=torch.long)
    generated = torch.empty(b, max_new_tokens, dtype=torch.long)
    # `rows`: the batch rows the cache holds, in cache order. Rows that ended are dropped from
    # the cache once they are a quarter of it (one copy of the cache), so later steps cost only
    # the rows still writing; `generate` keeps computing them to the end.
    rows = torch.arange(b)
    n = 0
    while True:
        # generate's order: the processors see the ids so far (the warpers here ignore them).
        scores = processors(input_ids[rows], logits) if processors else logits
        tokens = torch.full((b,), pad_token_id, dtype=torch.long)
        if do_sample:
            # One draw of shape [B, 1] over every row, as `generate` draws (rows that left the
            # cache draw from a uniform stand-in, and their token is replaced by the pad): each
            # row's token depends only on its own probabilities and its own share of the noise,
            # so the rows still writing draw what `generate` draws for them.
            probs = torch.full((b, scores.shape[-1]), 1.0 / scores.shape[-1])
            probs[rows] = F.softmax(scores, dim=-1)
            tokens = torch.multinomial(probs, num_samples=1).squeeze(1)
        else:
            tokens[rows] = torch.argmax(scores, dim=-1)
        tokens = tokens * unfinished + pad_token_id * (1 - unfinished)
        generated[:, n] = tokens
        n += 1
        if eos_t is not None:
            unfinished = unfinished & ~torch.isin(tokens, eos_t)
        if n == max_new_tokens or not bool(unfinished.any()):
            break
        live = unfinished[rows].bool()
        if int(live.sum()) * 4 <= 3 * len(rows):
            rows, position, mask = rows[live], position[live], mask[live]
            keys = [k[live] for k in keys]
            values = [v[live] for v in values]
        logits = step(tokens[rows], position, keys, values, p + n - 1, mask)
        position = position + 1
    return torch.cat([input_ids, generated[:, :n]], dim=1)


def lab_generate(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                 generation_config=None, **kwargs) -> torch.Tensor:
    """`model.generate(input_ids, attention_mask, generation_config, **kwargs)` for one sample
    per row, through this module's loop where `supports(model)` and the settings allow it."""
    settings = _settings(generation_config, kwargs)
    if settings is None or not supports(model) or settings.get("max_new_tokens") is None:
        return model.generate(input_ids=input_ids, attention_mask=attention_mask,
                              generation_config=generation_config, **kwargs)
    return sample(model, input_ids, attention_mask,
                  max_new_tokens=settings["max_new_tokens"],
                  do_sample=bool(settings["do_sample"]), temperature=settings["temperature"],
                  top_p=settings["top_p"], top_k=settings["top_k"], min_p=settings["min_p"],
                  eos_token_id=settings["eos_token_id"], pad_token_id=settings["pad_token_id"])
