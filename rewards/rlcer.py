"""RLCER's batch-level scoring (paper 004 §4.2-4.5): question groups, which CoTs the rubricator
reads, both roles' rewards for one question, the rubricator's advantages, the step's metrics, and
the rubrics-as-hints inference option (§5.5).

The per-question maths (rubric parsing, validity, the CoT reward, both roles' rewards) is
:mod:`rewards.evolving_rubrics`; the policy's two roles in one GRPO step (rubricator sampling, the
judge model, the two-role batch) are :mod:`models.rlcer_trainer`. Nothing here runs a model.

The rubricator's baseline (ours: the mean reward of the same question's rubricator rollouts in the
step, where the paper uses PPO with a critic) and the seeded choice of CoTs are explained, with
their reasons, in docs/methods/rlcer.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rewards.evolving_rubrics import (
    ProposedRubric,
    cot_rewards,
    reasoner_reward,
    rubric_correlations,
    rubricator_reward,
    valid_rubrics,
)

__all__ = [
    "QuestionScores",
    "hint_prompt",
    "pick_cots",
    "question_groups",
    "rubricator_advantages",
    "score_question",
    "step_metrics",
]


def question_groups(prompts: Sequence[str], group_size: int) -> list[list[int]]:
    """Row indices of each question: TRL lays out the G rollouts of a prompt consecutively.

    >>> question_groups(["a", "a", "b", "b"], 2)
    [[0, 1], [2, 3]]
    """
    if group_size < 1 or len(prompts) % group_size:
        raise ValueError(f"{len(prompts)} completions do not split into groups of {group_size}: "
                         "per_device_train_batch_size must be a multiple of num_generations")
    groups = [list(range(i, i + group_size)) for i in range(0, len(prompts), group_size)]
    for g in groups:
        if any(prompts[i] != prompts[g[0]] for i in g):
            raise ValueError(f"rows {g[0]}..{g[-1]} are not the rollouts of one prompt; RLCER needs "
                             "each question's rollouts together (TRL's RepeatSampler layout)")
    return groups


def pick_cots(n_rollouts: int, n_picks: int, rng: np.random.Generator) -> list[int]:
    """Which of a question's rollouts each rubricator reads: distinct while n_picks <= n_rollouts.

    >>> sorted(pick_cots(4, 4, np.random.default_rng(0)))
    [0, 1, 2, 3]
    >>> len(set(pick_cots(4, 2, np.random.default_rng(0))))
    2
    """
    rounds = -(-n_picks // n_rollouts)
    order = np.concatenate([rng.permutation(n_rollouts) for _ in range(rounds)])
    return [int(i) for i in order[:n_picks]]


@dataclass
class QuestionScores:
    """Both roles' rewards for one question (N reasoner rollouts, R rubricator outputs, K pooled rubrics)."""

    reasoner: np.ndarray     # [N]
    r_cot: np.ndarray        # [N]
    rubricator: np.ndarray   # [R]
    format_ok: np.ndarray    # [R] bool
    valid: np.ndarray        # [K] bool
    corr: np.ndarray         # [K] float, NaN where undefined


def score_question(
    outputs: Sequence[list[ProposedRubric] | None],
    V: Any,
    z: Any,
    *,
    alpha: float,
    mode: str,
    rng: np.random.Generator | None = None,
) -> QuestionScores:
    """Score one question (paper 004 §4.3-4.4, Eq. 6-12): ``outputs`` are its R parsed rubricator outputs (None =
    malformed), ``V[k, n]`` the verifier's judgement of pooled rubric k on rollout n (rubrics of
    the well-formed outputs in order), ``z[n]`` the rollouts' correctness.

    Worked example, z = [1, 0]: the first output proposes a merit met only by the correct rollout
    (valid) and a flaw met by both (constant, not valid); the second output is malformed.

    >>> s = score_question([[ProposedRubric("a", 3), ProposedRubric("b", -2)], None], [[1, 0], [1, 1]],
    ...                    [1, 0], alpha=0.2, mode="rlcer")
    >>> s.reasoner.tolist(), s.rubricator.tolist(), s.format_ok.tolist()
    ([2.0, -1.0], [1.5, 0.0], [True, False])
    """
    outcome = np.asarray(z, dtype=float).reshape(-1)
    pooled = [r for rubrics in outputs if rubrics for r in rubrics]
    matrix = np.asarray(V, dtype=float).reshape(len(pooled), outcome.size)
    valid = valid_rubrics(matrix, outcome, alpha)
    r_cot = cot_rewards(matrix, [r.points for r in pooled], valid)
    reasoner = np.array([reasoner_reward(bool(zn), rc, mode, rng) for zn, rc in zip(outcome, r_cot)])
    rubricator, start = [], 0
    for rubrics in outputs:
        n = len(rubrics) if rubrics else 0
        n_valid = int(valid[start:start + n].sum())
        rubricator.append(rubricator_reward(n_valid, n, rubrics is not None, mode))
        start += n
    return QuestionScores(reasoner=reasoner, r_cot=np.asarray(r_cot, dtype=float),
                          rubricator=np.array(rubricator), format_ok=np.array([o is not None for o in outputs]),
                          valid=valid, corr=rubric_correlations(matrix, outcome))


