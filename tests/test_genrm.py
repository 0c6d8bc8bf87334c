"""The `rationale` method's TRL reward (rewards/genrm.py) and the GenRM benchmarks (evals/pairs.py).

Hand-computed examples, paper 001 Table 1 among them, through the public callables: the reward as
TRL calls it (prompts, completions, dataset columns as keyword lists) and the registry scorer.
"""

from __future__ import annotations

import json
import pickle
import random
from types import SimpleNamespace

import numpy as np
import pytest

from core.io import DataError
from evals.metrics import aggregate
from evals.pairs import helpsteer3_rows, make_pairs_scorer, score_pairs
from rewards import MethodContext, MethodPlan, build_plan
from rewards.genrm import VERSION, GenrmReward, build, score_outputs
from rewards.matchers import LexicalMatcher, Matcher
from world import pairs as world_pairs

# Paper 001 Table 1: the human checklist (R1..R4) and the label (B is better).
TABLE1 = [
    'Missing name: Response A omits the product name "Tips"; B includes it.',
    "Bad format: Response A uses hashtags, which are inappropriate for ads.",
    "Limit violation: Response A exceeds 100 characters (counting hashtags); B is under the limit.",
    'Content missing: Response B fails to include the required "play in advance" concept.',
]
# o3 hits R3, R1, R4 (in that order, restated), then adds two reasons no human gave.
O3 = ("\n1. " + TABLE1[2] + "\n2. " + TABLE1[0] + "\n3. " + TABLE1[3]
      + "\n4. Response B reads more smoothly.\n5. Both responses offer several options."
      + "\nVerdict: \\boxed{A<B}")
# o3-mini: the same verdict from surface cues (formatting, emoji); no human reason recovered.
O3_MINI = ("\n- Response B explicitly labels its options with a heading, whereas A does not."
           "\n- Response B's emoji enhance appeal and modern style."
           "\n- Response A lacks clear separation between different versions."
           "\nFinal: \\boxed{A<B}")


def call(reward: GenrmReward, completions: list, checklists: list, labels: list) -> list:
    return reward([""] * len(completions), completions, checklist=checklists, label=labels)


class FixedMatcher(Matcher):
    """Returns a given S whatever the texts (the paper's MetaJudge verdicts, typed in)."""

    def __init__(self, S) -> None:
        self.S = np.asarray(S, dtype=float)

    def many(self, items):
        return [self.S[:len(h), :len(m)] for h, m in items]


def test_version() -> None:
    assert VERSION == "1"


# --- paper 001 Table 1 -------------------------------------------------------------------------

def test_table1_three_of_four_reasons_first_is_ap_075_and_none_is_0() -> None:
    reward = GenrmReward("hybrid", "lexical")
    o3, o3_mini = call(reward, [O3, O3_MINI], [TABLE1] * 2, ["B", "B"])
    # Hits at ranks 1, 2, 3 with I = 1: P@1 = P@2 = P@3 = 1 -> AP = 3 / |R_h| = 3/4; the two
    # unmatched reasons come after the hits and cost nothing. Verdict right -> hybrid = AP.
    assert o3 == pytest.approx(0.75)
    assert o3_mini == 0.0
    m = reward.metrics()
    assert m["genrm/outcome_acc"] == 1.0  # both right: outcome alone cannot tell them apart
    assert m["genrm/ap"] == pytest.approx(0.375)
    assert m["genrm/malformed_rate"] == 0.0


def test_table1_with_the_paper_judge_scores() -> None:
    # The MetaJudge's Table 1 verdict for o3 as S: R3@S1, R1@S2, R4@S3 fully achieved, R2 missed.
    S = np.zeros((4, 5))
    S[2, 0] = S[0, 1] = S[3, 2] = 1.0
    reward = GenrmReward("hybrid", FixedMatcher(S))
    assert call(reward, [O3], [TABLE1], ["B"]) == [pytest.approx(0.75)]
    # The same hits listed after two unmatched reasons: I = [0, 0, 1, 1, 1],
    # AP = (1/3 + 2/4 + 3/5) / 4 = 0.358...
    late = np.zeros((4, 5))
    late[2, 2] = late[0, 3] = late[3, 4] = 1.0
    reward = GenrmReward("ap_only", FixedMatcher(late))
    assert call(reward, [O3], [TABLE1], ["B"]) == [pytest.approx((1 / 3 + 2 / 4 + 3 / 5) / 4)]


