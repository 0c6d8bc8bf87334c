"""The held-out callback keeps its history, collapse monitor and best weights across a resume.

A resumed run (after `kill -9`, or `dvc repro` of a finished stage, which deletes `best/` and
`run.json` first) must report the same held-out history and collapse events as an uninterrupted
run, not restart them at the checkpoint. Fakes stand in for the model and the trainer state.
"""

import json
import math
from pathlib import Path
from types import SimpleNamespace

from models.callbacks import HeldoutCallback
from models.collapse import CollapseConfig, CollapseMonitor


class FakeModel:
    training = True

    def __init__(self):
        self.saved = 0

    def eval(self):
        self.training = False

    def train(self):
        self.training = True

    def save_pretrained(self, path):
        self.saved += 1
        Path(path).mkdir(parents=True, exist_ok=True)
        (Path(path) / "model.safetensors").write_text(f"weights {self.saved}")


# Held-out score at each evaluation step, and the train reward logged before it: the score peaks
# at step 4 then falls while the reward rises (reward hacking, confirmed after `patience` = 2).
SCORES = {0: 0.5, 2: 0.7, 4: 0.8, 6: 0.5, 8: 0.3, 10: 0.2}
REWARDS = {s: 0.1 * s for s in SCORES}


def _callback(out: Path) -> HeldoutCallback:
    """The callback under test; `_drive` sets `next_score`, the held-out score it will see (the
    test split's, the collapse label's curve, is that score minus 0.05)."""
    cb = HeldoutCallback(lambda model: {"arith/pass@1": cb.next_score}, every=2,
                         headline="arith/pass@1",
                         monitor=CollapseMonitor(CollapseConfig(patience=2, min_drop=0.1)),
                         best_dir=out / "best",
                         label_fn=lambda model: {"arith/pass@1": cb.next_score - 0.05})
    return cb


def _drive(cb: HeldoutCallback, out: Path, steps, model, save_every=4):
    """Call the callback as the Trainer would for `steps`; returns the steps it saved at."""
    args = SimpleNamespace(output_dir=str(out))
    saved = []
    for step in steps:
        state = SimpleNamespace(global_step=step, log_history=[{"step": step, "reward": REWARDS[step]}])
        control = SimpleNamespace(should_save=step > 0 and step % save_every == 0,
                                  should_training_stop=False)
        cb.next_score = SCORES[step]
        if step == 0:
            cb.on_train_begin(args, state, control, model=model)
        else:
            cb.on_step_end(args, state, control, model=model)
        if control.should_save:
            (out / f"checkpoint-{step}").mkdir(parents=True)
            saved.append(step)
    return saved


def _comparable(history):
    return [{k: v for k, v in h.items() if not (isinstance(v, float) and math.isnan(v))}
            for h in history]


def test_resume_restores_history_monitor_and_best(tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    full = _callback(straight)
    _drive(full, straight, sorted(SCORES), FakeModel())
    assert [e.kind for e in full.monitor.events] == ["reward_hacking"]

    first = _callback(resumed)
    assert _drive(first, resumed, [0, 2, 4, 6], FakeModel()) == [4]
    # kill -9 after step 6: the newest complete checkpoint is 4. A new process resumes from it.
    second = _callback(resumed)
    assert second.restore(resumed / "checkpoint-4")
    assert [h["step"] for h in second.history] == [0, 2, 4]
    assert [h["step"] for h in second.label_history] == [0, 2, 4]
    assert second.monitor.best_step == 4 and second.monitor.steps == [0, 2, 4]
    _drive(second, resumed, [6, 8, 10], FakeModel())

    assert _comparable(second.history) == _comparable(full.history)
    # The test curve is whole from the base on (once, it restarted at the checkpoint: a resumed
    # run's curve began at step 75 and its "first evaluation" was not the base).
    assert second.label_history == full.label_history
    assert [h["step"] for h in second.label_history] == sorted(SCORES)
    assert second.monitor.events == full.monitor.events
    assert (second.monitor.best_step, second.monitor.best_heldout) == (4, 0.8)


def test_best_weights_survive_the_deletion_of_best(tmp_path):
    cb = _callback(tmp_path)
    model = FakeModel()
    _drive(cb, tmp_path, sorted(SCORES), model)
    cb.publish_best()
    best = tmp_path / "best" / "model.safetensors"
    # Saved at steps 0, 2 and 4 (each a new best); step 4's weights are the published ones.
    assert model.saved == 3 and best.read_text() == "weights 3"
    best.unlink()
    (tmp_path / "best").rmdir()  # what `dvc repro` does to an output before running the stage
    cb.publish_best()
    assert best.read_text() == "weights 3"
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob(".*.tmp"))


