"""Safe when shared (issue 35): each defect the issue measured has a test here that fails on the
code before the fix. The sandbox's OS layer is in tests/test_sandbox_os_layer.py, the servers'
refusal to face a network without auth in tests/test_server_auth.py (slow: it starts them).

- core/llm.py: a redirect never carries the API key to another host; URLs are redacted.
- tasks/stages.py: a run-cache entry reaches the DVC remote only after every output it names;
  a stage whose flow run is no longer Running (the heartbeat automation marked it Crashed, or it
  cannot confirm it for a lease shorter than the automation's window, even while the API does
  not answer) is killed before it writes, and the pipeline retries a Crashed stage only once its
  attempt's fence has certainly stopped it.
- models/callbacks.py: the best checkpoint is swapped atomically.
- models/grpo.py: a checkpoint counts for resuming only with its completion marker.
- scripts/*_server.sh: a non-loopback host without auth is refused (no server is started).
"""

from __future__ import annotations

import http.server
import json
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from core import llm
from core.llm import HttpClient, LlmEndpointError
from core.params import LlmSettings

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]
API_KEY = "sk-test-secret-0123456789"


# ---- core/llm.py -------------------------------------------------------------------------------


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every request with `server.reply` (status, headers, body); records the headers."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.server.seen.append(dict(self.headers))  # type: ignore[attr-defined]
        status, headers, body = self.server.reply  # type: ignore[attr-defined]
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def http_servers() -> Iterator[list[http.server.HTTPServer]]:
    """Two servers on 127.0.0.1 (different ports: different origins)."""
    servers = []
    for _ in range(2):
        server = http.server.HTTPServer(("127.0.0.1", 0), _Recorder)
        server.seen = []  # type: ignore[attr-defined]
        server.reply = (200, {"Content-Type": "application/json"},  # type: ignore[attr-defined]
                        json.dumps({"choices": [{"message": {"content": "ok"}}]}).encode())
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    yield servers
    for server in servers:
        server.shutdown()
        server.server_close()


