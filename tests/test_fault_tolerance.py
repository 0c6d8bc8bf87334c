"""Fault tolerance of the `synthesize` stage against a flaky OpenAI-compatible endpoint.

A stub server on 127.0.0.1 (a thread in the test) answers HTTP 503 to its first N requests, or to
every request. The stage reads the endpoint from `SYNTHESIS_LLM_URL`, as in production:

- N transient failures (N <= llm.max_retries): the stage completes through the HTTP client's
  retries and writes both splits;
- an endpoint that always fails: the stage raises one error naming the endpoint and the last
  error, and writes nothing; as a Prefect flow the run ends Failed with that message and a task
  downstream of it never runs (slow: a Prefect test server starts in about 20 s).
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest

from core.llm import LlmEndpointError
from core.params import SynthesizeConfig, load
from tests.chat_stub import ChatStub, chat_payload

NAMES = {"train": [("Zorb", "crab", "green"), ("Lune", "frog", "brown")], "val": [("Kesh", "owl", "grey")]}


def prepared_rows(split: str) -> list[dict]:
    return [{"id": f"facts-{split}-{i}", "family": "facts", "split": split,
             "prompt": f"Facts: name={n}; kind={k}; color={c}.\nTask: Describe {n}.\nAnswer:",
             "references": [f" {n} is a {k}. It is {c}.", f" {n} is a small {k}. Its coat is {c}.",
                            f" Meet {n}, a {k}. Its color is {c}."]}
            for i, (n, k, c) in enumerate(NAMES[split])]


def write_prepared(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split in NAMES:
        (folder / f"facts_{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in prepared_rows(split)))
    return folder


def reply(prompt: str) -> str:
    """A well-behaved model: key points, keywords and a style check for the named animal."""
    name = re.search(r"Describe (\w+)", prompt).group(1)
    kind = next(k for rows in NAMES.values() for n, k, _ in rows if n == name)
    if "# Key points (numbered)" in prompt:
        return json.dumps({"keywords": [[name, kind]]})
    if "style checks" in prompt.lower() or "def check" in prompt:
        return json.dumps({"checks": [{"name": "nonempty", "weight": 1.0,
                                       "source": "def check(response):\n    return len(response) > 0"}]})
    return json.dumps({"key_points": [f"{name} is a {kind}"]})


class FlakyEndpoint(ChatStub):
    """OpenAI-compatible /v1/chat/completions: HTTP 503 for the first `fail_first` requests
    (every request if `fail_first` is None), then `reply(prompt)`."""

    def __init__(self, fail_first: int | None) -> None:
        self.fail_first = fail_first

        def respond(path: str, body: dict, n: int) -> tuple[int, bytes]:
            if fail_first is None or n <= fail_first:
                return 503, b'{"error": "model is loading"}'
            return 200, chat_payload(reply(body["messages"][0]["content"]))

        super().__init__(respond)


MAX_RETRIES = 3


@pytest.fixture()
def params():
    """The `ci` preset with the llm backend: tiny back-off, a short timeout, two requests at once."""
    base = load(preset="ci")
    cfg = SynthesizeConfig(backend="llm", llm={"max_retries": MAX_RETRIES, "backoff_s": 0.001,
                                               "timeout_s": 5.0, "concurrency": 2})
    return base.model_copy(update={"synthesize": cfg})


def test_transient_503s_are_retried_and_the_stage_completes(params, tmp_path, monkeypatch) -> None:
    from flows.synthesize import synthesize_stage

    prepared, out = write_prepared(tmp_path / "prepared"), tmp_path / "components"
    with FlakyEndpoint(fail_first=MAX_RETRIES) as endpoint:
        monkeypatch.setenv("SYNTHESIS_LLM_URL", endpoint.url)
        stats = synthesize_stage(params, prepared, out)
    rows = sum(len(v) for v in NAMES.values())
    assert endpoint.calls == MAX_RETRIES + 3 * rows  # three prompts per row, plus the failed tries
    assert stats["train"]["kept"] == 2 and stats["val"]["kept"] == 1
    assert stats["train"]["dropped_unparseable"] == 0
    kept = [json.loads(line) for line in (out / "facts_train.jsonl").read_text().splitlines()]
    assert [r["id"] for r in kept] == ["facts-train-0", "facts-train-1"]
    assert kept[0]["keywords"] == [["Zorb", "crab"]]


def test_an_endpoint_that_always_fails_names_itself_and_writes_nothing(params, tmp_path,
                                                                        monkeypatch) -> None:
    from flows.synthesize import synthesize_stage

    prepared, out = write_prepared(tmp_path / "prepared"), tmp_path / "components"
    with FlakyEndpoint(fail_first=None) as endpoint:
        monkeypatch.setenv("SYNTHESIS_LLM_URL", endpoint.url)
        with pytest.raises(LlmEndpointError) as info:
            synthesize_stage(params, prepared, out)
    message = str(info.value)
    assert f"{endpoint.url}/chat/completions" in message
    assert f"{MAX_RETRIES + 1} attempt" in message and "HTTP 503" in message and "model is loading" in message
    assert not out.exists() or not any(out.iterdir())  # no split half-written, the val split never asked
    # two rows of the train split in flight at once, each spending its attempts
    assert endpoint.calls <= 2 * (MAX_RETRIES + 1)


def test_an_unreachable_endpoint_fails_fast_with_its_url(params, tmp_path, monkeypatch) -> None:
    import socket

    from flows.synthesize import synthesize_stage

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("SYNTHESIS_LLM_URL", f"http://127.0.0.1:{port}/v1")
    with pytest.raises(LlmEndpointError, match=rf"127\.0\.0\.1:{port}/v1/chat/completions.*attempt.*last error"):
        synthesize_stage(params, write_prepared(tmp_path / "prepared"), tmp_path / "components")
    assert not (tmp_path / "components").exists()


# ------------------------------------------------------------------------------ as a Prefect flow

@pytest.fixture(scope="module")
def prefect_api():
    """A throwaway Prefect API (its own sqlite database) for the module."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture()
