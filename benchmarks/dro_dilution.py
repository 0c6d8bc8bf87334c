"""Dilution of reasoning-reflective tokens under plain aggregation: paper 003 Fig. 3 (App. C and D).

Question: when a group's reward is an aggregate of token self-certainties over a long reference
answer, how well does the GRPO advantage (reward minus group mean) still track the few tokens
whose probability really depends on the CoT? Paper 003 §3.1.2 argues that averaging lets the many
uninformative tokens drown them (App. C: the informative share of the z-score shrinks like
1/sqrt(T) for independent noise), that log-probabilities are worse because near-impossible tokens
swing by whole nats, and that R3 (clipping + softmax emphasis on high-spread tokens) resists both.

Noise model (a seeded Monte Carlo in the spirit of App. D; the paper's calibrated means and
standard deviations did not survive extraction, so the numbers below are ours). Each group has G
rollouts with hidden reasoning quality q_g ~ N(0, 1); every token probability is sigmoid(logit):

- reasoning-reflective tokens (a fraction ``frac`` of the T tokens, at least one):
  logit = mu_t + 1.5 * q_g + N(0, 0.3^2), mu_t ~ N(0, 1). Mid-range and strongly CoT-dependent,
  correlated among themselves through q_g, as App. D simulates them.
- the other tokens carry small noise that is independent across tokens and rollouts and has
  nothing to do with q_g (App. C's independent-noise setting), in three kinds (§3.1.2's list):
  * 75% confident (function words, structural and predictable factual tokens):
    mu_t ~ N(4, 1), per-rollout noise N(0, 0.5^2) on the logit; P mostly above 0.9;
  * 15% neutral mid-range (synonyms, stylistic variants): mu_t ~ U(-2, 2), noise N(0, 0.3^2);
  * 10% mismatched (style or format the policy would not write): mu_t ~ N(-8, 1), noise
    N(0, 1.5^2); P below 0.01, so tiny in probability but large on the log scale.

For each group the advantage under each aggregation (``avg_logprob_rewards``, ``avg_prob_rewards``,
``r3_rewards`` and R3 without emphasis, i.e. clipping only) is correlated (Pearson, over the G
rollouts) with the rollouts' mean z-score over the reflective tokens (z-scored within the group on
the probability scale); the table reports the mean correlation over groups (groups where either
side is constant are skipped). Lengths are fixed per cell instead of App. D's uniform draw so the
trend is visible per length. At a fixed *fraction* a longer reference also holds more reflective
tokens, so the plain averages improve with length and the dilution shows along the fraction axis;
a second table holds the *count* of reflective tokens fixed (App. C's setting), where the plain
averages decay with length as the appendix predicts.

Run from the repository root: ``python -m benchmarks.dro_dilution [--groups 2000]``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np

from rewards.reflection import avg_logprob_rewards, avg_prob_rewards, r3_rewards

LENGTHS = (100, 200, 500, 1000)
FRACTIONS = (0.01, 0.02, 0.05)
METHODS = ("avg_logprob", "avg_prob", "clip_only", "r3")
FIXED_COUNT = 2


@dataclass(frozen=True)
class NoiseModel:
    """Parameters of the token self-certainty simulation (module docstring explains each)."""

    reflective_mean_sd: float = 1.0
    reflective_quality_scale: float = 1.5
    reflective_noise_sd: float = 0.3
    confident_share: float = 0.75
    confident_mean: float = 4.0
    confident_mean_sd: float = 1.0
    confident_noise_sd: float = 0.5
    neutral_share: float = 0.15
    neutral_half_range: float = 2.0
    neutral_noise_sd: float = 0.3
    mismatch_mean: float = -8.0
    mismatch_mean_sd: float = 1.0
    mismatch_noise_sd: float = 1.5


def sample_group(
    rng: np.random.Generator, length: int, frac: float, G: int, noise: NoiseModel = NoiseModel()
) -> tuple[np.ndarray, np.ndarray]:
    """One group's token log-probabilities [G, T] and the boolean mask of reflective tokens [T]."""
    n_reflective = max(1, int(round(frac * length)))
    n_other = length - n_reflective
    n_confident = int(round(noise.confident_share * n_other))
    n_neutral = int(round(noise.neutral_share * n_other))
    n_mismatch = n_other - n_confident - n_neutral
    quality = rng.standard_normal(G)

    mu = np.concatenate([
        rng.normal(0.0, noise.reflective_mean_sd, n_reflective),
        rng.normal(noise.confident_mean, noise.confident_mean_sd, n_confident),
        rng.uniform(-noise.neutral_half_range, noise.neutral_half_range, n_neutral),
        rng.normal(noise.mismatch_mean, noise.mismatch_mean_sd, n_mismatch),
    ])
    noise_sd = np.concatenate([
        np.full(n_reflective, noise.reflective_noise_sd),
        np.full(n_confident, noise.confident_noise_sd),
        np.full(n_neutral, noise.neutral_noise_sd),
        np.full(n_mismatch, noise.mismatch_noise_sd),
    ])
    reflective = np.zeros(length, dtype=bool)
    reflective[:n_reflective] = True
    logits = mu + noise_sd * rng.standard_normal((G, length))
    logits[:, reflective] += noise.reflective_quality_scale * quality[:, None]
    # log sigmoid(x) = -log(1 + exp(-x)), stable for very negative logits.
    return -np.logaddexp(0.0, -logits), reflective


