"""Rationale consistency / MetaJudge (rewards/rationale.py): hand-computed examples."""

from __future__ import annotations

import numpy as np
import pytest

from rewards.rationale import (
    VERSION,
    hybrid_reward,
    lexical_matcher,
    optimal_matching,
    outcome_reward,
    parse_reasons,
    parse_verdict,
    rationale_ap,
    rationale_consistency,
    verdict_direction,
)


def test_version() -> None:
    assert VERSION == "1"


# --- matching and rationale consistency -------------------------------------------------------

def test_paper_table1_three_of_four_reasons_is_075_and_none_is_0() -> None:
    # Paper 001 Table 1: four human reasons R1..R4. o3 recovers R3, R1 and R4 (its reasons 0, 1, 2
    # match human 2, 0, 3 fully); its two other reasons match nothing. 3 / 4 = 0.75.
    o3 = np.zeros((4, 5))
    o3[2, 0] = o3[0, 1] = o3[3, 2] = 1.0
    total, pairs = optimal_matching(o3)
    assert total == pytest.approx(3.0)
    assert pairs == [(0, 1), (2, 0), (3, 2)]
    assert rationale_consistency([o3]) == pytest.approx(0.75)
    # o3-mini follows surface cues: nothing matches -> 0 / 4 = 0.
    o3_mini = np.zeros((4, 3))
    assert optimal_matching(o3_mini) == (0.0, [])
    assert rationale_consistency([o3_mini]) == 0.0
    # RC over both examples is the mean: (0.75 + 0) / 2.
    assert rationale_consistency([o3, o3_mini]) == pytest.approx(0.375)


def test_one_broad_reason_cannot_match_several_human_reasons() -> None:
    # One vague model reason scores 1 against all three human reasons; one-to-one matching gives it
    # credit once: total 1, RC 1/3 (not 3/3).
    broad = np.ones((3, 1))
    total, pairs = optimal_matching(broad)
    assert total == pytest.approx(1.0) and len(pairs) == 1
    assert rationale_consistency([broad]) == pytest.approx(1 / 3)
    # AP also counts it once: I = [1], P@1 = 1 -> AP = 1 * 1 / 3.
    assert rationale_ap(broad) == pytest.approx(1 / 3)


def test_matching_is_globally_optimal_not_greedy() -> None:
    # Greedy (human 0 takes its best, model 0 at 0.9) leaves human 1 with 0.1: total 1.0.
    # Optimal: human 0 -> model 1 (0.8), human 1 -> model 0 (0.9): total 1.7.
    S = [[0.9, 0.8], [0.9, 0.1]]
    total, pairs = optimal_matching(S)
    assert total == pytest.approx(1.7)
    assert pairs == [(0, 1), (1, 0)]


def test_zero_score_pairs_are_dropped() -> None:
    # 2 human x 3 model; human 1 matches nothing, so only one pair is reported.
    total, pairs = optimal_matching([[0.0, 0.5, 0.0], [0.0, 0.0, 0.0]])
    assert total == pytest.approx(0.5)
    assert pairs == [(0, 1)]


def test_top_k_limits_evaluation_to_the_first_reasons() -> None:
    # The only matching reason is the model's sixth: excluded by the top-5 evaluation rule.
    S = np.zeros((2, 6))
    S[0, 5] = 1.0
    assert rationale_consistency([S]) == 0.0
    assert rationale_consistency([S], top_k=None) == pytest.approx(0.5)
    assert rationale_consistency([S], top_k=6) == pytest.approx(0.5)


def test_malformed_matrices() -> None:
    with pytest.raises(ValueError, match="n_human, n_model"):
        optimal_matching([1.0, 0.0])
    with pytest.raises(ValueError, match="nan"):
        optimal_matching([[np.nan]])
    with pytest.raises(ValueError, match="checklist"):
        rationale_ap(np.zeros((0, 2)))
    with pytest.raises(ValueError, match="checklist"):
        rationale_consistency([np.zeros((0, 2))])
    with pytest.raises(ValueError, match="at least one"):
        rationale_consistency([])


def test_no_model_reasons() -> None:
    assert optimal_matching(np.zeros((3, 0))) == (0.0, [])
    assert rationale_ap(np.zeros((3, 0))) == 0.0
    assert rationale_consistency([np.zeros((3, 0))]) == 0.0


# --- average precision -------------------------------------------------------------------------

def test_ap_rewards_matched_reasons_first() -> None:
    # Same two matches, different order. Two human reasons, three model reasons.
    # Matched first, I = [1, 1, 0]: P@1 = 1, P@2 = 1 -> AP = (1 + 1) / 2 = 1.0
    first = [[1, 0, 0], [0, 1, 0]]
    # Matched last, I = [0, 1, 1]: P@2 = 1/2, P@3 = 2/3 -> AP = (1/2 + 2/3) / 2 = 7/12
    last = [[0, 1, 0], [0, 0, 1]]
    assert rationale_ap(first) == pytest.approx(1.0)
    assert rationale_ap(last) == pytest.approx(7 / 12)
    # Both recover both reasons, so rationale consistency cannot tell them apart.
    assert rationale_consistency([first]) == rationale_consistency([last]) == pytest.approx(1.0)


