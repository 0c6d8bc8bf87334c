"""The `rlvrr` TRL reward callable (docs/methods/rlvrr.md) on hand-written completions.

Components are hand-written, so every expected number can be worked out by hand: key point
"diet" has three keywords whose order the LCS content reward checks; the other key points have one.
"""

from __future__ import annotations

import json
import pickle

import pytest

from core.io import DataError
from rewards import rlvrr
from rewards.rlvrr import RlvrrReward
from rewards.sandbox import StyleSandbox

REF_A = "Zorb is a crab. It is green. It eats fish, berries and honey. It is good at digging."
REF_B = "Zorb is a small crab. Its coat is green. Its food is fish, berries and honey. It loves digging."
CHECKS = [
    {"name": "no_bullets", "weight": 3.0, "source":
        "def check(response):\n    return not any(line.lstrip().startswith('-') for line in response.splitlines())"},
    {"name": "word_count", "weight": 1.0, "source":
        "def check(response):\n    return 8 <= len(response.split()) <= 30"},
]
COMPONENTS = [
    {"id": "p1", "key_points": ["Zorb is a crab", "It is green", "Its diet", "Its skill"],
     "keywords": [["zorb", "crab"], ["green", "coat"], ["fish", "berries", "honey"], ["digging"]],
     "style_checks": CHECKS, "references": [REF_A, REF_B]},
    {"id": "p2", "key_points": ["Lune is a frog"], "keywords": [["lune", "frog"]],
     "style_checks": [], "references": ["Lune is a frog."]},
]
SHUFFLED = "Zorb is a crab. It is green. It eats honey, berries and fish. It is good at digging."
STUFFED = "zorb crab crab green green fish fish berries berries honey honey digging digging zorb crab"


class CountingSandbox(StyleSandbox):
    """A real sandbox that counts its round trips."""

    def __init__(self) -> None:
        super().__init__()
        self.round_trips = 0

    def run_groups(self, groups, cpu_seconds=None):
        self.round_trips += 1
        return super().run_groups(groups, cpu_seconds)


@pytest.fixture(scope="module")
def components(tmp_path_factory):
    path = tmp_path_factory.mktemp("components") / "facts_train.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in COMPONENTS))
    return path


@pytest.fixture(scope="module")
def sandbox():
    box = CountingSandbox()
    yield box
    box.close()


def score(reward: RlvrrReward, texts: list[str], ids: list[str | None] | None = None) -> list:
    ids = ids if ids is not None else ["p1"] * len(texts)
    return reward(prompts=["prompt"] * len(texts), completions=texts, prompt_id=ids)


def test_version_and_name(components, sandbox) -> None:
    assert rlvrr.VERSION == "1"
    assert RlvrrReward(components, sandbox=sandbox).__name__ == "rlvrr_chain"


def test_reference_scores_one(components, sandbox) -> None:
    reward = RlvrrReward(components, sandbox=sandbox)
    assert score(reward, [REF_A, REF_B]) == [1.0, 1.0]


def test_ordered_beats_shuffled(components, sandbox) -> None:
    reward = RlvrrReward(components, sandbox=sandbox, content_only=True)
    ordered, shuffled = score(reward, [REF_A, SHUFFLED])
    # Diet: LCS([fish, berries, honey], [honey, berries, fish]) = 1 of 3; the rest match.
    assert ordered == 1.0 and shuffled == pytest.approx((1 + 1 + 1 / 3 + 1) / 4)


def test_keyword_stuffing_scores_below_the_reference(components, sandbox) -> None:
    reward = RlvrrReward(components, sandbox=sandbox)
    reference, stuffed = score(reward, [REF_A, STUFFED])
    assert stuffed < reference
    # Content: every key point is diluted by the repeats (e.g. diet 3/6); style: word count holds.
    assert reward.last_content[1] == pytest.approx((2 / 5 + 1 / 2 + 3 / 6 + 1 / 2) / 4)
    assert reward.last_style[1] == 1.0


