"""The pipeline's executors know GPUs by any CUDA name, and a stage goes only to a worker with its
GPUs (issue 66, defect 7).

Before: `visible_gpus` kept only the numeric entries of CUDA_VISIBLE_DEVICES, so a machine whose
GPUs are named by UUID (`GPU-...`) or MIG instance (`MIG-...`) had "no GPUs" and the local
executor scheduled by cores alone; `nvidia-smi -L` on a MIG-split GPU gave the GPU's index, which
CUDA cannot use. And the pool executor sent every stage to the pool's one queue, which any worker
polls: a 4-GPU training could land on a 1-GPU worker.
"""

from __future__ import annotations

import logging
import os
import stat
from types import SimpleNamespace

import pytest

from core.params import load

UUIDS = "GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f,GPU-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
MIG_LISTING = """GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-aaaa-1111)
  MIG 3g.40gb     Device  0: (UUID: MIG-cccc-3333)
  MIG 3g.40gb     Device  1: (UUID: MIG-dddd-4444)
GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-bbbb-2222)
"""


# --- GPU names -----------------------------------------------------------------------------------

def test_gpus_named_by_uuid_are_scheduled_as_numbered_ones(monkeypatch):
    from flows.pipeline import GpuPool, place_stages, visible_gpus

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", UUIDS)
    gpus = visible_gpus(None)
    assert gpus == UUIDS.split(",")
    pool = GpuPool(gpus, per_gpu=1)
    placed = place_stages(["train@a-0", "evaluate@b-0", "evaluate@c-0"], 3,
                          {"train@a-0": 1, "evaluate@b-0": 1, "evaluate@c-0": 1}, pool)
    # Two GPUs, two stages; each gets one UUID, which is what its CUDA_VISIBLE_DEVICES will say.
    assert [s for s, _ in placed] == ["train@a-0", "evaluate@b-0"]
    assert sorted(g for _, given in placed for g in given) == sorted(UUIDS.split(","))


