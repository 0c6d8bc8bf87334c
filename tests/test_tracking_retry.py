"""One live MLflow run per training however often its stage is retried (tasks/tracking.py,
`training_run_id`): an attempt that starts over ends the crashed attempt's run as superseded
rather than deleting it, so a pool's workers need EDIT only (docs/shared_servers.md)."""

from mlflow.tracking import MlflowClient

from tasks import tracking

MATCH = {"stage": "train", "reward_method": "rlvr", "seed": "0", "preset": "default"}


def _store(tmp_path, monkeypatch) -> tuple[MlflowClient, str]:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "retry")
    tracking.setup()
    client = MlflowClient()
    return client, client.get_experiment_by_name("retry").experiment_id


def test_a_retry_that_starts_over_supersedes_the_crashed_run(tmp_path, monkeypatch):
    client, exp = _store(tmp_path, monkeypatch)
    crashed = client.create_run(exp, tags=MATCH).info.run_id  # left RUNNING by a killed worker
    assert tracking.training_run_id(MATCH, resumable=False) is None  # a new run begins
    run = client.get_run(crashed)
    assert run.info.status == "KILLED" and tracking.SUPERSEDED in run.data.tags
    assert run.info.lifecycle_stage == "active"  # kept, with its partial curve
    assert tracking.previous_runs(MATCH) == []
    # the next attempt's run is the one the views see
    fresh = client.create_run(exp, tags=MATCH).info.run_id
    assert [r.info.run_id for r in tracking.previous_runs(MATCH)] == [fresh]


def test_a_resuming_attempt_continues_its_run_and_a_finished_run_is_kept(tmp_path, monkeypatch):
    client, exp = _store(tmp_path, monkeypatch)
    crashed = client.create_run(exp, tags=MATCH).info.run_id
    assert tracking.training_run_id(MATCH, resumable=True) == crashed  # same workspace: resume
    assert client.get_run(crashed).info.status == "RUNNING"
    client.set_terminated(crashed, status="FINISHED")
    assert tracking.training_run_id(MATCH, resumable=False) == crashed  # adopted, not superseded
    assert tracking.SUPERSEDED not in client.get_run(crashed).data.tags
