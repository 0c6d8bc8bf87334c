"""RLVRR reference reward chain (docs/methods/rlvrr.md). Expected numbers are worked by hand."""

from __future__ import annotations

import statistics
import time

import pytest

from rewards import reference_chain
from rewards.reference_chain import (
    chain_reward,
    content_reward,
    keyword_sequence,
    lcs_length,
    style_reward,
)

CAPITAL = ["paris", "capital", "france"]
REFERENCE = "Paris is the capital of France."


def test_version() -> None:
    assert reference_chain.VERSION == "1"


# ---------------------------------------------------------------- keyword_sequence

def test_longest_keyword_wins() -> None:
    text = "I love New York City and new york."
    assert keyword_sequence(text, ["new york", "new york city"]) == ["new york city", "new york"]


def test_repeats_are_kept() -> None:
    assert keyword_sequence("paris, paris and Paris", ["paris"]) == ["paris", "paris", "paris"]


def test_case_insensitive_and_lower_case_form() -> None:
    assert keyword_sequence("PARIS in spring", ["Paris"]) == ["paris"]
    assert keyword_sequence("paris", ["Paris", "PARIS", "paris"]) == ["paris"]


def test_punctuation_adjacent_keywords_match() -> None:
    text = "Paris, France. (paris) paris's \"Paris\"!"
    assert keyword_sequence(text, ["paris", "france"]) == ["paris", "france", "paris", "paris", "paris"]


def test_whole_word_only() -> None:
    assert keyword_sequence("category cat concatenate cats cat_x bobcat", ["cat"]) == ["cat"]


def test_empty_keyword_list_and_empty_keywords_are_ignored() -> None:
    assert keyword_sequence("a cat", []) == []
    assert keyword_sequence("a cat", ["", "   "]) == []
    assert keyword_sequence("a cat", ["", "cat"]) == ["cat"]
    assert keyword_sequence("", ["cat"]) == []


def test_matches_do_not_overlap_and_scan_left_to_right() -> None:
    # "new york" is taken first; the remaining "city" is not a keyword on its own.
    assert keyword_sequence("new york city", ["york city", "new york"]) == ["new york"]


def test_multi_word_keyword_across_whitespace_runs() -> None:
    assert keyword_sequence("New\n   York", ["new york"]) == ["new york"]


def test_regex_metacharacters_are_literal() -> None:
    assert keyword_sequence("I like c++ and c. Not cxx.", ["c", "c++", "c.x"]) == ["c++", "c"]


# ---------------------------------------------------------------- lcs_length

def test_lcs_classic_example() -> None:
    # ABCBDAB vs BDCABA: the textbook answer is 4 (e.g. BCBA).
    assert lcs_length(list("ABCBDAB"), list("BDCABA")) == 4


def test_lcs_edge_cases() -> None:
    assert lcs_length([], ["a"]) == 0
    assert lcs_length(["a", "b"], ["c", "d"]) == 0
    assert lcs_length(["x", "y", "z"], ["x", "y", "z"]) == 3
    assert lcs_length(["a", "a", "a"], ["a"]) == 1
    assert lcs_length(["paris", "capital", "france"], ["france", "capital", "paris"]) == 1


# ---------------------------------------------------------------- content_reward

def test_reference_order_scores_one() -> None:
    assert content_reward("Paris is the capital city of France.", [REFERENCE], [CAPITAL]) == 1.0


def test_reversed_order_scores_lower() -> None:
    # K_y = [france, capital, paris], K_z = [paris, capital, france]: LCS 1, max length 3.
    score = content_reward("France has its capital in Paris.", [REFERENCE], [CAPITAL])
    assert score == pytest.approx(1 / 3)


def test_keyword_stuffing_scores_lower_than_reference_order() -> None:
    # K_y has 6 tokens, LCS with the 3 reference tokens is 3: 3 / 6.
    stuffed = "paris capital france paris capital france"
    assert content_reward(stuffed, [REFERENCE], [CAPITAL]) == pytest.approx(0.5)
    assert content_reward(REFERENCE, [REFERENCE], [CAPITAL]) == 1.0


def test_missing_keywords_in_response_score_zero_for_that_key_point() -> None:
    assert content_reward("Nothing relevant here.", [REFERENCE], [CAPITAL]) == 0.0


def test_both_empty_gives_zero_for_that_key_point() -> None:
    # Key point 1 matches perfectly (1.0); "eiffel" is in neither text (0.0): mean 0.5.
    score = content_reward("Paris is the capital of France.", [REFERENCE], [CAPITAL, ["eiffel"]])
    assert score == pytest.approx(0.5)


MULTI_KEYPOINTS = [CAPITAL, ["seine", "river"]]
Z1 = "Paris is the capital of France. The Seine is a river."          # [p, c, f], [seine, river]
Z2 = "France has its capital in Paris. A river, the Seine, crosses it."  # [f, c, p], [river, seine]
Y = "Paris is the capital of France. A river called the Seine."        # [p, c, f], [river, seine]


def test_multiple_references_take_the_max_per_key_point() -> None:
    # Key point 1: z1 gives 3/3, z2 gives 1/3 -> 1. Key point 2: z1 gives 1/2, z2 gives 2/2 -> 1.
    assert content_reward(Y, [Z1, Z2], MULTI_KEYPOINTS) == pytest.approx(1.0)
    # Each reference alone: z1 -> (1 + 1/2) / 2, z2 -> (1/3 + 1) / 2; the max of those (0.75)
    # is lower than the per-key-point max above.
    assert content_reward(Y, [Z1], MULTI_KEYPOINTS) == pytest.approx(0.75)
    assert content_reward(Y, [Z2], MULTI_KEYPOINTS) == pytest.approx(2 / 3)


