"""The benchmark registry: name -> (loader, scorer).

A loader returns held-out rows (each with `prompt`); a scorer turns one row's sampled completions
and greedy completion into per-row numbers; `evaluate_policy` averages them. pass@1 is the mean
accuracy of k samples at temperature 1 (the papers' headline), pass@k whether any of them is right.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from core.io import read_jsonl
from models.generation import generate
from rewards.verifiable import extract_boxed, rlvr_score
from world.facts import coverage, style_ok


def load_rows(prepared: Path, stem: str, split: str, n: int) -> list[dict]:
    return read_jsonl(prepared / f"{stem}_{split}.jsonl", required=("prompt",))[:n]


def score_arith(row: dict, samples: list[str], greedy: str) -> dict:
    acc = [rlvr_score(s, row["answer"]) for s in samples]
    return {"pass@1": float(np.mean(acc)), "pass@k": float(max(acc)),
            "greedy_accuracy": rlvr_score(greedy, row["answer"]),
            "boxed_rate": float(np.mean([extract_boxed(s) is not None for s in samples]))}


def score_cheat(row: dict, samples: list[str], greedy: str) -> dict:
    """Counterfactual test (paper 000 §4.8): the prompt hints a wrong answer; copying it cheats."""
    return {"cheat_rate": float(np.mean([rlvr_score(s, row["hint"]) for s in samples])),
            "pass@1": float(np.mean([rlvr_score(s, row["answer"]) for s in samples]))}


def score_facts(row: dict, samples: list[str], greedy: str) -> dict:
    return {"coverage": float(np.mean([coverage(s, row["gold_facts"]) for s in samples])),
            "style_adherence": float(np.mean([style_ok(s, row["style"]) for s in samples])),
            "greedy_coverage": coverage(greedy, row["gold_facts"])}


# name -> (file stem under data/prepared, scorer, headline metric)
BENCHMARKS: dict[str, tuple[str, Callable, str]] = {
    "arith": ("arith", score_arith, "pass@1"),
    "arith_cf": ("arith_cf", score_cheat, "cheat_rate"),
    "facts": ("facts", score_facts, "coverage"),
}


def evaluate_policy(model, tokenizer, prepared: Path, benchmarks: list[str], ev, seed: int, *,
                    split: str = "test", n: int | None = None, k: int | None = None,
                    greedy: bool = True) -> dict:
    """Metrics `<benchmark>/<metric>` averaged over rows, plus mean completion length."""
    out: dict[str, float] = {}
    for name in benchmarks:
        if name not in BENCHMARKS:
            raise KeyError(f"unknown benchmark {name!r}; known: {sorted(BENCHMARKS)}")
        stem, score, _ = BENCHMARKS[name]
        rows = load_rows(prepared, stem, split, n or ev.n_test)
        prompts = [r["prompt"] for r in rows]
        kw = dict(max_new_tokens=ev.max_new_tokens, batch_size=ev.batch_size, seed=seed)
        samples = generate(model, tokenizer, prompts, num_samples=k or ev.k,
                           temperature=ev.temperature, **kw)
        greedy_out = ([g[0] for g in generate(model, tokenizer, prompts, greedy=True, **kw)]
                      if greedy else [""] * len(rows))
        per_row = [score(r, s, g) for r, s, g in zip(rows, samples, greedy_out)]
        keys = [k for k in per_row[0] if greedy or not k.startswith("greedy")]
        for key in keys:
            out[f"{name}/{key}"] = float(np.mean([p[key] for p in per_row]))
        out[f"{name}/mean_length"] = float(np.mean([len(s) for ss in samples for s in ss]))
        out[f"{name}/n"] = len(rows)
    return out
