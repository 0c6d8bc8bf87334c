"""A progress line a person can read during a pipeline run (`make run`, `make study`).

The stages' own output (TRL's per-step dictionaries, DVC's messages) still streams into the log
line by line; every minute, and whenever a stage ends, the pipeline (flows/pipeline.py) adds one
line that says how far the whole run is and where each running stage stands:

    progress: 5/20 stages done; train@rlme-0 step 40/150, ETA 9 min; evaluate@rlvr-0 running 2 min

A training's step and total come from its MLflow run (`tasks.tracking.training_progress`); its
ETA is the rate seen since the pipeline first saw it times the steps left, so a training resumed
from a checkpoint is not credited with the steps it did before. Stages without steps (prepare,
evaluate, report) show how long they have been running.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def minutes(seconds: float) -> str:
    """A duration as a person reads it in a log.

    >>> minutes(20), minutes(90), minutes(599), minutes(3725)
    ('<1 min', '2 min', '10 min', '1 h 02 min')
    """
    m = int(round(seconds / 60))
    if m < 1:
        return "<1 min"
    return f"{m} min" if m < 60 else f"{m // 60} h {m % 60:02d} min"


def eta_seconds(step: int, total: int, first_step: int, first_s: float, now_s: float) -> float | None:
    """Seconds left at the rate seen since (`first_step`, `first_s`); None before a step passed.

    >>> eta_seconds(40, 150, 10, 0.0, 300.0)  # 30 steps in 300 s, 110 left
    1100.0
    >>> eta_seconds(10, 150, 10, 0.0, 300.0) is None
    True
    """
    if step <= first_step or now_s <= first_s:
        return None
    return (now_s - first_s) / (step - first_step) * max(0, total - step)


@dataclass
class Board:
    """The running stages' start times and the first step seen of each (times in seconds, from
    any clock: the pipeline passes time.monotonic(), tests pass numbers).

    >>> b = Board()
    >>> b.start("train@rlme-0", 0.0); b.start("evaluate@rlvr-0", 0.0)
    >>> b.observe("train@rlme-0", 10, 150, 60.0)
    >>> b.observe("train@rlme-0", 40, 150, 360.0)
    >>> b.line(5, 20, 480.0)
    'progress: 5/20 stages done; train@rlme-0 step 40/150, ETA 18 min; evaluate@rlvr-0 running 8 min'
    >>> b.end("train@rlme-0"); b.line(6, 20, 480.0)
    'progress: 6/20 stages done; evaluate@rlvr-0 running 8 min'
    """

    started: dict[str, float] = field(default_factory=dict)
    first: dict[str, tuple[int, float]] = field(default_factory=dict)
    last: dict[str, tuple[int, int, float]] = field(default_factory=dict)

    def start(self, stage: str, now_s: float) -> None:
        self.started[stage] = now_s

    def end(self, stage: str) -> None:
        self.started.pop(stage, None)
        self.first.pop(stage, None)
        self.last.pop(stage, None)

    def observe(self, stage: str, step: int, total: int, now_s: float) -> None:
        """A training's step of its total, as seen at `now_s`."""
        self.first.setdefault(stage, (step, now_s))
        self.last[stage] = (step, total, now_s)

    def part(self, stage: str, now_s: float) -> str:
        if stage in self.last:
            step, total, seen_s = self.last[stage]
            first_step, first_s = self.first[stage]
            eta = eta_seconds(step, total, first_step, first_s, seen_s)
            return f"{stage} step {step}/{total}" + (f", ETA {minutes(eta)}" if eta is not None else "")
        return f"{stage} running {minutes(now_s - self.started.get(stage, now_s))}"

    def line(self, done: int, total: int, now_s: float) -> str:
        parts = [f"{done}/{total} stages done"] + [self.part(s, now_s) for s in self.started]
        return "progress: " + "; ".join(parts)
