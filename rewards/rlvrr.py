"""`rlvrr`: the TRL reward callable of the reference reward chain (paper 002).

:class:`RlvrrReward` (``rlvrr_chain``) scores a generation batch against the offline components of
the `synthesize` stage (``data/components/<task>_<split>.jsonl``, schema in synthesis/README.md),
found by each row's ``prompt_id``; the maths is :mod:`rewards.reference_chain`. All style checks of
a batch go to the sandbox in ONE round trip; completions are cut at the first special-token text
before scoring; a row without components gets ``None`` (the reward does not apply). Options are
paper 002's Table 3 ablations (``mode="direct"``, ``single_ref``, ``content_only``,
``content_weight``).

Decisions and their reasons: docs/methods/rlvrr.md.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from core import ranks
from core.io import DataError, iter_jsonl
from rewards.chat import strip_thinking
from rewards.reference_chain import ContentMode, chain_reward, content_reward, style_reward
from rewards.sandbox import DEFAULT_CPU_SECONDS, StyleSandbox
from rewards.verifiable import completion_text

VERSION = "1"

# Special-token texts cut from completions decoded with their special tokens: the tiny world's,
# and the common EOS / end-of-turn markers of Qwen, Llama 3, Mistral/Llama 2 and Gemma.
DEFAULT_SPECIAL_TOKENS = ("<|endoftext|>", "<|pad|>", "<|im_end|>", "<|eot_id|>",
                          "<|end_of_text|>", "</s>", "<pad>", "<eos>", "<end_of_turn>")


class _Prompt(NamedTuple):
    """Precomputed components of one prompt."""

    references: tuple[str, ...]
    keywords: tuple[tuple[str, ...], ...]
    sources: tuple[str, ...]
    checks: tuple[tuple[str, float], ...]


def load_components(paths: str | Path | Iterable[str | Path], single_ref: bool = False
                    ) -> dict[str, _Prompt]:
    """Components by prompt id from one or more JSONL files; a bad row is a DataError naming it."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    table: dict[str, _Prompt] = {}
    for path in paths:
        for n, row in enumerate(iter_jsonl(path, required=("id", "keywords", "style_checks",
                                                            "references")), 1):
            where = f"{path}: row {n} (id={row.get('id')!r})"
            key = str(row["id"])
            if key in table:
                raise DataError(f"{where}: duplicate id")
            table[key] = _parse_row(row, where, single_ref)
    return table


def _parse_row(row: dict, where: str, single_ref: bool) -> _Prompt:
    refs, keywords, checks = row["references"], row["keywords"], row["style_checks"]
    if not isinstance(refs, list) or not refs or not all(isinstance(r, str) for r in refs):
        raise DataError(f"{where}: `references` must be a non-empty list of strings")
    if not isinstance(keywords, list) or not all(
            isinstance(k, list) and all(isinstance(w, str) for w in k) for k in keywords):
        raise DataError(f"{where}: `keywords` must be a list of lists of strings")
    parsed: list[tuple[str, float]] = []
    for check in checks if isinstance(checks, list) else [None]:
        source = check.get("source") if isinstance(check, dict) else None
        weight = check.get("weight") if isinstance(check, dict) else None
        if not isinstance(source, str) or isinstance(weight, bool) \
                or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight < 0:
            raise DataError(f"{where}: `style_checks` must be objects with a string `source` "
                            f"and a finite `weight` >= 0")
        parsed.append((source, float(weight)))
    if parsed and sum(w for _, w in parsed) <= 0:
        raise DataError(f"{where}: style check weights are all zero")
    return _Prompt(
        references=tuple(refs[:1] if single_ref else refs),
        keywords=tuple(tuple(k) for k in keywords),
        sources=tuple(s for s, _ in parsed),
        checks=tuple(parsed),
    )


