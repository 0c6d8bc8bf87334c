"""URLVR's per-training measures (evals/urlvr.py): worked examples, hostile input, the training
hook on a fabricated batch (models/grpo.py), the report's table (flows/report_urlvr.py), and a
tiny training that logs them while every value it logged before stays bit for bit the same."""

from __future__ import annotations

import math
from collections import defaultdict
from types import SimpleNamespace

import pytest

from evals.urlvr import (
    ACCURACY,
    CORRELATION,
    collapse_step,
    logged,
    point_biserial,
    reward_accuracy,
    rise_then_fall,
    step_measures,
)

NAN = float("nan")


# ------------------------------------------------------------------ worked examples (by hand)

def test_reward_accuracy_splits_each_group_at_its_median() -> None:
    # Group a: median 0.5, floor 0.2: 0.8 and 0.5 positive, 0.2 negative; truth 1, 0, 0: 2 of 3.
    # Group b: median 0.35 between 0.3 and 0.4: 0.4 positive (right), 0.3 negative (wrong): 1 of 2.
    acc = reward_accuracy([0.8, 0.5, 0.2, 0.4, 0.3], [1, 0, 0, 1, 1], ["a", "a", "a", "b", "b"])
    assert acc == pytest.approx(3 / 5)


def test_a_zero_one_reward_scores_its_plain_agreement_with_the_truth() -> None:
    # Ties at the median go up except at the group's floor: a 0/1 reward marks exactly its 1s.
    assert reward_accuracy([1, 1, 1, 0], [1, 1, 1, 0], [0] * 4) == 1.0
    assert reward_accuracy([1, 0, 0, 0], [1, 0, 0, 0], [0] * 4) == 1.0
    assert reward_accuracy([1, 0, 0, 0], [0, 1, 1, 1], [0] * 4) == 0.0
    # A majority vote that rewards the wrong consensus: 1 for the three wrong, 0 for the right one.
    assert reward_accuracy([1, 1, 1, 0], [0, 0, 0, 1], [0] * 4) == 0.0


def test_point_biserial_is_the_hand_formula() -> None:
    rewards, correct = [1.0, 0.5, 0.0, 1.5], [1, 0, 1, 0]
    # (M1 - M0) / s * sqrt(p q), s the population deviation: (0.5 - 1.0) / sqrt(0.3125) * 0.5.
    assert point_biserial(rewards, correct) == pytest.approx(-1 / math.sqrt(5))
    assert point_biserial([0.0, 1.0], [0, 1]) == pytest.approx(1.0)


def test_collapse_step_is_the_first_step_from_which_accuracy_stays_below_the_threshold() -> None:
    curve = [{"step": s, ACCURACY: a} for s, a in
             [(1, 0.8), (2, 0.45), (3, 0.55), (4, 0.49), (5, 0.2), (6, 0.3)]]
    assert collapse_step(curve) == 4
    assert collapse_step(curve, threshold=0.6) == 2
    assert collapse_step(curve[:3]) is None          # recovered at step 3: no collapse yet
    assert collapse_step([{"step": 1, ACCURACY: 0.5}]) is None  # at the threshold is not below
    # Rows without the key (steps where it was undefined) are skipped, not read as zeros.
    assert collapse_step([*curve[:3], {"step": 4, "reward": 0.1}, {"step": 5, ACCURACY: 0.1}]) == 5


def test_rise_then_fall_needs_a_rise_and_a_fall_beyond_the_margin() -> None:
    assert rise_then_fall([0.5, 0.6, 0.7, 0.6])
    assert not rise_then_fall([0.5, 0.6, 0.7, 0.68])   # fell 0.02: within the margin
    assert not rise_then_fall([0.5, 0.53, 0.4])        # rose 0.03: within the margin
    assert not rise_then_fall([0.7, 0.5, 0.3])         # only falls
    assert not rise_then_fall([0.3, 0.5, 0.7])         # only rises
    assert rise_then_fall([0.5, 0.53, 0.4], margin=0.01)


# ------------------------------------------------------------------ hostile input

def test_empty_input_gives_no_measure() -> None:
    assert reward_accuracy([], [], []) is None and point_biserial([], []) is None
    assert step_measures([], [], 4) == {} and collapse_step([]) is None
    assert not rise_then_fall([]) and not logged([])


