"""DRO scoring (rewards/reflection.py): worked examples computed by hand in the comments."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from rewards.reflection import (
    VERSION,
    AdaptiveThreshold,
    avg_logprob_rewards,
    avg_prob_rewards,
    consistency_gate,
    coverage_gate,
    group_variance_score,
    r3_rewards,
    static_prefilter,
)

# Two rollouts, three reference tokens. After clipping to [0.1, 0.9] (0.95 -> 0.9):
#   row 0: [0.5, 0.9, 0.3]    row 1: [0.5, 0.9, 0.7]
# sigma (population std over rollouts) = [0, 0, 0.2]; emphasis 10 -> logits [0, 0, 2]
# w = [1, 1, e^2] / (2 + e^2) = [0.1065070, 0.1065070, 0.7869860]   (e^2 = 7.3890561)
# R3_0 = (0.5 + 0.9) * 0.1065070 + 0.3 * 0.7869860 = 0.1491098 + 0.2360958 = 0.3852056
# R3_1 = 0.1491098 + 0.7 * 0.7869860 = 0.1491098 + 0.5508902 = 0.7000000
P_EXAMPLE = [[0.5, 0.9, 0.3], [0.5, 0.95, 0.7]]


def test_version_is_a_string() -> None:
    assert VERSION == "1"


def test_r3_worked_example() -> None:
    np.testing.assert_allclose(r3_rewards(P_EXAMPLE), [0.3852056, 0.7000000], atol=1e-6)


def test_r3_without_emphasis_is_the_clipped_average() -> None:
    # (0.5 + 0.9 + 0.3) / 3 = 0.5666667 and (0.5 + 0.9 + 0.7) / 3 = 0.7
    np.testing.assert_allclose(r3_rewards(P_EXAMPLE, emphasis=0.0), [0.5666667, 0.7], atol=1e-6)


def test_r3_clips_extremes() -> None:
    # One rollout: sigma = 0, uniform weights over clipped [0.1, 0.9] -> 0.5.
    np.testing.assert_allclose(r3_rewards([[0.0, 1.0]]), [0.5])
    # Tighter clip [0.3, 0.6]: [0.3, 0.6] -> 0.45.
    np.testing.assert_allclose(r3_rewards([[0.0, 1.0]], clip_low=0.3, clip_high=0.6), [0.45])


def test_r3_large_emphasis_picks_the_most_variable_token_without_overflow() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rewards = r3_rewards(P_EXAMPLE, emphasis=1000.0)
    # All weight on token 2, whose clipped values are 0.3 and 0.7.
    np.testing.assert_allclose(rewards, [0.3, 0.7], atol=1e-9)


def test_r3_mask_none_equals_all_ones_and_padding_is_ignored() -> None:
    padded = np.array([[0.5, 0.9, 0.3, 0.0], [0.5, 0.95, 0.7, 1.0]])
    mask = np.array([[1, 1, 1, 0], [1, 1, 1, 0]])
    np.testing.assert_allclose(r3_rewards(P_EXAMPLE, None), r3_rewards(P_EXAMPLE, np.ones((2, 3))))
    np.testing.assert_allclose(r3_rewards(padded, mask), r3_rewards(P_EXAMPLE), atol=1e-12)


def test_r3_ragged_mask() -> None:
    # Row 0 lacks token 2, so token 2's sigma is taken over row 1 alone (0); all sigmas are 0.
    # Row 0: (0.5 + 0.9) / 2 = 0.7; row 1: (0.5 + 0.9 + 0.7) / 3 = 0.7.
    mask = [[1, 1, 0], [1, 1, 1]]
    np.testing.assert_allclose(r3_rewards(P_EXAMPLE, mask), [0.7, 0.7], atol=1e-12)


def test_r3_all_masked_row_is_nan_and_others_unaffected() -> None:
    P = [[0.5, 0.9, 0.3], [0.5, 0.95, 0.7], [0.2, 0.2, 0.2]]
    mask = [[1, 1, 1], [1, 1, 1], [0, 0, 0]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rewards = r3_rewards(P, mask)
    assert math.isnan(rewards[2])
    np.testing.assert_allclose(rewards[:2], [0.3852056, 0.7], atol=1e-6)
    assert np.isnan(r3_rewards(P, np.zeros((3, 3)))).all()


def test_r3_single_rollout_group() -> None:
    # G = 1: every sigma is 0, so R3 is the clipped mean: (0.2 + 0.9 + 0.4) / 3 = 0.5.
    np.testing.assert_allclose(r3_rewards([[0.2, 0.99, 0.4]]), [0.5])


def test_r3_rejects_malformed_inputs() -> None:
    with pytest.raises(ValueError, match=r"\[G, T\]"):
        r3_rewards([0.5, 0.6])
    with pytest.raises(ValueError, match="mask shape"):
        r3_rewards(P_EXAMPLE, [[1, 1], [1, 1]])
    with pytest.raises(ValueError, match="clip_low"):
        r3_rewards(P_EXAMPLE, clip_low=0.9, clip_high=0.1)


def test_baselines() -> None:
    # Avg prob: (0.5 + 0.9 + 0.3) / 3 = 0.5666667; (0.5 + 0.95 + 0.7) / 3 = 0.7166667 (no clip).
    np.testing.assert_allclose(avg_prob_rewards(P_EXAMPLE), [0.5666667, 0.7166667], atol=1e-6)
    # Avg logprob with a masked -inf: (-1 - 2) / 2 = -1.5; (-4) / 1 = -4.
    logp = [[-1.0, -2.0], [-4.0, -np.inf]]
    np.testing.assert_allclose(avg_logprob_rewards(logp, [[1, 1], [1, 0]]), [-1.5, -4.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(avg_prob_rewards([[0.3, 0.4]], [[0, 0]])).all()
        assert np.isnan(avg_logprob_rewards([[-1.0]], [[0]])).all()


def test_coverage_gate() -> None:
    # Rubric 1 is met by nobody -> reject; every rubric met by >= 1 rollout -> accept.
    assert coverage_gate([[1, 0], [1, 0], [0, 0]]) is False
    assert coverage_gate([[1, 0], [0, 1], [0, 0]]) is True
    # min_rollouts = 2: column sums [2, 1] -> rubric 1 is short.
    assert coverage_gate([[1, 1], [1, 0], [0, 0]], min_rollouts=2) is False
    assert coverage_gate([[1, 1], [1, 1], [0, 0]], min_rollouts=2) is True
    # No rubrics: nothing to violate.
    assert coverage_gate(np.zeros((4, 0))) is True


def test_consistency_gate_top_quarter() -> None:
    # G = 8, top_frac 0.25 -> ceil(2) = 2 top rollouts: indices 5 (0.9) and 2 (0.8).
    S = np.array([[1, 1, 1, 1]] * 8)
    S[2] = [1, 1, 0, 0]  # 2 of 4 = 0.5 >= 0.5 -> ok
    S[5] = [1, 1, 1, 0]  # 3 of 4 -> ok
    S[7] = [0, 0, 0, 0]  # low score, not in the top -> irrelevant
    scores = [0.1, 0.2, 0.8, 0.3, 0.4, 0.9, 0.5, 0.05]
    assert consistency_gate(S, scores) is True
    S[2] = [1, 0, 0, 0]  # 1 of 4 < 0.5 -> the second-best rollout now fails
    assert consistency_gate(S, scores) is False
    # Requiring every rubric: rollout 5 meets 3 of 4 -> fail.
    S[2] = [1, 1, 1, 1]
    assert consistency_gate(S, scores, min_rubric_frac=1.0) is False


def test_consistency_gate_edge_cases() -> None:
    # top_frac 0.1 of G = 30 is 3 rollouts, not 4 (0.1 * 30 = 3.0000000000000004 in floats).
    S = np.ones((30, 2), dtype=int)
    S[3] = 0  # fourth-best rollout fails the rubrics
    scores = -np.arange(30.0)  # rollout 0 best, then 1, 2, 3, ...
    assert consistency_gate(S, scores, top_frac=0.1) is True
    # Ties keep rollout order: with all scores equal, rollout 0 is the top one (G = 4 -> 1 top).
    assert consistency_gate([[0, 0], [1, 1], [1, 1], [1, 1]], [0.5] * 4) is False
    # nan ranks last: rollout 0 is skipped, rollout 1 leads.
    assert consistency_gate([[0, 0], [1, 1], [1, 1], [1, 1]], [np.nan, 0.5, 0.4, 0.3]) is True
    # G = 1 and no rubrics.
    assert consistency_gate([[1, 0]], [0.3]) is True
    assert consistency_gate(np.zeros((3, 0)), [0.1, 0.2, 0.3]) is True
    with pytest.raises(ValueError, match="scores has 2 entries"):
        consistency_gate([[1], [1], [1]], [0.1, 0.2])


def test_group_variance_score() -> None:
    # Clipped: token 0 [0.5, 0.5] -> sigma 0; token 1 [0.9, 0.9] -> 0; token 2 [0.3, 0.7] -> 0.2.
    # top ceil(0.1 * 3) = 1 token: h = 0.2; token_frac 1.0: (0 + 0 + 0.2) / 3 = 0.0666667.
    assert group_variance_score(P_EXAMPLE) == pytest.approx(0.2)
    assert group_variance_score(P_EXAMPLE, token_frac=1.0) == pytest.approx(0.2 / 3)
    # Masking token 2 out of both rows leaves only zero-spread tokens.
    assert group_variance_score(P_EXAMPLE, [[1, 1, 0], [1, 1, 0]]) == pytest.approx(0.0)
    assert group_variance_score(P_EXAMPLE, np.zeros((2, 3))) == 0.0
    assert group_variance_score([[0.3, 0.6]]) == 0.0  # G = 1: no spread


def test_adaptive_threshold_follows_the_previous_window() -> None:
    th = AdaptiveThreshold()  # period 8, 20th percentile
    assert th.theta == 0.0 and th.accept(0.0)
    for step in range(7):
        assert th.update(step, [step + 1.0]) == 0.0
    # Window h = 1..8; numpy's linear percentile: position 0.2 * 7 = 1.4 -> 2 + 0.4 = 2.4.
    assert th.update(7, [8.0]) == pytest.approx(2.4)
    assert not th.accept(2.0) and th.accept(2.5) and th.accept(5.0)
    assert th.accept(th.theta)  # h == theta is kept: only h < theta is rejected
    assert not th.accept(float("nan"))
    # Next window only (steps 8..15, all 10; non-finite values ignored): theta = 10.
    for step in range(8, 16):
        th.update(step, [10.0, float("nan")])
    assert th.theta == pytest.approx(10.0)
    # An empty window keeps theta.
    for step in range(16, 24):
        th.update(step, [])
    assert th.theta == pytest.approx(10.0)


def test_adaptive_threshold_rejects_bad_settings() -> None:
    with pytest.raises(ValueError):
        AdaptiveThreshold(period=0)
    with pytest.raises(ValueError):
        AdaptiveThreshold(percentile=120)


def test_static_prefilter() -> None:
    h = [0.5, 0.1, 0.9, 0.3, 0.7]
    # Top 2 by h: indices 2 (0.9) and 4 (0.7). Rest {0, 1, 3}: 0.5 * 3 = 1.5 rounds up to 2 extra.
    picked = static_prefilter(h, top_k=2, rest_frac=0.5, seed=0)
    assert len(picked) == 4 and {2, 4} <= set(picked.tolist())
    assert picked.tolist() == sorted(picked.tolist())
    assert static_prefilter(h, 2, 0.5, seed=0).tolist() == picked.tolist()
    assert static_prefilter(h, top_k=2, rest_frac=0.0).tolist() == [2, 4]
    assert static_prefilter(h, top_k=10).tolist() == [0, 1, 2, 3, 4]
    assert static_prefilter(h, top_k=0, rest_frac=1.0).tolist() == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError):
        static_prefilter(h, top_k=-1)
