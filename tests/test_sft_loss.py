"""The role phase's per-example loss (`models.tiny.example_mean_nll`)."""

import math

import pytest
import torch

from models.tiny import _trainer_class, example_mean_nll


def _logits(rows):
    """[B, T, V] logits from per-position probability rows (log taken, so softmax gives them back)."""
    return torch.tensor(rows, dtype=torch.float32).log()


def test_worked_example_weighs_each_example_once():
    # Vocabulary of 2. Example 0 has one label token (prob 0.5), example 1 three (probs 0.9 each),
    # example 2 none. Labels are shifted by one: position t predicts labels[t + 1].
    p = [[0.5, 0.5], [0.5, 0.5], [0.5, 0.5], [0.5, 0.5]]
    q = [[0.9, 0.1], [0.9, 0.1], [0.9, 0.1], [0.5, 0.5]]
    logits = _logits([p, q, p])
    labels = torch.tensor([[-100, -100, -100, 0],
                           [-100, 0, 0, 0],
                           [-100, -100, -100, -100]])
    per_example = [-math.log(0.5), -math.log(0.9)]
    assert example_mean_nll(logits, labels).item() == pytest.approx(sum(per_example) / 2, rel=1e-6)
    # TRL's token mean would give the long example 3/4 of the weight instead of 1/2.
    token_mean = (-math.log(0.5) - 3 * math.log(0.9)) / 4
    assert example_mean_nll(logits, labels).item() != pytest.approx(token_mean, rel=1e-3)


def test_matches_cross_entropy_when_every_example_has_one_token():
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 7)
    labels = torch.full((3, 5), -100)
    labels[:, 4] = torch.tensor([1, 6, 3])
    expected = torch.nn.functional.cross_entropy(logits[:, 3], labels[:, 4])
    assert example_mean_nll(logits, labels).item() == pytest.approx(expected.item(), rel=1e-6)


def test_gradient_flows_and_token_norm_keeps_trl():
    from trl import SFTTrainer

    logits = torch.randn(2, 4, 5, requires_grad=True)
    labels = torch.tensor([[-100, 1, 2, 3], [-100, -100, -100, 4]])
    example_mean_nll(logits, labels).backward()
    assert logits.grad is not None and logits.grad[:, :3].abs().sum() > 0
    assert _trainer_class("token") is SFTTrainer
    assert issubclass(_trainer_class("example"), SFTTrainer)