def test_direct_mode_ignores_order(components, sandbox) -> None:
    direct = RlvrrReward(components, sandbox=sandbox, mode="direct", content_only=True)
    assert score(direct, [REF_A, SHUFFLED, STUFFED]) == [1.0, 1.0, 1.0]


def test_missing_prompt_id_gets_none(components, sandbox) -> None:
    reward = RlvrrReward(components, sandbox=sandbox)
    assert score(reward, [REF_A, REF_A, REF_A], ids=["p1", "unknown", None]) == [1.0, None, None]
    assert reward.last_content[1:] == [None, None]


def test_missing_column_is_a_clear_error(components, sandbox) -> None:
    reward = RlvrrReward(components, sandbox=sandbox)
    with pytest.raises(KeyError, match="prompt_id.*columns passed: \\['answer'\\]"):
        reward(prompts=["p"], completions=["x"], answer=["1"])


def test_one_sandbox_round_trip_per_call(components, sandbox) -> None:
    reward = RlvrrReward(components, sandbox=sandbox)
    texts = [REF_A, SHUFFLED, STUFFED, "- Zorb is a crab.", "Lune is a frog.", "A frog.", "?", ""]
    ids = ["p1"] * 4 + ["p2"] * 3 + ["unknown"]
    before = sandbox.round_trips
    rewards = score(reward, texts, ids)
    assert sandbox.round_trips - before == 1
    assert rewards[4] == 1.0 and rewards[5] == 0.5 and rewards[7] is None
    assert reward.last_style[3] == 0.0  # a bullet line and 5 words: both p1 checks fail
    assert reward.last_style[4] is None  # p2 has no style checks
    before = sandbox.round_trips
    score(RlvrrReward(components, sandbox=sandbox, content_only=True), texts, ids)
    assert sandbox.round_trips == before  # content only: no sandbox at all


def test_style_is_scored_per_prompt(components, sandbox) -> None:
    """A bullet answer fails the `no_bullets` check (weight 3 of 4) and keeps the word count."""
    reward = RlvrrReward(components, sandbox=sandbox)
    bullets = "- " + REF_A.replace(". ", ".\n- ")
    (value,) = score(reward, [bullets])
    assert reward.last_content == [1.0] and reward.last_style == [0.25]
    assert value == pytest.approx(0.5 * 1.0 + 0.5 * 0.25)
    assert reward.metrics() == {"rlvrr/content": 1.0, "rlvrr/style": 0.25}


def test_special_tokens_and_eos_text_are_stripped(components, sandbox) -> None:
    reward = RlvrrReward(components, sandbox=sandbox)
    dirty = REF_A + "<|endoftext|><|pad|><|pad|>"
    after_eos = REF_A + "<|im_end|>\n- zorb zorb crab crab"
    assert score(reward, [dirty, after_eos, "  " + REF_A + "\n"]) == [1.0, 1.0, 1.0]


def test_tokenizer_special_tokens_are_stripped(components, sandbox) -> None:
    class Tok:
        all_special_tokens = ["[END]"]

    reward = RlvrrReward(components, sandbox=sandbox, tokenizer=Tok())
    assert score(reward, [REF_A + "[END] - junk - junk"]) == [1.0]


def test_single_ref_uses_only_the_first_reference(components, sandbox) -> None:
    text = "Zorb is a crab. Its coat is green. It eats fish, berries and honey. It is good at digging."
    both = RlvrrReward(components, sandbox=sandbox, content_only=True)
    first = RlvrrReward(components, sandbox=sandbox, content_only=True, single_ref=True)
    assert score(both, [text]) == [1.0]
    # Colour: K_z = [green] in REF_A, K_y = [coat, green] -> 1/2.
    assert score(first, [text]) == [pytest.approx((1 + 0.5 + 1 + 1) / 4)]


def test_content_weight_ablations(components, sandbox) -> None:
    bullets = "- " + REF_A.replace(". ", ".\n- ")
    no_style = RlvrrReward(components, sandbox=sandbox, content_weight=1.0)
    no_content = RlvrrReward(components, sandbox=sandbox, content_weight=0.0)
    assert score(no_style, [bullets]) == [1.0] and score(no_content, [bullets]) == [0.25]