def flow_in_tmp(params, tmp_path, monkeypatch):
    """`synthesize_flow` as deployed, reading params and folders redirected to tmp_path."""
    import flows.synthesize as module

    prepared, out = write_prepared(tmp_path / "prepared"), tmp_path / "components"
    monkeypatch.setattr(module, "load", lambda *a, **k: params)
    monkeypatch.setattr(module, "synthesize_stage",
                        functools.partial(module.synthesize_stage, prepared_dir=prepared, out_dir=out))
    return module.synthesize_flow, out


@pytest.mark.slow
def test_flow_completes_through_retries(prefect_api, flow_in_tmp, monkeypatch) -> None:
    synthesize_flow, out = flow_in_tmp
    with FlakyEndpoint(fail_first=2) as endpoint:
        monkeypatch.setenv("SYNTHESIS_LLM_URL", endpoint.url)
        state = synthesize_flow(preset="ci", return_state=True)
    assert state.is_completed(), state.message
    assert state.result()["train"]["kept"] == 2 and endpoint.calls == 2 + 9
    assert (out / "facts_val.jsonl").exists()


@pytest.mark.slow
def test_flow_fails_naming_the_endpoint_and_nothing_downstream_runs(prefect_api, flow_in_tmp,
                                                                     monkeypatch, tmp_path) -> None:
    from prefect import flow, task

    synthesize_flow, out = flow_in_tmp
    marker = tmp_path / "downstream-ran"

    @task(name="downstream")
    def downstream(stats: dict) -> None:
        marker.write_text(json.dumps(stats))

    @flow(name="synthesize-then-train")
    def parent() -> None:
        downstream(synthesize_flow(preset="ci"))

    with FlakyEndpoint(fail_first=None) as endpoint:
        monkeypatch.setenv("SYNTHESIS_LLM_URL", endpoint.url)
        child = synthesize_flow(preset="ci", return_state=True)
        state = parent(return_state=True)
    for s in (child, state):
        assert s.is_failed(), s
        assert f"{endpoint.url}/chat/completions" in s.message and "HTTP 503" in s.message, s.message
        assert f"failed after {MAX_RETRIES + 1} attempt(s)" in s.message
    assert not marker.exists()
    assert not out.exists() or not any(out.iterdir())