def _zscore_columns(values: np.ndarray) -> np.ndarray:
    centred = values - values.mean(axis=0)
    sd = values.std(axis=0)
    return np.where(sd > 0, centred / np.where(sd > 0, sd, 1.0), 0.0)


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    x, y = x - x.mean(), y - y.mean()
    denom = np.sqrt((x * x).sum() * (y * y).sum())
    return float((x * y).sum() / denom) if denom > 1e-15 else float("nan")


def simulate(
    length: int, frac: float, n_groups: int = 2000, G: int = 16, seed: int = 0
) -> dict[str, float]:
    """Mean over groups of corr(advantage, reflective mean z-score), per aggregation method."""
    rng = np.random.default_rng(seed)
    corr: dict[str, list[float]] = {m: [] for m in METHODS}
    for _ in range(n_groups):
        logp, reflective = sample_group(rng, length, frac, G)
        P = np.exp(logp)
        target = _zscore_columns(P[:, reflective]).mean(axis=1)
        rewards = {
            "avg_logprob": avg_logprob_rewards(logp),
            "avg_prob": avg_prob_rewards(P),
            "clip_only": r3_rewards(P, emphasis=0.0),
            "r3": r3_rewards(P),
        }
        for method, reward in rewards.items():
            corr[method].append(_pearson(reward - reward.mean(), target))
    return {m: float(np.nanmean(v)) for m, v in corr.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=2000, help="Monte Carlo groups per cell")
    parser.add_argument("--G", type=int, default=16, help="rollouts per group")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"mean corr(advantage, reflective z-score); {args.groups} groups of G={args.G}, seed {args.seed}")
    print(f"{'length':>6} {'frac':>5} " + " ".join(f"{m:>11}" for m in METHODS))
    for length in LENGTHS:
        for frac in FRACTIONS:
            result = simulate(length, frac, args.groups, args.G, args.seed)
            print(f"{length:>6} {frac:>5.0%} " + " ".join(f"{result[m]:>11.3f}" for m in METHODS))
    print(f"\nApp. C's setting: a fixed {FIXED_COUNT} reflective tokens as the reference grows")
    print(f"{'length':>6} {'frac':>5} " + " ".join(f"{m:>11}" for m in METHODS))
    for length in LENGTHS:
        result = simulate(length, FIXED_COUNT / length, args.groups, args.G, args.seed)
        share = FIXED_COUNT / length
        print(f"{length:>6} {share:>5.1%} " + " ".join(f"{result[m]:>11.3f}" for m in METHODS))


if __name__ == "__main__":
    main()
