"""Tokens per second of the lab's sampler (models/sampler.py) and vLLM (models/vllm_engine.py, its
CPU build here) against transformers' `generate`, at the shapes the lab samples at, measured in
one run on one model; and which of them is fastest, with greedy output identical, for each kind of
stage (what params.yaml's `grpo.use_vllm` and `eval.sampler` default to; tests/test_vllm.py checks
that they agree with the committed record).

    python -m benchmarks.sampling                  # both shapes, 1 thread (a pipeline stage's share)
    python -m benchmarks.sampling --quick          # fewer prompts and repeats (under two minutes)
    python -m benchmarks.sampling --threads 2 --json /tmp/sampling.json

The model has the default base's shape (params.yaml `base_model.arch`, the tokenizer's vocabulary)
with random weights: no base is needed, and a random model never stops early, so every row
generates the full budget (the worst case for both samplers). Prompts are the prepared test split's,
tokenised by a tokenizer trained on the world's corpus as the base's is.

- `rollout`: GRPO's generation batch, `grpo.prompts_per_step` x `grpo.num_generations` rows of
  train prompts, `grpo.max_completion_length` new tokens, sampled at `grpo.temperature`.
- `evaluate (sampled)`: the evaluate stage's `n_test` test prompts x `eval.k` samples at
  `eval.max_new_tokens`; `generate` in `eval.batch_size`-row calls (the evaluate stage's batching
  before the lab sampler), the lab sampler in one call of every row (models/generation.py).
- `evaluate (greedy)`: the same prompts once, greedy; `greedy_identical` says whether the two
  produce the same tokens for every row.

vLLM runs every row of a shape in one call (its scheduler batches them), from an in-process
engine built once (`vllm_startup_seconds`). `stages` prices a training and an evaluate stage from
the shapes and the calls each makes (`stage_calls`), vLLM's start-up charged once to each, and
names the fastest sampler with greedy output identical: the defaults of `grpo.use_vllm` and
`eval.sampler`. Its tokens/s
counts the lab's positions for the same rows (vLLM stops a row at its EOS); its greedy check
compares each row up to its first EOS.

Tokens/s counts every generated position of every row (rows that ended keep being padded until
the batch ends, in both samplers). Prints a table and writes JSON
`{"shapes": [{"name", "hf_tokens_per_s", "lab_tokens_per_s", "speedup", "greedy_identical"}],
"machine": {...}}` (default `benchmarks/results/sampling.json`).

`--profile`: the lab sampler's per-step profile at the same shapes, instead of the comparison
(where a shape stops short of `generate` x3, where its time goes). Each shape's lab call runs once
to warm up, once timed (seconds per step) and once under `torch.profiler` (CPU); the self CPU time
of every op is charged to the top-level op it ran under (`aten::exponential_` under
`aten::multinomial` is sampling, `aten::copy_` under `aten::to` is not a cache write), and the
top-level ops are grouped into the parts of `PARTS` by `part_of`. Next to the shares, two floors
from the model's config: the bytes of KV cache attention reads per step (rows x layers x 2 x cached
length x kv heads x head dim x 4, averaged over the steps) and the matmul FLOPs per step (2 x the
matmul weights x rows). Writes `{"shapes": [{"name", "rows", "steps", "seconds_per_step", "parts",
"kv_bytes_per_step", "matmul_gflop_per_step"}], "machine": {...}, "threads": N}` (default
`benchmarks/results/sampling_profile.json`; `sampling.json` is left as it is).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import torch

from core.params import ROOT, load

RESULTS = ROOT / "benchmarks" / "results" / "sampling.json"
PROFILE = ROOT / "benchmarks" / "results" / "sampling_profile.json"

# The parts of a decoding step (the JSON's keys), in the table's order, with the table's label.
PARTS = {
    "matmuls (qkv, o, gate/up, down, lm_head)": "matmuls",
    "attention (SDPA over the KV cache)": "attention",
    "KV cache writes": "KV writes",
    "logits warpers + sampling": "sampling",
    "norms, RoPE, activations, elementwise": "elementwise",
    "row selection, compaction of finished rows": "row selection",
    "other (embedding, views, allocation, loop tests)": "other",
}
_MATMUL, _ATTENTION, _WRITES, _SAMPLING, _ELEMENTWISE, _ROWS, _OTHER = PARTS
# Top-level op (without its `aten::` prefix) -> part, as the profiler names them for
# models/sampler.py: F.linear is `linear` (its `mm` a child), SDPA is
# `scaled_dot_product_attention` (the flash kernel and its mask `where` children), a cache write
# `k_cache[:, :, slot] = k` is a top-level `copy_` (beside its `slice`/`select` views), a draw is
# `multinomial` (`exponential_` its child), `probs[rows] = ...` is `index_put_`, `self.cos[position]`,
# `tokens[rows]` and the compaction's `k[live]` are `index`.
_OPS = {
    **dict.fromkeys(("linear", "matmul", "mm", "addmm", "bmm", "baddbmm"), _MATMUL),
    **dict.fromkeys(("scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu",
                     "_scaled_dot_product_attention_math", "_scaled_dot_product_efficient_attention"),
                    _ATTENTION),
    **dict.fromkeys(("copy_", "index_copy_", "slice_scatter"), _WRITES),
    **dict.fromkeys(("softmax", "_softmax", "log_softmax", "_log_softmax", "multinomial",
                     "exponential_", "argmax", "topk", "sort", "cumsum", "scatter", "scatter_",
                     "gather", "masked_fill", "masked_fill_", "index_put_", "_index_put_impl_",
                     "isin", "full"), _SAMPLING),
    **dict.fromkeys(("mul", "add", "sub", "rsub", "neg", "div", "pow", "mean", "sum", "rsqrt",
                     "silu", "cat", "where", "exp", "sin", "cos", "clone", "__and__", "__or__",
                     "bitwise_and", "bitwise_not", "bitwise_or", "eq", "ne", "lt", "le", "gt",
                     "ge"), _ELEMENTWISE),
    **dict.fromkeys(("index", "index_select", "nonzero", "masked_select"), _ROWS),
}


def part_of(op: str) -> str:
    """The part of `PARTS` a top-level profiler op (`aten::mm`, `mm`) belongs to."""
    return _OPS.get(op.removeprefix("aten::"), _OTHER)


def group_profile(events) -> dict[str, float]:
    """Fraction of the self CPU time of `events` (torch profiler `FunctionEvent`s: `name`,
    `cpu_parent`, `cpu_time_total`) in each part: a top-level op's total time is its own self time
    and that of every op under it."""
    totals = dict.fromkeys(PARTS, 0.0)
    for e in events:
        if e.cpu_parent is None:
            totals[part_of(e.name)] += e.cpu_time_total
    whole = sum(totals.values()) or 1.0
    return {part: round(t / whole, 4) for part, t in totals.items()}


def _model_and_prompts(n_prompts: int):
    from core.io import read_jsonl
    from models.tiny import build_model, build_tokenizer, corpus
    from world import generate_world

    params = load()
    with tempfile.TemporaryDirectory() as tmp:
        generate_world(params.world, tmp)
        tokenizer = build_tokenizer(corpus(Path(tmp)), params.base_model.vocab_size)
        rows = read_jsonl(Path(tmp) / "arith_test.jsonl")[:n_prompts]
        train = read_jsonl(Path(tmp) / "arith_train.jsonl")
    tokenizer.padding_side = "left"
    model = build_model(params.base_model.arch, tokenizer, seed=0).eval()
    return params, model, tokenizer, [r["prompt"] for r in rows], [r["prompt"] for r in train]


def _encode(tokenizer, prompts: list[str]):
    return tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)


def _hf(model, tokenizer, enc, *, max_new_tokens: int, greedy: bool, temperature: float):
    return model.generate(**enc, do_sample=not greedy, temperature=None if greedy else temperature,
                          top_p=None, top_k=None, max_new_tokens=max_new_tokens,
                          pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)


def _lab(model, tokenizer, enc, *, max_new_tokens: int, greedy: bool, temperature: float):
    from models.sampler import sample

    return sample(model, enc["input_ids"], enc["attention_mask"], max_new_tokens=max_new_tokens,
                  do_sample=not greedy, temperature=temperature,
                  eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)


def _vllm_engine(model, tokenizer, max_model_len: int, compiled: bool = False):
    """(an in-process vLLM engine holding `model`, seconds it took to build), or (None, reason)
    where vLLM cannot run here. The model is saved to a scratch folder first (vLLM loads from a
    folder); its compile cache (~/.cache/vllm) is warm after the first build on a machine."""
    from models import vllm_engine

    reason = vllm_engine.unavailable()
    if reason:
        return None, reason
    folder = tempfile.mkdtemp(prefix="sampling-vllm-")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    start = time.perf_counter()
    llm = vllm_engine.engine(folder, max_model_len=max_model_len, enforce_eager=not compiled)
    return llm, round(time.perf_counter() - start, 1)


def _vllm(llm, tokenizer, enc, *, max_new_tokens: int, greedy: bool, temperature: float):
    """The batch's rows through vLLM in one call (continuous batching does its own), each
    prompt without its left padding; completions as token-id lists."""
    from models import vllm_engine

    prompts = [ids[mask.bool()].tolist() for ids, mask in zip(enc["input_ids"], enc["attention_mask"])]
    return vllm_engine.sample_ids(llm, prompts, greedy=greedy, temperature=temperature,
                                  max_new_tokens=max_new_tokens, eos_token_id=tokenizer.eos_token_id)


def _until_eos(row, eos: int) -> list[int]:
    """A completion's tokens up to and with its first EOS (the padding after it dropped)."""
    row = [int(t) for t in row]
    return row[:row.index(eos) + 1] if eos in row else row


