"""Batched sampling for evaluation (transformers `generate`; vLLM serves rollouts on GPUs)."""

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
    device = next(model.parameters()).device
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        return _generate(model, tokenizer, prompts, device, num_samples=num_samples,
                         temperature=temperature, greedy=greedy, max_new_tokens=max_new_tokens,
                         batch_size=batch_size)


def _generate(model, tokenizer, prompts: list[str], device, *, num_samples: int, temperature: float,
              greedy: bool, max_new_tokens: int, batch_size: int) -> list[list[str]]:
    out: list[list[str]] = []
    per_batch = max(1, batch_size // (1 if greedy else num_samples))
    for i in range(0, len(prompts), per_batch):
        chunk = prompts[i:i + per_batch]
        enc = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
        n = 1 if greedy else num_samples
        ids = model.generate(
            **enc, do_sample=not greedy, temperature=None if greedy else temperature,
            top_p=None, top_k=None, num_return_sequences=n, max_new_tokens=max_new_tokens,
            pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        )
        texts = tokenizer.batch_decode(ids[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        out.extend(texts[j * n:(j + 1) * n] for j in range(len(chunk)))
    return out
