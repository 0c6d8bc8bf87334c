"""Trainer callback: periodic held-out evaluation that feeds collapse detection (SPEC 10).

Every `every` steps the policy is scored on held-out data; the score, the train reward since the
previous evaluation, entropy, completion length and clipped ratio go to a `CollapseMonitor`. The
callback keeps the best checkpoint by held-out score, reports events through `on_event`, and
stops training on an event when the collapse config asks for it. Recording (MLflow) is injected
as `sink`/`on_event`, so this module stays free of tracking code.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path

from transformers import TrainerCallback

from models.collapse import CollapseEvent, CollapseMonitor

log = logging.getLogger(__name__)

# TRL log keys averaged since the previous evaluation.
_TRAIN_KEYS = {"reward": "reward", "entropy": "entropy", "length": "completions/mean_length",
               "clipped_ratio": "completions/clipped_ratio"}


class HeldoutCallback(TrainerCallback):
    """Score the policy every `every` steps (and at the start and end), watch for collapse."""

    def __init__(self, score_fn: Callable[[object], dict], every: int, headline: str,
                 monitor: CollapseMonitor | None = None, best_dir: Path | None = None,
                 tokenizer=None, sink: Callable[[dict, int], None] | None = None,
                 on_event: Callable[[CollapseEvent], None] | None = None):
        self.score_fn, self.every, self.headline = score_fn, every, headline
        self.monitor, self.best_dir, self.tokenizer = monitor, best_dir, tokenizer
        self.sink, self.on_event = sink, on_event
        self.history: list[dict] = []
        self._last_step = -1

    def _train_means(self, state) -> dict[str, float | None]:
        logs = [h for h in state.log_history if self._last_step < h.get("step", -1) <= state.global_step]
        out = {}
        for name, key in _TRAIN_KEYS.items():
            vals = [h[key] for h in logs if key in h]
            out[name] = sum(vals) / len(vals) if vals else None
        return out

    def _run(self, model, state, control) -> None:
        step = state.global_step
        was_training = model.training
        model.eval()
        metrics = self.score_fn(model)
        if was_training:
            model.train()
        score = metrics.get(self.headline)
        train = self._train_means(state)
        self._last_step = step
        record = {"step": step, **metrics, **{f"train/{k}": v for k, v in train.items()}}
        if self.monitor is not None:
            best_before = self.monitor.best_heldout
            events = self.monitor.update(step, train["reward"], score, train["entropy"],
                                         train["length"], train["clipped_ratio"])
            metrics = {**metrics, **self.monitor.metrics()}
            if self.best_dir is not None and self.monitor.best_step == step and (
                    best_before is None or score > best_before):
                model.save_pretrained(self.best_dir)
                if self.tokenizer is not None:
                    self.tokenizer.save_pretrained(self.best_dir)
            for e in events:
                log.warning("collapse detected: %s at step %d: %s", e.kind, e.step, e.message)
                record.setdefault("events", []).append(e.kind)
                if self.on_event:
                    self.on_event(e)
            if self.monitor.should_stop:
                log.warning("early stop at step %d (collapse.early_stop)", step)
                control.should_training_stop = True
        self.history.append(record)
        if self.sink:
            self.sink({k: v for k, v in metrics.items()
                       if isinstance(v, (int, float)) and not math.isnan(v)}, step)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if state.global_step == 0 and model is not None:
            self._run(model, state, control)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if model is not None and state.global_step % self.every == 0 and state.global_step != self._last_step:
            self._run(model, state, control)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        if model is not None and state.global_step != self._last_step:
            self._run(model, state, control)


class MetricsCallback(TrainerCallback):
    """At every logging step, log the metrics of a method's own objects (`metrics() -> dict`):
    RLME's per-question probabilities, RLVRR's content/style parts, the GenRM's malformed rate."""

    def __init__(self, loggers, sink: Callable[[dict, int], None]):
        self.loggers, self.sink = list(loggers), sink

    def on_log(self, args, state, control, logs=None, **kwargs):
        metrics = {}
        for obj in self.loggers:
            metrics.update({k: v for k, v in obj.metrics().items() if math.isfinite(v)})
        if metrics:
            self.sink(metrics, state.global_step)