# --- one-to-one matching and ordering ---------------------------------------------------------

CHECKLIST = ["The first step is wrong: 3 * 3 is 9, not 11.",
             "The final answer 2 is wrong; the correct answer is 3."]


def test_one_broad_reason_cannot_match_several_human_reasons() -> None:
    # The broad reason shares words with both human reasons, but may be matched to one only.
    broad = "\n1. The first step is wrong and the final answer is wrong.\n\\boxed{B>A}"
    specific = "\n1. " + CHECKLIST[0] + "\n2. " + CHECKLIST[1] + "\n\\boxed{B>A}"
    S = LexicalMatcher()(CHECKLIST, ["The first step is wrong and the final answer is wrong."])
    assert (S > 0.3).all()  # it "matches" both...
    reward = GenrmReward("ap_only", "lexical")
    got_broad, got_specific = call(reward, [broad, specific], [CHECKLIST] * 2, ["B", "B"])
    # ...but is credited once: I = [s] with s = max S, P@1 = s, AP = s * s / |R_h|.
    assert got_broad == pytest.approx(S.max() ** 2 / 2)
    assert got_specific == pytest.approx(1.0)


def test_ap_rewards_putting_matched_reasons_first() -> None:
    filler = "Response A looks tidy."
    first = f"\n1. {CHECKLIST[0]}\n2. {CHECKLIST[1]}\n3. {filler}\n\\boxed{{B>>A}}"
    last = f"\n1. {filler}\n2. {CHECKLIST[0]}\n3. {CHECKLIST[1]}\n\\boxed{{B>>A}}"
    reward = GenrmReward("hybrid", "lexical")
    got_first, got_last = call(reward, [first, last], [CHECKLIST] * 2, ["B", "B"])
    assert got_first == pytest.approx(1.0)
    assert got_last == pytest.approx((1 / 2 + 2 / 3) / 2)  # I = [0, 1, 1]
    # Rationale consistency ignores order: both recover both reasons.
    rc = [s.rc for s in score_outputs([first, last], [CHECKLIST] * 2, ["B"] * 2, LexicalMatcher())]
    assert rc == [pytest.approx(1.0), pytest.approx(1.0)]


# --- malformed outputs and modes ---------------------------------------------------------------

def test_malformed_outputs_get_zero_and_are_counted() -> None:
    right = f"\n1. {CHECKLIST[0]}\n\\boxed{{B>A}}"
    no_verdict = f"\n1. {CHECKLIST[0]}\nB is better."
    no_reasons = "B is clearly better. \\boxed{B>A}"
    reasons_after_verdict = f"\\boxed{{B>A}}\n1. {CHECKLIST[0]}"
    for mode in ("outcome", "hybrid", "ap_only"):
        reward = GenrmReward(mode, "lexical")
        got = call(reward, [right, no_verdict, no_reasons, reasons_after_verdict, ""],
                   [CHECKLIST] * 5, ["B"] * 5)
        assert got[1:] == [0.0, 0.0, 0.0, 0.0], mode
        assert got[0] > 0, mode
        m = reward.metrics()
        assert m["genrm/malformed"] == 4 and m["genrm/malformed_rate"] == pytest.approx(0.8)
    # The count runs across calls; the rate is the last batch's.
    call(reward, [right, no_verdict], [CHECKLIST] * 2, ["B"] * 2)
    assert reward.metrics()["genrm/malformed"] == 5
    assert reward.metrics()["genrm/malformed_rate"] == 0.5
    assert reward.seen == 7