def _timed(fn, batches, repeats: int, **kwargs) -> tuple[float, int, list[torch.Tensor]]:
    """Best wall time over `repeats` of sampling every batch, generated positions, outputs."""
    best, outputs = float("inf"), []
    for _ in range(repeats):
        torch.manual_seed(0)
        start = time.perf_counter()
        outputs = [fn(enc=enc, **kwargs) for enc in batches]
        best = min(best, time.perf_counter() - start)
    tokens = sum((o.shape[1] - e["input_ids"].shape[1]) * o.shape[0] for o, e in zip(outputs, batches))
    return best, tokens, outputs


def _shape(name: str, model, tokenizer, hf_batches, lab_batches, repeats: int, llm=None,
           **kwargs) -> dict:
    hf_s, hf_tokens, hf_out = _timed(lambda enc, **kw: _hf(model, tokenizer, enc, **kw),
                                     hf_batches, repeats, **kwargs)
    lab_s, lab_tokens, lab_out = _timed(lambda enc, **kw: _lab(model, tokenizer, enc, **kw),
                                        lab_batches, repeats, **kwargs)
    row = {"name": name, "rows": sum(e["input_ids"].shape[0] for e in lab_batches),
           "hf_seconds": round(hf_s, 3), "lab_seconds": round(lab_s, 3),
           "hf_tokens_per_s": round(hf_tokens / hf_s), "lab_tokens_per_s": round(lab_tokens / lab_s),
           "speedup": round((lab_tokens / lab_s) / (hf_tokens / hf_s), 2), "greedy_identical": None}
    vllm_out = None
    if llm is not None:
        # Timed as the others (best of `repeats`); its work counted as the lab's (the same rows
        # and budget: vLLM stops a row at its EOS where the lab pads it to the batch's end).
        times = []
        for _ in range(max(2, repeats)):
            start = time.perf_counter()
            vllm_out = [r for enc in lab_batches for r in _vllm(llm, tokenizer, enc, **kwargs)]
            times.append(time.perf_counter() - start)
        best = min(times)
        # An engine's first call pays a warm-up (`stage_costs` charges it once per stage).
        row.update(vllm_first_seconds=round(times[0], 3), vllm_seconds=round(best, 3),
                   vllm_tokens_per_s=round(lab_tokens / best),
                   vllm_speedup=round(hf_s / best, 2), vllm_greedy_identical=None)
    if kwargs.get("greedy"):
        hf_rows = [r for o, e in zip(hf_out, hf_batches) for r in o[:, e["input_ids"].shape[1]:]]
        lab_rows = [r for o, e in zip(lab_out, lab_batches) for r in o[:, e["input_ids"].shape[1]:]]
        row["greedy_identical"] = len(hf_rows) == len(lab_rows) and all(
            torch.equal(a, b) for a, b in zip(hf_rows, lab_rows))
        if vllm_out is not None:
            eos = tokenizer.eos_token_id
            row["vllm_greedy_identical"] = len(vllm_out) == len(hf_rows) and all(
                _until_eos(v[0], eos) == _until_eos(h, eos) for v, h in zip(vllm_out, hf_rows))
    return row


