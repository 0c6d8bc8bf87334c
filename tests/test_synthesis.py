"""The `synthesize` stage: rule backend, validation gates, llm backend over HTTP.

The llm backend is tested against a stub OpenAI-compatible server started on 127.0.0.1 in the
test (http.server in a thread): it can fail the first N requests, always fail, stall, or answer
with text that is not JSON.
"""

from __future__ import annotations

import json
import socket
import time
import types

import pytest
from pydantic import ValidationError

from core import llm as core_llm
from core.params import LlmSettings, SynthesizeConfig
from rewards.reference_chain import content_reward, keyword_sequence
from rewards.sandbox import StyleSandbox, static_rejection_reason
from synthesis import (
    Components,
    StyleCheck,
    SynthesisStats,
    llm,
    rule,
    stats_path,
    synthesize,
    validate,
    write_components,
)
from tests.chat_stub import ChatStub, chat_payload

ROWS = [
    {"id": "facts-t-0", "prompt": "Facts: name=Zorb; kind=crab; color=green; food=fish.\nTask: "
     "Describe Zorb. Write one sentence per fact.\nAnswer:", "style": "sentences",
     "gold_facts": ["crab", "green", "fish"],
     "references": [" Zorb is a crab. It is green. It eats fish.",
                    " Zorb is a small crab. Its coat is green. It likes to eat fish.",
                    " Meet Zorb, a crab. Its color is green. Its food is fish."]},
    {"id": "facts-t-1", "prompt": "Facts: name=Lune; kind=frog; home=forest; skill=hiding.\nTask: "
     "Describe Lune. Write one line per fact, each starting with '- '.\nAnswer:", "style": "bullets",
     "gold_facts": ["frog", "forest", "hiding"],
     "references": [" - Lune is a frog.\n- It lives in the forest.\n- It is good at hiding.",
                    " - Lune is a small frog.\n- Its home is the forest.\n- It loves hiding.",
                    " - Meet Lune, a frog.\n- It stays near the forest.\n- Its skill is hiding."]},
    {"id": "facts-t-2", "prompt": "Facts: name=Kesh; kind=owl; food=nuts.\nTask: Describe Kesh. "
     "Write one sentence per fact.\nAnswer:", "style": "sentences", "gold_facts": ["owl", "nuts"],
     # Unequal sentence counts: alignment by similarity instead of position.
     "references": [" Kesh is an owl. It eats nuts.",
                    " Kesh is an owl that lives alone. It is quiet. It likes to eat nuts.",
                    " Meet Kesh, an owl. Its food is nuts."]},
]


@pytest.fixture(scope="module")
def sandbox():
    with StyleSandbox() as box:
        yield box


# ------------------------------------------------------------------------------ rule backend

@pytest.fixture(scope="module")
def rule_output():
    return synthesize(ROWS, SynthesizeConfig())


def test_rule_keywords_come_from_the_references(rule_output) -> None:
    components, stats = rule_output
    assert [c.id for c in components] == [r["id"] for r in ROWS] and stats.kept == 3
    for c in components:
        assert c.key_points and len(c.keywords) == len(c.key_points)
        for keywords in c.keywords:
            assert 1 <= len(keywords) <= 3
            for keyword in keywords:
                assert len(keyword.split()) <= 3
                assert any(keyword_sequence(ref, [keyword]) for ref in c.references), keyword


def test_rule_keywords_are_the_shared_facts(rule_output) -> None:
    zorb, lune, kesh = rule_output[0]
    assert zorb.keywords == [["zorb", "crab"], ["green"], ["fish"]]
    assert lune.keywords == [["lune", "frog"], ["forest"], ["hiding"]]
    assert kesh.key_points == ["Kesh is an owl.", "It eats nuts."]
    assert kesh.keywords[1] == ["nuts"]


def test_rule_style_checks_compile_and_pass_the_references(rule_output, sandbox) -> None:
    for c in rule_output[0]:
        assert c.style_checks
        sources = [check.source for check in c.style_checks]
        assert all(static_rejection_reason(s) is None for s in sources)
        assert all(all(row) for row in sandbox.run(sources, c.references)), c.id
    names = {c.id: [check.name for check in c.style_checks] for c in rule_output[0]}
    assert "bullet_lines" in names["facts-t-1"] and "no_bullets" in names["facts-t-0"]


def test_rule_style_checks_tell_styles_apart(rule_output, sandbox) -> None:
    lune = rule_output[0][1]
    layout = next(c for c in lune.style_checks if c.name == "bullet_lines")
    prose = "Lune is a frog. It lives in the forest. It is good at hiding."
    assert sandbox.run([layout.source], [prose, lune.references[0]]) == [[False, True]]


