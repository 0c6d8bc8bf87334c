"""Trainer callbacks: periodic held-out evaluation during GRPO (issue 3 §5, feeds issue 9)."""

from __future__ import annotations

from collections.abc import Callable

from transformers import TrainerCallback


class HeldoutCallback(TrainerCallback):
    """Every `every` steps (and at the end), score the policy on held-out data.

    `score_fn(model) -> dict` does the work; `sink(metrics, step)` records it (MLflow in the
    train flow), so this module stays free of tracking code. The history is kept for plots.
    """

    def __init__(self, score_fn: Callable[[object], dict], every: int,
                 sink: Callable[[dict, int], None] | None = None):
        self.score_fn, self.every, self.sink = score_fn, every, sink
        self.history: list[dict] = []

    def _run(self, model, step: int) -> None:
        was_training = model.training
        model.eval()
        metrics = self.score_fn(model)
        if was_training:
            model.train()
        self.history.append({"step": step, **metrics})
        if self.sink:
            self.sink(metrics, step)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if state.global_step == 0 and model is not None:
            self._run(model, 0)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if model is not None and state.global_step % self.every == 0:
            self._run(model, state.global_step)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        if model is not None and (not self.history or self.history[-1]["step"] != state.global_step):
            self._run(model, state.global_step)