def test_state_is_written_before_the_checkpoint_and_kept_beside_it(tmp_path):
    cb = _callback(tmp_path)
    _drive(cb, tmp_path, [0, 2, 4], FakeModel())
    path = HeldoutCallback.state_path(tmp_path / "checkpoint-4")
    assert path == tmp_path / "heldout_state" / "checkpoint-4.json"
    data = json.loads(path.read_text())
    assert [h["step"] for h in data["history"]] == [0, 2, 4] and data["last_step"] == 4
    assert [h["step"] for h in data["label_history"]] == [0, 2, 4]


def test_a_state_file_without_a_test_curve_restores_the_rest(tmp_path):
    """A state file written before the test curve was saved with it: the held-out history and the
    monitor come back, the test curve starts at the checkpoint (the reader leaves it out)."""
    cb = _callback(tmp_path)
    _drive(cb, tmp_path, [0, 2, 4], FakeModel())
    path = HeldoutCallback.state_path(tmp_path / "checkpoint-4")
    data = json.loads(path.read_text())
    del data["label_history"]
    path.write_text(json.dumps(data))
    again = _callback(tmp_path)
    assert again.restore(tmp_path / "checkpoint-4")
    assert [h["step"] for h in again.history] == [0, 2, 4] and again.label_history == []


def test_a_checkpoint_without_state_restarts_the_history_and_says_so(tmp_path, caplog):
    (tmp_path / "checkpoint-4").mkdir()
    cb = _callback(tmp_path)
    assert cb.restore(tmp_path / "checkpoint-4") is False
    assert cb.history == [] and "held-out history restarts" in caplog.text


def test_the_monitor_reads_a_hybrid_raw_component(tmp_path):
    """A hybrid's summed reward is 0 on average (batch-standardised components); the monitor
    reads the raw component it is told to (`MethodPlan.monitor_reward`), so hacking through it is
    seen as 'reward holds', and the flat sum is not what it compares."""
    def drive(reward_key):
        cb = HeldoutCallback(lambda model: {"arith/pass@1": cb.next_score}, every=2,
                             headline="arith/pass@1",
                             monitor=CollapseMonitor(CollapseConfig(patience=2, min_drop=0.1)),
                             reward_key=reward_key)
        args = SimpleNamespace(output_dir=str(tmp_path))
        for step in SCORES:
            # TRL's summed reward drifts slightly down; the raw component rises.
            logs = [{"step": step, "reward": -0.01 * step, "hybrid/rlme": REWARDS[step]}]
            state = SimpleNamespace(global_step=step, log_history=logs)
            control = SimpleNamespace(should_save=False, should_training_stop=False)
            cb.next_score = SCORES[step]
            (cb.on_train_begin if step == 0 else cb.on_step_end)(args, state, control, model=FakeModel())
        return cb

    raw = drive("hybrid/rlme")
    assert [h["train/reward"] for h in raw.history[1:]] == [REWARDS[s] for s in list(SCORES)[1:]]
    assert [h["step"] for h in raw.history if h.get("events") == ["reward_hacking"]] == [8]
    assert not any(h.get("events") for h in drive("reward").history)