def rubricator_advantages(rewards: Any, question: Sequence[int], scale_rewards: str = "group") -> torch.Tensor:
    """Rubricator advantages: reward minus the mean of the same question's rubricator rollouts,
    scaled as TRL scales the reasoner's (``group`` / ``batch`` std + 1e-4, or ``none``). A question
    with a single rubricator rollout has no peer: the batch mean (and std) stands in for all of
    them. See the module docstring for why this baseline.

    >>> rubricator_advantages([1.5, 1.0, 2.0, 2.0], [0, 0, 1, 1], "none").tolist()
    [0.25, -0.25, 0.0, 0.0]
    >>> rubricator_advantages([1.0, 2.0], [0, 1], "none").tolist()
    [-0.5, 0.5]
    """
    r = torch.as_tensor(rewards, dtype=torch.float32).reshape(-1)
    q = torch.as_tensor(list(question), dtype=torch.long)
    counts = torch.bincount(q)
    if bool((counts[q] < 2).all()):
        q = torch.zeros_like(q)
        counts = torch.bincount(q)
    mean = torch.zeros(len(counts)).index_add_(0, q, r) / counts.clamp(min=1)
    dev = r - mean[q]
    if scale_rewards == "none":
        return dev
    if scale_rewards == "batch":
        std = r.std() if r.numel() > 1 else torch.zeros(())
        return dev / (std + 1e-4)
    if scale_rewards != "group":
        raise ValueError(f"scale_rewards must be group, batch or none, got {scale_rewards!r}")
    # Unbiased std per question, as TRL's group std (torch.std).
    var = torch.zeros(len(counts)).index_add_(0, q, dev**2) / (counts - 1).clamp(min=1)
    return dev / (var.sqrt()[q] + 1e-4)


def step_metrics(scores: Sequence[QuestionScores], z: np.ndarray) -> dict[str, float]:
    """The step's RLCER curves (paper Fig. 6); a mean over an empty set is left out."""
    valid = np.concatenate([s.valid for s in scores])
    corr = np.concatenate([s.corr for s in scores])
    out = {
        "valid_fraction": float(valid.mean()) if valid.size else 0.0,
        "r_cot": float(np.concatenate([s.r_cot for s in scores]).mean()),
        "format_rate": float(np.concatenate([s.format_ok for s in scores]).mean()),
        "rubricator_reward": float(np.concatenate([s.rubricator for s in scores]).mean()),
        "reasoner_accuracy": float(z.mean()),
    }
    if valid.any():
        out["valid_corr_mean"] = float(corr[valid].mean())
    if np.isfinite(corr).any():
        out["corr_mean"] = float(np.nanmean(corr))
    return out


def hint_prompt(prompt: str, rubrics: Sequence[ProposedRubric]) -> str:
    """The prompt with rubrics as in-prompt hints (paper 004 §5.5, RLCER's inference option).

    Hints go just before the prompt's last line, its answer cue ("Solution:" in the tiny world),
    so the model reads them after the question and still answers after its usual cue; a one-line
    prompt gets them appended on new lines. Merits come first, most points first, then flaws to
    avoid, most negative first; a repeated criterion is listed once. No rubrics: the prompt as is.
    The tiny base model never saw hints in SFT, so on it this is an out-of-distribution probe.

    >>> print(hint_prompt("Problem: 2 + 3?\\nSolution:", [ProposedRubric("contains an arithmetic slip", -4),
    ...                   ProposedRubric("shows every intermediate step", 3)]))
    Problem: 2 + 3?
    Hints: aim for: shows every intermediate step (+3); avoid: contains an arithmetic slip (-4).
    Solution:
    """
    seen: dict[str, ProposedRubric] = {}
    for r in rubrics:
        seen.setdefault(r.criterion, r)
    merits = sorted((r for r in seen.values() if r.points > 0), key=lambda r: -r.points)
    flaws = sorted((r for r in seen.values() if r.points < 0), key=lambda r: r.points)
    if not merits and not flaws:
        return prompt
    parts = [f"aim for: {r.criterion} ({r.points:+d})" for r in merits]
    parts += [f"avoid: {r.criterion} ({r.points:+d})" for r in flaws]
    hints = "Hints: " + "; ".join(parts) + "."
    head, sep, cue = prompt.rpartition("\n")
    if not sep:
        return f"{prompt}\n{hints}\n"
    return f"{head}\n{hints}\n{cue}"