def test_nan_rewards_and_none_correctness_are_left_out() -> None:
    rewards, correct = [0.9, NAN, 0.1, None, 0.7, 0.2], [1, 1, 0, 0, None, 1]
    # Left: (0.9, 1), (0.1, 0) in group 0; (0.2, 1) alone in group 1 (constant: not split).
    assert reward_accuracy(rewards, correct, [0, 0, 0, 0, 1, 1]) == 1.0
    assert point_biserial(rewards, correct) == pytest.approx(point_biserial([0.9, 0.1, 0.2], [1, 0, 1]))
    assert reward_accuracy([NAN, NAN], [1, 0], [0, 0]) is None
    assert reward_accuracy([0.1, 0.9], [None, None], [0, 0]) is None
    assert reward_accuracy([float("inf"), 0.2, 0.3], [0, 0, 1], [0, 0, 0]) == 1.0


def test_constant_rewards_or_correctness_are_undefined_not_a_number() -> None:
    assert reward_accuracy([0.4, 0.4, 0.4], [1, 0, 1], [0, 0, 0]) is None
    assert point_biserial([0.4, 0.4, 0.4], [1, 0, 1]) is None
    assert point_biserial([0.1, 0.5, 0.9], [1, 1, 1]) is None
    assert point_biserial([0.1, 0.5, 0.9], [0, 0, 0]) is None
    assert step_measures([0.1, 0.5, 0.9, 0.3], [1, 1, 1, 1], 2) == {ACCURACY: 0.5}


def test_mismatched_lengths_name_the_lengths() -> None:
    with pytest.raises(ValueError, match=r"one per completion; got lengths \[3, 2, 3\]"):
        reward_accuracy([0.1, 0.2, 0.3], [1, 0], [0, 0, 0])
    with pytest.raises(ValueError, match="group size"):
        step_measures([0.1], [1], 0)


def test_curves_with_junk_values_are_read_as_not_logged_steps() -> None:
    curve = [{"step": 1, ACCURACY: None}, {"step": 2, ACCURACY: "x"}, {"step": 3, ACCURACY: NAN},
             {ACCURACY: 0.1}, {"step": 4, ACCURACY: 0.9}]
    assert collapse_step(curve) is None
    assert not rise_then_fall([None, "a", NAN, 0.5])


# ------------------------------------------------------------------ the training hook

class FakeTrainer:
    """What `models.grpo._urlvr_measures` reads of TRL's GRPOTrainer."""

    def __init__(self, rewards_per_func, weights, group_size: int, training: bool = True):
        import torch

        self.model = SimpleNamespace(training=training)
        self.reward_weights = torch.tensor(weights)
        self.num_generations = group_size
        self._metrics: dict = {"train": defaultdict(list), "eval": defaultdict(list)}
        self.rewards = rewards_per_func

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        return self.rewards


def _batch():
    import torch

    # Two groups of three; two reward functions weighted 1 and 0.5. Row 3 is unscorable (every
    # function None), row 6 has no gold answer.
    rewards = torch.tensor([[1.0, 0.0], [0.0, 1.0], [NAN, NAN], [0.0, 0.0], [1.0, 1.0], [1.0, 0.0]])
    completions = [r"\boxed{7}", r"\boxed{8}", r"\boxed{7}", r"so \boxed{3}", "no box", r"\boxed{3}"]
    inputs = [{"prompt": "p", "answer": a} for a in ("7", "7", "7", "3", "3", None)]
    return rewards, completions, inputs


def test_the_hook_logs_the_measures_of_the_exact_rewards_and_returns_them_untouched() -> None:
    import torch

    from models.grpo import _urlvr_measures

    rewards, completions, inputs = _batch()
    trainer = FakeTrainer(rewards, [1.0, 0.5], 3)
    _urlvr_measures(trainer)
    before = rewards.clone()
    out = trainer._calculate_rewards(inputs, ["p"] * 6, completions, [[1]] * 6)
    assert out is rewards and torch.equal(out.nan_to_num(-1), before.nan_to_num(-1))
    # Proxy (weighted sum): 1.0, 0.5, NaN | 0.0, 1.5, 1.0; correct: 1, 0, 1 | 1, 0, None.
    # Group 0 scored: (1.0, 1), (0.5, 0): both agree. Group 1 scored: (0.0, 1), (1.5, 0): neither.
    assert trainer._metrics["train"][ACCURACY] == [0.5]
    # Point-biserial of [1.0, 0.5, 0.0, 1.5] with [1, 0, 1, 0]: -1 / sqrt(5) (see above).
    assert trainer._metrics["train"][CORRELATION] == [pytest.approx(-1 / math.sqrt(5))]
    assert set(trainer._metrics["train"]) == {ACCURACY, CORRELATION}


