"""`empo` (arXiv 2504.05812; docs/methods/empo.md): the share of the group in the completion's
answer cluster. Worked examples by hand (ties, equivalent answers, missing answers), hostile
inputs, its relation to TTRL's vote, the TRL callable (metrics, whole groups, two ranks), its
registry and params entries."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rewards.majority import (
    ClusterShareReward,
    answer_clusters,
    cluster_share_rewards,
    majority_vote_rewards,
    semantic_entropy,
)
from rewards.verifiable import extract_boxed


@pytest.mark.parametrize("answers, expected", [
    (["4", "3", None, "4", ""], [2 / 5, 1 / 5, 0, 2 / 5, 0]),  # G = 5 counts the unanswered too
    (["3", "4"], [1 / 2, 1 / 2]),                              # a 1-1 tie: the same share each
    (["4", "3", "3", "4"], [1 / 2] * 4),                       # a 2-2 tie
    (["1,000", "1000", "7", "7", "$1000$"], [3 / 5, 3 / 5, 2 / 5, 2 / 5, 3 / 5]),  # one class
    (["3", "3.0", "3", "8"], [3 / 4, 3 / 4, 3 / 4, 1 / 4]),    # numeric equality
    ([None, None, None], [0, 0, 0]),                           # every answer missing
    ([None, " ", ""], [0, 0, 0]),                              # blank boxes are no answer
    (["5"], [1]),                                              # a group of one
    (["2", "2", "2"], [1, 1, 1]),                              # all agree: equal rewards
    ([None, "6", None, None], [0, 1 / 4, 0, 0]),               # a lone answer: 1 / G, not 1
])
def test_cluster_share_worked_examples(answers, expected) -> None:
    assert cluster_share_rewards(answers).tolist() == pytest.approx(expected)


def test_clusters_are_ttrls_answer_classes_in_order_of_appearance() -> None:
    assert answer_clusters(["7", None, "8", "7.0", "", "8", "9"]) == [0, None, 1, 0, None, 1, 2]
    assert answer_clusters(iter(["1", "1"])) == [0, 0]  # any sequence, a generator too


def test_the_largest_cluster_is_ttrls_label_when_no_tie() -> None:
    """Without a tie at the top, TTRL's 1.0 goes exactly to the completions of the largest
    cluster; EMPO grades the rest by their cluster's share instead of 0."""
    for group in (["3", "4", "4", None], ["1", "1", "1", "2", "3"], ["9", None, None, "9", "8"]):
        shares = cluster_share_rewards(group)
        np.testing.assert_array_equal(majority_vote_rewards(group), (shares == shares.max()) * 1.0)
    tie = ["3", "4"]  # TTRL's first class alone wins a tie; EMPO pays both the same
    assert majority_vote_rewards(tie).tolist() == [1.0, 0.0]
    assert cluster_share_rewards(tie).tolist() == [0.5, 0.5]


def test_semantic_entropy_by_hand() -> None:
    """p = (2/3, 1/3) over the answered: -(2/3 ln 2/3 + 1/3 ln 1/3) = 0.636514."""
    assert semantic_entropy(["4", "3", None, "4"]) == pytest.approx(0.636514, abs=1e-6)
    assert semantic_entropy(["1", "2", "3", "4"]) == pytest.approx(math.log(4))
    assert semantic_entropy(["4", "4.0"]) == 0.0
    assert semantic_entropy([None, ""]) is None


@pytest.mark.parametrize("answers, error, message", [
    ([], ValueError, "cluster_share_rewards: an empty group"),
    (["3", 4], TypeError, r"answer 1 is int 4; answers are the extracted strings"),
    ([None, float("nan")], TypeError, r"answer 1 is float nan"),
])
def test_hostile_inputs_are_named(answers, error, message) -> None:
    with pytest.raises(error, match=message):
        cluster_share_rewards(answers)


# --- the TRL callable -------------------------------------------------------------------------

COMPLETIONS = ["2 + 3 = 5. The answer is \\boxed{5}.", "The answer is \\boxed{6}.", "no box",
               "\\boxed{7}", "\\boxed{7.0}", "\\boxed{7}"]