def test_conversational_completions(components, sandbox) -> None:
    reward = RlvrrReward(components, sandbox=sandbox)
    message = [{"role": "assistant", "content": REF_A}]
    assert score(reward, [message]) == [1.0]


def test_several_component_files(tmp_path, components, sandbox) -> None:
    val = tmp_path / "facts_val.jsonl"
    val.write_text(json.dumps({**COMPONENTS[1], "id": "v1"}) + "\n")
    reward = RlvrrReward([components, val], sandbox=sandbox)
    assert score(reward, ["Lune is a frog."] * 2, ids=["p2", "v1"]) == [1.0, 1.0]


@pytest.mark.parametrize("row, message", [
    ({"id": "x", "keywords": "green", "style_checks": [], "references": ["r"]}, "keywords"),
    ({"id": "x", "keywords": [], "style_checks": [{"source": 1, "weight": 1}], "references": ["r"]},
     "style_checks"),
    ({"id": "x", "keywords": [], "style_checks": [], "references": []}, "references"),
    ({"id": "x", "keywords": [], "style_checks": []}, "missing field"),
])
def test_bad_component_rows_name_file_and_row(tmp_path, row, message) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(COMPONENTS[1]) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(DataError, match=f"bad.jsonl.*2.*{message}"):
        RlvrrReward(path, sandbox=StyleSandbox())


def test_duplicate_ids_are_refused(tmp_path) -> None:
    path = tmp_path / "dup.jsonl"
    path.write_text((json.dumps(COMPONENTS[1]) + "\n") * 2)
    with pytest.raises(DataError, match="duplicate id"):
        RlvrrReward(path, sandbox=StyleSandbox())


def test_picklable(components) -> None:
    reward = RlvrrReward(components)
    clone = pickle.loads(pickle.dumps(reward))
    try:
        assert clone.__name__ == "rlvrr_chain" and score(clone, [REF_A]) == [1.0]
    finally:
        clone.close()
        reward.close()


def test_rule_synthesis_end_to_end(tmp_path, sandbox) -> None:
    """Components from the rule backend: the references score 1, the wrong style less."""
    from core.params import SynthesizeConfig
    from synthesis import synthesize, write_components

    rows = [{"id": "r1", "prompt": "Describe Zorb. One sentence per fact.",
             "references": [" " + REF_A, " " + REF_B, " Meet Zorb, a crab. Its color is green. "
                            "Its food is fish, berries and honey. Its skill is digging."]}]
    components, stats = synthesize(rows, SynthesizeConfig())
    path = tmp_path / "facts_train.jsonl"
    write_components(path, components, stats)
    reward = RlvrrReward(path, sandbox=sandbox)
    bullets = "- " + REF_A.replace(". ", ".\n- ")
    good, bad, partial = score(reward, [REF_A + "<|endoftext|>", bullets, "Zorb is a crab."], ["r1"] * 3)
    assert good == 1.0 and bad < good and partial < good


def test_golden_fixture(tmp_path, sandbox) -> None:
    """tests/fixtures/rlvrr.jsonl changes only with rlvrr.VERSION (house style)."""
    from pathlib import Path

    lines = [json.loads(line) for line in
             (Path(__file__).parent / "fixtures" / "rlvrr.jsonl").read_text().splitlines()]
    path = tmp_path / "components.jsonl"
    path.write_text("".join(json.dumps({k: v for k, v in line.items() if k != "kind"}) + "\n"
                            for line in lines if line["kind"] == "components"))
    cases = [line for line in lines if line["kind"] == "case"]
    for mode in ("ordered", "direct"):
        chosen = [c for c in cases if c["mode"] == mode]
        reward = RlvrrReward(path, sandbox=sandbox, mode=mode)
        got = score(reward, [c["completion"] for c in chosen], [c["prompt_id"] for c in chosen])
        assert got == [pytest.approx(c["expected"]) if c["expected"] is not None else None
                       for c in chosen], mode