def test_ap_uses_soft_scores() -> None:
    # Matching (0, 0) = 0.5 and (1, 1) = 1.0 -> I = [0.5, 1.0].
    # P@1 = 0.5, P@2 = 1.5 / 2 = 0.75 -> AP = (0.5 * 0.5 + 0.75 * 1.0) / 2 = 0.5
    assert rationale_ap([[0.5, 0.0], [0.0, 1.0]]) == pytest.approx(0.5)


def test_ap_counts_missing_human_reasons() -> None:
    # Three human reasons, one matched at rank 1: AP = 1 * 1 / 3.
    assert rationale_ap([[1, 0], [0, 0], [0, 0]]) == pytest.approx(1 / 3)


def test_hybrid_reward() -> None:
    assert hybrid_reward(0.75, 1.0) == pytest.approx(0.75)
    assert hybrid_reward(0.75, 0.0) == 0.0  # right reasons, wrong verdict: nothing
    assert hybrid_reward(0.0, 1.0) == 0.0  # right verdict, wrong reasons: nothing


# --- verdicts ----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"Reasons... \boxed{A>>B}", "A>>B"),
        (r"\boxed{A>B}", "A>B"),
        (r"\boxed{A=B}", "A=B"),
        (r"\boxed{B>A}", "B>A"),
        (r"\boxed{B>>A}", "B>>A"),
        (r"\boxed{ B > > A }", "B>>A"),  # whitespace inside the box
        (r"\boxed {A>B}", "A>B"),  # whitespace before the brace
        (r"\boxed{a>b}", "A>B"),  # case
        (r"Final Decision: A<B \boxed{A<B}", "B>A"),  # paper 001's own spelling
        (r"\boxed{A<<B}", "B>>A"),
        (r"\boxed{B=A}", "A=B"),
        (r"first \boxed{A>B}, on reflection \boxed{B>A}", "B>A"),  # last verdict wins
        (r"\boxed{A>B} and the sum is \boxed{42}", "A>B"),  # non-verdict boxes are skipped
        ("A is clearly better.", None),  # no box
        (r"\boxed{}", None),
        (r"\boxed{A>>>B}", None),
        (r"\boxed{A>C}", None),
        (r"\boxed{Response A}", None),
        (r"\boxed{\text{A>B}}", None),  # nested braces are not a plain verdict box
        (r"\boxed{A>B", None),  # unclosed
        ("", None),
    ],
)
def test_parse_verdict(text: str, expected: str | None) -> None:
    assert parse_verdict(text) == expected


def test_parse_verdict_non_string() -> None:
    assert parse_verdict(None) is None  # type: ignore[arg-type]


def test_verdict_direction() -> None:
    assert [verdict_direction(v) for v in ("A>>B", "A>B", "A=B", "B>A", "B>>A")] == [1, 1, 0, -1, -1]
    with pytest.raises(ValueError, match="valid verdicts"):
        verdict_direction("A?B")
    with pytest.raises(ValueError):
        verdict_direction(None)  # type: ignore[arg-type]


def test_outcome_reward() -> None:
    assert outcome_reward("A>>B", "A") == 1.0
    assert outcome_reward("A>B", "B") == 0.0
    assert outcome_reward("B>A", "b") == 1.0
    assert outcome_reward("A=B", "tie") == 1.0
    assert outcome_reward("A=B", "A") == 0.0  # a tie is not "A is better"
    assert outcome_reward("A>B", 1) == 1.0 and outcome_reward("B>>A", -1) == 1.0
    assert outcome_reward("B>A", "B>>A") == 1.0  # label given as a verdict: direction only
    assert outcome_reward(None, "A") == 0.0  # unparsable output
    assert outcome_reward("garbage", "A") == 0.0
    with pytest.raises(ValueError, match="preference label"):
        outcome_reward("A>B", "C")
    with pytest.raises(ValueError):
        outcome_reward("A>B", 2)


# --- reasons and the lexical matcher -----------------------------------------------------------

def test_parse_reasons_formats() -> None:
    text = (
        "Reasons:\n"
        "1. Response B: The first step is wrong.\n"
        "2) Response B: The final answer 7 is wrong.\n"
        "- a dash bullet\n"
        "* a star bullet\n"
        "• a dot bullet\n"
        "[R2] Bad format: hashtags.\n"
        "\\bullet a LaTeX bullet\n"
        "not a reason line\n"
        "-3 is not a bullet\n"
        "Final Decision: \\boxed{A>B}\n"
        "3. a reason after the verdict is ignored\n"
    )
    assert parse_reasons(text) == [
        "Response B: The first step is wrong.",
        "Response B: The final answer 7 is wrong.",
        "a dash bullet",
        "a star bullet",
        "a dot bullet",
        "Bad format: hashtags.",
        "a LaTeX bullet",
    ]


