"""Pure metric helpers shared by every benchmark: answer accuracy, pass@k, self-BLEU, row pooling.

Nothing here runs a model or reads a file, so every function is testable on hand-written strings.

Scale: every number the suite reports is on [0, 1], self-BLEU included (sacreBLEU's 0-100 score
divided by 100), so one plot axis and one collapse threshold fit every metric.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from rewards.majority import majority_label
from rewards.verifiable import answers_match, extract_boxed, rlvr_score


class Ratio(NamedTuple):
    """A per-row metric pooled over rows as sum(num) / sum(den) (a micro-average).

    IFEval's instruction-level accuracy counts instructions, not prompts (Zhou et al. 2023 §3), and
    a per-subgroup accuracy (MATH by level) exists only on some rows: both need pooling, not a
    mean of per-row means.
    """

    num: float
    den: float


def answer_metrics(samples: list[str], greedy: str, gold: str) -> dict:
    """Accuracy of boxed final answers: pass@1 (mean over samples), pass@k (any), greedy, boxed rate.

    pass@k here is the plain "any of the k samples is right", which equals the unbiased estimator
    `pass_at_k(k, c, k)` when n = k.

    >>> answer_metrics([r"\\boxed{4}", r"\\boxed{5}", "no box"], r"\\boxed{4}", "4")["pass@1"]
    0.3333333333333333
    """
    acc = [rlvr_score(s, gold) for s in samples]
    return {"pass@1": float(np.mean(acc)), "pass@k": float(max(acc)),
            "greedy_accuracy": rlvr_score(greedy, gold),
            "boxed_rate": float(np.mean([extract_boxed(s) is not None for s in samples]))}


def majority_metrics(samples: list[str], gold: str) -> dict:
    """maj@k: 1.0 when the majority vote of the samples' boxed answers is the gold answer (the
    vote TTRL trains on, :func:`rewards.majority.majority_label`: equivalent answers are one
    class, samples without an answer do not vote, ties go to the class seen first), else 0.0;
    0.0 when no sample answers.

    >>> majority_metrics([r"\\boxed{4}", r"\\boxed{5}", r"\\boxed{4.0}", "no box"], "4")
    {'maj@k': 1.0}
    >>> majority_metrics([r"\\boxed{5}", r"\\boxed{4}"], "4")   # a tie: the first answer wins
    {'maj@k': 0.0}
    """
    label, _ = majority_label([extract_boxed(s) for s in samples])
    return {"maj@k": 1.0 if label is not None and answers_match(label, gold) else 0.0}


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c are correct (Chen et al. 2021, §2.1 and Fig. 3).

    1 - C(n-c, k) / C(n, k), computed as a running product so large n neither overflows nor loses
    precision. Drawing more samples than k and using this estimator lowers the variance of pass@k
    compared with drawing exactly k.

    >>> pass_at_k(10, 0, 1), pass_at_k(10, 10, 5), round(pass_at_k(10, 3, 1), 6), pass_at_k(5, 1, 2)
    (0.0, 1.0, 0.3, 0.4)
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    if n - c < k:  # every k-subset holds a correct sample
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


@lru_cache(maxsize=1)
def _bleu():
    from sacrebleu.metrics import BLEU  # import on first use: only evaluation needs it

    # Sentence-level settings of `sacrebleu.sentence_bleu`: effective order (short samples are not
    # zeroed by missing 4-grams) and exponential smoothing.
    return BLEU(effective_order=True)


def self_bleu(samples: list[str]) -> float | None:
    """Diversity of one prompt's samples: mean BLEU of each sample against all the others.

    Self-BLEU (Zhu et al. 2018, Texygen §3.2): each sample in turn is the hypothesis and the rest
    are its references; higher means less diverse. sacreBLEU's sentence BLEU with its default `13a`
    tokenizer, divided by 100. Identical samples give 1.0, samples sharing no word give 0.0; an
    empty sample scores 0.0 against anything. None for fewer than two samples (no pair to compare).

    >>> self_bleu(["the cat sat", "the cat sat"]), self_bleu(["a b", "c d"]), self_bleu(["x"])
    (1.0, 0.0, None)
    """
    if len(samples) < 2:
        return None
    bleu = _bleu()
    scores = [bleu.sentence_score(s, samples[:i] + samples[i + 1:]).score
              for i, s in enumerate(samples)]
    return round(float(np.mean(scores)) / 100.0, 12)  # sacreBLEU's 100.00000000000004 -> 1.0


def aggregate(per_row: Iterable[dict], keep_greedy: bool = True) -> dict[str, float]:
    """Pool per-row metric dicts into one number per key, in first-seen key order.

    float: mean over the rows that report the key; `Ratio`: sum of numerators over sum of
    denominators; None: the metric does not apply to that row (skipped). Keys starting with
    `greedy` are dropped when no greedy completion was generated.

    >>> aggregate([{"a": 1.0, "r": Ratio(1, 2)}, {"a": 0.0, "r": Ratio(3, 3)}, {"a": None}])
    {'a': 0.5, 'r': 0.8}
    """
    sums: dict[str, list[float]] = {}
    for row in per_row:
        for key, value in row.items():
            if value is None or (not keep_greedy and key.startswith("greedy")):
                continue
            num, den = value if isinstance(value, Ratio) else (float(value), 1.0)
            acc = sums.setdefault(key, [0.0, 0.0])
            acc[0] += num
            acc[1] += den
    return {key: (num / den if den else 0.0) for key, (num, den) in sums.items()}
