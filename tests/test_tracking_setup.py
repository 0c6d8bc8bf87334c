"""Several stages opening a fresh MLflow store at once (two trainings, a Prefect work pool)."""

import os
import subprocess
import sys

from core.params import ROOT


def test_concurrent_first_setup_creates_the_store_once(tmp_path):
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
           "MLFLOW_EXPERIMENT_NAME": "race", "MLFLOW_DISABLE_TELEMETRY": "true"}
    code = ("import mlflow; from tasks import tracking; tracking.setup(); "
            "print(mlflow.get_experiment_by_name('race').experiment_id)")
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(4)]
    results = [(p.wait(timeout=300), p.stdout.read().strip(), p.stderr.read()) for p in procs]
    for rc, _, err in results:
        assert rc == 0, err[-2000:]
    assert len({out for _, out, _ in results}) == 1  # one experiment, seen by all four
