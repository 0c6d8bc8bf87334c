"""The committed runs in MLflow (flows/mlflow_records.py), checked through MLflow's own API
against a store in tmp_path."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from core.params import ROOT
from flows import mlflow_records as mr
from flows import mlflow_runs as mruns

STEPS = (0, 25, 50, 75)


def _write(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2), encoding="utf-8")


def fake_records(root: Path, methods=("alpha", "beta"), seeds=(0, 1), run_ids=None) -> Path:
    """A records tree like data/: two methods x two seeds with evaluations, curves and run.json,
    and the base's evaluation. `beta` seed 1 falls after its peak (the collapse label)."""
    data = root / "data"
    _write(data / "eval" / "base" / "metrics.json", {"arith/pass@1": 0.30, "arith/n": 200})
    _write(data / "eval" / "base" / "headline.json", {"arith/pass@1": 0.30})
    for m in methods:
        for s in seeds:
            falls = (m, s) == ("beta", 1)
            held = [0.3, 0.7, 0.4, 0.4] if falls else [0.3, 0.4 + 0.1 * s, 0.5 + 0.1 * s, 0.5 + 0.1 * s]
            _write(data / "eval" / m / f"seed{s}" / "metrics.json",
                   {"arith/pass@1": held[-1], "arith/maj@k": 0.5, "arith/n": 200})
            _write(data / "eval" / m / f"seed{s}" / "headline.json", {"arith/pass@1": held[-1]})
            plots = data / "plots" / m / f"seed{s}"
            _write(plots / "train.json", [{"step": st + 5, "reward": 0.1 * i, "entropy": 0.5}
                                          for i, st in enumerate(STEPS)])
            _write(plots / "heldout.json", [{"step": st, "arith/pass@1": v, "arith/n": 100,
                                             "train/reward": None if st == 0 else 0.2}
                                            for st, v in zip(STEPS, held, strict=True)])
            _write(plots / "test.json", [{"step": st, "arith/pass@1": v} for st, v in zip(STEPS, held, strict=True)])
            events = [{"kind": "reward_hacking", "step": 50, "message": "fell"}] if falls else []
            _write(data / "checkpoints" / m / f"seed{s}" / "run.json",
                   {"method": m, "seed": s, "run_id": (run_ids or {}).get((m, s), f"gone{m}{s}"),
                    "config_hash": f"c{m}", "collapsed": bool(events), "collapse_events": events,
                    "steps": 50, "train_seconds": 12.5})
    return root


@pytest.fixture
def store(tmp_path, monkeypatch):
    """The lab's experiment in a fresh sqlite store; (client, experiment id)."""
    from mlflow.tracking import MlflowClient

    from tasks import tracking

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "records-test")
    tracking.setup()
    client = MlflowClient()
    exp = client.get_experiment_by_name("records-test")
    assert exp is not None
    return client, exp.experiment_id


def _runs(client, exp_id, query="tags.source = 'records'"):
    return {r.data.tags["record_key"]: r for r in client.search_runs([exp_id], query, max_results=1000)}


