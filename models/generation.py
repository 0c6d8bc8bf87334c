"""Batched sampling for evaluation: through a vLLM engine where one holds the model
(models/vllm_engine.py: the evaluate stage with `eval.sampler: vllm`, held-out evaluations of a
run with vLLM rollouts), else the lab's sampler for the lab's models on the CPU
(models/sampler.py), else transformers `generate`."""

from __future__ import annotations

import torch


@torch.no_grad()
def generate(model, tokenizer, prompts: list[str], *, num_samples: int = 1, temperature: float = 1.0,
             greedy: bool = False, max_new_tokens: int = 64, batch_size: int = 64,
             seed: int = 0) -> list[list[str]]:
    """`num_samples` completions per prompt (decoded, special tokens removed), in prompt order.

    Sampling is seeded by `seed` inside `torch.random.fork_rng`: the same samples every time, and
    the caller's RNG streams (TRL's per-rank generation seeds, during a held-out evaluation) are
    left exactly where they were."""
    from models import vllm_engine

    tied = vllm_engine.attached(model)
    if tied is not None:  # a vLLM engine holds this model (the evaluate stage, colocate training)
        llm, sync = tied
        if sync is not None:
            sync()
        return vllm_engine.generate(llm, tokenizer, prompts, num_samples=num_samples,
                                    temperature=temperature, greedy=greedy,
                                    max_new_tokens=max_new_tokens, seed=seed)
    device = next(model.parameters()).device
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        return _generate(model, tokenizer, prompts, device, num_samples=num_samples,
                         temperature=temperature, greedy=greedy, max_new_tokens=max_new_tokens,
                         batch_size=batch_size)


# Rows per call of the lab sampler: its cost per row falls with the batch (the matrix products
# run nearer the CPU's peak), and its KV cache for the tiny model at this many rows and the
# evaluate stage's lengths is a few hundred MB.
LAB_ROWS = 1024


def _generate(model, tokenizer, prompts: list[str], device, *, num_samples: int, temperature: float,
              greedy: bool, max_new_tokens: int, batch_size: int) -> list[list[str]]:
    from models.sampler import lab_generate, supports

    out: list[list[str]] = []
    n = 1 if greedy else num_samples
    rows = max(batch_size, LAB_ROWS) if supports(model) else batch_size
    per_batch = max(1, rows // n)
    for i in range(0, len(prompts), per_batch):
        chunk = prompts[i:i + per_batch]
        enc = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
        # Rows repeated here rather than by `num_return_sequences`: the same rows, in the same
        # order, as `generate` makes of them.
        ids = lab_generate(
            model, enc["input_ids"].repeat_interleave(n, dim=0),
            enc["attention_mask"].repeat_interleave(n, dim=0), do_sample=not greedy,
            temperature=None if greedy else temperature, top_p=None, top_k=None,
            max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id)
        texts = tokenizer.batch_decode(ids[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        out.extend(texts[j * n:(j + 1) * n] for j in range(len(chunk)))
    return out