class RlvrrReward:
    """TRL reward function ``rlvrr_chain``: ``chain_reward(r_c, r_s)`` per completion.

    ``components`` is one components JSONL or several (train and val, so held-out prompts are
    scored too). ``sandbox`` defaults to a private :class:`StyleSandbox` (its worker starts on
    the first call; the object pickles to its settings, as TRL expects). ``tokenizer``, if
    given, adds its special tokens to the texts cut from completions.
    """

    def __init__(
        self,
        components: str | Path | Iterable[str | Path],
        *,
        mode: ContentMode = "ordered",
        single_ref: bool = False,
        content_only: bool = False,
        content_weight: float = 0.5,
        prompt_id_column: str = "prompt_id",
        special_tokens: Sequence[str] = DEFAULT_SPECIAL_TOKENS,
        tokenizer: Any = None,
        sandbox: StyleSandbox | None = None,
        cpu_seconds: float = DEFAULT_CPU_SECONDS,
    ) -> None:
        self.__name__ = "rlvrr_chain"
        if mode not in ("ordered", "direct"):
            raise ValueError(f"unknown content mode {mode!r}; valid modes: direct, ordered")
        if not 0.0 <= content_weight <= 1.0:
            raise ValueError(f"content_weight must be in [0, 1], got {content_weight}")
        self.mode = mode
        self.single_ref = single_ref
        self.content_only = content_only
        self.content_weight = content_weight
        self.prompt_id_column = prompt_id_column
        self.table = load_components(components, single_ref=single_ref)
        tokens = set(special_tokens)
        if tokenizer is not None:
            tokens.update(t for t in getattr(tokenizer, "all_special_tokens", []) if t)
        tokens.discard("")
        self._cut = re.compile("|".join(re.escape(t) for t in sorted(tokens, key=len, reverse=True))) \
            if tokens else None
        self.sandbox = sandbox if sandbox is not None else StyleSandbox(cpu_seconds=cpu_seconds)
        self.last_content: list[float | None] = []
        self.last_style: list[float | None] = []

    def clean(self, completion: Any) -> str:
        """The completion's text up to its first special token, stripped; a reasoning model's
        reply only (after its think block: `rewards.chat.strip_thinking`)."""
        text = strip_thinking(completion_text(completion))
        if self._cut is not None:
            match = self._cut.search(text)
            if match:
                text = text[:match.start()]
        return text.strip()

    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        completion_ids: Sequence[Sequence[int]] | None = None,
        **columns: Any,
    ) -> list[float | None]:
        """TRL contract: one reward per completion, ``None`` where no components exist."""
        if self.prompt_id_column not in columns:
            raise KeyError(f"rlvrr needs the dataset column {self.prompt_id_column!r}; "
                           f"columns passed: {sorted(columns)}")
        ids = columns[self.prompt_id_column]
        if len(ids) != len(completions):
            raise ValueError(f"{len(ids)} prompt ids but {len(completions)} completions")
        texts = [self.clean(c) for c in completions]
        found = [self.table.get(str(pid)) if pid is not None else None for pid in ids]
        styles = self._style_results(ids, texts, found)
        rewards: list[float | None] = []
        self.last_content, self.last_style = [], []
        for i, (text, prompt) in enumerate(zip(texts, found)):
            if prompt is None:
                content = style = None
            else:
                content = content_reward(text, prompt.references, prompt.keywords, self.mode)
                results = styles.get(i)
                style = None if results is None else style_reward(text, prompt.checks, results)
            self.last_content.append(content)
            self.last_style.append(style)
            rewards.append(None if prompt is None
                           else chain_reward(content, style, self.content_weight))
        # The logged parts cover the global batch: every rank's, in rank order.
        parts = ranks.gather_objects((self.last_content, self.last_style))
        self.last_content = [v for content, _ in parts for v in content]
        self.last_style = [v for _, style in parts for v in style]
        return rewards

    def _style_results(self, ids: Sequence[Any], texts: list[str], found: list[_Prompt | None]
                       ) -> dict[int, list[bool]]:
        """Check results per completion index, from ONE sandbox round trip for the batch."""
        if self.content_only or self.content_weight == 1.0:
            return {}
        members: dict[str, list[int]] = {}
        for i, (pid, prompt) in enumerate(zip(ids, found)):
            if prompt is not None and prompt.sources:
                members.setdefault(str(pid), []).append(i)
        if not members:
            return {}
        keys = list(members)
        matrices = self.sandbox.run_groups(
            [(self.table[k].sources, [texts[i] for i in members[k]]) for k in keys])
        out: dict[int, list[bool]] = {}
        for key, matrix in zip(keys, matrices):
            for column, i in enumerate(members[key]):
                out[i] = [row[column] for row in matrix]
        return out

    def metrics(self) -> dict[str, float]:
        """Means of the last call's parts (``rlvrr/content``, ``rlvrr/style``) for logging."""
        out = {}
        for name, values in (("content", self.last_content), ("style", self.last_style)):
            present = [v for v in values if v is not None]
            if present:
                out[f"rlvrr/{name}"] = statistics.fmean(present)
        return out

    def close(self) -> None:
        """Stop the sandbox worker (a later call starts a new one)."""
        self.sandbox.close()


def build(ctx: Any):
    """The RLVRR plan (a `rewards.MethodContext`): components of the task's train and val splits."""
    from rewards import MethodPlan

    cfg, task = ctx.cfg, ctx.grpo.task
    files = [ctx.components / f"{task}_{split}.jsonl" for split in ("train", "val")]
    missing = [str(f) for f in files if not f.exists()]
    if missing:
        raise FileNotFoundError(f"rlvrr needs the synthesis stage's components: missing {', '.join(missing)} "
                                f"(run `dvc repro synthesize`)")
    reward = RlvrrReward(files, mode=cfg.content_mode, single_ref=cfg.single_ref,
                         content_only=cfg.content_only, content_weight=cfg.content_weight,
                         tokenizer=ctx.tokenizer, cpu_seconds=cfg.cpu_seconds)
    return MethodPlan([reward], loggers=[reward])