@pytest.mark.parametrize("mode,expected", [
    # (right verdict, right reasons), (right verdict, wrong reasons), (wrong verdict, right reasons)
    ("outcome", [1.0, 1.0, 0.0]),
    ("hybrid", [1.0, 0.0, 0.0]),
    ("ap_only", [1.0, 0.0, 1.0]),
])
def test_modes(mode, expected) -> None:
    good = "\n1. " + CHECKLIST[0] + "\n2. " + CHECKLIST[1]
    off = "\n1. Response B uses nicer formatting."
    completions = [good + "\n\\boxed{B>>A}", off + "\n\\boxed{B>A}", good + "\n\\boxed{A>B}"]
    reward = GenrmReward(mode, "lexical")
    assert reward.__name__ == f"rationale_{mode}"
    assert call(reward, completions, [CHECKLIST] * 3, ["B"] * 3) == pytest.approx(expected)


def test_ties_and_conversational_completions() -> None:
    reward = GenrmReward("outcome")
    got = call(reward, [[{"role": "assistant", "content": f"1. {CHECKLIST[0]}\n\\boxed{{A=B}}"}],
                        f"1. {CHECKLIST[0]}\n\\boxed{{A>B}}"], [CHECKLIST] * 2, ["tie", "tie"])
    assert got == [1.0, 0.0]


def test_rows_without_a_checklist() -> None:
    text = f"1. {CHECKLIST[0]}\n\\boxed{{B>A}}"
    assert call(GenrmReward("hybrid"), [text], [[]], ["B"]) == [None]
    assert call(GenrmReward("ap_only"), [text], [None], ["B"]) == [None]
    assert call(GenrmReward("outcome"), [text], [[]], ["B"]) == [1.0]


def test_column_names_are_parameters_and_checked() -> None:
    reward = GenrmReward("hybrid", checklist_column="reasons", label_column="preferred")
    text = f"1. {CHECKLIST[0]}\n\\boxed{{B>A}}"
    assert reward([""], [text], reasons=[CHECKLIST], preferred=["B"]) == [pytest.approx(0.5)]
    with pytest.raises(KeyError, match=r"needs the dataset column\(s\) \['reasons'\]"):
        reward([""], [text], checklist=[CHECKLIST], preferred=["B"])
    with pytest.raises(ValueError, match="unknown rationale mode 'f1'"):
        GenrmReward("f1")
    with pytest.raises(KeyError, match="unknown matcher 'bleu'; known matchers: lexical, embedding, llm"):
        GenrmReward("hybrid", "bleu")


def test_tiny_world_demonstrations_score_one_and_flipped_verdicts_zero() -> None:
    rows = world_pairs.generate(random.Random(0), 20, "train", min_ops=2, max_ops=4, max_value=20)
    reward = GenrmReward("hybrid")
    demos = [r["demonstration"] for r in rows]
    assert call(reward, demos, [r["checklist"] for r in rows], [r["label"] for r in rows]) \
        == [pytest.approx(1.0)] * len(rows)
    flipped = [d.replace("A>", "X").replace("B>", "A>").replace("X", "B>") for d in demos]
    assert call(reward, flipped, [r["checklist"] for r in rows], [r["label"] for r in rows]) \
        == [0.0] * len(rows)


def test_reward_pickles() -> None:
    reward = GenrmReward("hybrid")
    copy = pickle.loads(pickle.dumps(reward))
    assert copy.__name__ == "rationale_hybrid"
    text = f"1. {CHECKLIST[0]}\n\\boxed{{B>A}}"
    assert call(copy, [text], [CHECKLIST], ["B"]) == [pytest.approx(0.5)]


def test_build_plan_logs_the_reward() -> None:
    cfg = SimpleNamespace(mode="ap_only", matcher="lexical", top_k=5)
    ctx = MethodContext(name="rationale_ap_only", family="rationale", cfg=cfg, grpo=None, seed=0)
    for plan in (build(ctx), build_plan(ctx)):
        assert isinstance(plan, MethodPlan)
        (reward,) = plan.reward_funcs
        assert plan.loggers == [reward] and reward.__name__ == "rationale_ap_only"
        assert isinstance(reward.matcher, LexicalMatcher)


# --- evaluation: evals.pairs -------------------------------------------------------------------

