"""`ttrl`: Test-Time RL's majority-vote reward (arXiv 2504.16084; docs/methods/ttrl.md).

The group's extracted answers vote; the most voted answer is the pseudo-label, and a completion
whose answer matches it earns 1.0, any other 0.0. No label is read: the policy's own consensus is
the reward. Rules (SPEC §12, the tiny world's choices marked in the docs page):

- answers are the last ``\\boxed{}`` (:func:`rewards.verifiable.extract_boxed`) and compare with
  :func:`rewards.verifiable.answers_match`, so ``1,000`` and ``1000`` are one class;
- a completion without an answer (no box, or an empty one) gets 0.0 and does not vote;
- ties: the answer class whose first member comes first in the group wins (TTRL's
  ``Counter.most_common`` keeps insertion order for equal counts the same way);
- every answer missing: every reward 0.0;
- ``voters`` (``reward.ttrl.vote_samples``, default the whole group): only the first ``voters``
  completions vote; every completion is rewarded against their label (TTRL votes over more
  samples than it trains on; the tiny world votes over the group itself, **(ours)**).

:func:`majority_label` is also the maj@k metric of evaluation (``evals.metrics.answer_metrics``).

`empo`: EMPO's semantic-cluster share (arXiv 2504.05812; docs/methods/empo.md), the same answer
classes without a vote. A completion's reward is the share of the group in its answer's cluster,
|cluster| / G (G counts every completion of the group, answered or not); a completion without an
answer gets 0.0. The clusters are :func:`majority_label`'s classes (each answer joins the first
class whose first member it ``answers_match``es), so a group's largest cluster is TTRL's label (on a
tie TTRL's first class alone earns 1.0; here the tied clusters earn the same share). Reads no label.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from rewards.verifiable import answers_match, completion_text, extract_boxed

VERSION = "1"

__all__ = ["VERSION", "ClusterShareReward", "MajorityVoteReward", "answer_clusters", "build",
           "build_empo", "cluster_share_rewards", "has_answer", "majority_label",
           "majority_vote_rewards", "semantic_entropy"]


def has_answer(answer: str | None) -> bool:
    """An extracted answer that can vote or be graded: present and not blank.

    >>> has_answer("7"), has_answer(" "), has_answer(None)
    (True, False, False)
    """
    return answer is not None and bool(answer.strip())


def majority_label(answers: Sequence[str | None]) -> tuple[str | None, int]:
    """(the most voted answer, its votes): classes by :func:`answers_match` against each class's
    first member, ties to the class that appears first; (None, 0) when no answer is present.

    >>> majority_label(["3", None, "4", "4", "3"])
    ('3', 2)
    >>> majority_label(["1,000", "1000", "7"])
    ('1,000', 2)
    >>> majority_label([None, ""])
    (None, 0)
    """
    firsts: list[str] = []  # each class's first member, in order of appearance
    counts: list[int] = []
    for a in answers:
        if not has_answer(a):
            continue
        assert a is not None
        for i, first in enumerate(firsts):
            if answers_match(a, first):
                counts[i] += 1
                break
        else:
            firsts.append(a)
            counts.append(1)
    if not counts:
        return None, 0
    best = int(np.argmax(counts))  # the first maximum: the earliest class wins a tie
    return firsts[best], counts[best]


def majority_vote_rewards(answers: Sequence[str | None], voters: int | None = None) -> np.ndarray:
    """TTRL's reward [G] of one group from its extracted answers (None = no answer).

    1.0 where the answer matches the majority label of the first ``voters`` answers (None = all),
    else 0.0; all 0.0 when none of the voters answered.

    >>> majority_vote_rewards(["3", "4", None, "4"]).tolist()
    [0.0, 1.0, 0.0, 1.0]
    >>> majority_vote_rewards(["3", "4"]).tolist()   # a tie: the first class wins
    [1.0, 0.0]
    >>> majority_vote_rewards(["3", "4", "4"], voters=1).tolist()
    [1.0, 0.0, 0.0]
    >>> majority_vote_rewards([None, None]).tolist(), majority_vote_rewards([]).tolist()
    ([0.0, 0.0], [])
    """
    if voters is not None and voters < 1:
        raise ValueError(f"voters must be at least 1, got {voters}")
    label, _ = majority_label(list(answers)[:voters])
    if label is None:
        return np.zeros(len(answers))
    return np.array([1.0 if has_answer(a) and answers_match(a, label) else 0.0 for a in answers])


class MajorityVoteReward:
    """TRL reward function for TTRL: each group's completions vote (module docstring).

    Groups are consecutive blocks of ``num_generations`` completions of the GLOBAL generation batch
    (TRL's layout): on N ranks each rank holds a slice, so the answers are gathered, voted on, and
    each rank keeps its own slice. Logs through TRL's ``log_metric``: ``ttrl/majority_ratio`` (votes
    of the label / group size), ``ttrl/no_answer`` (share of completions without an answer) and,
    when the dataset has an ``answer`` column, ``ttrl/label_accuracy`` (share of groups whose label
    is the gold answer, TTRL's diagnostic; the reward never reads the gold).
    """

    def __init__(self, num_generations: int, vote_samples: int | None = None) -> None:
        if num_generations < 1:
            raise ValueError(f"num_generations must be at least 1, got {num_generations}")
        if vote_samples is not None and not 1 <= vote_samples <= num_generations:
            raise ValueError(f"reward.ttrl.vote_samples={vote_samples} must be between 1 and the "
                             f"group size {num_generations} (null = the whole group)")
        self.__name__ = "ttrl_majority"
        self.num_generations = num_generations
        self.vote_samples = vote_samples

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any],
                 answer: Sequence[Any] | None = None, **kwargs: Any) -> list[float]:
        from core import ranks

        mine = [extract_boxed(completion_text(c)) for c in completions]
        golds = list(answer) if answer is not None else [None] * len(mine)
        rows, start = ranks.gather_rows(list(zip(mine, golds, strict=True)))
        G = self.num_generations
        if len(rows) % G:
            raise ValueError(f"ttrl: a generation batch of {len(rows)} completions is not whole "
                             f"groups of {G}")
        rewards: list[float] = []
        ratios, hits = [], []
        for i in range(0, len(rows), G):
            group = [a for a, _ in rows[i:i + G]]
            label, votes = majority_label(group[:self.vote_samples])
            rewards.extend(majority_vote_rewards(group, self.vote_samples).tolist())
            ratios.append(votes / G)
            gold = rows[i][1]
            if gold is not None:
                hits.append(float(label is not None and answers_match(label, str(gold))))
        log_metric = kwargs.get("log_metric")
        if log_metric is not None:  # global values: the same on every rank
            log_metric("ttrl/majority_ratio", float(np.mean(ratios)))
            log_metric("ttrl/no_answer", float(np.mean([not has_answer(a) for a, _ in rows])))
            if hits:
                log_metric("ttrl/label_accuracy", float(np.mean(hits)))
        return rewards[start:start + len(completions)]


def build(ctx: Any) -> Any:
    """TTRL's plan: the majority-vote reward over each group of ``grpo.num_generations``."""
    from rewards import MethodPlan

    return MethodPlan([MajorityVoteReward(ctx.grpo.num_generations, ctx.cfg.vote_samples)])


# --- empo: the semantic-cluster share (arXiv 2504.05812) ----------------------------------------

def _answers(answers: Sequence[str | None], who: str) -> list[str | None]:
    """The group's answers as a list, or an error naming what is wrong: an empty group, or an
    answer that is neither a string nor None (an extracted answer, :func:`extract_boxed`)."""
    out = list(answers)
    if not out:
        raise ValueError(f"{who}: an empty group; a group has at least one completion")
    for i, a in enumerate(out):
        if a is not None and not isinstance(a, str):
            raise TypeError(f"{who}: answer {i} is {type(a).__name__} {a!r}; answers are the "
                            "extracted strings (rewards.verifiable.extract_boxed), None = no answer")
    return out


def answer_clusters(answers: Sequence[str | None]) -> list[int | None]:
    """The cluster of each answer, numbered in order of first appearance; None for a completion
    without an answer. The classes of :func:`majority_label`: an answer joins the first cluster
    whose first member it ``answers_match``es.

    >>> answer_clusters(["3", None, "4", "3.0", " ", "1,000", "1000"])
    [0, None, 1, 0, None, 2, 2]
    """
    firsts: list[str] = []
    out: list[int | None] = []
    for a in _answers(answers, "answer_clusters"):
        if not has_answer(a):
            out.append(None)
            continue
        assert a is not None
        for i, first in enumerate(firsts):
            if answers_match(a, first):
                out.append(i)
                break
        else:
            firsts.append(a)
            out.append(len(firsts) - 1)
    return out


def cluster_share_rewards(answers: Sequence[str | None]) -> np.ndarray:
    """EMPO's reward [G] of one group from its extracted answers (None = no answer): the share of
    the group in each completion's answer cluster, |cluster| / G; 0.0 without an answer.

    Worked example: G = 5, clusters {"4": 2, "3": 1} and two completions without an answer.

    >>> cluster_share_rewards(["4", "3", None, "4", ""]).tolist()
    [0.4, 0.2, 0.0, 0.4, 0.0]
    >>> cluster_share_rewards(["3", "4"]).tolist()   # a tie: both clusters earn the same share
    [0.5, 0.5]
    >>> cluster_share_rewards([None, None]).tolist()
    [0.0, 0.0]
    """
    clusters = answer_clusters(_answers(answers, "cluster_share_rewards"))
    sizes = Counter(c for c in clusters if c is not None)
    return np.array([0.0 if c is None else sizes[c] / len(clusters) for c in clusters])


def semantic_entropy(answers: Sequence[str | None]) -> float | None:
    """The entropy (nats) of the group's answer clusters, -sum_c p_c log p_c with p_c the share of
    the ANSWERED completions in cluster c: the quantity EMPO lowers. None without any answer.

    >>> round(semantic_entropy(["4", "3", None, "4"]), 4)   # p = (2/3, 1/3)
    0.6365
    >>> semantic_entropy(["4", "4.0"]), semantic_entropy([None])
    (0.0, None)
    """
    clusters = [c for c in answer_clusters(answers) if c is not None]
    if not clusters:
        return None
    p = np.bincount(clusters) / len(clusters)
    return float(-(p * np.log(p)).sum()) + 0.0


class ClusterShareReward:
    """TRL reward function for EMPO: each group's answer clusters (module docstring).

    Groups are consecutive blocks of ``num_generations`` completions of the GLOBAL generation batch
    (TRL's layout), gathered across ranks as :class:`MajorityVoteReward` does; each rank keeps its
    own slice. Logs through TRL's ``log_metric``: ``empo/semantic_entropy`` (mean over the groups
    with an answer), ``empo/top_share`` (the largest cluster's share of G), ``empo/no_answer``
    (share of completions without an answer) and, when the dataset has an ``answer`` column,
    ``empo/label_accuracy`` (share of groups whose largest cluster is the gold answer, a
    diagnostic; the reward never reads the gold).
    """

    def __init__(self, num_generations: int) -> None:
        if num_generations < 1:
            raise ValueError(f"num_generations must be at least 1, got {num_generations}")
        self.__name__ = "empo_cluster_share"
        self.num_generations = num_generations

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any],
                 answer: Sequence[Any] | None = None, **kwargs: Any) -> list[float]:
        from core import ranks

        mine = [extract_boxed(completion_text(c)) for c in completions]
        golds = list(answer) if answer is not None else [None] * len(mine)
        rows, start = ranks.gather_rows(list(zip(mine, golds, strict=True)))
        G = self.num_generations
        if len(rows) % G:
            raise ValueError(f"empo: a generation batch of {len(rows)} completions is not whole "
                             f"groups of {G}")
        rewards: list[float] = []
        entropies, tops, hits = [], [], []
        for i in range(0, len(rows), G):
            group = [a for a, _ in rows[i:i + G]]
            shares = cluster_share_rewards(group)
            rewards.extend(shares.tolist())
            tops.append(float(shares.max()))
            h = semantic_entropy(group)
            if h is not None:
                entropies.append(h)
            gold = rows[i][1]
            if gold is not None:
                label, _ = majority_label(group)
                hits.append(float(label is not None and answers_match(label, str(gold))))
        log_metric = kwargs.get("log_metric")
        if log_metric is not None:  # global values: the same on every rank
            if entropies:
                log_metric("empo/semantic_entropy", float(np.mean(entropies)))
            log_metric("empo/top_share", float(np.mean(tops)))
            log_metric("empo/no_answer", float(np.mean([not has_answer(a) for a, _ in rows])))
            if hits:
                log_metric("empo/label_accuracy", float(np.mean(hits)))
        return rewards[start:start + len(completions)]


def build_empo(ctx: Any) -> Any:
    """EMPO's plan: the cluster-share reward over each group of ``grpo.num_generations``."""
    from rewards import MethodPlan

    return MethodPlan([ClusterShareReward(ctx.grpo.num_generations)])