def test_a_records_tree_imports_once_with_its_curves_and_labels(tmp_path, store):
    client, exp = store
    root = fake_records(tmp_path / "repo")
    done = mr.import_records(root, log=lambda _: None)
    assert (done.imported, done.unchanged) == (5, 0)
    runs = _runs(client, exp)
    assert sorted(runs) == ["default/alpha/seed0", "default/alpha/seed1", "default/base",
                            "default/beta/seed0", "default/beta/seed1"]
    run = runs["default/beta/seed1"]
    assert run.info.run_name == "beta-seed1" and run.info.status == "FINISHED"
    tags = run.data.tags
    assert (tags["study"], tags["reward_method"], tags["seed"], tags["task"]) == ("default", "beta", "1", "arith")
    assert (tags["collapse_label"], tags["collapse_label_test"], tags["collapsed"]) == ("collapsed",) * 2 + ("true",)
    assert runs["default/alpha/seed1"].data.tags["collapse_label"] == "healthy"
    assert tags["stale"] == "false" and tags["outdated"] == "unknown"  # no dvc.lock to judge by
    assert tags["base"].startswith("unrecorded:")
    assert run.data.params["seed"] == "1" and run.data.params["config_hash"] == "cbeta"
    # The curves, step-indexed, under the live runs' names (no `@`).
    held = client.get_metric_history(run.info.run_id, "heldout/arith/pass_at_1")
    assert [(m.step, m.value) for m in held] == [(0, 0.3), (25, 0.7), (50, 0.4), (75, 0.4)]
    # MLflow's metric page plots against relative time: the points are spread in step order, not
    # stacked at the import's instant, and the run lasts as long as its last step's time.
    times = [m.timestamp - run.info.start_time for m in held]
    assert times[0] == 0 and times == sorted(times) and len(set(times)) == len(times)
    assert run.info.end_time >= run.info.start_time + times[-1]
    assert [m.step for m in client.get_metric_history(run.info.run_id, "reward")] == [5, 30, 55, 80]
    assert [m.step for m in client.get_metric_history(run.info.run_id, "test_curve/arith/pass_at_1")] == list(STEPS)
    flags = client.get_metric_history(run.info.run_id, "heldout/collapse/reward_hacking")
    assert [(m.step, m.value) for m in flags] == [(0, 0.0), (25, 0.0), (50, 1.0), (75, 1.0)]
    assert "heldout/train/reward" not in run.data.metrics  # the train curve is train.json's
    assert run.data.metrics["test/arith/maj_at_k"] == 0.5
    assert tags["headline_metrics"] == "test/arith/pass_at_1"  # the DVC metric file's keys
    assert runs["default/base"].data.metrics["test/arith/pass_at_1"] == 0.30
    # The note links one chart of the held-out headline with the four trained runs overlaid.
    note = client.get_experiment(exp).tags["mlflow.note.content"]
    assert "default study, arith: `heldout/arith/pass_at_1`, 4 runs of 2 methods" in note
    assert all(runs[k].info.run_id in note for k in runs if k != "default/base")

    again = mr.import_records(root, log=lambda _: None)
    assert (again.imported, again.replaced, again.unchanged, again.removed) == (0, 0, 5, 0)
    assert {k: r.info.run_id for k, r in _runs(client, exp).items()} == {k: r.info.run_id for k, r in runs.items()}
    assert len(client.search_runs([exp], "", max_results=1000)) == 5  # nothing else was created


def test_a_changed_record_replaces_its_run_and_a_gone_one_is_removed(tmp_path, store):
    client, exp = store
    root = fake_records(tmp_path / "repo")
    mr.import_records(root, log=lambda _: None)
    before = _runs(client, exp)
    _write(root / "data" / "eval" / "alpha" / "seed0" / "metrics.json", {"arith/pass@1": 0.9})
    for sub in ("eval", "plots", "checkpoints"):
        shutil.rmtree(root / "data" / sub / "beta" / "seed1")
    done = mr.import_records(root, log=lambda _: None)
    assert (done.replaced, done.unchanged, done.removed) == (1, 3, 1)
    after = _runs(client, exp)
    assert "default/beta/seed1" not in after
    assert after["default/alpha/seed0"].info.run_id != before["default/alpha/seed0"].info.run_id
    assert after["default/alpha/seed0"].data.metrics["test/arith/pass_at_1"] == 0.9
    assert after["default/alpha/seed1"].info.run_id == before["default/alpha/seed1"].info.run_id
    assert client.get_run(before["default/alpha/seed0"].info.run_id).info.lifecycle_stage == "deleted"


def test_a_run_logged_live_in_this_store_is_tagged_not_imported_again(tmp_path, store):
    """flows/train.py writes its MLflow run id into run.json: that run is the record's."""
    client, exp = store
    live = client.create_run(exp, run_name="alpha-seed0", tags={"stage": "train", "reward_method": "alpha",
                                                                 "seed": "0", "preset": "default"})
    root = fake_records(tmp_path / "repo", run_ids={("alpha", 0): live.info.run_id})
    done = mr.import_records(root, log=lambda _: None)
    assert (done.imported, done.live) == (4, 1)
    assert "default/alpha/seed0" not in _runs(client, exp)
    tags = client.get_run(live.info.run_id).data.tags
    assert tags["record_key"] == "default/alpha/seed0" and "source" not in tags
    assert tags["stage"] == "train"  # the live run's own tags stay
    assert len(client.search_runs([exp], "", max_results=1000)) == 5


