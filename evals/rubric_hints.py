"""RLCER's inference option (paper 004 §5.5): the policy's own rubrics as in-prompt hints.

Per test prompt: the policy answers once (greedy), reads its answer as the rubricator (RLCER's
template, greedy) and writes rubrics; the rubrics go into the prompt as hints
(`rewards.rlcer.hint_prompt`) and the policy is sampled again. Reported as
`arith_hints/pass@1` (k samples at the eval temperature) next to the rubric parse rate, so it
reads against `arith/pass@1` of the same policy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from evals.registry import load_rows
from models.generation import generate
from rewards.evolving_rubrics import parse_rubrics
from rewards.rlcer import hint_prompt
from rewards.verifiable import rlvr_score


def hinted_pass_at_1(model: Any, tokenizer: Any, rows: list[dict], template: str, ev: Any, seed: int,
                     max_rubric_tokens: int, chat: Any = None) -> dict[str, float]:
    """pass@1 of hinted prompts (``ev``: the evaluation settings, ``template``: RLCER's rubricator
    template), with the share of rubricator replies that parsed. ``chat`` (a
    ``rewards.chat.ChatFormat``; None = auto): every prompt through the chat template, as in
    training; rubrics are parsed from a reply's visible answer."""
    from rewards.chat import ChatFormat, strip_thinking

    chat = chat or ChatFormat()

    def render(texts: list[str]) -> list[str]:
        return [chat.render(tokenizer, t) for t in texts]

    kw = dict(batch_size=ev.batch_size, seed=seed)
    prompts = [r["prompt"] for r in rows]
    first = [g[0] for g in generate(model, tokenizer, render(prompts), greedy=True,
                                    max_new_tokens=ev.max_new_tokens, **kw)]
    asks = [template.format(problem=p, solution=s) for p, s in zip(prompts, first)]
    replies = [g[0] for g in generate(model, tokenizer, render(asks), greedy=True,
                                      max_new_tokens=max_rubric_tokens, **kw)]
    rubrics = [parse_rubrics(strip_thinking(t)) for t in replies]
    hinted = [hint_prompt(p, rb or []) for p, rb in zip(prompts, rubrics)]
    samples = generate(model, tokenizer, render(hinted), num_samples=ev.k, temperature=ev.temperature,
                       max_new_tokens=ev.max_new_tokens, **kw)
    acc = [np.mean([rlvr_score(s, r["answer"]) for s in ss]) for r, ss in zip(rows, samples)]
    return {"arith_hints/pass@1": float(np.mean(acc)),
            "arith_hints/rubric_parse_rate": float(np.mean([rb is not None for rb in rubrics])),
            "arith_hints/n": float(len(rows))}


def evaluate(model: Any, tokenizer: Any, cfg: Any, params: Any, *, prepared: Path,
             benchmarks: list[str], seed: int, chat: Any = None) -> dict[str, float]:
    """The `rlcer` registry entry's extra evaluation (`core.methods`, run by `flows.evaluate`):
    :func:`hinted_pass_at_1` on the arith test split, when arith is among the benchmarks."""
    if "arith" not in benchmarks:
        return {}
    rows = load_rows(prepared, "arith", "test", params.eval.n_test)
    return hinted_pass_at_1(model, tokenizer, rows, cfg.rubricator_template, params.eval, seed,
                            cfg.max_rubric_tokens, chat=chat)