def test_empty_keyword_list_key_point_is_left_out() -> None:
    assert content_reward(REFERENCE, [REFERENCE], [[], CAPITAL, ["", " "]]) == 1.0


def test_not_applicable_returns_none() -> None:
    assert content_reward(REFERENCE, [], [CAPITAL]) is None
    assert content_reward(REFERENCE, [REFERENCE], []) is None
    assert content_reward(REFERENCE, [REFERENCE], [[""]]) is None


def test_unknown_mode_lists_valid_modes() -> None:
    with pytest.raises(ValueError, match="ordered, direct"):
        content_reward(REFERENCE, [REFERENCE], [CAPITAL], mode="bag")  # type: ignore[arg-type]


def test_direct_mode_ignores_order_and_repetition() -> None:
    reversed_text = "France has its capital in Paris."
    stuffed = "paris capital france paris capital france"
    assert content_reward(reversed_text, [REFERENCE], [CAPITAL], mode="direct") == 1.0
    assert content_reward(stuffed, [REFERENCE], [CAPITAL], mode="direct") == 1.0
    # Two of the three reference keywords present: 2/3 (ordered mode: LCS 1 of 3 -> 1/3).
    partial = "France and Paris."
    assert content_reward(partial, [REFERENCE], [CAPITAL], mode="direct") == pytest.approx(2 / 3)
    assert content_reward(partial, [REFERENCE], [CAPITAL]) == pytest.approx(1 / 3)


def test_direct_mode_takes_max_over_references() -> None:
    # z1 holds {paris, capital}: 2/2 present. z2 holds {france}: 0/1. Max is 1.
    refs = ["Paris is a capital.", "France."]
    assert content_reward("Paris capital", refs, [CAPITAL], mode="direct") == 1.0
    # A reference without any keyword scores that key point 0 (nothing to find).
    assert content_reward("Paris", ["Nothing here."], [CAPITAL], mode="direct") == 0.0


def test_content_scoring_is_fast() -> None:
    """5 key points x 3 keywords, 3 references: well under 1 ms per completion (median)."""
    keypoints = [[f"term{m}a", f"term{m}b word", f"term{m}c"] for m in range(5)]
    filler = "some ordinary words in between " * 8
    refs = [" ".join(f"{filler} {kw[0]} {kw[1]} {filler} {kw[2]}" for kw in keypoints)] * 3
    response = refs[0][::-1] + refs[0]
    timings = []
    for _ in range(300):
        start = time.perf_counter()
        content_reward(response, refs, keypoints)
        timings.append(time.perf_counter() - start)
    assert statistics.median(timings) < 1e-3


# ---------------------------------------------------------------- style_reward

def test_style_weights_normalise() -> None:
    checks = [("a", 2.0), ("b", 1.0), ("c", 1)]
    assert style_reward("x", checks, results=[True, False, True]) == pytest.approx(0.75)
    assert style_reward("x", checks, results=[True, True, True]) == pytest.approx(1.0)
    assert style_reward("x", checks, results=[False, False, False]) == 0.0


def test_style_huge_finite_weights_stay_finite() -> None:
    """Regression: 1e308 + 1e308 overflowed to inf and inf/inf made the reward NaN."""
    checks = [("a", 1e308), ("b", 1e308), ("c", 5e307)]
    assert style_reward("x", checks, results=[True, False, True]) == pytest.approx(0.6)
    assert style_reward("x", checks, results=[True, True, True]) == pytest.approx(1.0)


def test_style_only_exact_true_counts() -> None:
    checks = [("a", 1.0), ("b", 1.0), ("c", 1.0), ("d", 1.0)]
    assert style_reward("x", checks, results=[1, "yes", None, True]) == pytest.approx(0.25)


def test_style_without_checks_is_not_applicable() -> None:
    assert style_reward("x", []) is None


@pytest.mark.parametrize("weights", [[1.0, -1.0], [0.0, 0.0], [float("nan"), 1.0]])
def test_style_bad_weights_raise(weights: list[float]) -> None:
    with pytest.raises(ValueError, match="weights"):
        style_reward("x", [("a", w) for w in weights], results=[True] * len(weights))


def test_style_results_must_align_with_checks() -> None:
    with pytest.raises(ValueError, match="2 style results for 1 checks"):
        style_reward("x", [("a", 1.0)], results=[True, True])


def test_style_runs_checks_in_the_sandbox() -> None:
    checks = [
        ("def check(response):\n    return len(response.split()) <= 3\n", 3.0),
        ("def check(response):\n    return response.endswith('.')\n", 1.0),
        ("import os\ndef check(response):\n    return True\n", 1.0),
    ]
    # Passes: 3 (short) + 1 (ends with a period); the import is rejected: 4 / 5.
    assert style_reward("Hi there.", checks) == pytest.approx(0.8)


# ---------------------------------------------------------------- chain_reward

def test_chain_reward_mean_by_default_and_weighted() -> None:
    assert chain_reward(0.5, 1.0) == pytest.approx(0.75)
    assert chain_reward(0.5, 1.0, content_weight=0.8) == pytest.approx(0.6)
    assert chain_reward(0.5, 1.0, content_weight=1.0) == pytest.approx(0.5)


def test_chain_reward_missing_parts() -> None:
    assert chain_reward(None, 0.25) == 0.25
    assert chain_reward(0.5, None) == 0.5
    assert chain_reward(None, None) is None


def test_chain_reward_bad_weight() -> None:
    with pytest.raises(ValueError, match="content_weight"):
        chain_reward(0.5, 0.5, content_weight=1.5)