def test_parse_reasons_edge_cases() -> None:
    assert parse_reasons("") == []
    assert parse_reasons(r"\boxed{A>B}") == []
    assert parse_reasons("no list at all") == []
    # Without a verdict every listed line counts; a non-verdict box does not cut the list.
    assert parse_reasons("1. one\n\\boxed{42}\n2. two") == ["one", "two"]
    assert parse_reasons(None) == []  # type: ignore[arg-type]


def test_lexical_matcher_worked_example() -> None:
    human = ["The first step is wrong: 12 - 3 is 9, not 8.", "The final answer 16 is wrong."]
    model = ["Response B: the first step is wrong, 12 - 3 is 9 not 8", "B is longer", ""]
    S = lexical_matcher(human, model)
    assert S.shape == (2, 3)
    # human 0 tokens {first, step, wrong, 12, 3, 9, not, 8} (8); model 0 the same 8 ("Response"
    # is a stopword, the letter "B" too short) -> F1 = 1.
    assert S[0, 0] == pytest.approx(1.0)
    # human 1 {final, answer, 16, wrong} vs model 0: shares {wrong} -> 2 * 1 / (4 + 8) = 1/6.
    assert S[1, 0] == pytest.approx(1 / 6)
    # model 1 {longer} shares nothing; the empty reason scores 0.
    assert S[0, 1] == 0.0 and S[1, 1] == 0.0
    assert (S[:, 2] == 0.0).all()
    assert lexical_matcher([], ["x"]).shape == (0, 1)
    assert ((S >= 0) & (S <= 1)).all()


def test_end_to_end_genrm_output() -> None:
    # A GenRM output in the tiny world's `pairs` format, label A (A is the correct solution).
    checklist = [
        "The first step is wrong: 12 - 3 is 9, not 8.",
        "The final answer 17 is wrong; the correct answer is 18.",
    ]
    output = (
        "\n1. Response B: The final answer 17 is wrong; the correct answer is 18."
        "\n2. Response B: The first step is wrong: 12 - 3 is 9, not 8."
        "\n3. Response A is shorter."
        "\nVerdict: \\boxed{A>>B}"
    )
    reasons = parse_reasons(output)
    assert len(reasons) == 3
    S = lexical_matcher(checklist, reasons)
    # Both human reasons are matched exactly (F1 = 1) by model reasons 1 and 0, listed first:
    # I = [1, 1, 0] -> AP = (1 + 1) / 2 = 1; RC = 2 / 2 = 1.
    assert rationale_ap(S) == pytest.approx(1.0)
    assert rationale_consistency([S]) == pytest.approx(1.0)
    outcome = outcome_reward(parse_verdict(output), "A")
    assert outcome == 1.0
    assert hybrid_reward(rationale_ap(S), outcome) == pytest.approx(1.0)


def test_script_metrics_differ_from_eq3_as_the_analysis_script_does():
    """The issue's worked example: two human reasons matched by model reasons 2 and 3 give 0.583
    by Eq. 3 and 1.0 by the script; a vague reason matching two human reasons counts twice in the
    script's recall but once in the one-to-one RC."""
    from rewards.rationale import optimal_matching, rationale_ap, script_metrics

    S = [[0, 1, 0], [0, 0, 1]]
    assert round(rationale_ap(S), 3) == 0.583 and script_metrics(S)["ap_script"] == 1.0
    vague = [[1.0], [1.0]]  # one model reason achieves both human reasons
    assert script_metrics(vague)["recall"] == 1.0 and optimal_matching(vague)[0] / 2 == 0.5
    assert script_metrics([[0.0, 0.0]]) == {"ap_script": 0.0, "precision": 0.0, "recall": 0.0, "f1": 0.0}
    assert script_metrics(np.zeros((2, 0)))["f1"] == 0.0
    with pytest.raises(ValueError, match="nan"):
        script_metrics([[float("nan")]])
    with pytest.raises(ValueError, match="empty"):
        script_metrics(np.zeros((0, 2)))


def test_pairs_evaluation_reports_both_ap_definitions():
    from evals.pairs import score_pairs

    row = {"checklist": ["response a is correct", "response b has a wrong sum"], "label": "A"}
    out = "1. the weather\n2. response b has a wrong sum\n3. response a is correct\n\\boxed{A>B}"
    m = score_pairs(row, [out], out)
    assert m["ap"] < m["ap_script"] == 1.0
    assert {"precision", "recall", "f1"} <= set(m)
