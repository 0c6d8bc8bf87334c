"""Hostile and malformed inputs: every reader, parser and reward either answers fast
or fails with one clear error; nothing crashes deep inside, hangs, returns NaN/inf, or loses rows.

Why rewards must never be NaN or inf: TRL 1.16's GRPOTrainer turns a `None` reward into NaN and
then treats NaN as "not applicable" (`nansum`, `nanmean`, `nanstd` in
`_generate_and_score_completions`), so a NaN silently removes a completion from its group, and
an inf makes the group's mean and std NaN, which `nan_to_num` turns into zero advantages for the
whole group: training goes on with no signal and no error. The lab's policy is therefore: a reward
callable returns a finite float or `None`, nothing else (`assert_rewards_ok`).

An input found to crash or hang is marked `xfail(strict=True)` with the file, function and input
in the reason (reported to the maintainers); a fix turns the test into an XPASS failure, the
signal to drop the mark. None is marked now: the ten found first are fixed.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import time
from pathlib import Path

import pytest

from core.io import DataError, read_jsonl, write_jsonl
from core.params import SynthesizeConfig
from rewards.baselines import RandomReward
from rewards.evolving_rubrics import parse_rubrics
from rewards.rationale import VERDICTS, parse_verdict
from rewards.reference_chain import content_reward
from rewards.verifiable import extract_boxed, rlvr_correct
from synthesis import llm as synth_llm
from synthesis import synthesize

MB = 1_000_000
# Seconds a single hostile call may take. Honest inputs of this size take under 1 s here; the
# margin is for a loaded 2-core machine. Hangs are cut at HANG_BUDGET_S in a forked child.
BUDGET_S = 10.0
HANG_BUDGET_S = 3.0

HUGE = {  # 1 MB completions of different shapes
    "prose": "The answer follows from the facts. " * (MB // 35),
    "one_char": "a" * MB,
    "newlines": "\n" * MB,
    "unicode": "é😀\u2028\x00" * (MB // 4),
    "digits_boxed": "\\boxed{" + "1" * MB + "}",
    "open_braces_after_box": "\\boxed{" + "{" * MB,
    "closing_braces": "}" * MB,
}


def assert_rewards_ok(rewards, n: int, allowed=None) -> None:
    """The TRL contract plus the lab's policy: one finite float or None per completion."""
    assert isinstance(rewards, list) and len(rewards) == n, rewards
    for r in rewards:
        assert r is None or (isinstance(r, float) and math.isfinite(r)), f"bad reward {r!r}"
        if allowed is not None and r is not None:
            assert r in allowed, r


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    elapsed = time.perf_counter() - start
    assert elapsed < BUDGET_S, f"{getattr(fn, '__name__', fn)} took {elapsed:.1f} s"
    return out


def within(seconds: float, fn, *args):
    """`fn(*args)` in a forked child killed after `seconds`: a hang fails the test, not the run."""
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)

    def child() -> None:
        try:
            send.send(("ok", fn(*args)))
        except BaseException as e:  # any failure is reported to the parent as text
            send.send(("raised", f"{type(e).__name__}: {e}"[:300]))

    proc = ctx.Process(target=child, daemon=True)
    proc.start()
    try:
        if not receive.poll(seconds):
            pytest.fail(f"{getattr(fn, '__name__', fn)} did not finish within {seconds:g} s")
        status, value = receive.recv()
    finally:
        proc.kill()
        proc.join()
    if status == "raised":
        pytest.fail(f"{getattr(fn, '__name__', fn)} raised {value}")
    return value


# ------------------------------------------------------------------------------ core.io JSONL

@pytest.mark.parametrize("line, message", [
    ('{"id": 2', "not valid JSON"),                   # truncated by a killed writer
    ('{"id": 2,}', "not valid JSON"),                 # trailing comma
    ('"just a string"', "expected a JSON object, got str"),
    ('[{"id": 2}]', "expected a JSON object, got list"),
    ("null", "expected a JSON object, got NoneType"),
    ('\ufeff{"id": 2}', "not valid JSON"),            # a byte-order mark mid-file
])
def test_malformed_jsonl_rows_name_file_and_line(tmp_path, line, message) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"id": 1}\n\n' + line + '\n{"id": 3}\n', encoding="utf-8")
    with pytest.raises(DataError, match=rf"rows\.jsonl:3: {message}"):
        read_jsonl(path)


def test_missing_fields_are_named(tmp_path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"id": 1, "prompt": "p"}\n{"id": 2}\n')
    with pytest.raises(DataError, match=r"rows\.jsonl:2: missing field\(s\) \['prompt'\]"):
        read_jsonl(path, required=("id", "prompt"))


