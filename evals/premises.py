"""A base's premises: what the label-free rewards assume of the base they start from, measured.

Self-certainty (Intuitor), entropy minimisation (RENT, EM-RL) and TTRL's majority vote select
among what the base already samples, and the two confidence rewards read the base's own
distributions. Each claim about them therefore rests on a property of the base's prior, which
this module measures on a benchmark's test rows (the `premises` stage, `flows/premises.py`,
writes them for the study's base):

- ``premise/token_entropy``: the mean over the base's greedy completions of each completion's
  mean token entropy H(p_t) in nats (`rewards.confidence.token_entropy`: the quantity the
  `entropy` reward minimises);
- ``premise/self_certainty_auroc``: the AUROC of each sampled completion's self-certainty (the
  `self_certainty` reward, `rewards.confidence.self_certainty`) against its correctness
  (`rewards.verifiable.rlvr_score`), over the k samples of every row; None, with
  ``premise/self_certainty_auroc_note`` saying why, where it is undefined (one class only);
- ``premise/pass@1``, ``premise/pass@<k>``, ``premise/maj@<k>`` of the k samples at the
  evaluation temperature (`evals.metrics.answer_metrics`, `majority_metrics`: TTRL's vote);
- ``premise/pass@1_leaked`` and ``premise/pass@1_clean`` where rows carry a boolean ``leaked``
  field (a base whose SFT saw a share of the test items); omitted otherwise.

Both confidence measures score a completion's tokens as the tokenizer encodes its decoded text
(the sampler returns text): the EOS a completion stopped on is not scored, and a completion with
no token (an immediate EOS) is left out of both, counted in ``premise/empty_completions``.

:data:`PREMISES` names each premise a claim can require, with its threshold and why;
:func:`holds` reads one from a measured dict. Where the thresholds come from: docs/premises.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from evals.metrics import aggregate, answer_metrics, majority_metrics
from rewards.verifiable import rlvr_score

__all__ = ["K", "PREMISES", "VERSION", "Premise", "auroc", "distinct_share", "holds",
           "measure_premises", "summarise", "verdicts"]

# Bumped whenever a measure changes meaning (lm-eval's task version).
VERSION = "1"
# Samples per row: pass@16 and maj@16, as the premises are stated (docs/premises.md).
K = 16
# Float32 logits one teacher-forced pass may hold (rows x completion length x vocabulary): the
# whole batch for the tiny model, one row at a time for a 152k vocabulary at 2,048 tokens.
LOGITS_BYTES = 2**30


class Premise(NamedTuple):
    """A premise holds when ``premises[measure]`` − ``premises[minus]`` (0 without one) is at
    least ``threshold``."""

    measure: str
    minus: str | None
    threshold: float
    why: str


PREMISES: dict[str, Premise] = {
    "confidence_tracks_correctness": Premise(
        "premise/self_certainty_auroc", None, 0.7,
        "self-certainty can only reward correct answers if it ranks them above wrong ones; 0.7 is "
        "the issue's target, well clear of the 0.5 of no signal at a few hundred samples"),
    "room_to_sharpen": Premise(
        "premise/token_entropy", None, 0.3,
        "entropy and self-certainty rewards sharpen the distribution; a pretrained model's "
        "reasoning tokens carry about 0.3-1 nat, and near 0 there is nothing left to sharpen"),
    "latent_skill": Premise(
        f"premise/pass@{K}", "premise/pass@1", 0.2,
        "a reward that selects among the base's samples can at most lift pass@1 toward pass@k; "
        "a gap of 0.2 leaves room for gains several standard errors wide at 200 test rows"),
    "majority_beats_sample": Premise(
        f"premise/maj@{K}", "premise/pass@1", 0.05,
        "TTRL's pseudo-label is the majority vote: it teaches more right than wrong answers only "
        "where maj@k is above pass@1"),
    "leak_memorised": Premise(
        "premise/pass@1_leaked", "premise/pass@1_clean", 0.2,
        "a leaked base answers the items its SFT saw better than clean ones; only measured where "
        "the rows say which are leaked"),
}


def holds(premises: dict, name: str) -> tuple[bool | None, float | None]:
    """(whether premise ``name`` holds, its value) on a measured dict; (None, None) where a
    measure it reads is missing or undefined (None).

    >>> holds({"premise/pass@16": 0.7, "premise/pass@1": 0.3}, "latent_skill")
    (True, 0.39999999999999997)
    >>> holds({"premise/self_certainty_auroc": None}, "confidence_tracks_correctness")
    (None, None)
    """
    if name not in PREMISES:
        raise KeyError(f"unknown premise {name!r}; known: {', '.join(PREMISES)}")
    p = PREMISES[name]
    value = premises.get(p.measure)
    minus = premises.get(p.minus) if p.minus else 0.0
    if value is None or minus is None:
        return None, None
    value = float(value) - float(minus)
    return value >= p.threshold, value


def verdicts(premises: dict) -> dict[str, bool | None]:
    """``holds/<name>`` of every premise in :data:`PREMISES` (None where undefined)."""
    return {f"holds/{name}": holds(premises, name)[0] for name in PREMISES}


def auroc(scores: Sequence[float], correct: Sequence[bool]) -> float | None:
    """AUROC of ``scores`` for ``correct`` (scikit-learn's ``roc_auc_score``): the chance that a
    correct item outscores a wrong one, ties counted half. None with fewer than two classes.

    >>> auroc([0.9, 0.8, 0.3, 0.1], [True, False, True, False])   # 3 of 4 pairs ordered
    0.75
    >>> auroc([0.9, 0.1], [True, True]) is None
    True
    """
    if len(scores) != len(correct):
        raise ValueError(f"auroc: {len(scores)} scores for {len(correct)} labels")
    labels = np.asarray(correct, dtype=bool)
    if labels.size == 0 or labels.all() or not labels.any():
        return None
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(labels, np.asarray(scores, dtype=float)))


def distinct_share(samples: Sequence[str]) -> float | None:
    """The share of a row's samples that are distinct texts (1/k: all identical; 1: all differ).

    >>> distinct_share(["a", "a", "b", "a"]), distinct_share([])
    (0.5, None)
    """
    return len(set(samples)) / len(samples) if samples else None


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None


def summarise(rows: Sequence[dict], greedy: Sequence[str], samples: Sequence[Sequence[str]],
              greedy_entropy: Sequence[float | None],
              certainty: Sequence[Sequence[float | None]]) -> dict[str, Any]:
    """The premises from texts and per-completion scores (no model): each row's greedy
    completion and its mean token entropy, its k samples (as scored: the visible answer) and
    each sample's self-certainty. None marks a completion with no token.

    >>> rows = [{"prompt": "1+1=", "answer": "2"}, {"prompt": "2+2=", "answer": "4"}]
    >>> out = summarise(rows, [r"\\boxed{2}", r"\\boxed{5}"],
    ...                 [[r"\\boxed{2}", r"\\boxed{3}"], [r"\\boxed{5}", r"\\boxed{5}"]],
    ...                 [0.2, 0.4], [[2.0, 1.0], [1.5, 0.5]])
    >>> out["premise/token_entropy"], out["premise/pass@1"], out["premise/pass@2"]
    (0.30000000000000004, 0.25, 0.5)
    >>> out["premise/self_certainty_auroc"], out["premise/maj@2"]
    (1.0, 0.5)
    """
    if not rows:
        raise ValueError("no rows to measure the premises on")
    n = len(rows)
    if not (len(greedy) == len(samples) == len(greedy_entropy) == len(certainty) == n):
        raise ValueError(f"summarise: {n} rows, {len(greedy)} greedy completions, {len(samples)} "
                         f"sample lists, {len(greedy_entropy)} entropies, {len(certainty)} "
                         "certainty lists: one each per row")
    k = len(samples[0])
    if k == 0 or any(len(s) != k or len(c) != k for s, c in zip(samples, certainty)):
        raise ValueError("summarise: every row needs the same k >= 1 samples, each with a "
                         "certainty score (None for a completion with no token)")
    per_row = [{**answer_metrics(list(s), g, r["answer"]), **majority_metrics(list(s), r["answer"]),
                "distinct_share": distinct_share(s)}
               for r, g, s in zip(rows, greedy, samples)]
    pooled = aggregate(per_row)
    scored = [(c, bool(rlvr_score(s, r["answer"])))
              for r, ss, cs in zip(rows, samples, certainty) for s, c in zip(ss, cs) if c is not None]
    out: dict[str, Any] = {
        "premise/n": n, "premise/k": k,
        "premise/token_entropy": _mean(greedy_entropy),
        "premise/self_certainty_auroc": auroc([c for c, _ in scored], [ok for _, ok in scored]),
        "premise/self_certainty_correct": _mean([c for c, ok in scored if ok]),
        "premise/self_certainty_wrong": _mean([c for c, ok in scored if not ok]),
        "premise/empty_completions": (sum(e is None for e in greedy_entropy)
                                      + sum(c is None for cs in certainty for c in cs)),
        "premise/pass@1": pooled["pass@1"], f"premise/pass@{k}": pooled["pass@k"],
        f"premise/maj@{k}": pooled["maj@k"], "premise/greedy_accuracy": pooled["greedy_accuracy"],
        "premise/boxed_rate": pooled["boxed_rate"], "premise/distinct_share": pooled["distinct_share"],
    }
    if out["premise/self_certainty_auroc"] is None:
        right = sum(ok for _, ok in scored)
        out["premise/self_certainty_auroc_note"] = (
            f"undefined: AUROC needs correct and wrong completions; of {len(scored)} scored "
            f"completions {right} are correct")
    leaked = [r.get("leaked") for r in rows]
    if any(flag is not None for flag in leaked):
        if not all(isinstance(flag, bool) for flag in leaked):
            raise ValueError("rows mark a leak with a boolean `leaked` field on every row")
        for name, side in (("leaked", True), ("clean", False)):
            out[f"premise/pass@1_{name}"] = _mean([m["pass@1"] for m, flag in zip(per_row, leaked)
                                                  if flag is side])
        out["premise/n_leaked"] = sum(flag is True for flag in leaked)
    return out


def _scores(model, tokenizer, prompts: list[str], texts: list[str], score: str,
            rows_per_pass: int) -> list[float | None]:
    """One confidence score per (prompt, completion text); None for a text with no token."""
    from models.confidence_trainer import score_completions

    ids = tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []
    values = score_completions(model, tokenizer, prompts, ids, score, rows_per_pass=rows_per_pass)
    return [float(v) if len(i) else None for v, i in zip(values, ids)]


def measure_premises(model, tokenizer, rows: list[dict], *, k: int = K, temperature: float = 1.0,
                     max_new_tokens: int = 64, batch_size: int = 64, seed: int = 0,
                     chat=None) -> dict[str, Any]:
    """The premises (module docstring) of ``model`` on ``rows`` (each with ``prompt`` and
    ``answer``): one greedy completion and ``k`` samples at ``temperature`` per row, drawn with
    ``seed`` (`models.generation.generate`), then one teacher-forced pass per ``batch_size``
    completions (fewer where their logits would pass `LOGITS_BYTES`) for the confidence scores
    (`models.confidence_trainer.score_completions`).
    ``chat`` (a `rewards.chat.ChatFormat`; None = auto) renders the prompts as training does; the
    answers are scored on the visible text after a think block (`rewards.chat.strip_thinking`)."""
    from models.generation import generate
    from rewards.chat import ChatFormat, strip_thinking

    if not rows:
        raise ValueError("no rows to measure the premises on (an empty test split?)")
    missing = [i for i, r in enumerate(rows) if "prompt" not in r or "answer" not in r]
    if missing:
        raise ValueError(f"row {missing[0]} has no `prompt` or no `answer`: the premises need both")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    chat = chat or ChatFormat()
    rows_per_pass = max(1, min(batch_size, LOGITS_BYTES // (4 * max_new_tokens * len(tokenizer))))
    visible = strip_thinking if chat.applies(tokenizer) else (lambda text: text)
    seen = [chat.render(tokenizer, r["prompt"]) for r in rows]
    kw: dict[str, Any] = dict(max_new_tokens=max_new_tokens, batch_size=batch_size, seed=seed)
    greedy = [g[0] for g in generate(model, tokenizer, seen, greedy=True, **kw)]
    samples = generate(model, tokenizer, seen, num_samples=k, temperature=temperature, **kw)
    model.eval()
    entropy = [None if e is None else -e
               for e in _scores(model, tokenizer, seen, greedy, "neg_entropy", rows_per_pass)]
    flat = _scores(model, tokenizer, [p for p in seen for _ in range(k)],
                   [s for ss in samples for s in ss], "self_certainty", rows_per_pass)
    certainty = [flat[i * k:(i + 1) * k] for i in range(len(rows))]
    return summarise(rows, [visible(g) for g in greedy], [[visible(s) for s in ss] for ss in samples],
                     entropy, certainty)
