"""One completion -> text helper (rewards.verifiable.completion_text) for every reward.

TRL passes a conversational completion as a list of messages whose ``content`` may be None (an
assistant turn that only calls tools) or a list of OpenAI-style parts; every reward reads it through
the same helper, so none of them crashes on None. RLME's path is in tests/test_meta_eval.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rewards.verifiable import completion_text, content_text, rlvr_correct

TOOL_ONLY = {"role": "assistant", "content": None}
PARTS = {"role": "assistant", "content": [{"type": "text", "text": "so \\boxed{12}"}, {"type": "image_url"},
                                          {"type": "text", "text": 3}]}


@pytest.mark.parametrize("completion, expected", [
    ("plain \\boxed{1}", "plain \\boxed{1}"),
    ([TOOL_ONLY], ""),
    ([TOOL_ONLY, {"role": "assistant", "content": "done"}], "done"),
    ([PARTS], "so \\boxed{12}"),
    ([{"role": "assistant"}, "not a message", {"role": "assistant", "content": 7}], ""),
    ([], ""),
])
def test_completion_text(completion: object, expected: str) -> None:
    assert completion_text(completion) == expected


def test_content_text_of_one_message() -> None:
    assert content_text(None) == "" and content_text("x") == "x" and content_text(3) == ""
    assert content_text(PARTS["content"]) == "so \\boxed{12}"


def test_every_reward_reads_completions_through_the_one_helper() -> None:
    import models.rlcer_trainer
    import rewards.genrm
    import rewards.meta_eval
    import rewards.rlvrr

    for module in (rewards.genrm, rewards.meta_eval, rewards.rlvrr, models.rlcer_trainer):
        assert module.completion_text is completion_text, module.__name__


def test_rlvr_on_none_content() -> None:
    assert rlvr_correct(["p"] * 2, [[TOOL_ONLY], [TOOL_ONLY, PARTS]], ["12", "12"]) == [0.0, 1.0]


def test_genrm_on_none_content() -> None:
    from rewards.genrm import score_outputs
    from rewards.matchers import LexicalMatcher

    verdict = {"role": "assistant", "content": "1. The step is wrong.\nVerdict: \\boxed{A>B}"}
    [tool_only, answered] = score_outputs([[TOOL_ONLY], [TOOL_ONLY, verdict]], [["The step is wrong."]] * 2,
                                          ["A", "A"], LexicalMatcher())
    assert tool_only.malformed and tool_only.outcome == 0.0
    assert not answered.malformed and answered.outcome == 1.0 and answered.ap == 1.0


def test_rlvrr_on_none_content(tmp_path: Path) -> None:
    from rewards.rlvrr import RlvrrReward

    components = tmp_path / "facts_train.jsonl"
    components.write_text(json.dumps({"id": "p1", "keywords": [["zorb", "crab"]], "style_checks": [],
                                      "references": ["Zorb is a crab."]}) + "\n")
    reward = RlvrrReward(components, content_only=True)
    tool_then_text = [TOOL_ONLY, {"role": "assistant", "content": "Zorb is a crab.<|endoftext|>"}]
    assert reward.clean([TOOL_ONLY]) == "" and reward.clean(tool_then_text) == "Zorb is a crab."
    assert reward(["p"] * 2, [[TOOL_ONLY], tool_then_text], prompt_id=["p1", "p1"]) == [0.0, 1.0]
