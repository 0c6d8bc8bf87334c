"""Trainer callback: periodic held-out evaluation that feeds collapse detection.

Every `every` steps the policy is scored on held-out data; the score, the train reward since the
previous evaluation, entropy, completion length and clipped ratio go to a `CollapseMonitor`. The
callback keeps the best checkpoint by held-out score, reports events through `on_event`, and
stops training on an event when the collapse config asks for it. Recording (MLflow) is injected
as `sink`/`on_event`, so this module stays free of tracking code.

On N ranks (docs/multiprocess.md) every rank calls the callback at the same steps; the main
process alone evaluates, keeps the monitor and the best weights and writes the files, and its
early-stop verdict is broadcast so that every rank stops at the same step.

A run that resumes from a checkpoint keeps its held-out history, its test curve and its collapse
monitor: each saved checkpoint gets `heldout_state/checkpoint-<N>.json` (history, test curve,
monitor, best step), read back by `restore`. The best weights live under `<output_dir>/.best`,
which no DVC output owns, and `publish_best` links them into `best_dir` at the end; so `dvc repro`
deleting `best/` before re-running a finished stage loses nothing. A new best is swapped in
atomically: it is written whole into a folder of its own, `.best/v<step>`, and the symlink
`.best/current` is then replaced by one pointing at it (a rename over a symlink is atomic), so a
kill at any point leaves the previous best whole and current. Removing `.best` removes every version.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from core import ranks
from models.collapse import CollapseEvent, CollapseMonitor

log = logging.getLogger(__name__)

# TRL log keys averaged since the previous evaluation.
_TRAIN_KEYS = {"reward": "reward", "entropy": "entropy", "length": "completions/mean_length",
               "clipped_ratio": "completions/clipped_ratio"}
# Beside the checkpoints: `heldout_state/checkpoint-<N>.json`, written before checkpoint-<N> is
# complete (DefaultFlowCallback has set `should_save` by this callback's `on_step_end`), so a kill
# can never leave a complete checkpoint without its held-out state.
STATE_DIR = "heldout_state"


def _replace_dir(src: Path, dst: Path) -> None:
    """Make `dst` a copy of the folder `src` (hard links where the filesystem allows)."""
    tmp = dst.with_name(f".{dst.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp, copy_function=_link_or_copy)
    shutil.rmtree(dst, ignore_errors=True)
    tmp.rename(dst)


def _fsync_tree(folder: Path) -> None:
    """Flush a folder's files and the folder itself to disk (before it is swapped in)."""
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    _fsync_dir(folder)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


# Share of the process group's timeout a held-out evaluation may take before it is reported: the
# other ranks wait for it in a collective, and past the timeout the group kills them.
NEAR_TIMEOUT = 0.5


def _warn_if_near_timeout(seconds: float, step: int) -> None:
    """Log, on rank 0, a held-out evaluation that took over `NEAR_TIMEOUT` of the process group's
    timeout (`core.ranks.init`, params `grpo.ddp_timeout_s`) on N ranks: the next, longer one
    (the policy's completions grow) may reach it."""
    limit = ranks.timeout_s()
    if limit is None or ranks.world_size() <= 1 or seconds <= NEAR_TIMEOUT * limit:
        return
    log.warning("the held-out evaluation at step %d took %.0f s while %d other rank(s) waited, "
                "%.0f%% of the process group's timeout (grpo.ddp_timeout_s = %.0f s): lower "
                "eval.heldout_n or raise grpo.ddp_timeout_s", step, seconds,
                ranks.world_size() - 1, 100 * seconds / limit, limit)


