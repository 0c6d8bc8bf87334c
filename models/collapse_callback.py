"""`CollapseCallback`: the lab's collapse alarms (models/collapse.py) in anyone's TRL training.

The lab's own runs watch for collapse in `models.callbacks.HeldoutCallback`, which evaluates the
policy on the lab's held-out split and records to MLflow. This callback runs the same
:class:`models.collapse.CollapseMonitor` inside a user's own ``GRPOTrainer`` (docs/use_in_your_trainer.md):

- **What it reads**: what TRL logs at every logging step (the train ``reward``, ``entropy``,
  ``completions/mean_length``, ``completions/clipped_ratio``) and, for reward hacking, a score
  the reward cannot fool: ``heldout_fn(model) -> float`` (e.g. accuracy on a few labelled
  held-out problems), or ``heldout_key``, a value already in the logs (e.g.
  ``rewards/rlvr_correct/mean`` of a verifiable reward given weight 0, logged but not trained
  on, or an ``eval_...`` key of ``trainer.evaluate``). Without either, the entropy and length
  alarms still run.
- **When**: an evaluation every ``every`` optimiser steps (at the first training log at or past
  it, and at the last step), over the means of the training logs since the previous one, as the
  lab's runs evaluate every ``grpo.heldout_every`` steps; with ``heldout_fn``, also once before the
  first step (the start's score).
- **Where its results go**: at each evaluation the monitor's flags (``collapse/reward_hacking``,
  ``collapse/entropy``, ``collapse/length``: 0 or 1; ``collapse/best_step``,
  ``collapse/best_heldout``, ``collapse/heldout``) are logged through the trainer, so they reach
  whatever ``report_to`` the run uses and ``trainer.state.log_history`` (the trainer is handed over
  by ``rewards.api.attach(trainer)`` or the constructor; without it they go to the log history
  only). Each event is also a warning in the Python log and one JSON line in
  ``<args.output_dir>/collapse_events.jsonl`` (kind, step, message and the values the monitor
  saw), appended, written by the main process. With ``CollapseConfig(early_stop=True)`` the first
  event stops training.

On N processes every rank sees the same logs (TRL gathers its metrics), so every rank's monitor
reaches the same verdict and they stop together; ``heldout_fn`` is called on every rank and must
give every rank the same score. A resumed run starts a new monitor.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformers import Trainer, TrainerCallback

from models.collapse import CollapseConfig, CollapseEvent, CollapseMonitor

log = logging.getLogger(__name__)

__all__ = ["EVENTS_FILE", "TRL_KEYS", "CollapseCallback"]

# What TRL's GRPOTrainer logs at each logging step, by the monitor's name for it.
TRL_KEYS = {"entropy": "entropy", "length": "completions/mean_length",
            "clipped_ratio": "completions/clipped_ratio"}
EVENTS_FILE = "collapse_events.jsonl"


def _mean(values: list[Any]) -> float | None:
    finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return sum(finite) / len(finite) if finite else None


class CollapseCallback(TrainerCallback):
    """The collapse alarms as a ``transformers.TrainerCallback`` (module docstring).

    ``trainer``: the trainer it logs through (or ``rewards.api.attach(trainer)`` later).
    ``heldout_fn`` / ``heldout_key``: the truth reward hacking is judged against (at most one).
    ``every``: optimiser steps between evaluations. ``config``: the detectors' thresholds
    (:class:`models.collapse.CollapseConfig`, the lab's ``collapse`` section).
    ``reward_key``: the logged value read as the train reward (TRL's ``reward``, the weighted sum
    of the reward functions; ``rewards/<name>/mean`` for one of them).
    """

    def __init__(self, trainer: Any = None, *, heldout_fn: Callable[[Any], float] | None = None,
                 heldout_key: str | None = None, every: int = 1, config: CollapseConfig | None = None,
                 reward_key: str = "reward", events_file: str = EVENTS_FILE) -> None:
        if heldout_fn is not None and heldout_key is not None:
            raise ValueError("CollapseCallback: give heldout_fn or heldout_key, not both")
        if every < 1:
            raise ValueError(f"CollapseCallback: every must be at least 1 step, got {every}")
        self.trainer = trainer
        self.heldout_fn, self.heldout_key = heldout_fn, heldout_key
        self.every, self.reward_key, self.events_file = every, reward_key, events_file
        self.monitor = CollapseMonitor(config or CollapseConfig())
        self._window: list[dict] = []      # training logs since the last evaluation
        self._heldout: list[Any] = []      # values of heldout_key since the last evaluation
        self._last_eval = 0                # step of the last evaluation
        self._emitting = False             # inside our own trainer.log

    @property
    def events(self) -> list[CollapseEvent]:
        """The events confirmed so far."""
        return self.monitor.events

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if self.heldout_fn is not None and model is not None and not self.monitor.steps:
            self._last_eval = state.global_step
            self._evaluate(args, state, control, {}, self._score(model))

    def on_log(self, args, state, control, logs=None, model=None, **kwargs):
        if self._emitting or not logs:
            return
        if self.heldout_key is not None and self.heldout_key in logs:
            self._heldout.append(logs[self.heldout_key])
        if self.reward_key not in logs:  # an evaluation's or the end of training's summary
            return
        self._window.append(logs)
        last = bool(state.max_steps) and state.global_step >= state.max_steps
        if state.global_step - self._last_eval < self.every and not last:
            return
        train = {"reward": _mean([h.get(self.reward_key) for h in self._window]),
                 **{name: _mean([h.get(key) for h in self._window]) for name, key in TRL_KEYS.items()}}
        if self.heldout_fn is not None and model is not None:
            heldout = self._score(model)
        else:
            heldout = _mean(self._heldout)
        self._window, self._heldout, self._last_eval = [], [], state.global_step
        self._evaluate(args, state, control, train, heldout)

    def _score(self, model: Any) -> float:
        """``heldout_fn(model)`` with the model in eval mode (put back as it was)."""
        assert self.heldout_fn is not None
        training = bool(getattr(model, "training", False))
        if hasattr(model, "eval"):
            model.eval()
        try:
            return float(self.heldout_fn(model))
        finally:
            if training:
                model.train()

    def _evaluate(self, args, state, control, train: dict[str, float | None],
                  heldout: float | None) -> None:
        step = state.global_step
        if self.monitor.steps and step <= self.monitor.steps[-1]:
            return  # a second training log at the same step (a manual `trainer.log`)
        events = self.monitor.update(step, train.get("reward"), heldout, train.get("entropy"),
                                     train.get("length"), train.get("clipped_ratio"))
        for event in events:
            self._record(args, state, event, {**train, "heldout": heldout})
        metrics: dict[str, float] = {k: float(v) for k, v in self.monitor.metrics().items()
                                     if v is not None}
        if heldout is not None:
            metrics["collapse/heldout"] = heldout
        self._log(state, metrics)
        if self.monitor.should_stop:
            log.warning("collapse: stopping at step %d (CollapseConfig.early_stop)", step)
            control.should_training_stop = True

    def _record(self, args, state, event: CollapseEvent, values: dict[str, float | None]) -> None:
        """A warning in the log and a line of the events file (main process)."""
        if not state.is_world_process_zero:
            return
        log.warning("collapse detected: %s at step %d: %s", event.kind, event.step, event.message)
        path = Path(args.output_dir) / self.events_file
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"kind": event.kind, "step": event.step, "message": event.message,
                                **values}) + "\n")

    def _log(self, state, metrics: dict[str, float]) -> None:
        """Through the trainer, so every report_to callback gets them; else the log history."""
        if self.trainer is None:
            state.log_history.append({**metrics, "step": state.global_step})
            return
        self._emitting = True
        try:
            # transformers' own `log`, not GRPOTrainer's: that one would log the step's metrics
            # it holds a second time with ours.
            Trainer.log(self.trainer, dict(metrics))
        finally:
            self._emitting = False