def test_rule_references_score_full_content(rule_output) -> None:
    for c in rule_output[0]:
        for i, ref in enumerate(c.references):
            others = [r for j, r in enumerate(c.references) if j != i]
            assert content_reward(ref, others, c.keywords) == 1.0


def test_rule_is_deterministic() -> None:
    a = [c.as_row() for c in rule.propose(ROWS, SynthesizeConfig())]
    b = [c.as_row() for c in rule.propose(list(reversed(ROWS)), SynthesizeConfig())]
    assert a == list(reversed(b))


def test_write_components_schema(tmp_path, rule_output) -> None:
    components, stats = rule_output
    path = tmp_path / "facts_train.jsonl"
    write_components(path, components, stats)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert set(lines[0]) == {"id", "key_points", "keywords", "style_checks", "references"}
    assert set(lines[0]["style_checks"][0]) == {"source", "weight", "name"}
    saved = json.loads(stats_path(path).read_text())
    assert saved["kept"] == 3 and saved["dropped_filter"] == 0 and "dropped_unparseable" in saved


def test_bad_rows_name_the_row() -> None:
    from core.io import DataError

    with pytest.raises(DataError, match="row 1 .*'x'"):
        synthesize([ROWS[0], {"id": "x", "references": []}], SynthesizeConfig())


def test_config_is_strict() -> None:
    with pytest.raises(ValidationError, match="extra"):
        SynthesizeConfig(treshold=0.5)
    with pytest.raises(ValidationError):
        SynthesizeConfig(llm={"timeout_s": 0})
    assert SynthesizeConfig().threshold == 0.7


# ------------------------------------------------------------------------------ validation

def _draft(id_: str, references: list[str], keywords: list[list[str]], checks: list[StyleCheck]):
    return Components(id_, [f"point {m}" for m in range(len(keywords))], keywords, checks, references)


STARTS_WITH_DASH = StyleCheck("dash", "def check(response):\n    return response.strip().startswith('- ')", 1.0)
ALWAYS = StyleCheck("always", "def check(response):\n    return True", 1.0)


def test_filter_drops_a_row_whose_references_disagree(sandbox) -> None:
    agree = _draft("agree", ["- Paris is the capital of France.", "- Paris is the French capital."],
                   [["paris", "capital"]], [STARTS_WITH_DASH])
    # Different facts in different orders, and a style only one reference has.
    disagree = _draft("disagree", ["- Paris is the capital, Rome is old.", "Old Rome; capital Paris.",
                                   "Berlin is big."],
                      [["paris", "rome"], ["capital", "old"]], [STARTS_WITH_DASH])
    stats = SynthesisStats()
    kept = validate.validate([agree, disagree], SynthesizeConfig(), stats, sandbox=sandbox)
    assert [c.id for c in kept] == ["agree"] and stats.dropped_filter == 1


def test_filter_needs_both_parts_low(sandbox) -> None:
    """Content below the threshold alone does not drop a row whose style agrees (paper 4.1)."""
    low_content = _draft("x", ["Paris then Rome.", "Rome then Paris."], [["paris", "rome"]], [ALWAYS])
    stats = SynthesisStats()
    kept = validate.validate([low_content], SynthesizeConfig(), stats, sandbox=sandbox)
    assert len(kept) == 1 and stats.dropped_filter == 0
    assert validate.reference_scores(low_content, [[True, True]]) == (0.5, 1.0)


def test_bad_checks_are_dropped_and_counted(sandbox) -> None:
    checks = [
        ALWAYS,
        StyleCheck("imports", "import os\ndef check(response):\n    return True", 1.0),
        StyleCheck("raises", "def check(response):\n    return 1 / 0 > 0", 1.0),
        StyleCheck("non_bool", "def check(response):\n    return 'yes'", 1.0),
        StyleCheck("no_weight", "def check(response):\n    return True", float("nan")),
        StyleCheck("not_code", None, 1.0),  # type: ignore[arg-type]
        StyleCheck("never", "def check(response):\n    return len(response) > 10**6", 1.0),
    ]
    draft = _draft("x", ["Paris is big."], [["paris"]], checks)
    stats = SynthesisStats()
    kept = validate.validate([draft], SynthesizeConfig(), stats, sandbox=sandbox)
    assert [c.name for c in kept[0].style_checks] == ["always"]
    assert stats.dropped_sandbox == 6


def test_keywords_absent_from_references_are_dropped(sandbox) -> None:
    draft = _draft("x", ["Paris is the capital."], [["Paris", "London"], ["moon"]], [ALWAYS])
    stats = SynthesisStats()
    kept = validate.validate([draft], SynthesizeConfig(), stats, sandbox=sandbox)
    assert kept[0].keywords == [["Paris"]] and stats.dropped_keywords == 2


