"""The LLM client the lab shares: one prompt in, the model's text out, and lenient JSON reading.

Used by reference-component synthesis (:mod:`synthesis.llm`, paper 002's prompts) and by the
rationale matcher's MetaJudge (:mod:`rewards.matchers`), each with its own :class:`LlmSettings`.

The model is either a local transformers causal LM run in process (``llm.model_path``) or an
OpenAI-compatible HTTP server (a vLLM server, say) whose base URL is read from the environment
variable named by ``llm.endpoint_env`` (URLs are never written in code or params). HTTP uses
only ``urllib`` from the standard library. Every request has a timeout; connection errors,
timeouts, HTTP 5xx, 408 and 429 are retried with exponential back-off
(``backoff_s * 2**attempt``); when the retries are spent, :class:`LlmEndpointError` names the
endpoint and the last error. Other HTTP errors (400, 401, 404: a misconfiguration, not a blip)
fail at once. Redirects are never followed: the API key goes in the ``Authorization`` header,
which urllib would resend to whatever host a redirect names; a 3xx fails at once and says where
it pointed. The endpoint URL is redacted wherever it is shown (logs, errors): no user or password
part, no query values (:func:`redact_url`).

:func:`parse_json` reads the JSON a prompt asks for, or returns ``None``; it never raises. It is
lenient about what models wrap JSON in:
code fences, a ``<think>...</think>`` preamble, text before or after the object. It is also
bounded on hostile replies: a reply nested deeper than Python's recursion limit, or longer than
``MAX_REPLY_CHARS`` after the preamble, is unparseable, and the search for the JSON skips the
brackets that cannot start it and decodes from windows, not to the end of the reply, at each
(see :func:`parse_json`).
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from core.params import LlmSettings

log = logging.getLogger(__name__)

_TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_MAX_BACKOFF_S = 60.0
# Longest reply (after any ``</think>``) that parse_json reads; a longer one is unparseable. The
# JSON the prompts ask for is a few KB (``llm.max_tokens`` is 1,024 by default); the cap bounds what
# a runaway reply can cost.
MAX_REPLY_CHARS = 200_000
# A `{` or `[` that can start a JSON value: the decoder needs `"` or `}` after `{`, and a value or
# `]` after `[` (whitespace allowed between). Every other bracket is skipped without decoding.
_JSON_START = re.compile(r'\{(?=\s*["}])|\[(?=\s*[-"{\[\]0-9tfnNI])')
_FIRST_WINDOW = 4096
_DECODER_LOOKAHEAD = 16  # the decoder reads at most this far past the error it reports


class LlmEndpointError(ConnectionError):
    """The model cannot be reached or refuses requests; the message names it."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Turn every redirect into an HTTPError: following one would send the Authorization header
    (the API key) to the host it names, and would turn the POST into a GET anyway."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


def redact_url(url: str) -> str:
    """``url`` as it may be shown: no user or password, every query value replaced by ``***``.

    >>> redact_url("https://user:sk-secret@llm.example:8443/v1?api_key=sk-2&x=1")
    'https://***@llm.example:8443/v1?api_key=***&x=***'
    >>> redact_url("http://127.0.0.1:8000/v1/chat/completions")
    'http://127.0.0.1:8000/v1/chat/completions'
    """
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    query = "&".join(f"{pair.split('=', 1)[0]}=***" if "=" in pair else "***"
                     for pair in parts.query.split("&")) if parts.query else ""
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, ""))


class LlmClient(Protocol):
    """One prompt in, the model's text out (``None`` if the reply itself was unreadable)."""

    concurrent: bool

    def complete(self, prompt: str) -> str | None: ...