ROW = {"checklist": TABLE1, "label": "B"}


def test_pairs_scorer_table1() -> None:
    wrong = O3.replace("A<B", "A>>B")
    m = score_pairs(ROW, [O3, O3_MINI, wrong, "no verdict"], O3)
    assert m["outcome_acc"] == pytest.approx(2 / 4)
    # RC (top 5): o3 3/4, o3-mini 0, wrong verdict still 3/4 (RC scores reasons), malformed 0.
    assert m["rc"] == pytest.approx((0.75 + 0 + 0.75 + 0) / 4)
    assert m["ap"] == pytest.approx((0.75 + 0 + 0.75 + 0) / 4)
    assert m["malformed_rate"] == 0.25
    assert m["greedy_outcome_acc"] == 1.0 and m["greedy_rc"] == pytest.approx(0.75)


def test_pairs_scorer_keeps_the_first_five_reasons() -> None:
    filler = "".join(f"\n{i}. Response B reads well, point {i}." for i in range(1, 6))
    late = filler + "\n6. " + TABLE1[0] + "\n\\boxed{B>A}"
    assert score_pairs(ROW, [late], "")["rc"] == 0.0
    assert make_pairs_scorer(top_k=None)(ROW, [late], "")["rc"] == pytest.approx(1 / 4)
    # No greedy output: its keys are dropped when rows are pooled.
    assert "greedy_rc" not in aggregate([score_pairs(ROW, [late], "")], keep_greedy=False)


def write(path, rows) -> str:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return str(path)


HS3 = {"context": [{"role": "user", "content": "Write an ad for Tips."}],
       "response1": "Play ahead! #Stress", "response2": "Play Tips!",
       "checklist": TABLE1, "overall_preference": 2}


def test_helpsteer3_rows_map_to_the_pairs_schema(tmp_path) -> None:
    path = write(tmp_path / "hs3.jsonl", [
        HS3,
        {"context": "Say hi.", "response_a": "hi", "response_b": "hello", "checklist": ["x"],
         "label": "a"},
        {**HS3, "overall_preference": -1},
        {**HS3, "overall_preference": 0},
    ])
    rows = helpsteer3_rows(path, "test")
    assert [(r["label"], r["verdict"]) for r in rows] == [("B", "B>>A"), ("A", "A>B"), ("A", "A>B"),
                                                         ("tie", "A=B")]
    r = rows[0]
    assert r["id"] == "helpsteer3-test-00000" and r["family"] == "pairs"
    assert r["prompt"] == world_pairs.genrm_prompt("user: Write an ad for Tips.", " Play ahead! #Stress",
                                                   " Play Tips!")
    assert r["checklist"] == TABLE1 and r["demonstration"].endswith("\\boxed{B>>A}")
    assert rows[1]["question"] == "Say hi."
    # The demonstration scores full marks with the row's own scorer.
    assert score_pairs(r, [r["demonstration"]], "")["rc"] == pytest.approx(1.0)


@pytest.mark.parametrize("bad,match", [
    ('{"context": "q"', r"hs3\.jsonl:2: not valid JSON"),
    ({**HS3, "context": []}, r"hs3\.jsonl:2: `context` must be"),
    ({**HS3, "response2": ""}, r"hs3\.jsonl:2: needs non-empty string fields `response1`"),
    ({**HS3, "checklist": []}, r"hs3\.jsonl:2: `checklist` must be a non-empty list"),
    ({**HS3, "checklist": "one reason"}, r"hs3\.jsonl:2: `checklist` must be"),
    ({**HS3, "overall_preference": 5}, r"hs3\.jsonl:2: `overall_preference` must be an integer"),
    ({k: v for k, v in HS3.items() if k != "overall_preference"}, r"hs3\.jsonl:2: needs `overall_preference`"),
])
def test_helpsteer3_malformed_rows_name_file_and_line(tmp_path, bad, match) -> None:
    path = write(tmp_path / "hs3.jsonl", [HS3, bad])
    with pytest.raises(DataError, match=match):
        helpsteer3_rows(path, "test")