# ------------------------------------------------------------------------------ llm backend

def good_reply(prompt: str) -> str:
    """What a well-behaved model answers to each of the three prompts, for ROWS[0]."""
    if "# Key points (numbered)" in prompt:
        return '```json\n{"keywords": [["Zorb", "crab"], ["green"], ["fish"]]}\n```'
    if "style checks" in prompt:
        return json.dumps({"checks": [
            {"name": "short", "weight": 0.6, "source": "def check(response):\n    return len(response.split()) < 40"},
            {"name": "evil", "weight": 0.4, "source": "import os\ndef check(response):\n    return True"},
        ]})
    return 'Here you go: {"key_points": ["Zorb is a crab", "It is green", "It eats fish"]}'


class Stub(ChatStub):
    """A stub /v1/chat/completions server: `fail_first` 500s, then `reply(prompt)` or a status."""

    def __init__(self, fail_first: int = 0, status: int | None = None, reply=good_reply,
                 delay_s: float = 0.0) -> None:
        def respond(path: str, body: dict, n: int) -> tuple[int, bytes]:
            if delay_s:
                time.sleep(delay_s)
            if path != "/v1/chat/completions":
                return 404, b"not found"
            if n <= fail_first:
                return 500, b"overloaded"
            if status is not None:
                return status, b"nope"
            return 200, chat_payload(reply(body["messages"][0]["content"]))

        super().__init__(respond)


def _cfg(**llm_settings) -> SynthesizeConfig:
    settings = {"max_retries": 3, "backoff_s": 0.001, "timeout_s": 5.0, "concurrency": 2, **llm_settings}
    return SynthesizeConfig(backend="llm", llm=settings)


def _client(stub: Stub, cfg: SynthesizeConfig) -> core_llm.HttpClient:
    return core_llm.make_client(cfg.llm, environ={cfg.llm.endpoint_env: stub.url})


def test_llm_recovers_after_transient_500s() -> None:
    cfg = _cfg()
    with Stub(fail_first=2) as stub:
        client = _client(stub, cfg)
        components, stats = synthesize(ROWS[:1], cfg, client=client)
    assert stub.calls == 2 + 3 and client.requests == 5  # two 500s, then the three prompts
    assert stats.kept == 1 and stats.dropped_unparseable == 0
    c = components[0]
    assert c.key_points == ["Zorb is a crab", "It is green", "It eats fish"]
    assert c.keywords == [["Zorb", "crab"], ["green"], ["fish"]]
    assert [s.name for s in c.style_checks] == ["short"] and stats.dropped_sandbox == 1


def test_llm_gives_up_with_the_url_and_last_error() -> None:
    cfg = _cfg(max_retries=2)
    with Stub(status=503) as stub:
        with pytest.raises(core_llm.LlmEndpointError) as info:
            synthesize(ROWS[:1], cfg, client=_client(stub, cfg))
    message = str(info.value)
    assert f"{stub.url}/chat/completions" in message and "3 attempt" in message and "HTTP 503" in message
    assert stub.calls == 3


def test_llm_connection_refused_is_retried_then_named() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = _cfg(max_retries=1)
    client = core_llm.make_client(cfg.llm, environ={cfg.llm.endpoint_env: f"http://127.0.0.1:{port}"})
    match = rf"127\.0\.0\.1:{port}/v1/chat/completions.*2 attempt.*(Refused|refused)"
    with pytest.raises(core_llm.LlmEndpointError, match=match):
        client.complete("hi")


def test_llm_timeout_is_transient() -> None:
    cfg = _cfg(max_retries=1, timeout_s=0.2)
    with Stub(delay_s=1.0) as stub:
        with pytest.raises(core_llm.LlmEndpointError, match="2 attempt.*(timed out|Timeout)"):
            _client(stub, cfg).complete("hi")


def test_llm_client_errors_are_not_retried() -> None:
    cfg = _cfg()
    with Stub(status=400) as stub:
        with pytest.raises(core_llm.LlmEndpointError, match="HTTP 400"):
            _client(stub, cfg).complete("hi")
    assert stub.calls == 1


def test_llm_unparseable_replies_are_counted_not_raised() -> None:
    def reply(prompt: str) -> str:
        if "Describe Lune" in prompt and "# Key points (numbered)" not in prompt:
            return "Sure! Key points: frog, forest, hiding {not json"
        if "Describe Kesh" in prompt and "# Key points (numbered)" in prompt:
            return '{"keywords": [["owl"]]}'  # one list too few
        return good_reply(prompt).replace("Zorb", "Kesh") if "Kesh" in prompt else good_reply(prompt)

    cfg = _cfg()
    with Stub(reply=reply) as stub:
        components, stats = synthesize(ROWS, cfg, client=_client(stub, cfg))
    assert [c.id for c in components] == ["facts-t-0"]
    assert stats.dropped_unparseable == 2 and stats.examples == 3