class HttpClient:
    """An OpenAI-compatible ``/v1/completions`` or ``/v1/chat/completions`` endpoint."""

    concurrent = True

    def __init__(self, base_url: str, settings: LlmSettings, api_key: str | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.url = endpoint_url(base_url, settings.api)
        self.shown_url = redact_url(self.url)  # what logs and errors say
        self.settings = settings
        self.api_key = api_key
        self.sleep = sleep
        self.requests = 0  # attempts made, for logging and tests
        self._lock = threading.Lock()

    def _payload(self, prompt: str) -> bytes:
        s = self.settings
        body: dict[str, Any] = {"model": s.model, "temperature": s.temperature,
                                "max_tokens": s.max_tokens}
        if s.api == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        return json.dumps(body).encode()

    def _post(self, payload: bytes) -> bytes:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=payload, headers=headers, method="POST")
        with _OPENER.open(request, timeout=self.settings.timeout_s) as response:
            return response.read()

    def complete(self, prompt: str) -> str | None:
        """POST one request with retries; the generated text, or ``None`` for a garbled reply."""
        payload = self._payload(prompt)
        attempts = self.settings.max_retries + 1
        last = "no attempt made"
        for attempt in range(attempts):
            if attempt:
                self.sleep(min(self.settings.backoff_s * 2 ** (attempt - 1), _MAX_BACKOFF_S))
            with self._lock:
                self.requests += 1
            try:
                body = self._post(payload)
            except urllib.error.HTTPError as exc:
                if 300 <= exc.code < 400:
                    target = redact_url(exc.headers.get("Location", "") or "nowhere")
                    raise LlmEndpointError(
                        f"LLM endpoint {self.shown_url} answered HTTP {exc.code}, a redirect to "
                        f"{target}: redirects are not followed (the API key would go with it); "
                        "set the endpoint to the final URL") from None
                detail = _error_body(exc)
                if exc.code not in _TRANSIENT_STATUS:
                    raise LlmEndpointError(f"LLM endpoint {self.shown_url} refused the request: "
                                           f"HTTP {exc.code} {detail}") from None
                last = f"HTTP {exc.code} {detail}".strip()
            except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
                reason = getattr(exc, "reason", None) or exc
                last = f"{type(reason).__name__}: {reason}"
            else:
                return _reply_text(body, self.settings.api, self.shown_url)
            log.warning("LLM endpoint %s: attempt %d/%d failed (%s)", self.shown_url, attempt + 1,
                        attempts, last)
        raise LlmEndpointError(f"LLM endpoint {self.shown_url} failed after {attempts} attempt(s); "
                               f"last error: {last}")


def endpoint_url(base_url: str, api: str) -> str:
    """The request URL for a base URL given with or without ``/v1`` (or as the full path).

    >>> endpoint_url("http://127.0.0.1:8000", "chat")
    'http://127.0.0.1:8000/v1/chat/completions'
    >>> endpoint_url("http://host/v1/", "completions")
    'http://host/v1/completions'
    >>> endpoint_url("https://host/v1?api-version=2", "chat")  # a query stays at the end
    'https://host/v1/chat/completions?api-version=2'
    """
    base, mark, query = base_url.strip().partition("?")
    base = base.rstrip("/")
    path = "/chat/completions" if api == "chat" else "/completions"
    if not base.endswith(path):
        base = base + path if base.endswith("/v1") else base + "/v1" + path
    return base + mark + query


def _error_body(exc: urllib.error.HTTPError) -> str:
    try:
        return exc.read(300).decode("utf-8", "replace").strip()
    except Exception:  # the body is only decoration for the message
        return ""


def _reply_text(body: bytes, api: str, url: str) -> str | None:
    """The first choice's text from an OpenAI-style reply; ``None`` (logged) if it has none."""
    try:
        choice = json.loads(body)["choices"][0]
        text = choice["message"]["content"] if api == "chat" else choice["text"]
    except (ValueError, KeyError, IndexError, TypeError):
        log.warning("LLM endpoint %s: reply is not an OpenAI-style completion: %r", url, body[:200])
        return None
    return text if isinstance(text, str) else None