def _url(server: http.server.HTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def test_llm_client_never_sends_the_api_key_to_a_redirect_target(http_servers) -> None:
    endpoint, elsewhere = http_servers
    endpoint.reply = (302, {"Location": f"{_url(elsewhere)}/v1/chat/completions"}, b"")
    client = HttpClient(_url(endpoint), LlmSettings(max_retries=0, timeout_s=10), api_key=API_KEY,
                        sleep=lambda _: None)
    with pytest.raises(LlmEndpointError, match="redirect"):
        client.complete("hello")
    assert endpoint.seen and endpoint.seen[0].get("Authorization") == f"Bearer {API_KEY}"
    assert not any(API_KEY in json.dumps(h) for h in elsewhere.seen), elsewhere.seen


def test_llm_client_redacts_the_endpoint_in_logs_and_errors(http_servers, caplog) -> None:
    endpoint, _ = http_servers
    endpoint.reply = (503, {}, b"busy")
    base = _url(endpoint).replace("http://", f"http://user:{API_KEY}@") + f"/v1?key={API_KEY}"
    client = HttpClient(base, LlmSettings(max_retries=1, timeout_s=10), sleep=lambda _: None)
    with caplog.at_level(logging.WARNING, logger="core.llm"), \
            pytest.raises(LlmEndpointError) as failed:
        client.complete("hello")
    shown = str(failed.value) + "\n" + "\n".join(r.getMessage() for r in caplog.records)
    assert API_KEY not in shown, shown
    assert f"127.0.0.1:{endpoint.server_address[1]}" in shown  # still says which endpoint


def test_redact_url_hides_credentials() -> None:
    shown = llm.redact_url(f"https://me:{API_KEY}@h:1/v1/chat/completions?token={API_KEY}")
    assert API_KEY not in shown and shown.startswith("https://***@h:1/v1/chat/completions?")


# ---- tasks/stages.py: the order of a worker's writes, and the fence ---------------------------


class _FakeDvcRepo:
    """What `push_stage` touches of DVC's Repo, recording the order of the pushes."""

    def __init__(self, events: list[str], fail_outputs: bool) -> None:
        outer = self
        self.events, self.fail_outputs = events, fail_outputs

        class Stage:
            wdir = "."

            @staticmethod
            def collect(_address):
                return (Stage(),)

        class Cached:
            @staticmethod
            def get_used_objs():
                return {"remote": ["model.safetensors", "metrics.json"]}

        class StageCache:
            @staticmethod
            def _load(_stage):
                return {"cmd": "train"}

            @staticmethod
            def _create_stage(_entry, wdir):
                return Cached()

            @staticmethod
            def push(_remote):
                outer.events.append("run-cache entry")

        class Cloud:
            @staticmethod
            def push(objs):
                if outer.fail_outputs:
                    raise ConnectionError("worker lost mid-push")
                outer.events.append(f"outputs {objs}")

        self.stage, self.stage_cache, self.cloud = Stage, StageCache, Cloud
        self.lock = threading.Lock()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("fail_outputs", [False, True], ids=["whole", "killed_mid_push"])
def test_push_stage_sends_outputs_before_the_run_cache_entry(monkeypatch, tmp_path,
                                                              fail_outputs) -> None:
    import dvc.repo

    from tasks import stages

    events: list[str] = []
    monkeypatch.setattr(dvc.repo, "Repo", lambda _root: _FakeDvcRepo(events, fail_outputs))
    if fail_outputs:
        with pytest.raises(ConnectionError):
            stages.push_stage("train@rlvr-0", tmp_path, log=lambda _: None)
        assert "run-cache entry" not in events  # nothing names outputs the remote lacks
    else:
        stages.push_stage("train@rlvr-0", tmp_path, log=lambda _: None)
        assert events[-1] == "run-cache entry" and len(events) == 2, events


def test_a_fenced_command_is_killed_and_raises(tmp_path) -> None:
    from tasks import stages

    asked: list[int] = []

    def fence() -> str | None:
        asked.append(1)
        return "flow run x is CRASHED"

    with pytest.raises(stages.Fenced, match="CRASHED"):
        stages.run_command(["sleep", "120"], tmp_path, lambda _: None, fence=fence,
                           fence_every_s=0.05)
    assert asked


def test_a_crashed_attempt_records_nothing(monkeypatch, tmp_path) -> None:
    """The heartbeat automation marks the attempt Crashed while its command runs: the command is
    killed and the stage is neither committed nor pushed (the retry owns it now)."""
    from tasks import stages

    writes: list[list[str]] = []
    monkeypatch.setattr(stages, "stage_command", lambda stage, root: ("sleep 120", []))
    monkeypatch.setattr(stages, "dvc", lambda args, *a, **k: writes.append(args) or [])
    monkeypatch.setattr(stages, "push_stage", lambda *a, **k: writes.append(["push"]))
    monkeypatch.setattr(stages, "git", lambda args, root: "")
    monkeypatch.setattr(stages, "FENCE_EVERY_S", 0.05)
    states = iter(["RUNNING", "RUNNING"])
    fence = stages.flow_run_fence("run-1", read_state=lambda _id: next(states, "CRASHED"))
    with pytest.raises(stages.Fenced, match="CRASHED"):
        stages.reproduce_on_worker("train@rlvr-0", "abc123", [], tmp_path, force=True,
                                   log=lambda _: None, fence=fence)
    assert writes == []


def test_flow_run_fence_lease() -> None:
    """Running confirms the lease; another state ends it at once; failing to read the state
    ends it only once the lease has run out (the clock is the test's)."""
    from tasks import stages

    now = [0.0]
    answers: list[object] = ["RUNNING"]

    def read(_id: str) -> str:
        answer = answers[0]
        if isinstance(answer, Exception):
            raise answer
        return str(answer)

    fence = stages.flow_run_fence("run-1", lease_s=60, read_state=read, clock=lambda: now[0])
    assert fence() is None
    answers[0] = ConnectionError("API unreachable")
    now[0] = 59.0
    assert fence() is None
    now[0] = 61.0
    assert "not confirmed Running" in (fence() or "")
    answers[0], now[0] = "RUNNING", 62.0
    assert fence() is None
    answers[0] = "CRASHED"
    assert "CRASHED" in (fence() or "")
    # The lease runs out before the zombie automation marks the run Crashed (tasks/pool.py).
    import inspect

    from tasks.pool import ensure_zombie_automation

    window = inspect.signature(ensure_zombie_automation).parameters["within_s"].default
    assert stages.FENCE_LEASE_S < window


def test_flow_run_fence_does_not_wait_on_an_api_that_never_answers(monkeypatch) -> None:
    """A worker cut off from the API by a partition that drops packets: Prefect's client retries
    an unanswered request for minutes (60 s timeouts, 5 retries with back-off), so a fence that
    waited on its read would let the attempt run on long past its lease (and past the moment the
    automation marks it Crashed). The lease must run out on time all the same."""
    from tasks import stages

    monkeypatch.setattr(stages, "FENCE_ANSWER_S", 0.05, raising=False)
    release = threading.Event()
    reads: list[int] = []

    def read(_id: str) -> str:
        reads.append(1)
        if len(reads) == 1:
            return "RUNNING"
        release.wait(120)  # the request hangs
        raise ConnectionError("timed out")

    now = [0.0]
    fence = stages.flow_run_fence("run-1", lease_s=60, read_state=read, clock=lambda: now[0])
    answers: list[str | None] = []
    try:
        assert fence() is None
        for t in (30.0, 61.0):  # within the lease, then past it; the read still hangs
            now[0] = t
            asked = threading.Thread(target=lambda: answers.append(fence()), daemon=True)
            asked.start()
            asked.join(30)
            assert not asked.is_alive(), f"the fence waited on the hanging read (at {t:g} s)"
        assert answers[0] is None
        assert "not confirmed Running" in (answers[1] or ""), answers
    finally:
        release.set()


def test_the_retry_of_a_crashed_stage_waits_until_its_fence_has_stopped_it(monkeypatch) -> None:
    """The coordinator sees the flow run Crashed; the attempt may still be alive, cut off from
    the API, and its fence stops it at most FENCE_LEASE_S + one look after its last confirmed
    Running, which came before the Crash. The stage fails (to be retried) only after that long."""
    import logging as _logging

    import prefect.deployments
    from prefect.states import Crashed

    from flows import pipeline
    from tasks import stages

    events: list[object] = []
    monkeypatch.setattr(pipeline, "get_run_logger", lambda: _logging.getLogger("test"))
    monkeypatch.setattr(stages, "plan", lambda *a, **k: "run")
    monkeypatch.setattr(stages, "_sleep", lambda s: events.append(("wait", s)), raising=False)

    class _Run:
        name = "train@rlvr-0"
        state = Crashed(message="no heartbeat for 90 s: the worker died")

    monkeypatch.setattr(prefect.deployments, "run_deployment", lambda *a, **k: _Run())
    with pytest.raises(stages.StageFailed, match="CRASHED|Crashed"):
        pipeline.run_stage_on_pool.fn("train@rlvr-0", "abc123", [], "stage/worker")
    waited = sum(s for kind, s in events if kind == "wait")  # type: ignore[misc]
    longest = (stages.FENCE_LEASE_S + stages.FENCE_EVERY_S
               + getattr(stages, "FENCE_ANSWER_S", 0.0))
    assert waited >= longest, events


# ---- models/callbacks.py and models/grpo.py: the best checkpoint and resumable checkpoints ----


class _Weights:
    """Stands in for a model: save_pretrained writes its version."""

    def __init__(self, version: int) -> None:
        self.version = version

    def save_pretrained(self, folder) -> None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / "model.safetensors").write_text(f"weights v{self.version}")