class HeldoutCallback(TrainerCallback):
    """Score the policy every `every` steps (and at the start and end), watch for collapse."""

    def __init__(self, score_fn: Callable[[object], dict], every: int, headline: str,
                 monitor: CollapseMonitor | None = None, best_dir: Path | None = None,
                 tokenizer=None, sink: Callable[[dict, int], None] | None = None,
                 on_event: Callable[[CollapseEvent], None] | None = None,
                 reward_key: str = "reward", label_fn: Callable[[object], dict] | None = None):
        self.score_fn, self.every, self.headline = score_fn, every, headline
        # The TEST split at the same checkpoints, for the collapse label no alarm reads
        # (flows/alarms.py, `independent`): kept in `label_history`, never given to the monitor,
        # the sink or `history`.
        self.label_fn, self.label_history = label_fn, []
        # The logged key read as the train reward (a hybrid's raw component: MethodPlan.monitor_reward).
        self._keys = {**_TRAIN_KEYS, "reward": reward_key}
        self.monitor, self.best_dir, self.tokenizer = monitor, best_dir, tokenizer
        self.sink, self.on_event = sink, on_event
        self.history: list[dict] = []
        self._last_step = -1
        # Set by `models.grpo.train`: under DeepSpeed ZeRO-3 the weights are gathered for the evaluation.
        self.trainer: Any = None

    def _train_means(self, state) -> dict[str, float | None]:
        logs = [h for h in state.log_history if self._last_step < h.get("step", -1) <= state.global_step]
        out = {}
        for name, key in self._keys.items():
            vals = [h[key] for h in logs if key in h]
            out[name] = sum(vals) / len(vals) if vals else None
        return out

    def _run(self, model, state, control) -> None:
        """Every rank calls this at the same steps. The main process evaluates, keeps the monitor
        and the best weights and records (the other ranks wait at the broadcast); its early-stop
        verdict is broadcast, so every rank stops at the same step."""
        stop = False
        with self._full_weights(model) as full:
            if ranks.is_main():
                started = time.monotonic()
                with ranks.local():  # a reward or scorer called here must not wait for other ranks
                    stop = self._evaluate(full, state)
                _warn_if_near_timeout(time.monotonic() - started, state.global_step)
        if ranks.broadcast(stop):
            control.should_training_stop = True
        self._last_step = state.global_step

    @contextlib.contextmanager
    def _full_weights(self, model):
        """`model` itself, or under DeepSpeed ZeRO-3 the unwrapped model with its parameters gathered
        on every rank for the duration (TRL's helper; a collective, so every rank enters it).
        Not exercised here: no DeepSpeed on the CPU machine this was written on."""
        accelerator = getattr(self.trainer, "accelerator", None)
        plugin = getattr(getattr(accelerator, "state", None), "deepspeed_plugin", None)
        if plugin is None or getattr(plugin, "zero_stage", None) != 3:
            yield model
            return
        from trl.models.utils import unwrap_model_for_generation

        with unwrap_model_for_generation(self.trainer.model_wrapped, accelerator) as unwrapped:
            yield unwrapped

    def _evaluate(self, model, state) -> bool:
        """One held-out evaluation (main process); True when the run should stop early."""
        step = state.global_step
        stop = False
        was_training = model.training
        model.eval()
        metrics = self.score_fn(model)
        if self.label_fn is not None:
            self.label_history.append({"step": step, **self.label_fn(model)})
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
                self._save_best(model)
            for e in events:
                log.warning("collapse detected: %s at step %d: %s", e.kind, e.step, e.message)
                record.setdefault("events", []).append(e.kind)
                if self.on_event:
                    self.on_event(e)
            if self.monitor.should_stop:
                log.warning("early stop at step %d (collapse.early_stop)", step)
                stop = True
        self.history.append(record)
        if self.sink:
            self.sink({k: v for k, v in metrics.items()
                       if isinstance(v, (int, float)) and not math.isnan(v)}, step)
        return stop

    @property
    def _best_root(self) -> Path | None:
        return None if self.best_dir is None else self.best_dir.with_name(".best")

    @property
    def _kept_best(self) -> Path | None:
        """The current best weights: `.best/current` (a symlink to `.best/v<step>`), or `.best`
        itself as runs before the atomic swap left it."""
        root = self._best_root
        if root is None:
            return None
        current = root / "current"
        return current if current.is_symlink() or not root.is_dir() else root

    def _save_best(self, model) -> None:
        """Best weights into `.best/v<step>`, then `.best/current` swapped to them atomically: a
        kill at any point leaves the previous best whole. Main process only (`_evaluate`)."""
        root = self._best_root
        assert root is not None  # only called with a best_dir
        root.mkdir(parents=True, exist_ok=True)
        version = f"v{self._last_step}-{os.getpid()}-{len(self.history)}"
        tmp = root / f"tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(tmp)
        if self.tokenizer is not None:
            self.tokenizer.save_pretrained(tmp)
        _fsync_tree(tmp)
        shutil.rmtree(root / version, ignore_errors=True)
        tmp.rename(root / version)
        link = root / f"current.tmp-{os.getpid()}"
        link.unlink(missing_ok=True)
        link.symlink_to(version)
        os.replace(link, root / "current")  # the swap: atomic
        _fsync_dir(root)
        for stale in root.iterdir():  # older versions, and what a run before the swap left
            if stale.name not in ("current", version):
                if stale.is_dir() and not stale.is_symlink():
                    shutil.rmtree(stale, ignore_errors=True)
                else:
                    stale.unlink(missing_ok=True)

    def publish_best(self) -> None:
        """Link the kept best weights into `best_dir` (the stage output); main process only."""
        if ranks.is_main() and self._kept_best is not None and self._kept_best.exists():
            _replace_dir(self._kept_best, self.best_dir)

    def state_dict(self) -> dict:
        monitor = None if self.monitor is None else {
            f.name: getattr(self.monitor, f.name) for f in dataclasses.fields(self.monitor)
            if f.name != "config"}
        if monitor is not None:
            monitor["events"] = [dataclasses.asdict(e) for e in self.monitor.events]
        return {"history": self.history, "label_history": self.label_history,
                "last_step": self._last_step, "monitor": monitor}

    @staticmethod
    def state_path(checkpoint: Path) -> Path:
        """Where the state that goes with `<output_dir>/checkpoint-<N>` is kept."""
        checkpoint = Path(checkpoint)
        return checkpoint.parent / STATE_DIR / f"{checkpoint.name}.json"

    def restore(self, checkpoint: Path) -> bool:
        """Take the held-out history and monitor saved with `checkpoint`; False if it has none
        (a checkpoint made before this file existed)."""
        path = self.state_path(checkpoint)
        if not path.exists():
            log.warning("%s has no %s: the held-out history restarts here", checkpoint, path)
            return False
        data = json.loads(path.read_text())
        self.history, self._last_step = data["history"], data["last_step"]
        # The test curve (the collapse label's) resumes too; a state file written before it was
        # saved has none, and the curve of such a run lacks the steps before the checkpoint
        # (flows/report_collect.py leaves a curve that does not start at step 0 out).
        self.label_history = data.get("label_history", [])
        if self.monitor is not None and data.get("monitor"):
            for name, value in data["monitor"].items():
                setattr(self.monitor, name, value)
            self.monitor.events = [CollapseEvent(**e) for e in data["monitor"]["events"]]
        return True

    def _write_state(self, args, state) -> None:
        if not ranks.is_main():  # the main process holds the history and the monitor
            return
        path = self.state_path(Path(args.output_dir) / f"checkpoint-{state.global_step}")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.state_dict()))
        tmp.rename(path)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if state.global_step == 0 and model is not None:
            self._run(model, state, control)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if model is not None and state.global_step % self.every == 0 and state.global_step != self._last_step:
            self._run(model, state, control)
        if control.should_save:
            self._write_state(args, state)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        if model is not None and state.global_step != self._last_step:
            self._run(model, state, control)
            if (Path(args.output_dir) / f"checkpoint-{state.global_step}").exists():
                self._write_state(args, state)  # the final evaluation goes with the last checkpoint