def test_the_callable_scores_each_group_and_logs_its_metrics() -> None:
    logged: dict[str, float] = {}
    reward = ClusterShareReward(3)
    assert reward.__name__ == "empo_cluster_share"
    out = reward(["p"] * 6, COMPLETIONS, answer=["5"] * 3 + ["8"] * 3,
                 log_metric=lambda k, v: logged.__setitem__(k, v))
    assert out == pytest.approx([1 / 3, 1 / 3, 0.0, 1.0, 1.0, 1.0])
    # Group 1: two clusters of one among 2 answered (ln 2); group 2: one cluster (0).
    assert logged["empo/semantic_entropy"] == pytest.approx(math.log(2) / 2)
    assert logged["empo/top_share"] == pytest.approx((1 / 3 + 1) / 2)
    assert logged["empo/no_answer"] == pytest.approx(1 / 6)
    assert logged["empo/label_accuracy"] == 0.5  # group 1's first cluster "5" is the gold
    # The gold column is logged, never read by the reward.
    assert reward(["p"] * 6, COMPLETIONS, answer=["1"] * 6) == out
    assert reward(["p"] * 6, COMPLETIONS) == out


def test_the_callable_refuses_a_batch_of_partial_groups() -> None:
    with pytest.raises(ValueError, match="empo: a generation batch of 6 completions is not whole groups of 4"):
        ClusterShareReward(4)(["p"] * 6, COMPLETIONS)
    with pytest.raises(ValueError, match="num_generations must be at least 1"):
        ClusterShareReward(0)


def test_two_ranks_score_the_batch_as_one_rank_does(monkeypatch) -> None:
    """Rank 1 holds the second half of the global batch, whose groups straddle the ranks' slices:
    the answers are gathered, grouped over the whole batch, and rank 1 keeps its own slice."""
    import core.ranks as ranks

    one = ClusterShareReward(3)(["p"] * 6, COMPLETIONS)
    mine = COMPLETIONS[2:]  # a group of 3 split 2 + 1 over the ranks when rank 0 holds 2
    first = [(extract_boxed(c), None) for c in COMPLETIONS[:2]]
    monkeypatch.setattr(ranks, "gather_rows", lambda rows: (first + rows, 2))
    assert ClusterShareReward(3)(["p"] * 4, mine) == one[2:]


# --- registry and params --------------------------------------------------------------------

def test_empo_is_registered_label_free_and_trains_beside_ttrl_in_the_intrinsic_study() -> None:
    from core.params import load
    from rewards import MethodContext, build_plan, entry_modules, reward_version

    p = load(preset="ci")
    family, cfg = p.method_config("empo")
    assert family == "empo" and reward_version("empo") == "1"
    assert entry_modules("empo") == ["rewards.majority"]
    plan = build_plan(MethodContext(name="empo", family=family, cfg=cfg, grpo=p.method_grpo("empo"), seed=0))
    assert [f.__name__ for f in plan.reward_funcs] == ["empo_cluster_share"] and plan.trainer_cls is None
    assert plan.reward_funcs[0].num_generations == p.method_grpo("empo").num_generations
    study = load(preset="intrinsic_long")
    assert {"ttrl_long", "empo_long"} <= set(study.methods)
    assert study.method_config("empo_long")[0] == "empo" and study.method_grpo("empo_long").max_steps == 450
    assert study.method_grpo("empo_long") == study.method_grpo("ttrl_long")
    default = load()
    assert not {"empo", "empo_long"} & set(default.pipeline.quick.methods + default.methods)


def test_a_misspelt_empo_key_is_named() -> None:
    from core.params import ParamsError, load, validate

    raw = load().model_dump()
    raw["reward"]["empo"]["vote_samples"] = 4
    with pytest.raises(ParamsError, match=r"reward\.empo\.vote_samples: unknown key"):
        validate(raw)


def test_public_api_matches_the_spec() -> None:
    import inspect

    params = inspect.signature(cluster_share_rewards).parameters
    assert [n for n, p in params.items() if p.default is inspect.Parameter.empty] == ["answers"]