@pytest.mark.parametrize("reply,expected", [
    ('Here: {"key_points": ["a", "b"]} done', {"key_points": ["a", "b"]}),
    ('{"key_points": ["a"],}', ["a"]),                  # broken object: the list inside it
    ('{x} {"a": "}{]["} tail', {"a": "}{]["}),            # brackets in strings, prose braces
    ('\\boxed{A} [ 1 , "[" ]', [1, "["]),
    ('["' + "x" * 10_000 + '", 2]', ["x" * 10_000, 2]),  # longer than the first decode window
    ("[" * 3000 + "]" * 3000, None),                     # past the recursion limit
    ("{" * 200_000, None),
])
def test_parse_json_cases(reply, expected) -> None:
    assert core_llm.parse_json(reply) == expected


def test_parse_json_matches_first_decodable_bracket() -> None:
    """Same answer as trying raw_decode at every bracket (the old rule), on replies mixing both."""
    decoder = json.JSONDecoder()

    def first_decodable(text):
        for i, char in enumerate(text):
            if char in "{[":
                try:
                    return decoder.raw_decode(text, i)[0]
                except ValueError:
                    continue
        return None

    pieces = ["{", "}", "[", "]", '"', "\\", ":", ",", " ", "\n", "a", "1", "-", "e", "true", "\\u12",
              '{"k": [1, 2]}', '["x", {"y": null}]', "[1, 2,]", '{"k": 1,}', "1" * 5000]
    rng = __import__("random").Random(0)
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 40)))
        assert core_llm.parse_json(text) == first_decodable(text), text


def test_parse_json_caps_reply_length() -> None:
    padding = " " * core_llm.MAX_REPLY_CHARS
    assert core_llm.parse_json('{"a": 1}' + padding) is None
    assert core_llm.parse_json("<think>" + padding + '</think>{"a": 1}') == {"a": 1}  # preamble not counted


def test_llm_garbled_envelope_is_unparseable() -> None:
    class Garbled:
        concurrent = False

        def complete(self, prompt: str) -> str | None:
            return core_llm._reply_text(b"<html>502</html>", "chat", "http://x")

    components, stats = synthesize(ROWS[:1], _cfg(), client=Garbled())
    assert components == [] and stats.dropped_unparseable == 1


def test_llm_missing_endpoint_names_the_variable() -> None:
    with pytest.raises(core_llm.LlmEndpointError, match="SYNTHESIS_LLM_URL"):
        core_llm.make_client(LlmSettings(), environ={})


def test_prompt_templates_have_their_placeholders() -> None:
    text = llm.render("keywords", question="Q?", references="R.", key_points="1. P")
    assert "Q?" in text and "1. P" in text and "{question}" not in text
    assert '{"keywords": [[' in text  # JSON braces stay literal


# ------------------------------------------------------------------------------ the stage

def test_synthesize_stage_writes_both_splits(tmp_path) -> None:
    from flows.synthesize import synthesize_stage

    prepared = tmp_path / "prepared"
    prepared.mkdir()
    for split, rows in (("train", ROWS[:2]), ("val", ROWS[2:])):
        (prepared / f"facts_{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    params = types.SimpleNamespace(synthesize=SynthesizeConfig())
    stats = synthesize_stage(params, prepared, tmp_path / "components")
    assert stats["train"]["kept"] == 2 and stats["val"]["kept"] == 1
    for split in ("train", "val"):
        assert (tmp_path / "components" / f"facts_{split}.jsonl").exists()
        assert (tmp_path / "components" / f"facts_{split}.stats.json").exists()


@pytest.mark.slow
def test_llm_in_process_model_output_is_counted_not_raised(tmp_path) -> None:
    """A random tiny causal LM (no training) writes no JSON: every row dropped and counted."""
    from models.tiny import build_model, build_tokenizer

    tokenizer = build_tokenizer([r for row in ROWS for r in row["references"]] * 4, vocab_size=300)
    arch = types.SimpleNamespace(hidden_size=16, intermediate_size=32, num_layers=1, num_heads=2,
                                 max_positions=2048)
    build_model(arch, tokenizer, seed=0).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    cfg = SynthesizeConfig(backend="llm", llm={"model_path": str(tmp_path), "max_tokens": 8})
    components, stats = synthesize(ROWS[:2], cfg)
    assert components == [] and stats.dropped_unparseable == 2