def test_mig_ids_are_devices_too(monkeypatch):
    from flows.pipeline import visible_gpus

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-cccc-3333,MIG-dddd-4444")
    assert visible_gpus(None) == ["MIG-cccc-3333", "MIG-dddd-4444"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-GPU-aaaa-1111/1/0")  # the older MIG form
    assert visible_gpus(None) == ["MIG-GPU-aaaa-1111/1/0"]


def test_nvidia_smi_on_a_mig_split_gpu_lists_its_instances(monkeypatch, tmp_path):
    """A fake `nvidia-smi -L` on PATH: the MIG-split GPU 0 offers its two instances, GPU 1 itself."""
    from flows.pipeline import visible_gpus

    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\ncat <<'EOF'\n" + MIG_LISTING + "EOF\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert visible_gpus(None) == ["MIG-cccc-3333", "MIG-dddd-4444", "1"]


# --- the pool: a stage goes to a worker with its GPUs --------------------------------------------

def test_a_worker_polls_only_the_queues_its_gpus_can_serve():
    from tasks.pool import queue_for, worker_gpus, worker_queues

    one, four = worker_queues(1), worker_queues(4)
    assert queue_for(4) not in one and queue_for(4) in four
    assert queue_for(1) in one and queue_for(1) in four and queue_for(0) in one
    assert worker_gpus({"CUDA_VISIBLE_DEVICES": UUIDS}) == 2  # UUIDs count as GPUs
    assert worker_gpus({"CUDA_VISIBLE_DEVICES": "MIG-cccc-3333"}) == 1
    assert worker_gpus({"WORKER_GPUS": "0", "CUDA_VISIBLE_DEVICES": "0,1"}) == 0


@pytest.mark.parametrize("preset, stage, gpus", [
    ("qwen3_0p6b_8gpu", "train@rlvr-0", 4), ("qwen3_0p6b_8gpu", "evaluate@rlvr-0", 1),
    ("qwen3_0p6b_1gpu", "train@rlvr-0", 1), ("qwen3_0p6b_8gpu", "report", 0),
    (None, "train@rlvr-0", 0), (None, "evaluate@rlvr-0", 0),  # the tiny world: any worker
])
def test_the_pool_executor_submits_a_stage_to_the_queue_of_its_gpus(monkeypatch, preset, stage, gpus):
    import prefect.deployments

    import flows.pipeline as pipeline
    from tasks import pool

    params = load(preset=preset)
    need = {stage: pipeline.gpus_needed(stage, params)}
    asked = pipeline.pool_gpus(stage, need, params)
    assert asked == gpus
    submitted = {}

    def run_deployment(name, parameters, work_queue_name=None, **kwargs):
        submitted.update(name=name, parameters=parameters, queue=work_queue_name)
        return SimpleNamespace(name="run-1", state=SimpleNamespace(
            is_crashed=lambda: False, is_completed=lambda: True, message="", name="Completed"))

    monkeypatch.setattr(prefect.deployments, "run_deployment", run_deployment)
    monkeypatch.setattr(pipeline, "get_run_logger", lambda: logging.getLogger("test"))
    monkeypatch.setattr(pipeline.st, "plan", lambda *a, **k: "run")
    monkeypatch.setattr(pipeline.st, "restore_from_remote", lambda *a, **k: None)
    monkeypatch.setattr(pipeline, "_finish", lambda s, action: {"action": action})
    monkeypatch.setattr(pool, "unserved", lambda n: None)
    pipeline.run_stage_on_pool.fn(stage, "rev", [], "stage/worker", gpus=asked)
    assert submitted["queue"] == pool.queue_for(gpus)
    assert submitted["parameters"].get("gpus", 0) == gpus
    # A 1-GPU worker never polls a 4-GPU stage's queue.
    assert (submitted["queue"] in pool.worker_queues(1)) == (gpus <= 1)


def test_a_worker_refuses_a_stage_it_has_too_few_gpus_for(monkeypatch):
    """A worker started by hand polls every queue: it fails the stage (retried elsewhere) rather
    than train 4 processes on its 1 GPU."""
    import flows.pipeline as pipeline
    from tasks import stages as st

    monkeypatch.setattr(pipeline, "get_run_logger", lambda: logging.getLogger("test"))
    monkeypatch.setattr(pipeline, "ROOT", type(pipeline.ROOT)(os.getcwd()))
    monkeypatch.setenv("WORKER_GPUS", "1")
    with pytest.raises(st.StageFailed, match="needs 4 GPU.*this worker has 1"):
        pipeline.stage_flow.fn("train@rlvr-0", "rev", gpus=4)


@pytest.mark.slow
def test_prefect_hands_a_4_gpu_stage_only_to_a_worker_polling_4_gpus(tmp_path):
    """Against a real (throwaway) Prefect server: the flow run `run_stage_on_pool` creates for a
    4-GPU stage is among the scheduled runs a 4-GPU worker's queues return, not a 1-GPU worker's."""
    from prefect import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.deployments import run_deployment
    from prefect.testing.utilities import prefect_test_harness

    from flows.pipeline import stage_flow
    from tasks.pool import POOL, ensure_queues, queue_for, worker_queues

    with prefect_test_harness(server_startup_timeout=120):
        with get_client(sync_client=True) as client:
            client.create_work_pool(WorkPoolCreate(name=POOL, type="process"))
        for gpus in (1, 4):
            ensure_queues(worker_queues(gpus))
        stage_flow.to_deployment(name="worker", work_pool_name=POOL).apply()
        run = run_deployment("stage/worker", parameters={"stage": "train@rlvr-0", "rev": "x",
                                                         "gpus": 4},
                             work_queue_name=queue_for(4), timeout=0)
        with get_client(sync_client=True) as client:
            def polled(gpus: int) -> set:
                return {r.flow_run.id for r in client.get_scheduled_flow_runs_for_work_pool(
                    POOL, work_queue_names=worker_queues(gpus))}

            assert run.id in polled(4) and run.id not in polled(1)
