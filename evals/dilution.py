"""Paper 003 Fig. 3 on real rollouts: does R3 keep tracking correctness where the plain average of
token probabilities is diluted by a long reference answer? (claim `r3_resists_dilution`).

The paper's Fig. 3 is a simulation (ours: `benchmarks/dro_dilution.py`). Here the evaluate stage
measures the same thing on the policy's own samples of `arith_ref` (a chain of thought, `</think>`,
then a long reference answer whose tokens mostly follow from the question: `world/arith_ref.py`).
Each test row's k samples are one group, as a GRPO group is:

1. P[g, t]: the probability the policy gives reference-answer token t after sample g's reasoning,
   from ONE batched teacher-forced pass (`models.dro_trainer.score_rollouts`, DRO's own scoring,
   the samples re-tokenised from their text);
2. the group's rewards under R3 (`rewards.reflection.r3_rewards` at its defaults, which are
   params.yaml's `reward.dro` emphasis and clip bounds: one fixed definition for every run, as a
   benchmark's scorer is) and under the plain average probability (`avg_prob_rewards`);
3. each reward's Pearson correlation with the samples' correctness (the boxed reply against the
   gold answer). A GRPO advantage is the reward minus the group's mean, divided by a per-group
   constant, so this is also the correlation of the advantage with correctness, the quantity
   Fig. 3 plots (there: with the reflective tokens' z-scores). A group whose samples are all right
   or all wrong, or whose reward is constant, has no correlation (None: skipped, not zero).

Per row (items.json; `evals.items`): `ref_tokens` (the reference answer's length in tokens),
`r3_corr`, `avg_prob_corr`, `dilution_gap` = r3_corr - avg_prob_corr, and the same gap split at the
median length over the test rows: `dilution_gap_long` (longer than the median) and
`dilution_gap_short` (the rest), None on the other half. Fig. 3's regime is a long reference of
which a few tokens reflect the reasoning; the tiny world's references are 40-45 tokens of which the
result's one or two do, so the split shows a trend over a narrow range only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rewards.chat import THINK_END
from rewards.reflection import avg_prob_rewards, r3_rewards
from rewards.verifiable import rlvr_score
from world.arith_ref import reply

__all__ = ["correlation", "dilution_metrics", "group_correlations", "score_samples"]

TASK = "arith_ref"
# A group's rewards closer than this are one reward: float32 logits move probabilities by about
# 1e-7 between a batched and an unbatched pass, which would otherwise read as a correlation.
MIN_SPREAD = 1e-6


def correlation(reward: Sequence[float] | np.ndarray, correct: Sequence[float]) -> float | None:
    """Pearson correlation of a group's rewards with its correctness; None where it is undefined
    (fewer than two samples, a constant side, or a NaN reward). Rounded to 6 decimals.

    >>> correlation([0.9, 0.1, 0.8, 0.2], [1, 0, 1, 0])
    0.989949
    >>> correlation([0.9, 0.1], [1, 1]) is None, correlation([0.5, 0.5], [1, 0]) is None
    (True, True)
    """
    r, c = np.asarray(reward, dtype=float), np.asarray(correct, dtype=float)
    if r.size < 2 or r.shape != c.shape or not np.isfinite(r).all() or np.ptp(c) == 0 or np.ptp(r) < MIN_SPREAD:
        return None
    return round(float(np.corrcoef(r, c)[0, 1]), 6)


def group_correlations(logp: Sequence[np.ndarray], correct: Sequence[float], emphasis: float = 10.0,
                       clip_low: float = 0.1, clip_high: float = 0.9) -> dict[str, float | None]:
    """R3's and the average probability's correlation with correctness for one group, from each
    sample's log-probabilities of the same reference tokens.

    Worked example: token 0 is predictable whatever the reasoning (P 0.95 for every sample), token
    1 is the result, likely only after a right chain. With one such token both rewards are a
    linear function of it, so they correlate equally (tests/test_dilution.py: many noisy tokens).

    >>> lp = [np.log([0.95, 0.8]), np.log([0.95, 0.1]), np.log([0.95, 0.7]), np.log([0.95, 0.2])]
    >>> group_correlations(lp, [1, 0, 1, 0])
    {'r3_corr': 0.986394, 'avg_prob_corr': 0.986394}
    """
    lengths = {len(x) for x in logp}
    if len(lengths) != 1:
        raise ValueError(f"a group's samples must score the same reference tokens; got lengths {sorted(lengths)}")
    P = np.exp(np.stack([np.asarray(x, dtype=float) for x in logp]))
    return {"r3_corr": correlation(r3_rewards(P, None, emphasis, clip_low, clip_high), correct),
            "avg_prob_corr": correlation(avg_prob_rewards(P), correct)}


def dilution_metrics(per_row: Sequence[dict]) -> list[dict]:
    """Each row's dict with `dilution_gap` (R3's correlation minus the average's) and its halves
    `dilution_gap_long` (references longer than the median `ref_tokens`) and `dilution_gap_short`
    (the rest) added; None where either correlation is.

    >>> rows = [{"ref_tokens": 10, "r3_corr": 0.5, "avg_prob_corr": 0.4},
    ...         {"ref_tokens": 30, "r3_corr": 0.6, "avg_prob_corr": 0.2},
    ...         {"ref_tokens": 20, "r3_corr": None, "avg_prob_corr": 0.2}]
    >>> [(r["dilution_gap"], r["dilution_gap_long"], r["dilution_gap_short"])
    ...  for r in dilution_metrics(rows)]
    [(0.1, None, 0.1), (0.4, 0.4, None), (None, None, None)]
    """
    if not per_row:
        return []
    median = float(np.median([r["ref_tokens"] for r in per_row]))
    out = []
    for r in per_row:
        a, b = r.get("r3_corr"), r.get("avg_prob_corr")
        gap = None if a is None or b is None else round(a - b, 6)
        long = r["ref_tokens"] > median
        out.append({**r, "dilution_gap": gap, "dilution_gap_long": gap if long else None,
                    "dilution_gap_short": None if long else gap})
    return out


def score_samples(model: Any, tokenizer: Any, rows: Sequence[dict], prompts: Sequence[str],
                  samples: Sequence[Sequence[str]], batch_size: int = 64) -> list[dict]:
    """The per-row dilution numbers of `arith_ref` samples (module docstring): `rows` the test
    rows, `prompts` the prompts as the policy saw them (chat template applied, if any), `samples`
    each row's k completions.

    The scored prefix is DRO's (`rewards.dro.scoring_prefix` with the marker `</think>`): the
    sample's reasoning through its last `</think>` (closed if it never was), so every sample of a
    row scores the same reference tokens. The model is scored in eval mode, without gradients."""
    from models.dro_trainer import score_rollouts

    flat_rows = [r for r, ss in zip(rows, samples, strict=True) for _ in ss]
    flat_prompts = [p for p, ss in zip(prompts, samples, strict=True) for _ in ss]
    texts = [s for ss in samples for s in ss]
    if not texts:
        return [{} for _ in rows]
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    was_training = model.training
    model.eval()
    try:
        logp = score_rollouts(model, tokenizer, flat_prompts, flat_rows, ids, TASK, THINK_END,
                              batch_size=batch_size)
    finally:
        model.train(was_training)
    per_row: list[dict] = []
    at = 0
    for row, ss in zip(rows, samples):
        group = logp[at:at + len(ss)]
        at += len(ss)
        if not group:  # a row without samples has no group
            per_row.append({"ref_tokens": 0.0, "r3_corr": None, "avg_prob_corr": None})
            continue
        correct = [rlvr_score(reply(s, row["separator"]), row["answer"]) for s in ss]
        per_row.append({"ref_tokens": float(len(group[0])),
                        **group_correlations(group, correct)})
    return dilution_metrics(per_row)