class TransformersClient:
    """A local causal LM run in process (greedy unless ``temperature`` > 0)."""

    concurrent = False

    def __init__(self, model_path: str, settings: LlmSettings) -> None:
        if not os.path.isdir(model_path):
            raise FileNotFoundError(f"synthesize.llm.model_path: {model_path!r} is not a directory "
                                    f"holding a transformers model")
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from core.devices import place, training_device

        self.settings = settings
        self.tokenizer = AutoTokenizer.from_pretrained(model_path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(model_path, local_files_only=True).eval()
        # this process's GPU (LOCAL_RANK's, not always GPU 0) in its compute dtype, or the CPU
        self.model = place(model, training_device())
        self._torch = torch

    def complete(self, prompt: str) -> str | None:
        tok = self.tokenizer
        templated = self.settings.api == "chat" and getattr(tok, "chat_template", None)
        text = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                       add_generation_prompt=True) if templated else prompt
        inputs = tok(text, return_tensors="pt", add_special_tokens=not templated).to(self.model.device)
        options: dict[str, Any] = {"max_new_tokens": self.settings.max_tokens,
                                   "do_sample": self.settings.temperature > 0}
        if options["do_sample"]:
            options["temperature"] = self.settings.temperature
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        with self._torch.no_grad():
            out = self.model.generate(**inputs, **options, pad_token_id=pad)
        reply = tok.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
        assert isinstance(reply, str)  # one sequence decodes to one string
        return reply


def make_client(settings: LlmSettings, environ: Mapping[str, str] | None = None, *,
                needed_by: str = "synthesize.backend is 'llm'",
                model_path_key: str = "synthesize.llm.model_path") -> LlmClient:
    """The in-process model if ``model_path`` is set, else the endpoint named in the environment.
    ``needed_by``/``model_path_key`` word the error for the caller (synthesis, the GenRM judge)."""
    if settings.model_path:
        return TransformersClient(settings.model_path, settings)
    env = os.environ if environ is None else environ
    url = env.get(settings.endpoint_env, "").strip()
    if not url:
        raise LlmEndpointError(
            f"{needed_by} but the environment variable {settings.endpoint_env} "
            f"is not set: set it to an OpenAI-compatible base URL (e.g. http://127.0.0.1:8000/v1) "
            f"or set {model_path_key} to a local model folder")
    return HttpClient(url, settings, api_key=env.get(settings.api_key_env) or None)


def parse_json(text: str | None) -> Any:
    """The first JSON object or array in a model reply, or ``None`` if there is none.

    "First" is the earliest ``{`` or ``[`` at which a JSON value starts (so a broken outer object
    can still yield a valid list inside it). A reply nested deeper than the recursion limit, or
    longer than ``MAX_REPLY_CHARS`` after the ``</think>`` preamble, is unparseable.

    >>> parse_json('Sure!\\n```json\\n{"key_points": ["a"]}\\n```')
    {'key_points': ['a']}
    >>> parse_json("<think>{maybe}</think> [1, 2]"), parse_json("{broken"), parse_json(None)
    ([1, 2], None, None)
    >>> parse_json('{"key_points": ["a"],}'), parse_json("[" * 5000 + "]" * 5000)
    (['a'], None)
    """
    if not text:
        return None
    end_think = text.rfind("</think>")
    if end_think >= 0:
        text = text[end_think + len("</think>"):]
    if len(text) > MAX_REPLY_CHARS:
        return None
    decoder = json.JSONDecoder()
    for start in _JSON_START.finditer(text):
        try:
            return _decode_at(decoder, text, start.start())
        except ValueError:
            continue
        except RecursionError:
            return None  # nested past the recursion limit: no prompt asks for that
    return None


def _decode_at(decoder: json.JSONDecoder, text: str, start: int) -> Any:
    """``decoder.raw_decode(text, start)[0]``, at a cost that does not grow with ``start``.

    raw_decode's errors count the newlines before their position, so trying it at every bracket
    of a long reply is quadratic (1 MB of brackets took minutes). Decoding a window from ``start``
    instead gives the same value, since an object or array ends at its closing bracket, and the
    same failure unless the window cut the text short: then the decoder fails near the window's
    end or in an unterminated string, and the window doubles.
    """
    size = _FIRST_WINDOW
    while True:
        try:
            return decoder.raw_decode(text[start:start + size])[0]
        except json.JSONDecodeError as e:
            if start + size >= len(text) or (e.pos < size - _DECODER_LOOKAHEAD
                                            and not e.msg.startswith("Unterminated string")):
                raise
        size *= 2
