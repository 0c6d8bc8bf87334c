"""Tokens per second of the lab's sampler (models/sampler.py) against transformers' `generate`,
at the two shapes the lab samples at, measured in one run on one model.

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

Tokens/s counts every generated position of every row (rows that ended keep being padded until
the batch ends, in both samplers). Prints a table and writes JSON
`{"shapes": [{"name", "hf_tokens_per_s", "lab_tokens_per_s", "speedup", "greedy_identical"}],
"machine": {...}}` (default `benchmarks/results/sampling.json`).
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


def _shape(name: str, model, tokenizer, hf_batches, lab_batches, repeats: int, **kwargs) -> dict:
    hf_s, hf_tokens, hf_out = _timed(lambda enc, **kw: _hf(model, tokenizer, enc, **kw),
                                     hf_batches, repeats, **kwargs)
    lab_s, lab_tokens, lab_out = _timed(lambda enc, **kw: _lab(model, tokenizer, enc, **kw),
                                        lab_batches, repeats, **kwargs)
    row = {"name": name, "rows": sum(e["input_ids"].shape[0] for e in lab_batches),
           "hf_seconds": round(hf_s, 3), "lab_seconds": round(lab_s, 3),
           "hf_tokens_per_s": round(hf_tokens / hf_s), "lab_tokens_per_s": round(lab_tokens / lab_s),
           "speedup": round((lab_tokens / lab_s) / (hf_tokens / hf_s), 2), "greedy_identical": None}
    if kwargs.get("greedy"):
        hf_rows = [r for o, e in zip(hf_out, hf_batches) for r in o[:, e["input_ids"].shape[1]:]]
        lab_rows = [r for o, e in zip(lab_out, lab_batches) for r in o[:, e["input_ids"].shape[1]:]]
        row["greedy_identical"] = len(hf_rows) == len(lab_rows) and all(
            torch.equal(a, b) for a, b in zip(hf_rows, lab_rows))
    return row


def run(quick: bool, threads: int) -> dict:
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
    shapes = [
        _shape(f"rollout ({rows} rows)", model, tokenizer, rollout, rollout, repeats + 1,
               max_new_tokens=g.max_completion_length, greedy=False, temperature=g.temperature),
        _shape(f"evaluate, sampled ({len(test)} x {ev.k})", model, tokenizer, sampled_hf,
               sampled_lab, repeats, max_new_tokens=ev.max_new_tokens, greedy=False,
               temperature=ev.temperature),
        _shape(f"evaluate, greedy ({len(test)})", model, tokenizer, greedy_hf, greedy_lab, repeats,
               max_new_tokens=ev.max_new_tokens, greedy=True, temperature=1.0),
    ]
    # The rollout's greedy check (same batch for both): identical tokens at GRPO's shape too.
    check = _shape("rollout, greedy", model, tokenizer, rollout, rollout, 1,
                   max_new_tokens=g.max_completion_length, greedy=True, temperature=1.0)
    shapes[0]["greedy_identical"] = check["greedy_identical"]
    return {"shapes": shapes, "quick": quick,
            "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                        "threads": threads, "torch": torch.__version__,
                        "parameters": sum(p.numel() for p in model.parameters())}}


def table(result: dict) -> str:
    lines = ["| shape | rows | generate tok/s | lab tok/s | speedup | greedy identical |",
             "|---|---|---|---|---|---|"]
    for s in result["shapes"]:
        same = "-" if s["greedy_identical"] is None else ("yes" if s["greedy_identical"] else "NO")
        lines.append(f"| {s['name']} | {s['rows']} | {s['hf_tokens_per_s']} | "
                     f"{s['lab_tokens_per_s']} | {s['speedup']}x | {same} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="40 test prompts, one repeat")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--json", type=Path, default=RESULTS, help=f"output (default {RESULTS})")
    args = ap.parse_args()
    result = run(args.quick, args.threads)
    print(table(result))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
