"""A local OpenAI-compatible chat endpoint on 127.0.0.1 for tests (judge, synthesis, retries).

`ChatStub(respond)` serves POSTs in threads; `respond(path, body, n)` gets the request path, the
parsed JSON body and the 1-based request number, and returns (HTTP status, payload bytes).
`chat_payload(text)` is a well-formed chat-completions answer. Use it as a context manager;
`url` is the base URL (`.../v1`) and `calls` counts requests.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def chat_payload(text: str) -> bytes:
    return json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}).encode()


class ChatStub:
    def __init__(self, respond: Callable[[str, dict, int], tuple[int, bytes]]) -> None:
        self.calls = 0
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with stub.lock:
                    stub.calls += 1
                    n = stub.calls
                code, payload = respond(self.path, body, n)
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:  # the client gave up (timeout tests)
                    pass

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