def test_invalid_utf8_is_a_data_error_naming_the_file(tmp_path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"id": 1}\n{"id": "\xff\xfe"}\n')
    with pytest.raises(DataError, match=r"rows\.jsonl"):
        read_jsonl(path)


def test_jsonl_round_trip_loses_nothing(tmp_path) -> None:
    rows = [{"id": i, "text": t} for i, t in enumerate([
        "", "a\rb\r\nc", "line\u2028sep\u2029para\x85nel", "nul\x00byte", "😀 émoji ∑", '{"nested": "json"}',
        "x" * MB])]
    path = tmp_path / "rows.jsonl"
    write_jsonl(path, rows)
    assert read_jsonl(path) == rows


def test_a_failed_write_keeps_the_old_file(tmp_path) -> None:
    path = tmp_path / "rows.jsonl"
    write_jsonl(path, [{"id": 1}])
    with pytest.raises(UnicodeEncodeError):
        write_jsonl(path, [{"id": 2}, {"id": 3, "text": "lone surrogate \ud800"}])
    assert read_jsonl(path) == [{"id": 1}]
    assert [p.name for p in tmp_path.iterdir()] == ["rows.jsonl"]  # no temp file left behind


# ------------------------------------------------------------------------------ rlvr, random

HOSTILE_COMPLETIONS = ["", "   ", "\\boxed{}", "\\boxed{", "}}}{{{", "\\boxed{12", "\\boxed{\\boxed{12}}",
                       "\\boxed{NaN}", "\\boxed{inf}", "\\boxed{1e999999}", "\\boxed{0x0C}",
                       "\\boxed{" + "9" * 5000 + "}", "\\boxed{\\frac{24}{2}}", "\x00\\boxed{12}\x00",
                       [{"role": "assistant", "content": "\\boxed{12}"}], [], ["not a message"]]


def test_rlvr_on_hostile_completions_is_zero_one_or_none() -> None:
    n = len(HOSTILE_COMPLETIONS)
    rewards = timed(rlvr_correct, ["p"] * n, HOSTILE_COMPLETIONS, ["12"] * n)
    assert_rewards_ok(rewards, n, allowed={0.0, 1.0})
    assert rewards[-3] == 1.0 and rewards[0] == 0.0
    golds = [None, "", float("nan"), float("inf"), 12, "  ", "12"]
    assert_rewards_ok(timed(rlvr_correct, ["p"] * 7, ["\\boxed{12}"] * 7, golds), 7, allowed={0.0, 1.0})
    assert rlvr_correct(["p"], ["\\boxed{12}"], [None]) == [None]  # no gold: not applicable


@pytest.mark.parametrize("shape", sorted(HUGE))
def test_rlvr_on_a_1mb_completion_is_fast(shape) -> None:
    assert_rewards_ok(timed(rlvr_correct, ["p"], [HUGE[shape]], ["12"]), 1, allowed={0.0, 1.0})


