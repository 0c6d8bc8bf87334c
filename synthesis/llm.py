"""The `llm` synthesis backend: paper 002's three prompts (App. A.2, Figures 4-6), any model.

Per prompt, three requests in a chain, as in the paper's hierarchical extraction (section 3.2)
and style-code generation (section 3.3):

1. ``prompts/key_points.txt``: question + references -> ``{"key_points": [...]}``;
2. ``prompts/keywords.txt``: + numbered key points -> ``{"keywords": [[...], ...]}``, one list
   per key point (one request per prompt, not per key point: the paper's Table 10 does not pin
   the granularity, and one request keeps the cost at three requests per prompt);
3. ``prompts/style_checks.txt``: question + references -> ``{"checks": [{"name", "weight",
   "source"}]}``.

The model is reached through :mod:`core.llm` (a local transformers model run in process, or an
OpenAI-compatible HTTP endpoint named by an environment variable, with timeouts and retries),
and replies are read with :func:`core.llm.parse_json`. A reply that does not parse as the JSON
the prompt asks for drops the example and is counted (``dropped_unparseable``); it never raises.
Requests for different prompts run concurrently against an endpoint (``llm.concurrency``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from core.llm import LlmClient, make_client, parse_json
from core.params import SynthesizeConfig
from synthesis import Components, StyleCheck, SynthesisStats

log = logging.getLogger(__name__)

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
# Placeholders each template must contain (anything else in braces is literal, e.g. JSON).
TEMPLATE_FIELDS = {
    "key_points": ("question", "references"),
    "keywords": ("question", "references", "key_points"),
    "style_checks": ("question", "references"),
}


@functools.cache
def load_template(name: str) -> str:
    """A prompt template from ``synthesis/prompts/<name>.txt``, checked for its placeholders."""
    path = PROMPTS_DIR / f"{name}.txt"
    text = path.read_text(encoding="utf-8")
    missing = [f for f in TEMPLATE_FIELDS[name] if "{" + f + "}" not in text]
    if missing:
        raise ValueError(f"{path}: missing placeholder(s) {', '.join('{' + m + '}' for m in missing)}")
    return text


def render(name: str, **fields: str) -> str:
    """Fill a template's ``{field}`` placeholders; other braces (JSON examples) stay literal."""
    text = load_template(name)
    for field in TEMPLATE_FIELDS[name]:
        text = text.replace("{" + field + "}", fields[field])
    return text


def _string_list(value: Any) -> list[str] | None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return [v.strip() for v in value if v.strip()]


def parse_key_points(reply: Any, limit: int) -> list[str] | None:
    """``{"key_points": [str, ...]}`` (or a bare list) -> up to ``limit`` key points."""
    value = reply.get("key_points") if isinstance(reply, dict) else reply
    points = _string_list(value)
    return points[:limit] if points else None


def parse_keywords(reply: Any, count: int) -> list[list[str]] | None:
    """``{"keywords": [[str, ...], ...]}`` with exactly ``count`` lists, else ``None``."""
    value = reply.get("keywords") if isinstance(reply, dict) else reply
    if not isinstance(value, list) or len(value) != count:
        return None
    lists = [_string_list(v) for v in value]
    return None if any(v is None for v in lists) else lists


def parse_checks(reply: Any) -> list[StyleCheck] | None:
    """``{"checks": [{"name", "weight", "source"}, ...]}`` -> checks (validated later)."""
    value = reply.get("checks") if isinstance(reply, dict) else reply
    if not isinstance(value, list):
        return None
    checks = []
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            item = {}
        source = item.get("source", item.get("code"))
        weight = item.get("weight", 1.0)
        # A malformed item is kept as an invalid check so that validation drops and counts it.
        checks.append(StyleCheck(str(item.get("name") or f"check_{i}"), source, weight))
    return checks


def _format_references(references: Sequence[str]) -> str:
    if len(references) == 1:
        return references[0].strip()
    return "\n\n".join(f"## Reference {i + 1}\n{r.strip()}" for i, r in enumerate(references))


def propose_one(row: dict, cfg: SynthesizeConfig, client: LlmClient) -> Components | None:
    """Components of one row from three requests; ``None`` if any reply does not parse."""
    question, refs = str(row.get("prompt", "")).strip(), list(row["references"])
    shown = _format_references(refs)
    points = parse_key_points(parse_json(client.complete(
        render("key_points", question=question, references=shown))), cfg.max_key_points)
    if points is None:
        return None
    numbered = "\n".join(f"{i + 1}. {p}" for i, p in enumerate(points))
    keywords = parse_keywords(parse_json(client.complete(
        render("keywords", question=question, references=shown, key_points=numbered))), len(points))
    if keywords is None:
        return None
    checks = parse_checks(parse_json(client.complete(
        render("style_checks", question=question, references=shown))))
    if checks is None:
        return None
    return Components(str(row["id"]), points, keywords, checks, refs)


def propose(rows: Sequence[dict], cfg: SynthesizeConfig, client: LlmClient | None = None,
            stats: SynthesisStats | None = None) -> list[Components]:
    """Unvalidated components of the rows whose replies parse; the others are counted."""
    client = client if client is not None else make_client(cfg.llm)
    workers = cfg.llm.concurrency if getattr(client, "concurrent", False) else 1
    if workers > 1 and len(rows) > 1:
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="synthesis-llm")
        try:
            drafts = list(pool.map(lambda row: propose_one(row, cfg, client), rows))
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
    else:
        drafts = [propose_one(row, cfg, client) for row in rows]
    unparseable = sum(d is None for d in drafts)
    if stats is not None:
        stats.dropped_unparseable += unparseable
    if unparseable:
        log.warning("%d of %d examples dropped: a model reply did not parse as the JSON asked for",
                    unparseable, len(rows))
    return [d for d in drafts if d is not None]