# Written into `checkpoint-<N>` last, atomically, once the Trainer has saved everything else:
# only a checkpoint holding it counts for resuming (models/grpo.py `last_checkpoint`).
CHECKPOINT_MARKER = "checkpoint_complete.json"


def mark_checkpoint_complete(checkpoint: Path, step: int) -> None:
    """Flush the checkpoint's files, then write its completion marker atomically (a temporary
    file renamed into place, the folder flushed): a kill at any point leaves either no marker or
    a whole one, and never a marker for files still in the page cache only."""
    checkpoint = Path(checkpoint)
    _fsync_tree(checkpoint)
    tmp = checkpoint / f".{CHECKPOINT_MARKER}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump({"global_step": step}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, checkpoint / CHECKPOINT_MARKER)
    _fsync_dir(checkpoint)


class CheckpointMarker(TrainerCallback):
    """Mark each checkpoint complete once the Trainer has written it (`on_save` runs after the
    weights, optimizer, scheduler, RNG state and trainer_state.json are saved); main process."""

    def on_save(self, args, state, control, **kwargs):
        checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if state.is_world_process_zero and checkpoint.is_dir():
            mark_checkpoint_complete(checkpoint, state.global_step)


class MetricsCallback(TrainerCallback):
    """At every logging step, log the metrics of a method's own objects (`metrics() -> dict`):
    RLME's per-question probabilities, RLVRR's content/style parts, the GenRM's malformed rate."""

    def __init__(self, loggers, sink: Callable[[dict, int], None]):
        self.loggers, self.sink = list(loggers), sink

    def on_log(self, args, state, control, logs=None, **kwargs):
        # The loggers' metrics are global already (each reward gathers its batch across ranks when
        # it is called); only the main process records them, into its one MLflow run.
        if not state.is_world_process_zero:
            return
        metrics = {}
        for obj in self.loggers:
            metrics.update({k: v for k, v in obj.metrics().items() if math.isfinite(v)})
        if metrics:
            self.sink(metrics, state.global_step)
