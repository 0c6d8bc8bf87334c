"""`evaluate_policy`: run a policy on registered benchmarks (`evals.registry`) and pool the scores.

Per benchmark: the scorer's metrics `<benchmark>/<metric>` (floats averaged over rows, `Ratio`s
pooled; `evals.metrics.aggregate`), `mean_length` (characters of the sampled completions), `n`
(rows) and, for k >= 2, `self_bleu` (diversity of each prompt's samples on [0, 1], averaged over
prompts; `evals.metrics.self_bleu`).

maj@k (`eval.maj_k`, TTRL's baseline): on the TEST split of a benchmark in `VOTES`, the first
maj_k of the k samples vote, plus maj_k - k more drawn with seed + `VOTE_SEED_OFFSET` when maj_k
> k; pass@1 and the other metrics read the k samples as before. Held-out evaluations during
training (split `val`) skip it: they run every few steps and the curves never read it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from evals.items import item_record
from evals.metrics import aggregate, self_bleu
from evals.registry import (
    BENCHMARKS,
    VERSION,
    VOTES,
    Benchmark,
    ExternalBenchmark,
    benchmark_rows,
    headline_key,
    parse_spec,
)
from models.generation import generate

__all__ = ["BENCHMARKS", "VERSION", "VOTE_SEED_OFFSET", "Benchmark", "ExternalBenchmark",
           "evaluate_policy", "headline_key", "parse_spec"]

# The extra maj@k voters are drawn with this offset on the evaluation seed: a sampling stream
# apart from the k samples' own (and from the seeds 0, 1, 2, ... of other runs).
VOTE_SEED_OFFSET = 1_000_003

# (rows, prompts as the policy saw them, each row's samples) -> one dict of extra scores per row.
ModelScorer = Callable[[list[dict], list[str], list[list[str]]], Sequence[dict]]


def evaluate_policy(model, tokenizer, prepared: Path, benchmarks: list[str], ev, seed: int, *,
                    split: str = "test", n: int | None = None, k: int | None = None,
                    greedy: bool = True, chat=None, items: dict | None = None,
                    scorers: Mapping[str, ModelScorer] | None = None) -> dict:
    """Metrics `<benchmark>/<metric>` pooled over rows, plus mean length, row count and self-BLEU.

    `benchmarks` holds registry names and `"<name>:<path>"` specs. Every benchmark's rows are
    loaded and checked before the first generation, so a bad spec or row fails in seconds.
    `chat` (a `rewards.chat.ChatFormat`; None = auto) renders the prompts through the tokenizer's
    chat template as training does; with a template, a sample is scored (and measured) on its
    visible answer, the text after its think block (`rewards.chat.strip_thinking`).
    `items` (a dict), when given, receives each benchmark's per-row scores under its name
    (`evals.items.item_record`: what the evaluate stage writes to items.json); the returned
    metrics are the same with or without it. `scorers` (benchmark name -> `ModelScorer`) add
    model-dependent per-row scores to the benchmarks they name (the module docstring).
    """
    from rewards.chat import ChatFormat, strip_thinking

    chat = chat or ChatFormat()
    templated = chat.applies(tokenizer)

    def sample(prompts: list[str], **kwargs) -> list[list[str]]:
        if not templated:
            return generate(model, tokenizer, prompts, **kwargs)
        rendered = [chat.render(tokenizer, p) for p in prompts]
        return [[strip_thinking(t) for t in ts] for ts in generate(model, tokenizer, rendered, **kwargs)]

    loaded: dict[str, list[dict]] = {}
    for spec in benchmarks:
        name = parse_spec(spec)[0]
        if name in loaded:
            raise KeyError(f"benchmark {name!r} listed twice (its metrics would overwrite each other)")
        loaded[name] = benchmark_rows(spec, prepared, split, n or ev.n_test)
    num_samples = k or ev.k
    kw = dict(max_new_tokens=ev.max_new_tokens, batch_size=ev.batch_size, seed=seed)
    out: dict[str, float] = {}
    for name, rows in loaded.items():
        score = BENCHMARKS[name].score
        prompts = [r["prompt"] for r in rows]
        samples = sample(prompts, num_samples=num_samples, temperature=ev.temperature, **kw)
        greedy_out = ([g[0] for g in sample(prompts, greedy=True, **kw)]
                      if greedy else [""] * len(rows))
        per_row = [score(r, s, g) for r, s, g in zip(rows, samples, greedy_out)]
        if scorers and name in scorers:
            seen = [chat.render(tokenizer, p) for p in prompts] if templated else prompts
            extra_scores = scorers[name](rows, seen, samples)
            if len(extra_scores) != len(rows):
                raise ValueError(f"the model scorer of {name!r} returned {len(extra_scores)} rows "
                                 f"for {len(rows)}")
            for metrics, scores in zip(per_row, extra_scores):
                metrics.update(scores)
        vote, maj_k = VOTES.get(name), getattr(ev, "maj_k", None)
        if vote is not None and maj_k and split == "test":
            extra = ([[]] * len(rows) if maj_k <= num_samples else
                     sample(prompts, num_samples=maj_k - num_samples, temperature=ev.temperature,
                            **{**kw, "seed": seed + VOTE_SEED_OFFSET}))
            for r, metrics, s, more in zip(rows, per_row, samples, extra):
                metrics.update(vote(r, (list(s) + list(more))[:maj_k]))
        out.update({f"{name}/{key}": v for key, v in aggregate(per_row, keep_greedy=greedy).items()})
        if items is not None:
            items[name] = item_record(rows, per_row, BENCHMARKS[name].headline, keep_greedy=greedy)
        out[f"{name}/mean_length"] = float(np.mean([len(s) for ss in samples for s in ss]))
        out[f"{name}/n"] = len(rows)
        if num_samples >= 2:
            out[f"{name}/self_bleu"] = float(np.mean([self_bleu(ss) for ss in samples]))
    return out
