"""Collapse detectors on synthetic histories with hand-computed expected steps."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from core.params import load
from models.collapse import (
    CollapseConfig,
    CollapseEvent,
    CollapseMonitor,
    detect_entropy_collapse,
    detect_length_collapse,
    detect_reward_hacking,
)

# Reward rises throughout; held-out peaks at 0.50 (step 20, reward 0.3), then falls.
# Drop below the peak: step 30 -> 0.05 (no), 40 -> 0.12 (1st), 50 -> 0.15 (2nd), 60 -> 0.20 (3rd).
STEPS = [0, 10, 20, 30, 40, 50, 60]
REWARD = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]
HELDOUT = [0.30, 0.40, 0.50, 0.45, 0.38, 0.35, 0.30]


@pytest.mark.parametrize("patience, expected", [(1, 40), (2, 50), (3, 60), (4, None)])
def test_hacking_confirmed_at_patience_th_evaluation(patience: int, expected: int | None) -> None:
    assert detect_reward_hacking(STEPS, REWARD, HELDOUT, patience=patience) == expected


def test_hacking_not_flagged_before_confirmation() -> None:
    # Fed prefix by prefix, as during training: nothing until step 50 (patience 2).
    found = [detect_reward_hacking(STEPS[: n + 1], REWARD[: n + 1], HELDOUT[: n + 1]) for n in range(len(STEPS))]
    assert found == [None, None, None, None, None, 50, 50]


def test_both_rising_never_flagged() -> None:
    steps = list(range(0, 200, 10))
    rising = np.linspace(0.1, 0.9, len(steps))
    assert detect_reward_hacking(steps, rising, rising, patience=1) is None


def test_noisy_flat_heldout_not_flagged() -> None:
    # Noise amplitude 0.04 => any two held-out values differ by < 0.08 < min_drop.
    rng = np.random.default_rng(0)
    n = 200
    heldout = 0.5 + rng.uniform(-0.04, 0.04, n)
    reward = np.linspace(0.0, 1.0, n) + rng.uniform(-0.01, 0.01, n)
    assert detect_reward_hacking(list(range(n)), reward, heldout, patience=1) is None


def test_drop_while_reward_also_drops_is_not_hacking() -> None:
    reward = [0.1, 0.2, 0.3, 0.25, 0.2, 0.15, 0.1]
    assert detect_reward_hacking(STEPS, reward, HELDOUT, patience=1) is None


def test_reward_tolerance() -> None:
    # Reward 0.02 below its value at the best step (0.3 at step 20) from step 40 on.
    reward = [0.1, 0.2, 0.3, 0.35, 0.28, 0.28, 0.28]
    assert detect_reward_hacking(STEPS, reward, HELDOUT) is None
    assert detect_reward_hacking(STEPS, reward, HELDOUT, reward_tol=0.05) == 50


def test_drop_of_exactly_min_drop_counts() -> None:
    # 0.7 - 0.6 is 0.0999... in binary; the detector means "at least min_drop".
    assert detect_reward_hacking([0, 1, 2], [0.1, 0.2, 0.3], [0.7, 0.6, 0.6]) == 2


def test_hacking_streak_restarts_after_recovery() -> None:
    # Best 0.6 at idx 1. idx2 drop 0.15 (1), idx3 drop 0.05 (reset), idx4 (1), idx5 (2).
    heldout = [0.5, 0.6, 0.45, 0.55, 0.45, 0.44]
    assert detect_reward_hacking([0, 1, 2, 3, 4, 5], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], heldout) == 5


def test_new_best_moves_the_reference() -> None:
    # Best 0.5 at idx0; idx1 drop 0.12 (1); idx2 new best 0.9 (reset); idx3 (1); idx4 (2).
    heldout = [0.5, 0.38, 0.9, 0.7, 0.6]
    assert detect_reward_hacking([0, 5, 10, 15, 20], [0.1, 0.2, 0.3, 0.4, 0.5], heldout) == 20


def test_nan_heldout_breaks_the_streak() -> None:
    heldout = [0.5, 0.6, 0.4, math.nan, 0.4, 0.4]
    assert detect_reward_hacking([0, 1, 2, 3, 4, 5], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], heldout) == 5


def test_detector_input_validation() -> None:
    with pytest.raises(ValueError, match="one value per step"):
        detect_reward_hacking([0, 1], [0.1, 0.2, 0.3], [0.1, 0.2])
    with pytest.raises(ValueError, match="patience"):
        detect_reward_hacking([0, 1], [0.1, 0.2], [0.1, 0.2], patience=0)


def test_entropy_collapse() -> None:
    steps = [0, 1, 2, 3, 4, 5, 6]
    entropy = [2.0, 1.5, 0.08, 0.2, 0.05, 0.04, 0.03]
    # Below 0.1 at idx 2 (1), reset at idx 3, idx 4 (1), idx 5 (2), idx 6 (3).
    assert detect_entropy_collapse(steps, entropy, floor=0.1, patience=2) == 5
    assert detect_entropy_collapse(steps, entropy, floor=0.1, patience=3) == 6
    assert detect_entropy_collapse(steps, entropy, floor=0.01, patience=1) is None


def test_length_collapse_short() -> None:
    steps = [0, 10, 20, 30, 40, 50]
    lengths = [400, 300, 70, 90, 60, 50]
    # Floor is 0.2 * 400 = 80: idx2 (1), idx3 reset, idx4 (1), idx5 (2).
    assert detect_length_collapse(steps, lengths) == 50
    assert detect_length_collapse(steps, lengths, patience=1) == 20
    assert detect_length_collapse(steps, lengths, min_length_frac=0.1) is None


def test_length_collapse_clipped() -> None:
    steps = [0, 1, 2, 3, 4]
    lengths = [400, 410, 420, 430, 440]
    # Above 0.5: idx1 (1), idx2 = 0.5 is not above (reset), idx3 (1), idx4 (2).
    clipped = [0.1, 0.6, 0.5, 0.55, 0.7]
    assert detect_length_collapse(steps, lengths, clipped) == 4
    assert detect_length_collapse(steps, lengths) is None
    assert detect_length_collapse(steps, lengths, clipped, max_clipped=0.8) is None


# step, reward, heldout, entropy, length, clipped
HISTORY = [
    (0, 0.1, 0.40, 2.0, 400, 0.0),
    (1, 0.2, 0.50, 1.5, 380, 0.0),
    (2, 0.3, 0.60, 0.05, 300, 0.0),  # best held-out; entropy below 0.1 (1)
    (3, 0.4, 0.45, 0.04, 200, 0.0),  # drop 0.15 (1); entropy (2) -> entropy event
    (4, 0.5, 0.40, 0.03, 70, 0.0),  # drop 0.20 (2) -> hacking event; 70 < 80 (1)
    (5, 0.6, 0.35, 0.02, 60, 0.0),  # 60 < 80 (2) -> length event
    (6, 0.7, 0.30, 0.01, 50, 0.9),  # everything still bad: nothing new
]


def test_monitor_fires_each_kind_once_at_the_right_step() -> None:
    monitor = CollapseMonitor(CollapseConfig(patience=2, entropy_floor=0.1, min_length_frac=0.2))
    fired = [[(e.kind, e.step) for e in monitor.update(*row)] for row in HISTORY]
    assert fired == [[], [], [], [("entropy", 3)], [("reward_hacking", 4)], [("length", 5)], []]
    assert [e.kind for e in monitor.events] == ["entropy", "reward_hacking", "length"]
    assert monitor.best_step == 2 and monitor.best_heldout == 0.6
    assert monitor.metrics() == {
        "collapse/reward_hacking": 1,
        "collapse/entropy": 1,
        "collapse/length": 1,
        "collapse/best_step": 2,
        "collapse/best_heldout": 0.6,
    }
    assert not monitor.should_stop  # early_stop defaults to False


def test_monitor_agrees_with_pure_detectors() -> None:
    monitor = CollapseMonitor(CollapseConfig(entropy_floor=0.1))
    for row in HISTORY:
        monitor.update(*row)
    steps, reward, heldout, entropy, lengths, clipped = (list(c) for c in zip(*HISTORY))
    by_kind = {e.kind: e.step for e in monitor.events}
    assert by_kind["reward_hacking"] == detect_reward_hacking(steps, reward, heldout)
    assert by_kind["entropy"] == detect_entropy_collapse(steps, entropy, 0.1)
    assert by_kind["length"] == detect_length_collapse(steps, lengths, clipped)


def test_monitor_skips_missing_values_and_stops_early() -> None:
    monitor = CollapseMonitor(CollapseConfig(early_stop=True))
    assert monitor.metrics() == {"collapse/reward_hacking": 0, "collapse/entropy": 0, "collapse/length": 0}
    # Held-out evaluated only every other step; the skipped steps neither count nor break.
    rows = [(0, 0.1, 0.6), (1, 0.2, None), (2, 0.3, 0.45), (3, 0.4, None), (4, 0.5, 0.4)]
    out = [monitor.update(s, r, h) for s, r, h in rows]
    assert out[:4] == [[], [], [], []]
    assert len(out[4]) == 1 and isinstance(out[4][0], CollapseEvent)
    assert (out[4][0].kind, out[4][0].step) == ("reward_hacking", 4)
    assert "best 0.6 (step 0)" in out[4][0].message
    assert monitor.should_stop
    assert monitor.best_step == 0


def test_monitor_rejects_non_increasing_steps() -> None:
    monitor = CollapseMonitor()
    monitor.update(5, 0.1, 0.5)
    with pytest.raises(ValueError, match="must increase"):
        monitor.update(5, 0.2, 0.5)


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="patience"):
        CollapseConfig(patience=0)


def test_monitor_compares_with_the_evaluation_before_training() -> None:
    """Live RLME on the v1 base (docs/results.md): held-out falls within the first window
    (0.175 -> 0.11) while the self-evaluation reward rises. The evaluation before training has no
    train reward; it takes the first window's, so the fall from the start is caught."""
    monitor = CollapseMonitor(CollapseConfig(min_drop=0.1, patience=2))
    history = [(0, None, 0.175), (25, -0.917, 0.11), (50, -0.93, 0.04), (75, -0.85, 0.045),
               (100, -0.82, 0.045), (125, -0.80, 0.04)]
    fired = [e for step, r, h in history for e in monitor.update(step, r, h)]
    assert [(e.kind, e.step) for e in fired] == [("reward_hacking", 100)]
    assert "best 0.175 (step 0)" in fired[0].message
    assert math.isnan(monitor.reward[0])  # the recorded series is left as measured


def test_config_defaults_are_params_yaml(monkeypatch: pytest.MonkeyPatch) -> None:
    # params.yaml (validated by core/params.py) is the source of truth; the dataclass defaults,
    # used by tests and offline analysis, must not drift from it.
    monkeypatch.delenv("LAB_PRESET", raising=False)
    assert dataclasses.asdict(CollapseConfig()) == load().collapse.model_dump()
