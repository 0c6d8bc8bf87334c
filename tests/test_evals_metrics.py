"""Pure evaluation metrics: pass@k estimator, self-BLEU, row pooling (and the evals doctests)."""

import doctest
import math

import pytest

import evals.external
import evals.metrics
from evals.metrics import Ratio, aggregate, answer_metrics, pass_at_k, self_bleu


@pytest.mark.parametrize("module", [evals.metrics, evals.external])
def test_doctests(module):
    # pyproject's testpaths do not collect evals/, so its worked examples run here.
    assert doctest.testmod(module).failed == 0


@pytest.mark.parametrize("n,c,k", [(10, 3, 1), (10, 3, 2), (20, 5, 10), (5, 0, 3), (7, 7, 7), (6, 1, 6)])
def test_pass_at_k_matches_the_combinatorial_formula(n, c, k):
    expected = 1.0 - math.comb(n - c, k) / math.comb(n, k)
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_edges_and_errors():
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)  # k = 1 is the plain accuracy c / n
    assert pass_at_k(200, 1, 200) == 1.0
    assert 0.0 < pass_at_k(1000, 1, 10) < 0.011  # large n: no overflow
    for bad in [(5, 6, 1), (5, -1, 1), (5, 2, 0), (5, 2, 6)]:
        with pytest.raises(ValueError, match="pass_at_k needs"):
            pass_at_k(*bad)


def test_pass_at_k_equals_any_correct_when_n_equals_k():
    samples = ["\\boxed{1}", "\\boxed{2}", "\\boxed{3}"]
    m = answer_metrics(samples, "", "2")
    assert m["pass@k"] == pass_at_k(3, 1, 3) == 1.0
    assert m["pass@1"] == pytest.approx(pass_at_k(3, 1, 1))


def test_self_bleu_identical_is_one_and_disjoint_is_zero():
    same = ["The answer is 12 because 3 * 4 = 12."] * 4
    assert self_bleu(same) == pytest.approx(1.0)
    disjoint = ["alpha beta gamma delta", "one two three four", "red green blue cyan", "x y z w"]
    assert self_bleu(disjoint) == pytest.approx(0.0, abs=1e-9)


def test_self_bleu_is_between_and_orders_diversity():
    close = ["the cat sat on the mat today", "the cat sat on the mat now", "the cat sat on a mat today"]
    far = ["the cat sat on the mat today", "a dog ran in the park", "birds fly over hills"]
    assert 0.0 < self_bleu(far) < self_bleu(close) < 1.0


def test_self_bleu_needs_two_samples():
    assert self_bleu([]) is None
    assert self_bleu(["only one"]) is None
    assert self_bleu(["", ""]) == 0.0  # empty samples share nothing to count


def test_aggregate_pools_ratios_skips_none_and_greedy():
    rows = [{"acc": 1.0, "inst": Ratio(1, 4), "greedy_acc": 1.0, "only_some": Ratio(2, 2)},
            {"acc": 0.0, "inst": Ratio(3, 4), "greedy_acc": 0.0, "only_some": None}]
    assert aggregate(rows) == {"acc": 0.5, "inst": 0.5, "greedy_acc": 0.5, "only_some": 1.0}
    assert "greedy_acc" not in aggregate(rows, keep_greedy=False)
    # pooled, not a mean of means: 1/1 and 0/3 pool to 0.25, where the mean of rows would be 0.5
    assert aggregate([{"r": Ratio(1, 1)}, {"r": Ratio(0, 3)}]) == {"r": 0.25}
