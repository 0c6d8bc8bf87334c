"""`rationale`: the GenRM's TRL reward (paper 001 §4.1) and the per-output scoring it shares
with evaluation (`evals.pairs`).

The policy here IS the generative reward model: it reads a context and responses A and B, lists
reasons by importance, then a boxed verdict. :class:`GenrmReward` parses each output into its
ordered reasons and verdict (:mod:`rewards.rationale`), scores the reasons against the row's human
checklist with a matcher (:mod:`rewards.matchers`), and pays by ``mode``: ``hybrid`` (the method,
AP x outcome), ``outcome`` (variant ``genrm_outcome``) or ``ap_only`` (variant
``rationale_ap_only``, the hacking mode the paper warns of). Nothing here knows the tiny world: the
checklist and label column names are parameters.

Decisions and their reasons (malformed outputs, rows without a checklist, what is logged):
docs/methods/rationale.md.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from core import ranks
from rewards.chat import strip_thinking
from rewards.matchers import Matcher, make_matcher
from rewards.rationale import (
    hybrid_reward,
    optimal_matching,
    outcome_reward,
    parse_reasons,
    parse_verdict,
    rationale_ap,
    script_metrics,
)
from rewards.verifiable import completion_text

# The `rationale` method's reward version: bumped when this glue (parsing, malformed rule, modes)
# or the maths it calls in rewards.rationale changes meaning.
VERSION = "1"

Mode = Literal["outcome", "hybrid", "ap_only"]
MODES = ("outcome", "hybrid", "ap_only")
SCRIPT_KEYS = ("ap_script", "precision", "recall", "f1")


@dataclass(frozen=True)
class GenrmScore:
    """One GenRM output scored against one row. ``ap`` / ``rc`` are None without a checklist."""

    verdict: str | None
    reasons: tuple[str, ...]
    malformed: bool
    outcome: float
    ap: float | None
    rc: float | None
    # AP, precision, recall, F1 as the paper's analysis script computes them (evaluation only;
    # :func:`rewards.rationale.script_metrics`); None without a checklist.
    script: dict[str, float] | None = None

    def reward(self, mode: Mode) -> float | None:
        """The training reward of this output in ``mode`` (0 for a malformed output)."""
        if self.malformed:
            return 0.0
        if mode == "outcome":
            return self.outcome
        if self.ap is None:
            return None
        return hybrid_reward(self.ap, self.outcome) if mode == "hybrid" else self.ap


def parse_output(text: str) -> tuple[str | None, list[str]]:
    """(verdict, reasons in output order) of one GenRM output.

    >>> parse_output("\\n1. Response B: the first step is wrong.\\nVerdict: \\\\boxed{A>B}")
    ('A>B', ['Response B: the first step is wrong.'])
    """
    return parse_verdict(text), parse_reasons(text)


def score_outputs(texts: Sequence[str], checklists: Sequence[Sequence[str] | None],
                  labels: Sequence[Any], matcher: Matcher, top_k: int | None = None
                  ) -> list[GenrmScore]:
    """Score a batch of GenRM outputs, one row (checklist, label) per output.

    ``top_k`` keeps only the first k reasons (evaluation, paper §2.3); None keeps all (training).
    The matcher sees the whole batch at once (``Matcher.many``). AP (paper Eq. 3) and RC (matched
    total / |R_h|, paper Eq. 2 for one example) come from the same S.
    """
    # A reasoning GenRM's reasons and verdict are its reply, after the think block.
    parsed = [parse_output(strip_thinking(completion_text(t))) for t in texts]
    reasons = [r if top_k is None else r[:top_k] for _, r in parsed]
    malformed = [v is None or not r for (v, _), r in zip(parsed, reasons)]
    todo = [(i, list(c)) for i, (bad, c) in enumerate(zip(malformed, checklists)) if not bad and c]
    matrices = dict(zip([i for i, _ in todo], matcher.many([(c, reasons[i]) for i, c in todo])))
    out = []
    for i, ((verdict, _), label) in enumerate(zip(parsed, labels)):
        has_checklist = bool(checklists[i])
        if malformed[i]:
            zero = 0.0 if has_checklist else None
            script = dict.fromkeys(SCRIPT_KEYS, 0.0) if has_checklist else None
            out.append(GenrmScore(verdict, tuple(reasons[i]), True, 0.0, zero, zero, script))
            continue
        S = matrices.get(i)
        ap = rationale_ap(S) if S is not None else None
        rc = optimal_matching(S)[0] / S.shape[0] if S is not None else None
        script = script_metrics(S) if S is not None else None
        out.append(GenrmScore(verdict, tuple(reasons[i]), False, outcome_reward(verdict, label),
                              ap, rc, script))
    return out


class GenrmReward:
    """TRL reward function ``rationale_<mode>`` for a GenRM policy (paper 001 §3.1).

    ``matcher`` is a :class:`rewards.matchers.Matcher` or a backend name. Dataset columns
    ``checklist_column`` (list of human atomic reasons) and ``label_column`` ('A' / 'B' / 'tie',
    a direction or a verdict) arrive as keyword lists aligned with the completions (TRL contract).
    The last batch's means are kept for :meth:`metrics`.
    """

    def __init__(self, mode: Mode = "hybrid", matcher: Matcher | str = "lexical", *,
                 checklist_column: str = "checklist", label_column: str = "label") -> None:
        if mode not in MODES:
            raise ValueError(f"unknown rationale mode {mode!r}; valid modes: {', '.join(MODES)}")
        self.__name__ = f"rationale_{mode}"
        self.mode = mode
        self.matcher = make_matcher(matcher) if isinstance(matcher, str) else matcher
        self.checklist_column = checklist_column
        self.label_column = label_column
        self.malformed = 0      # malformed outputs seen since construction
        self.seen = 0           # outputs seen since construction
        self.last: list[GenrmScore] = []

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any],
                 completion_ids: Sequence[Sequence[int]] | None = None,
                 **columns: Any) -> list[float | None]:
        """TRL contract: one reward per completion; None where the row has no checklist (AP modes)."""
        missing = [c for c in (self.checklist_column, self.label_column) if c not in columns]
        if missing:
            raise KeyError(f"{self.__name__} needs the dataset column(s) {missing}; "
                           f"columns passed: {sorted(columns)}")
        checklists, labels = columns[self.checklist_column], columns[self.label_column]
        if not len(checklists) == len(labels) == len(completions):
            raise ValueError(f"{len(completions)} completions but {len(checklists)} checklists "
                             f"and {len(labels)} labels")
        scores = score_outputs(completions, checklists, labels, self.matcher)
        # Metrics and counts over the global batch (every rank's scores, rank order); the matcher's
        # own counters (`genrm/matcher_*`) stay this process's.
        self.last = [s for part in ranks.gather_objects(scores) for s in part]
        self.seen += len(self.last)
        self.malformed += sum(s.malformed for s in self.last)
        return [s.reward(self.mode) for s in scores]

    def metrics(self) -> dict[str, float]:
        """Last batch: mean AP, outcome accuracy, malformed rate; plus running malformed count.

        Keys ``genrm/...`` (the matcher's counters as ``genrm/matcher_...``), the prefix the
        training curves keep (the ``rationale`` entry's ``metrics`` in ``core.methods``).

        >>> r = GenrmReward()
        >>> r([""] * 2, ["1. The step is wrong. \\\\boxed{A>B}", "no verdict"],
        ...   checklist=[["The step is wrong."]] * 2, label=["A", "A"])
        [1.0, 0.0]
        >>> r.metrics()["genrm/malformed_rate"], r.metrics()["genrm/ap"]
        (0.5, 0.5)
        """
        out: dict[str, float] = {"genrm/malformed": float(self.malformed)}
        if self.last:
            out["genrm/malformed_rate"] = float(np.mean([s.malformed for s in self.last]))
            out["genrm/outcome_acc"] = statistics.fmean(s.outcome for s in self.last)
            aps = [s.ap for s in self.last if s.ap is not None]
            if aps:
                out["genrm/ap"] = statistics.fmean(aps)
        out.update({f"genrm/matcher_{k}": v for k, v in self.matcher.metrics().items()})
        return out


def build(ctx: Any) -> Any:
    """The `rationale` method's plan: one GenrmReward, also logged as a metrics source.

    ``ctx.cfg`` is ``params.reward.rationale`` (mode, matcher). The ``llm`` matcher reaches its
    judge with :func:`rewards.matchers.default_judge_settings` (endpoint and key from the
    environment).
    """
    from rewards import MethodPlan

    cfg = ctx.cfg
    reward = GenrmReward(mode=cfg.mode, matcher=make_matcher(cfg.matcher))
    return MethodPlan(reward_funcs=[reward], loggers=[reward])
