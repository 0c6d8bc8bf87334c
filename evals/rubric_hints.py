"""RLCER's inference option (paper 004 §5.5): the policy's own rubrics as in-prompt hints.

Per test prompt: the policy answers once (greedy), reads its answer as the rubricator (RLCER's
template, greedy) and writes rubrics; the rubrics go into the prompt as hints
(`rewards.rlcer.hint_prompt`) and the policy is sampled again. Reported as
`arith_hints/pass@1` (k samples at the eval temperature) next to the rubric parse rate, so it
reads against `arith/pass@1` of the same policy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from models.generation import generate
from rewards.evolving_rubrics import parse_rubrics
from rewards.rlcer import hint_prompt
from rewards.verifiable import rlvr_score


def hinted_pass_at_1(model: Any, tokenizer: Any, rows: list[dict], template: str, ev: Any, seed: int,
                     max_rubric_tokens: int) -> dict[str, float]:
    """pass@1 of hinted prompts (``ev``: the evaluation settings, ``template``: RLCER's rubricator
    template), with the share of rubricator replies that parsed."""
    kw = dict(batch_size=ev.batch_size, seed=seed)
    prompts = [r["prompt"] for r in rows]
    first = [g[0] for g in generate(model, tokenizer, prompts, greedy=True,
                                    max_new_tokens=ev.max_new_tokens, **kw)]
    asks = [template.format(problem=p, solution=s) for p, s in zip(prompts, first)]
    replies = [g[0] for g in generate(model, tokenizer, asks, greedy=True,
                                      max_new_tokens=max_rubric_tokens, **kw)]
    rubrics = [parse_rubrics(t) for t in replies]
    hinted = [hint_prompt(p, rb or []) for p, rb in zip(prompts, rubrics)]
    samples = generate(model, tokenizer, hinted, num_samples=ev.k, temperature=ev.temperature,
                       max_new_tokens=ev.max_new_tokens, **kw)
    acc = [np.mean([rlvr_score(s, r["answer"]) for s in ss]) for r, ss in zip(rows, samples)]
    return {"arith_hints/pass@1": float(np.mean(acc)),
            "arith_hints/rubric_parse_rate": float(np.mean([rb is not None for rb in rubrics])),
            "arith_hints/n": float(len(rows))}