def test_extract_boxed_on_many_unclosed_boxes_is_fast() -> None:
    assert within(HANG_BUDGET_S, extract_boxed, "\\boxed{" * (MB // 7)) is None


def test_rlvr_on_a_1mb_latex_answer_is_fast() -> None:
    completion = "\\boxed{" + "x+" * (MB // 2) + "1}"
    assert within(HANG_BUDGET_S, rlvr_correct, ["p"], [completion], ["12"]) == [0.0]


@pytest.mark.parametrize("content", [None, [{"type": "text", "text": "\\boxed{12}"}]])
def test_rlvr_on_messages_without_string_content(content) -> None:
    assert_rewards_ok(rlvr_correct(["p"], [[{"role": "assistant", "content": content}]], ["12"]), 1)


def test_random_reward_is_finite_on_anything() -> None:
    reward = RandomReward(seed=0)
    for batch in ([], [""], [None, "", HUGE["prose"]], HOSTILE_COMPLETIONS):
        out = reward(["p"] * len(batch), batch)
        assert_rewards_ok(out, len(batch))
        assert all(0.0 <= r < 1.0 for r in out)


# ------------------------------------------------------------------------------ RLVRR

REFS = [" Zorb is a crab. It is green. It eats fish.", " Zorb is a small crab. Its coat is green."]
KEYWORDS = [["zorb", "crab"], ["green"], ["fish"]]
CHECKS = [{"name": "short", "weight": 1.0, "source": "def check(response):\n    return len(response) < 200"},
          {"name": "sentences", "weight": 2.0,
           "source": "def check(response):\n    return response.strip().endswith('.')"}]


def components_file(tmp_path: Path, rows: list[dict]) -> Path:
    path = tmp_path / "facts_train.jsonl"
    write_jsonl(path, rows)
    return path


@pytest.fixture()
def rlvrr(tmp_path):
    from rewards.rlvrr import RlvrrReward

    reward = RlvrrReward(components_file(tmp_path, [
        {"id": "ok", "key_points": ["a", "b", "c"], "keywords": KEYWORDS, "style_checks": CHECKS,
         "references": REFS},
        {"id": "no-keywords", "key_points": [], "keywords": [], "style_checks": [], "references": REFS},
        {"id": "empty-keywords", "key_points": ["a"], "keywords": [[], ["", "  "]], "style_checks": CHECKS,
         "references": REFS}]))
    yield reward
    reward.close()


def test_rlvrr_on_hostile_completions(rlvrr) -> None:
    batch = ["", "   ", "<|endoftext|>", "Zorb is a crab.<|endoftext|>junk", "\x00" * 100,
             "\ud800 lone surrogate Zorb", *HUGE.values(),
             [{"role": "assistant", "content": "Zorb is green."}]]
    out = timed(rlvrr, ["p"] * len(batch), batch, None, prompt_id=["ok"] * len(batch))
    assert_rewards_ok(out, len(batch))
    assert all(r is not None and 0.0 <= r <= 1.0 for r in out)


def test_rlvrr_reference_without_keywords_is_a_skip_not_a_crash(rlvrr) -> None:
    out = rlvrr(["p"] * 4, ["Zorb is a green crab."] * 4, None,
                prompt_id=["no-keywords", "empty-keywords", "unknown-id", None])
    assert out[0] is None and out[2] is None and out[3] is None  # nothing to score against
    assert out[1] == 1.0 and rlvrr.last_content[1] is None       # style alone, content skipped
    assert content_reward("anything", REFS, [[], [""], ["   "]]) is None
    assert content_reward("anything", [], KEYWORDS) is None


def test_rlvrr_bad_component_rows_name_the_row(tmp_path) -> None:
    from rewards.rlvrr import load_components

    bad = {"id": "x", "keywords": "zorb", "style_checks": [], "references": REFS}
    with pytest.raises(DataError, match=r"row 1 \(id='x'\).*keywords"):
        load_components(components_file(tmp_path, [bad]))
    nan_weight = {"id": "y", "keywords": KEYWORDS, "references": REFS,
                  "style_checks": [{"source": "def check(r):\n    return True", "weight": float("nan")}]}
    with pytest.raises(DataError, match=r"row 1 \(id='y'\).*finite `weight`"):
        load_components(components_file(tmp_path, [nan_weight]))


def test_rlvrr_huge_finite_weights_do_not_make_nan(tmp_path) -> None:
    from rewards.rlvrr import RlvrrReward

    checks = [{**c, "weight": 1e308} for c in CHECKS]
    reward = RlvrrReward(components_file(tmp_path, [{"id": "w", "keywords": KEYWORDS, "style_checks": checks,
                                                     "references": REFS}]))
    try:
        assert_rewards_ok(reward(["p"], ["Zorb is a green crab."], None, prompt_id=["w"]), 1)
    finally:
        reward.close()


@pytest.mark.parametrize("shape", sorted(HUGE))
def test_content_reward_on_a_1mb_completion_is_fast(shape) -> None:
    score = timed(content_reward, HUGE[shape], REFS, KEYWORDS)
    assert score is not None and 0.0 <= score <= 1.0


# ------------------------------------------------------------------------------ parsers

PARSER_INPUTS = {
    "none": None, "int": 5, "empty": "", "prose_1mb": "no list here " * (MB // 13),
    "open_brackets": "[" * 100_000, "nested_closed": "[" * 50_000 + "]" * 50_000,
    "many_empty_lists": "[]" * 200_000, "unclosed_fence": "```json\n" + "[{" * 50_000,
    "open_quotes": '["' * 100_000, "deep_objects": "[" + '{"a":' * 20_000 + "1" + "}" * 20_000 + "]",
    "trailing_comma": '[{"criterion": "x", "points": 3,}]', "nan_points": '[{"criterion": "x", "points": NaN}]',
    "float_points": '[{"criterion": "x", "points": 3.0}]', "bool_points": '[{"criterion": "x", "points": true}]',
    "huge_int": '[{"criterion": "x", "points": 1' + "0" * 5000 + "}]",
    "many_boxes": "\\boxed{" * 100_000, "boxes_1mb": "\\boxed{A>B}" * (MB // 11),
    "junk_boxes": "\\boxed{42} \\boxed{} \\boxed{A>>>B} \\boxed{ A  >  B }",
}


@pytest.mark.parametrize("name", sorted(PARSER_INPUTS))
def test_parse_rubrics_never_raises(name) -> None:
    out = timed(parse_rubrics, PARSER_INPUTS[name])
    assert out is None or (out and all(r.criterion and r.points for r in out))


def test_parse_rubrics_rejects_malformed_items() -> None:
    for name in ("trailing_comma", "nan_points", "float_points", "bool_points", "huge_int"):
        assert parse_rubrics(PARSER_INPUTS[name]) is None, name


@pytest.mark.parametrize("name", sorted(PARSER_INPUTS))
def test_parse_verdict_never_raises(name) -> None:
    out = timed(parse_verdict, PARSER_INPUTS[name])
    assert out is None or out in VERDICTS
    if name in ("junk_boxes", "boxes_1mb"):
        assert out == "A>B"


# ------------------------------------------------------------------------------ synthesis output

@pytest.mark.parametrize("name", sorted(PARSER_INPUTS))
def test_synthesis_reply_parsers_never_raise(name) -> None:
    text = PARSER_INPUTS[name]
    reply = timed(synth_llm.parse_json, text if isinstance(text, str) else None)
    synth_llm.parse_key_points(reply, 12)
    synth_llm.parse_keywords(reply, 3)
    checks = synth_llm.parse_checks(reply)
    assert checks is None or isinstance(checks, list)


@pytest.mark.parametrize("name", ["nested_closed", "deep_objects"])
def test_deeply_nested_reply_is_unparseable_not_raised(name) -> None:
    assert within(HANG_BUDGET_S, synth_llm.parse_json, PARSER_INPUTS[name]) is None


@pytest.mark.parametrize("text", ["{" * MB, "\\boxed{A>B}" * (MB // 11)], ids=["open_braces", "boxes"])
def test_a_1mb_reply_full_of_braces_is_fast(text) -> None:
    assert within(HANG_BUDGET_S, synth_llm.parse_json, text) is None


class Scripted:
    """An llm client whose reply to each of the three prompts is fixed text."""

    concurrent = False

    def __init__(self, key_points: str | None, keywords: str | None, checks: str | None) -> None:
        self.replies = {"key_points": key_points, "keywords": keywords, "checks": checks}

    def complete(self, prompt: str) -> str | None:
        if "# Key points (numbered)" in prompt:
            return self.replies["keywords"]
        if "style checks" in prompt:
            return self.replies["checks"]
        return self.replies["key_points"]


GOOD_POINTS = '{"key_points": ["Zorb is a crab", "It is green"]}'
GOOD_KEYWORDS = '{"keywords": [["Zorb", "crab"], ["green"]]}'
GOOD_CHECKS = json.dumps({"checks": [{"name": "short", "weight": 1.0, "source": CHECKS[0]["source"]}]})
ROWS = [{"id": "r0", "prompt": "Describe Zorb.", "references": REFS}]


@pytest.mark.parametrize("client, counter", [
    (Scripted("Sure! {not json", GOOD_KEYWORDS, GOOD_CHECKS), "dropped_unparseable"),
    (Scripted(None, GOOD_KEYWORDS, GOOD_CHECKS), "dropped_unparseable"),             # garbled envelope
    (Scripted('{"key_points": []}', GOOD_KEYWORDS, GOOD_CHECKS), "dropped_unparseable"),
    (Scripted(GOOD_POINTS, '{"keywords": [["Zorb"]]}', GOOD_CHECKS), "dropped_unparseable"),  # one list short
    (Scripted(GOOD_POINTS, '{"keywords": [[1], [null]]}', GOOD_CHECKS), "dropped_unparseable"),
    (Scripted(GOOD_POINTS, GOOD_KEYWORDS, '{"checks": "def check(r): return True"}'), "dropped_unparseable"),
    (Scripted(GOOD_POINTS, '{"keywords": [["moon"], ["sun rises in the east"]]}', "{\"checks\": []}"),
     "dropped_keywords"),                                                            # reference without keywords
    (Scripted(GOOD_POINTS, GOOD_KEYWORDS, json.dumps({"checks": [
        1, None, {"source": 5}, {"source": "import os\ndef check(r):\n    return True"},
        {"source": CHECKS[0]["source"], "weight": float("nan")}, {"source": CHECKS[0]["source"], "weight": -1},
        {"source": "def check(r):\n    while True: pass"}]})), "dropped_sandbox"),
])
def test_unparseable_synthesis_output_is_counted_and_every_row_accounted(client, counter) -> None:
    components, stats = synthesize(ROWS, SynthesizeConfig(backend="llm", check_cpu_seconds=0.05), client=client)
    assert getattr(stats, counter) >= 1
    assert stats.examples == stats.kept + stats.dropped_unparseable + stats.dropped_filter == len(ROWS)
    assert [c.id for c in components] == (["r0"] if stats.kept else [])
    for c in components:
        assert len(c.keywords) == len(c.key_points) and all(c.keywords)