def test_the_hook_logs_nothing_outside_training_or_when_undefined() -> None:
    import torch

    from models.grpo import _urlvr_measures

    rewards, completions, inputs = _batch()
    trainer = FakeTrainer(rewards, [1.0, 0.5], 3, training=False)
    _urlvr_measures(trainer)
    trainer._calculate_rewards(inputs, ["p"] * 6, completions, [[1]] * 6)
    assert not trainer._metrics["train"] and not trainer._metrics["eval"]
    # Every reward the same, no gold answers: neither measure is defined, none is logged.
    trainer = FakeTrainer(torch.ones(6, 1), [1.0], 3)
    _urlvr_measures(trainer)
    trainer._calculate_rewards([{"prompt": "p"}] * 6, ["p"] * 6, completions, [[1]] * 6)
    assert not trainer._metrics["train"]


# ------------------------------------------------------------------ the report's table

def test_the_report_names_runs_recorded_before_the_measures() -> None:
    from flows.report_urlvr import NOT_LOGGED, urlvr_markdown, urlvr_rows

    new = [{"step": 1, ACCURACY: 0.6, CORRELATION: 0.1}, {"step": 2, ACCURACY: 0.9, CORRELATION: 0.3},
           {"step": 3, ACCURACY: 0.3, CORRELATION: -0.1}]
    healthy = [{"step": 1, ACCURACY: 0.6}, {"step": 2, ACCURACY: 0.7}, {"step": 3, ACCURACY: 0.8}]
    old = [{"step": 1, "reward": 0.2}]
    runs = {"base": {None: SimpleNamespace(train=[])},
            "a": {0: SimpleNamespace(train=new), 1: SimpleNamespace(train=healthy)},
            "b": {0: SimpleNamespace(train=old)}}
    rows, unmeasured = urlvr_rows(runs)
    assert rows == [["a", "2 of 2", "0.550", "0.100", "s0: 3; s1: none", "1 of 2"]]
    assert unmeasured == ["b"]  # named apart, never a row of zeros
    text = urlvr_markdown(runs)
    assert NOT_LOGGED in text and text.endswith(": b.") and "| b |" not in text
    assert urlvr_markdown({"b": runs["b"]}).startswith("No run logged the measures yet.")
    assert urlvr_markdown({}) == "No training curves found."


# ------------------------------------------------------------------ a tiny training, with and without

@pytest.fixture(scope="module")
def micro(tmp_path_factory):
    from core.params import load
    from models.tiny import train_base
    from world import generate_world

    p = load(preset="ci")
    d = tmp_path_factory.mktemp("micro")
    generate_world(p.world, d / "prepared")
    train_base(d / "prepared", d / "base", p.base_model, p.seed, work_dir=d / "sft")
    return p, d


@pytest.mark.slow
def test_a_training_logs_the_measures_and_leaves_every_old_value_bit_for_bit(micro, tmp_path,
                                                                              monkeypatch) -> None:
    from flows.train import make_plan, task_rows
    from models import grpo

    p, d = micro
    measured = grpo._urlvr_measures
    logs = {}
    for arm in ("without", "with"):
        # The same run, once with the hook switched off: what was logged before the measures.
        monkeypatch.setattr(grpo, "_urlvr_measures", measured if arm == "with" else lambda trainer: None)
        history = grpo.train(d / "base", task_rows(d / "prepared", "arith"),
                             make_plan(p, "random", p.seed, None, None), p.grpo, seed=p.seed,
                             output_dir=tmp_path / arm)
        logs[arm] = [{k: v for k, v in row.items() if "time" not in k and "per_second" not in k}
                     for row in history]
    steps = [row for row in logs["with"] if "reward" in row]
    assert len(steps) >= 2 and all(0.0 <= row[ACCURACY] <= 1.0 for row in steps)
    assert all(-1.0 <= row[CORRELATION] <= 1.0 for row in steps if CORRELATION in row)
    assert not any(k.startswith("urlvr/") for row in logs["without"] for k in row)
    assert [{k: v for k, v in row.items() if not k.startswith("urlvr/")} for row in logs["with"]] \
        == logs["without"]
