"""RLCER scoring (rewards/evolving_rubrics.py, paper 004): worked examples computed by hand."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from rewards.evolving_rubrics import (
    MODES,
    RUBRIC_VOCABULARY,
    VERSION,
    ProposedRubric,
    cot_rewards,
    parse_rubrics,
    parse_steps,
    reasoner_reward,
    rubric_correlations,
    rubricator_reward,
    rule_verifier,
    valid_rubrics,
)

GOOD = r"7 + 5 = 12. 12 - 3 = 9. 9 * 2 = 18. The answer is \boxed{18}."
SLIP = r"7 + 5 = 12. 12 - 3 = 8. 8 * 2 = 16. The answer is \boxed{16}."
SLOPPY_BOX = r"7 + 5 = 12. 12 - 3 = 9. 9 * 2 = 18. The answer is \boxed{9}."
SKIPPED = r"7 + 5 = 12. 9 * 2 = 18. The answer is \boxed{18}."


def test_version() -> None:
    assert VERSION == "1"


# --- parse_rubrics -----------------------------------------------------------------------------

def test_parse_plain_prose_and_fenced() -> None:
    expected = [ProposedRubric("each step's arithmetic is correct", 4),
                ProposedRubric("contains an arithmetic slip", -3)]
    payload = json.dumps([{"criterion": r.criterion, "points": r.points} for r in expected])
    assert parse_rubrics(payload) == expected
    assert parse_rubrics(f"Here are my rubrics:\n{payload}\nHope this helps.") == expected
    assert parse_rubrics(f"Rubrics below.\n```json\n{payload}\n```\nDone.") == expected
    assert parse_rubrics(f"```\n{payload}\n```") == expected
    # A bracketed citation before the list is not the rubric list.
    assert parse_rubrics(f"As in [1], the rubrics are {payload}") == expected
    # An unclosed bracket in the prose does not hide the list; brackets inside strings are text.
    assert parse_rubrics(f"[draft: {payload}") == expected
    assert parse_rubrics('[{"criterion": "no [skipped] step", "points": 2}]') == [
        ProposedRubric("no [skipped] step", 2)]
    # A list wrapped in an object is still found.
    assert parse_rubrics(f'{{"rubrics": {payload}}}') == expected
    # Surrounding whitespace of a criterion is dropped; extra keys are tolerated.
    assert parse_rubrics('[{"criterion": "  tidy  ", "points": 1, "why": "x"}]') == [
        ProposedRubric("tidy", 1)]


@pytest.mark.parametrize(
    "text",
    [
        '[{"criterion": "x", "points": 3}',  # bad JSON (unclosed)
        "[{'criterion': 'x', 'points': 3}]",  # single quotes are not JSON
        "[]",  # empty list
        '[{"criterion": "x", "points": 6}]',  # above 5
        '[{"criterion": "x", "points": -6}]',  # below -5
        '[{"criterion": "x", "points": 0}]',  # zero
        '[{"criterion": "x", "points": 2.5}]',  # not an integer
        '[{"criterion": "x", "points": 2.0}]',  # a float, even if whole
        '[{"criterion": "x", "points": "3"}]',  # a string
        '[{"criterion": "x", "points": true}]',  # a bool
        '[{"points": 3}]',  # missing criterion
        '[{"criterion": "   ", "points": 3}]',  # empty criterion
        '[{"criterion": 7, "points": 3}]',  # non-string criterion
        '[{"criterion": "ok", "points": 2}, {"criterion": "bad", "points": 9}]',  # one bad item
        '{"criterion": "x", "points": 3}',  # an object, not a list
        "[1, 2, 3]",  # a list, but not of rubrics
        "no rubrics here",
        "",
        "[" * 5000,  # hostile nesting
        "[" * 100_000 + "]" * 100_000,  # deeper than the JSON decoder's recursion limit
    ],
)
def test_parse_malformed_is_none_and_scores_format_zero(text: str) -> None:
    rubrics = parse_rubrics(text)
    assert rubrics is None
    assert rubricator_reward(0, 0, format_ok=rubrics is not None) == 0.0


def test_parse_non_string_is_none() -> None:
    assert parse_rubrics(None) is None  # type: ignore[arg-type]


# --- valid_rubrics -----------------------------------------------------------------------------

def test_valid_rubrics_worked_example() -> None:
    z = [1, 1, 0, 0]
    V = [
        # v = [1, 0, 0, 0]: mean 0.25; cov = (0.75*0.5 - 0.25*0.5 + 0.25*0.5 + 0.25*0.5) / 4 = 0.125
        # std(v) = sqrt(0.25 * 0.75) = 0.4330, std(z) = 0.5 -> corr = 0.125 / 0.2165 = 0.577 > 0.2
        [1, 0, 0, 0],
        # v = [1, 1, 1, 0]: the mirror case, same corr 0.577 -> valid
        [1, 1, 1, 0],
        # v = [1, 0, 1, 0]: cov = (0.5*0.5 - 0.5*0.5 + 0.5*(-0.5) - 0.5*(-0.5)) / 4 = 0 -> not valid
        [1, 0, 1, 0],
        # std(v) = 0 (met by everyone: saturated) -> not valid
        [1, 1, 1, 1],
        # std(v) = 0 (met by nobody) -> not valid
        [0, 0, 0, 0],
        # anti-correlated, corr = -1 -> not valid (met mostly by wrong answers)
        [0, 0, 1, 1],
    ]
    assert valid_rubrics(V, z).tolist() == [True, True, False, False, False, False]
    # alpha 0.6 > 0.577 rejects the two moderate rubrics.
    assert valid_rubrics(V, z, alpha=0.6).tolist() == [False] * 6
    # A negative alpha admits the zero-correlation rubric but still never a constant one.
    assert valid_rubrics(V, z, alpha=-0.1).tolist() == [True, True, True, False, False, False]


def test_valid_rubrics_constant_outcome_validates_nothing_without_warnings() -> None:
    V = [[1, 0, 1, 0], [1, 1, 1, 1]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert valid_rubrics(V, [1, 1, 1, 1]).tolist() == [False, False]
        assert valid_rubrics(V, [0, 0, 0, 0]).tolist() == [False, False]
        assert valid_rubrics([[1, 1, 1, 1]], [1, 0, 1, 0]).tolist() == [False]


def test_valid_rubrics_shapes() -> None:
    assert valid_rubrics(np.zeros((0, 4)), [1, 0, 1, 0]).tolist() == []
    assert valid_rubrics([], [1, 0]).tolist() == []
    with pytest.raises(ValueError, match=r"\[K, N\]"):
        valid_rubrics([[1, 0, 1]], [1, 0, 1, 0])


def test_rubric_correlations_match_numpy_and_mark_undefined_nan() -> None:
    rng = np.random.default_rng(0)
    z = np.array([1, 0, 1, 1, 0, 0, 1, 0])
    V = rng.integers(0, 2, size=(20, 8))
    V[0], V[1] = 1, 0  # constant rows: undefined
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        corr = rubric_correlations(V, z)
        assert np.isnan(rubric_correlations(V, np.ones(8))).all()
    assert np.isnan(corr[:2]).all()
    expected = [np.corrcoef(v, z)[0, 1] for v in V[2:]]
    assert corr[2:] == pytest.approx(expected)
    assert valid_rubrics(V, z).tolist() == [False, False, *[bool(c > 0.2) for c in expected]]
    assert rubric_correlations(np.zeros((0, 4)), [1, 0, 1, 0]).shape == (0,)


# --- cot_rewards -------------------------------------------------------------------------------

def test_cot_rewards_mixed_signs() -> None:
    # Valid points [4, 1, -5]: Min = -5, Max = 5, range 10.
    # Rollout 0 meets rubrics 0 and 2: 4 - 5 = -1 -> (-1 + 5) / 10 = 0.4
    # Rollout 1 meets rubrics 0 and 1: 5 -> 1.0;  rollout 2 meets none: 0 -> 0.5
    V = [[1, 1, 0], [0, 1, 0], [1, 0, 0]]
    np.testing.assert_allclose(cot_rewards(V, [4, 1, -5], [True, True, True]), [0.4, 1.0, 0.5])


def test_cot_rewards_ignores_invalid_rubrics() -> None:
    # Rubric 1 (+5) is not valid: valid points [2, -2], Min -2, Max 2.
    # Rollout 0 meets rubric 0 and the invalid one: 2 -> 1.0; rollout 1 meets rubric 2: -2 -> 0.0
    V = [[1, 0], [1, 1], [0, 1]]
    np.testing.assert_allclose(cot_rewards(V, [2, 5, -2], [True, False, True]), [1.0, 0.0])


def test_cot_rewards_all_negative_rubrics() -> None:
    # Points [-2, -3], Min = -5, Max = 0. Meeting no flaw scores 1, meeting both scores 0:
    # none: (0 + 5) / 5 = 1.0;  first: (-2 + 5) / 5 = 0.6;  both: (-5 + 5) / 5 = 0.0
    V = [[0, 1, 1], [0, 0, 1]]
    np.testing.assert_allclose(cot_rewards(V, [-2, -3], [True, True]), [1.0, 0.6, 0.0])


def test_cot_rewards_no_valid_rubric_is_zero() -> None:
    V = [[1, 0, 1], [0, 1, 1]]
    np.testing.assert_array_equal(cot_rewards(V, [3, -2], [False, False]), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(cot_rewards(np.zeros((0, 3)), [], []), [0.0, 0.0, 0.0])


def test_cot_rewards_shape_errors() -> None:
    with pytest.raises(ValueError):
        cot_rewards([[1, 0]], [1, 2], [True, True])
    with pytest.raises(ValueError):
        cot_rewards([[1, 0]], [1], [True, True])


# --- role rewards ------------------------------------------------------------------------------

def test_rubricator_reward() -> None:
    assert rubricator_reward(3, 4, True) == pytest.approx(1.75)  # 3/4 + 1
    assert rubricator_reward(0, 4, True) == pytest.approx(1.0)
    assert rubricator_reward(4, 4, False) == 0.0  # malformed: no format, no valid fraction
    assert rubricator_reward(3, 4, True, mode="no_evolve") == pytest.approx(1.0)
    assert rubricator_reward(3, 4, True, mode="rlcer_no_evolve") == pytest.approx(1.0)
    with pytest.raises(ValueError):
        rubricator_reward(5, 4, True)


def test_reasoner_reward_modes() -> None:
    assert reasoner_reward(True, 0.25) == pytest.approx(1.25)
    assert reasoner_reward(False, 0.25) == pytest.approx(-0.75)
    assert reasoner_reward(False, 0.25, mode="no_evolve") == pytest.approx(-0.75)
    assert reasoner_reward(True, 0.25, mode="rubric_only") == pytest.approx(0.25)
    assert reasoner_reward(False, 0.25, mode="rlcer_rubric_only") == pytest.approx(0.25)
    draws = [reasoner_reward(c, 0.9, mode="random", rng=np.random.default_rng(7)) for c in (True, False)]
    # Same seed -> same draw, whatever the correctness: the control carries no outcome signal.
    assert draws[0] == draws[1] and 0.0 <= draws[0] < 1.0
    with pytest.raises(ValueError, match="rng"):
        reasoner_reward(True, 0.5, mode="random")


def test_unknown_mode_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError) as err:
        reasoner_reward(True, 0.5, mode="evolve_harder")
    for mode in MODES:
        assert mode in str(err.value)


# --- rule_verifier -----------------------------------------------------------------------------

def test_parse_steps() -> None:
    assert parse_steps(GOOD) == [(7, "+", 5, 12), (12, "-", 3, 9), (9, "*", 2, 18)]
    assert parse_steps("3 - 5 = -2. 12 / 4 = 3. 2 x 3 = 6.") == [(3, "-", 5, -2), (12, "/", 4, 3), (2, "x", 3, 6)]
    assert parse_steps("no steps at all") == []


@pytest.mark.parametrize(
    ("criterion", "cot", "expected"),
    [
        ("shows every intermediate step", GOOD, True),
        ("shows every intermediate step", SKIPPED, False),  # 9 does not follow from 12
        ("shows every intermediate step", SLOPPY_BOX, False),  # box is not the last result
        ("states the final answer in a box", GOOD, True),
        ("states the final answer in a box", "7 + 5 = 12. The answer is 12.", False),
        ("states the final answer in a box", r"The answer is \boxed{ }.", False),
        ("each step's arithmetic is correct", GOOD, True),
        ("each step's arithmetic is correct", SLIP, False),  # 12 - 3 = 8
        ("each step's arithmetic is correct", r"\boxed{3}", False),  # no steps to check
        ("each step's arithmetic is correct", "7 / 2 = 3.", False),  # division must be exact
        ("contains an arithmetic slip", SLIP, True),
        ("contains an arithmetic slip", GOOD, False),
        ("the boxed answer matches the last step", SLOPPY_BOX, False),
        ("the boxed answer matches the last step", SLIP, True),
        ("ends with the boxed answer", GOOD, True),
        ("ends with the boxed answer", GOOD + " Also 1 + 1 = 2.", False),
        ("uses at most 3 steps", GOOD, True),
        ("uses at most 2 steps", GOOD, False),
        ("uses at most 1 step", "7 + 5 = 12.", True),
        ("repeats the question", "How many apples are left? " + GOOD, True),
        ("repeats the question", GOOD, False),
        # Case, spacing, a final full stop and a typographic apostrophe do not matter.
        ("  Each Step\u2019s arithmetic  is correct. ", GOOD, True),
        # Outside the vocabulary: never satisfied.
        ("is elegant", GOOD, False),
        ("", GOOD, False),
    ],
)
def test_rule_verifier(criterion: str, cot: str, expected: bool) -> None:
    assert rule_verifier(criterion, cot) is expected


def test_rule_verifier_survives_hostile_numbers() -> None:
    huge = "9" * 5000
    cot = f"{huge} * {huge} = 1. 12 - 3 = 9. The answer is \\boxed{{9}}."
    assert parse_steps(cot) == [(12, "-", 3, 9)]
    assert rule_verifier("each step's arithmetic is correct", cot) is True


def test_rule_verifier_vocabulary_is_documented_and_total() -> None:
    for criterion, check in RUBRIC_VOCABULARY.items():
        assert criterion == criterion.lower().strip()
        assert check("") in (True, False)
    assert rule_verifier(None, GOOD) is False  # type: ignore[arg-type]


def test_end_to_end_one_question() -> None:
    # Four rollouts of one question (answer 18): two correct, two wrong.
    cots = [GOOD, GOOD, SLIP, SLOPPY_BOX]
    z = [1, 1, 0, 0]
    rubrics = parse_rubrics(json.dumps([
        {"criterion": "each step's arithmetic is correct", "points": 3},
        {"criterion": "contains an arithmetic slip", "points": -2},
        {"criterion": "states the final answer in a box", "points": 1},
    ]))
    assert rubrics is not None
    V = np.array([[rule_verifier(r.criterion, c) for c in cots] for r in rubrics], dtype=float)
    # correct steps: [1, 1, 0, 1] -> corr with z = 0.577 -> valid
    # slip:          [0, 0, 1, 0] -> corr -0.577 -> not valid (it is a flaw: points -2 would
    #                                make it reward-relevant only if it correlated positively)
    # boxed:         [1, 1, 1, 1] -> std 0 -> not valid
    valid = valid_rubrics(V, z)
    assert valid.tolist() == [True, False, False]
    # Only rubric 0 (+3) is valid: Min 0, Max 3 -> r_cot = [1, 1, 0, 1].
    r_cot = cot_rewards(V, [r.points for r in rubrics], valid)
    np.testing.assert_allclose(r_cot, [1.0, 1.0, 0.0, 1.0])
    rewards = [reasoner_reward(bool(zn), float(rc)) for zn, rc in zip(z, r_cot)]
    assert rewards == pytest.approx([2.0, 2.0, -1.0, 0.0])
    # The rubricator that proposed these three rubrics: 1 valid of 3, format ok -> 1 + 1/3.
    assert rubricator_reward(int(valid.sum()), len(rubrics), True) == pytest.approx(4 / 3)