def test_a_stale_or_outdated_record_says_so_in_its_tags_and_note(tmp_path):
    root = fake_records(tmp_path / "repo", methods=("alpha",), seeds=(0,))
    rec, = [r for r in mr.read_records(root) if r.seed == 0]
    tags = mruns.tags_of(rec, "d")
    assert (tags["stale"], tags["outdated"]) == ("false", "unknown")
    assert "Stale" not in tags["mlflow.note.content"] and "Outdated" not in tags["mlflow.note.content"]
    rec.run.stale, rec.outdated = "trained from base ab12, the study's base is now cd34", "true"
    tags = mruns.tags_of(rec, "d")
    assert (tags["stale"], tags["outdated"]) == ("true", "true")
    assert "Stale: trained from base ab12" in tags["mlflow.note.content"]
    assert "Outdated:" in tags["mlflow.note.content"]
    # An outdated run keeps its run files' fingerprints, never HEAD's settings in their place.
    rec.run_files = {"train": "f" * 32}
    assert mruns.params_of(rec)["train.run_file_md5"] == "f" * 32
    assert not any(k.startswith(("train.grpo", "evaluate.")) for k in mruns.params_of(rec))


def test_a_recorded_study_is_its_own_group_named_like_live_runs(tmp_path, store):
    client, exp = store
    root = fake_records(tmp_path / "repo", methods=("alpha",), seeds=(0,))
    study = root / "studies" / "other.seed1"
    fake_records(study, methods=("alpha",), seeds=(0,))
    _write(study / "study.json", {"preset": "other", "methods": ["alpha"], "seeds": [0]})
    mr.import_records(root, log=lambda _: None)
    runs = _runs(client, exp)
    assert sorted(runs) == ["default/alpha/seed0", "default/base", "other.seed1/alpha/seed0", "other.seed1/base"]
    run = runs["other.seed1/alpha/seed0"]
    assert run.info.run_name == "other.seed1/alpha-seed0"
    assert (run.data.tags["study"], run.data.tags["preset"]) == ("other.seed1", "other")
    with pytest.raises(LookupError, match="no recorded study nope"):
        mr.read_records(root, ["nope"])


def test_every_committed_current_run_is_a_record_with_a_verdict_on_its_settings():
    """The real records: each run the report shows (current: its study's base) is read, with the
    run files' fingerprints from dvc.lock and an outdated verdict."""
    from flows.report_collect import collect, collect_studies, current

    records = {r.key: r for r in mr.read_records(ROOT)}
    from core.paths import run_key

    # `base/draw1` for the base's further draws (params base_draws), `rlvr/seed0` for a training.
    shown = {f"default/{run_key(m, s)}" for m, seeds in current(collect(ROOT / "data")).runs.items()
             for s in seeds}
    for name, seeds in current(collect_studies(ROOT / "studies")).runs.items():
        study, _, method = name.partition("/")
        shown |= {f"{study}/{run_key(method, s)}" for s in seeds}
    assert "default/base/draw1" in shown
    assert shown and shown <= set(records)
    for key in shown:
        rec = records[key]
        assert rec.outdated in ("true", "false") and rec.run_files, key
        assert not rec.run.stale


@pytest.mark.slow
def test_the_real_records_import_lists_every_committed_current_run(tmp_path, store):
    client, exp = store
    done = mr.import_records(ROOT, log=lambda _: None)
    runs = _runs(client, exp)
    records = mr.read_records(ROOT)
    assert len(runs) == len(records) == done.imported
    current = [r for r in records if not r.run.stale]
    assert all(runs[r.key].data.tags["stale"] == "false" for r in current)
    trained = [r for r in current if r.seed is not None and r.run.heldout]
    assert all(runs[r.key].data.tags.get("collapse_label") in ("collapsed", "healthy") for r in trained)
    rec = trained[0]
    metric = mruns.metric_key("heldout/" + mruns.labels(rec)["collapse_metric"])
    steps = [m.step for m in client.get_metric_history(runs[rec.key].info.run_id, metric)]
    assert steps == sorted(int(r["step"]) for r in rec.run.heldout)