def test_best_checkpoint_survives_a_kill_during_the_swap(monkeypatch, tmp_path) -> None:
    """A new best whose save is killed at the swap (every rename fails from then on) leaves
    the previous best whole: what publish_best publishes is still the first best."""
    import pathlib

    from models.callbacks import HeldoutCallback

    best_dir = tmp_path / "best"
    callback = HeldoutCallback(score_fn=lambda m: {}, every=1, headline="h", best_dir=best_dir)
    callback._last_step = 2
    callback._save_best(_Weights(1))

    def killed(*args, **kwargs):
        raise OSError("killed at the swap")

    monkeypatch.setattr(os, "rename", killed)
    monkeypatch.setattr(os, "replace", killed)
    monkeypatch.setattr(pathlib.Path, "rename", killed)
    monkeypatch.setattr(pathlib.Path, "replace", killed)
    callback._last_step = 4
    with pytest.raises(OSError, match="killed"):
        callback._save_best(_Weights(2))
    monkeypatch.undo()
    callback.publish_best()
    assert (best_dir / "model.safetensors").read_text() == "weights v1"


def test_best_checkpoint_swap_keeps_only_the_newest(tmp_path) -> None:
    from models.callbacks import HeldoutCallback

    best_dir = tmp_path / "best"
    callback = HeldoutCallback(score_fn=lambda m: {}, every=1, headline="h", best_dir=best_dir)
    for step in (2, 4, 6):
        callback._last_step = step
        callback._save_best(_Weights(step))
    callback.publish_best()
    assert (best_dir / "model.safetensors").read_text() == "weights v6"
    assert len([p for p in (tmp_path / ".best").iterdir() if p.name != "current"]) == 1