def fastest(costs: dict[str, float], identical: dict[str, bool | None]) -> str:
    """The sampler of least cost among those whose greedy output is identical to `generate`'s
    (the reference, identical to itself).

    >>> fastest({"generate": 10.0, "lab": 8.0, "vllm": 5.0}, {"lab": True, "vllm": False})
    'lab'
    """
    ok = {k: v for k, v in costs.items() if k == "generate" or identical.get(k)}
    return min(ok, key=ok.__getitem__)


def stage_calls(params) -> dict[str, dict[str, float]]:
    """How many calls of each measured shape one stage of the default run makes, from params:
    a training samples `grpo.max_steps` rollouts and, every `grpo.heldout_every` steps and at
    step 0, a held-out evaluation of the val and the test split (`eval.heldout_k` samples per
    prompt: the sampled shape scaled by heldout_k / k rows); an evaluate stage samples each of
    `eval.benchmarks` (sampled and greedy), the majority vote's extra maj_k - k samples per
    prompt of its first (arith), and the self-evaluation probe (heldout_k per val prompt).

    >>> from core.params import load
    >>> calls = stage_calls(load())
    >>> calls["training"]["rollout"] == load().grpo.max_steps
    True
    """
    g, ev = params.grpo, params.eval
    heldout = (g.max_steps // g.heldout_every + 1) * 2 * ev.heldout_k / ev.k
    votes = max(0, (ev.maj_k or 0) - ev.k) / ev.k
    return {"training": {"rollout": g.max_steps, "sampled": heldout},
            "evaluate": {"sampled": len(ev.benchmarks) + votes + ev.heldout_k / ev.k,
                         "greedy": len(ev.benchmarks)}}


def stage_costs(shapes: list[dict], startup: float | None, calls: dict) -> dict:
    """What each sampler costs each kind of stage (`stage_calls`: the calls of each shape), from
    a run's shapes (in `run`'s order: rollout, evaluate sampled, evaluate greedy), and which is
    fastest with greedy identical. vLLM builds one engine per stage: its start-up and its first
    call's warm-up (the rollout shape's first call over its best) are added once.

    >>> shapes = [{"hf_seconds": 1.0, "lab_seconds": 0.8, "vllm_seconds": 0.5,
    ...            "vllm_first_seconds": 2.5, "greedy_identical": True, "vllm_greedy_identical": True},
    ...           {"hf_seconds": 9.0, "lab_seconds": 8.0, "vllm_seconds": 3.0},
    ...           {"hf_seconds": 3.0, "lab_seconds": 2.0, "vllm_seconds": 1.0,
    ...            "greedy_identical": True, "vllm_greedy_identical": True}]
    >>> costs = stage_costs(shapes, startup=20.0,
    ...                     calls={"training": {"rollout": 100}, "evaluate": {"sampled": 1, "greedy": 1}})
    >>> costs["training"]
    {'seconds': {'generate': 100.0, 'lab': 80.0, 'vllm': 72.0}, 'fastest': 'vllm'}
    >>> costs["evaluate"]
    {'seconds': {'generate': 12.0, 'lab': 10.0, 'vllm': 26.0}, 'fastest': 'lab'}
    """
    by_name = dict(zip(("rollout", "sampled", "greedy"), shapes))
    rollout, greedy = by_name["rollout"], by_name["greedy"]
    keys = {"generate": "hf_seconds", "lab": "lab_seconds", "vllm": "vllm_seconds"}
    out = {}
    for stage, counts in calls.items():
        costs = {name: round(sum(by_name[shape][key] * n for shape, n in counts.items()), 1)
                 for name, key in keys.items() if all(key in by_name[s] for s in counts)}
        if "vllm" in costs and startup is not None:
            warm_up = rollout["vllm_first_seconds"] - rollout["vllm_seconds"]
            costs["vllm"] = round(costs["vllm"] + startup + warm_up, 1)
        check = rollout if "rollout" in counts else greedy
        identical = {"lab": check["greedy_identical"], "vllm": check.get("vllm_greedy_identical")}
        out[stage] = {"seconds": costs, "fastest": fastest(costs, identical)}
    return out


def run(quick: bool, threads: int, vllm: bool = True, compiled: bool = False) -> dict:
    torch.set_num_threads(threads)
    n_test = 40 if quick else None
    params, model, tokenizer, test, train = _model_and_prompts(n_test or load().eval.n_test)
    g, ev = params.grpo, params.eval
    repeats = 1 if quick else 2
    rows = g.prompts_per_step * g.num_generations
    rollout = [_encode(tokenizer, [p for p in train[:g.prompts_per_step]
                                   for _ in range(g.num_generations)])]
    per_call = max(1, ev.batch_size // ev.k)
    sampled_hf = [_encode(tokenizer, [p for p in test[i:i + per_call] for _ in range(ev.k)])
                  for i in range(0, len(test), per_call)]
    sampled_lab = [_encode(tokenizer, [p for p in test for _ in range(ev.k)])]
    greedy_hf = [_encode(tokenizer, test[i:i + ev.batch_size])
                 for i in range(0, len(test), ev.batch_size)]
    greedy_lab = [_encode(tokenizer, test)]
    llm, startup = (_vllm_engine(model, tokenizer, model.config.max_position_embeddings, compiled)
                    if vllm else (None, "--no-vllm"))
    vllm_note = startup if llm is None else None
    shapes = [
        _shape(f"rollout ({rows} rows)", model, tokenizer, rollout, rollout, repeats + 1, llm=llm,
               max_new_tokens=g.max_completion_length, greedy=False, temperature=g.temperature),
        _shape(f"evaluate, sampled ({len(test)} x {ev.k})", model, tokenizer, sampled_hf,
               sampled_lab, repeats, llm=llm, max_new_tokens=ev.max_new_tokens, greedy=False,
               temperature=ev.temperature),
        _shape(f"evaluate, greedy ({len(test)})", model, tokenizer, greedy_hf, greedy_lab, repeats,
               llm=llm, max_new_tokens=ev.max_new_tokens, greedy=True, temperature=1.0),
    ]
    # The rollout's greedy check (same batch for both): identical tokens at GRPO's shape too.
    check = _shape("rollout, greedy", model, tokenizer, rollout, rollout, 1, llm=llm,
                   max_new_tokens=g.max_completion_length, greedy=True, temperature=1.0)
    shapes[0]["greedy_identical"] = check["greedy_identical"]
    if llm is not None:
        shapes[0]["vllm_greedy_identical"] = check["vllm_greedy_identical"]
    vllm_startup = None if llm is None else startup
    return {"shapes": shapes, "quick": quick, "machine": _machine(model, threads),
            "vllm_startup_seconds": vllm_startup, "vllm_unavailable": vllm_note,
            "vllm_compiled": compiled,
            "calls": stage_calls(params), "stages": stage_costs(shapes, vllm_startup, stage_calls(params))}


def cpu() -> dict:
    """This machine's CPU as the benchmark records say it: the architecture, the cores, and the
    widest vector instructions the kernels can use (`vector`: hosts here vary, some AVX-512, some
    AVX2 only, and a per-step loop's gain over `generate` moves with it).

    >>> sorted(cpu())
    ['cores', 'cpu', 'vector']
    """
    try:
        flags = next((line.split(":", 1)[1].split() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith(("flags", "Features"))), [])
    except OSError:
        flags = []
    vector = next((name for flag, name in (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("asimd", "NEON"))
                   if flag in flags), "unknown")
    return {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(), "vector": vector}


def _machine(model, threads: int) -> dict:
    return {**cpu(), "threads": threads, "torch": torch.__version__,
            "parameters": sum(p.numel() for p in model.parameters())}


def _floors(model, rows: int, prompt: int, steps: int) -> tuple[int, float]:
    """KV cache bytes attention reads per step, averaged over the steps (step n attends over the
    prompt and n tokens; the prefill's first token reads none), and matmul GFLOP per step (2 x the
    matmul weights of benchmarks/profile_run.py x rows)."""
    from benchmarks.profile_run import matmul_weights

    config = model.config
    layers, d, heads, kv = (config.num_hidden_layers, config.hidden_size, config.num_attention_heads,
                            config.num_key_value_heads)
    hd = getattr(config, "head_dim", None) or d // heads
    cached = sum(prompt + n for n in range(1, steps)) / steps
    kv_bytes = rows * layers * 2 * cached * kv * hd * 4
    return round(kv_bytes), round(2 * matmul_weights(model) * rows / 1e9, 4)


def _profile_shape(name: str, model, tokenizer, enc, **kwargs) -> dict:
    from torch.profiler import ProfilerActivity, profile

    _lab(model, tokenizer, enc, **kwargs)  # warm-up
    torch.manual_seed(0)
    start = time.perf_counter()
    out = _lab(model, tokenizer, enc, **kwargs)
    seconds = time.perf_counter() - start
    torch.manual_seed(0)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        _lab(model, tokenizer, enc, **kwargs)
    rows, prompt = enc["input_ids"].shape
    steps = out.shape[1] - prompt
    kv_bytes, gflop = _floors(model, rows, prompt, steps)
    return {"name": name, "rows": rows, "prompt_tokens": prompt, "steps": steps,
            "seconds_per_step": round(seconds / steps, 5), "parts": group_profile(prof.events()),
            "kv_bytes_per_step": kv_bytes, "matmul_gflop_per_step": gflop,
            **_step_floor(model, tokenizer, enc, **kwargs)}


def _step_floor(model, tokenizer, enc, **kwargs) -> dict:
    """Two reference times per step for the same batch: `generate`'s (the goal is a third of
    it), and the lab sampler's on the batch's first row alone, same prompt length and steps:
    the per-step cost that does not shrink with fewer rows (one pass of every op of the loop),
    a floor no batching removes."""
    one = {k: v[:1] for k, v in enc.items()}
    out = {}
    for key, fn, batch in (("hf_seconds_per_step", _hf, enc), ("one_row_seconds_per_step", _lab, one)):
        # `_timed`'s best of two: the first call is the warm-up.
        seconds, tokens, _ = _timed(lambda enc, fn=fn, **kw: fn(model, tokenizer, enc, **kw), [batch], 2, **kwargs)
        out[key] = round(seconds / max(1, tokens // batch["input_ids"].shape[0]), 5)
    return out


def run_profile(quick: bool, threads: int) -> dict:
    """The lab sampler's per-step profile at the lab's three shapes (its own batching)."""
    torch.set_num_threads(threads)
    params, model, tokenizer, test, train = _model_and_prompts(40 if quick else load().eval.n_test)
    g, ev = params.grpo, params.eval
    rows = g.prompts_per_step * g.num_generations
    rollout = _encode(tokenizer, [p for p in train[:g.prompts_per_step] for _ in range(g.num_generations)])
    shapes = [
        _profile_shape(f"rollout ({rows} rows)", model, tokenizer, rollout,
                       max_new_tokens=g.max_completion_length, greedy=False, temperature=g.temperature),
        _profile_shape(f"evaluate, sampled ({len(test)} x {ev.k})", model, tokenizer,
                       _encode(tokenizer, [p for p in test for _ in range(ev.k)]),
                       max_new_tokens=ev.max_new_tokens, greedy=False, temperature=ev.temperature),
        _profile_shape(f"evaluate, greedy ({len(test)})", model, tokenizer, _encode(tokenizer, test),
                       max_new_tokens=ev.max_new_tokens, greedy=True, temperature=1.0),
    ]
    from benchmarks.profile_run import matmul_peak

    return {"shapes": shapes, "quick": quick, "machine": _machine(model, threads), "threads": threads,
            "matmul_peak_gflops": round(max(matmul_peak(threads).values()), 1)}


def _same(flag) -> str:
    return "-" if flag is None else ("yes" if flag else "NO")


def table(result: dict) -> str:
    """Per shape: each sampler's tokens/s, its speed over `generate`, and whether its greedy
    output is `generate`'s; then, per kind of stage, each sampler's seconds for the stage's
    calls (`stage_calls`; vLLM's with its engine's start-up) and the fastest with greedy
    identical."""
    lines = ["| shape | rows | generate tok/s | lab tok/s | lab speedup | lab greedy identical"
             " | vLLM tok/s | vLLM speedup | vLLM greedy identical |",
             "|---|---|---|---|---|---|---|---|---|"]
    for s in result["shapes"]:
        vllm = (f"{s['vllm_tokens_per_s']} | {s['vllm_speedup']}x | "
                f"{_same(s['vllm_greedy_identical'])}" if "vllm_seconds" in s else "- | - | -")
        lines.append(f"| {s['name']} | {s['rows']} | {s['hf_tokens_per_s']} | "
                     f"{s['lab_tokens_per_s']} | {s['speedup']}x | {_same(s['greedy_identical'])} | "
                     f"{vllm} |")
    if result.get("stages"):
        lines += ["", "| stage | generate s | lab s | vLLM s (with start-up) | fastest, greedy identical |",
                  "|---|---|---|---|---|"]
        for stage, c in result["stages"].items():
            sec = c["seconds"]
            lines.append(f"| {stage} | {sec.get('generate', '-')} | {sec.get('lab', '-')} | "
                         f"{sec.get('vllm', '-')} | {c['fastest']} |")
    if result.get("vllm_startup_seconds") is not None:
        how = "compiled" if result.get("vllm_compiled") else "eager"
        lines += ["", f"vLLM's engine start-up ({how}): {result['vllm_startup_seconds']} s."]
    elif result.get("vllm_unavailable"):
        lines += ["", f"vLLM not measured: {result['vllm_unavailable']}."]
    return "\n".join(lines)


def profile_table(result: dict) -> str:
    """Per shape: rows, ms per step, each part's share of the self CPU time, and the two floors
    with the rates they imply (KV GB/s over attention's time, matmul GFLOP/s over the matmuls').
    Then the ceiling: the step's time in the matmuls and SDPA, the kernels `generate` calls for
    the same products (here q/k/v and gate/up are one product each: fewer calls, the same FLOPs;
    SDPA's own summation order is what keeps greedy outputs token-identical), and `generate`'s
    step over that time: the most a loop that keeps those kernels can gain over `generate`."""
    lines = ["| shape | rows | ms/step | " + " | ".join(f"{label} %" for label in PARTS.values())
             + " | KV MB/step | matmul GFLOP/step | attention GB/s | matmul GFLOP/s"
             + " | `generate` ms/step | goal ms/step | 1-row ms/step | floor ms/step"
             + " | matmuls + SDPA ms/step | ceiling |",
             "|---|---:|---:|" + "---:|" * len(PARTS) + "---:|" * 10]
    peak = result.get("matmul_peak_gflops")
    for s in result["shapes"]:
        sec, parts = s["seconds_per_step"], s["parts"]
        attention_s, matmul_s = sec * parts[_ATTENTION], sec * parts[_MATMUL]
        gbs = f"{s['kv_bytes_per_step'] / attention_s / 1e9:.1f}" if attention_s > 0 else ""
        gflops = f"{s['matmul_gflop_per_step'] / matmul_s:.1f}" if matmul_s > 0 else ""
        hf, one = s.get("hf_seconds_per_step"), s.get("one_row_seconds_per_step")
        # The floor: the 1-row step plus this step's matmuls at the machine's measured peak.
        floor = None if one is None or not peak else one + s["matmul_gflop_per_step"] / peak
        kernels = attention_s + matmul_s
        ceiling = f"{hf / kernels:.2f}x" if hf is not None and kernels > 0 else ""
        refs = " | ".join("" if v is None else f"{v * 1e3:.1f}"
                          for v in (hf, None if hf is None else hf / 3, one, floor, kernels))
        refs += f" | {ceiling}"
        lines.append(f"| {s['name']} | {s['rows']} | {sec * 1e3:.1f} | "
                     + " | ".join(f"{100 * parts.get(part, 0.0):.0f}" for part in PARTS)
                     + f" | {s['kv_bytes_per_step'] / 1e6:.1f} | {s['matmul_gflop_per_step']:.2f}"
                     f" | {gbs} | {gflops} | {refs} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="40 test prompts, one repeat")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--no-vllm", action="store_true", help="leave vLLM's column out")
    ap.add_argument("--compiled", action="store_true",
                    help="vLLM with torch.compile (default: eager, as the lab builds it on the CPU)")
    ap.add_argument("--profile", action="store_true",
                    help=f"the lab sampler's per-step profile instead (default output {PROFILE})")
    ap.add_argument("--json", type=Path, default=None,
                    help=f"output (default {RESULTS}, with --profile {PROFILE})")
    args = ap.parse_args()
    if args.profile:
        result = run_profile(args.quick, args.threads)
        print(profile_table(result))
        args.json = args.json or PROFILE
    else:
        result = run(args.quick, args.threads, vllm=not args.no_vllm, compiled=args.compiled)
        print(table(result))
        args.json = args.json or RESULTS
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