def test_resume_ignores_a_checkpoint_without_its_completion_marker(tmp_path) -> None:
    """checkpoint-4's save was killed: trainer_state.json is there (written in place, cut short)
    but the completion marker is not; the resume takes checkpoint-2."""
    from types import SimpleNamespace

    from models import grpo
    from models.callbacks import CheckpointMarker

    for step in (2, 4):
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        (folder / "model.safetensors").write_text("w")
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    (tmp_path / "checkpoint-4" / "trainer_state.json").write_text('{"global_st')
    state = SimpleNamespace(global_step=2, is_world_process_zero=True)
    CheckpointMarker().on_save(SimpleNamespace(output_dir=str(tmp_path)), state, None)
    assert grpo.last_checkpoint(tmp_path) == tmp_path / "checkpoint-2"
    marker = json.loads((tmp_path / "checkpoint-2" / "checkpoint_complete.json").read_text())
    assert marker == {"global_step": 2}
    assert not list(tmp_path.rglob("*.tmp"))


# ---- scripts/*_server.sh: no server faces a network without auth -------------------------------


def _script_env(prefixes: tuple[str, ...]) -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith(prefixes) and k != "LAB_INSECURE_NO_AUTH"}


@pytest.mark.parametrize("host", ["192.0.2.1", "127.0.0.1.invalid"])
@pytest.mark.parametrize(("script", "host_var", "prefixes"), [
    ("mlflow_server.sh", "MLFLOW_HOST", ("MLFLOW_",)),
    ("prefect_server.sh", "PREFECT_HOST", ("PREFECT_",)),
])
def test_server_scripts_refuse_a_network_host_without_auth(tmp_path, script, host_var,
                                                           prefixes, host) -> None:
    """192.0.2.1 (TEST-NET-1, on no interface here): the script must refuse before starting
    anything; the code before the fix tried to serve on it without auth. A DNS name that only
    starts like a loopback address (127.0.0.1.invalid) is no loopback address either."""
    import socket
    import subprocess

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = {**_script_env(prefixes), host_var: host, "MLFLOW_PORT": port,
           "PREFECT_PORT": port, "PREFECT_HOME": str(tmp_path / "prefect"),
           "MLFLOW_BACKEND_URI": f"sqlite:///{tmp_path / 'server.db'}",
           "MLFLOW_ARTIFACTS": str(tmp_path / "artifacts")}
    done = subprocess.run(["bash", str(ROOT / "scripts" / script)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, start_new_session=True)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"refusing to listen on {host} without authentication" in done.stderr
    assert "LAB_INSECURE_NO_AUTH=1" in done.stderr  # the override is named
