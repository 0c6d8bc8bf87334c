"""The Prefect work pool: a dead worker's flow run is marked Crashed, and a stage goes only to a
worker that has the GPUs it needs.

**Dead workers.** A worker killed mid-stage (machine lost, process killed) leaves its flow run
`Running` forever, so the pipeline would wait on it forever. Prefect's documented answer (docs:
"Detect zombie flows"): workers' flow runs emit a heartbeat event every
`PREFECT_FLOWS_HEARTBEAT_FREQUENCY` seconds (scripts/prefect_worker.sh sets 30), and an automation
marks a run Crashed when no heartbeat or final state follows within a few periods. The pipeline's
task then fails and is retried, and another worker of the pool picks the new flow run up.

**GPUs.** Prefect's workers know nothing of GPUs: any worker of a pool takes any flow run. So the
pool has one work queue per GPU count: a stage that needs n GPUs (flows/pipeline.py,
`gpus_needed`) is submitted to the queue `gpus-<n>` (none: the pool's `default` queue), and a
worker with N GPUs polls `default` and `gpus-1` ... `gpus-N` only (`worker_queues`;
scripts/prefect_worker.sh asks `python -m tasks.pool --worker-queues`, which counts this
machine's GPUs, UUID and MIG ids included, and creates the queues). A 4-GPU training never lands
on a 1-GPU worker; a 1-GPU evaluation may run on a 4-GPU worker.
"""

from __future__ import annotations

import argparse
import os
from datetime import timedelta

NAME = "lab: crash zombie flow runs"
# The work pool of prefect.yaml's deployments and scripts/prefect_*.sh.
POOL = "lab-pool"
# Prefect's own queue of every pool: deployments submit there unless told otherwise.
DEFAULT_QUEUE = "default"
# A queue no worker has polled for this long has, as far as the pool knows, no worker.
IDLE_AFTER_S = 300


def ensure_zombie_automation(within_s: int = 90) -> str:
    """Create the automation once (idempotent); returns its name."""
    from prefect.automations import Automation
    from prefect.client.schemas.objects import StateType
    from prefect.events.actions import ChangeFlowRunState
    from prefect.events.schemas.automations import EventTrigger, Posture
    from prefect.events.schemas.events import ResourceSpecification

    try:
        Automation.read(name=NAME)
        return NAME
    except ValueError:
        pass
    Automation(
        name=NAME,
        trigger=EventTrigger(
            after={"prefect.flow-run.heartbeat"},
            expect={"prefect.flow-run.heartbeat", "prefect.flow-run.Completed",
                    "prefect.flow-run.Failed", "prefect.flow-run.Cancelled",
                    "prefect.flow-run.Crashed"},
            match=ResourceSpecification({"prefect.resource.id": ["prefect.flow-run.*"]}),
            for_each={"prefect.resource.id"},
            posture=Posture.Proactive,
            threshold=1,
            within=timedelta(seconds=within_s),
        ),
        actions=[ChangeFlowRunState(state=StateType.CRASHED,
                                    message=f"no heartbeat for {within_s} s: the worker died")],
    ).create()
    return NAME


def queue_for(gpus: int) -> str:
    """The work queue of a stage that needs `gpus` GPUs.

    >>> queue_for(0), queue_for(1), queue_for(4)
    ('default', 'gpus-1', 'gpus-4')
    """
    return DEFAULT_QUEUE if gpus <= 0 else f"gpus-{gpus}"


def worker_queues(gpus: int) -> list[str]:
    """The queues a worker with `gpus` GPUs polls: every stage it has the GPUs for.

    >>> worker_queues(0), worker_queues(2)
    (['default'], ['default', 'gpus-1', 'gpus-2'])
    """
    return [queue_for(n) for n in range(max(0, gpus) + 1)]


def worker_gpus(env: dict[str, str] | None = None) -> int:
    """GPUs this worker offers: `WORKER_GPUS` where set (e.g. 0 to keep a GPU machine's worker
    for CPU stages), else the devices of CUDA_VISIBLE_DEVICES (indices, `GPU-<uuid>` and
    `MIG-<uuid>` alike), else those `nvidia-smi -L` lists.

    >>> worker_gpus({"CUDA_VISIBLE_DEVICES": "GPU-aaaa-1111,MIG-bbbb-2222"})
    2
    >>> worker_gpus({"WORKER_GPUS": "4", "CUDA_VISIBLE_DEVICES": "0"})
    4
    """
    from core.devices import visible_gpu_ids

    env = dict(os.environ) if env is None else env
    given = env.get("WORKER_GPUS", "").strip()
    if given:
        if not given.isdigit():
            raise ValueError(f"WORKER_GPUS={given!r}: give a number of GPUs (0 or more)")
        return int(given)
    return len(visible_gpu_ids(env))


def ensure_queues(names: list[str], pool: str = POOL) -> list[str]:
    """Create the pool's queues that do not exist yet (a worker polling a queue that does not
    exist gets no flow run at all); returns `names`."""
    from prefect import get_client
    from prefect.exceptions import ObjectAlreadyExists

    own = [name for name in names if name != DEFAULT_QUEUE]  # Prefect makes `default` itself
    if not own:
        return names
    with get_client(sync_client=True) as client:
        for name in own:
            try:
                client.create_work_queue(name=name, work_pool_name=pool,
                                         description=f"stages that need {name[5:]} GPU(s)")
            except ObjectAlreadyExists:
                pass
    return names


def unserved(gpus: int, pool: str = POOL, idle_after_s: float = IDLE_AFTER_S) -> str | None:
    """A line saying that no worker with `gpus` GPUs has polled its queue lately (the stage would
    wait until one starts), or None when one has (or the stage needs none)."""
    from prefect import get_client
    from prefect.exceptions import ObjectNotFound
    from prefect.types._datetime import now

    if gpus <= 0:
        return None
    name = queue_for(gpus)
    with get_client(sync_client=True) as client:
        try:
            polled = client.read_work_queue_by_name(name, work_pool_name=pool).last_polled
        except ObjectNotFound:
            polled = None
    if polled is not None and (now("UTC") - polled).total_seconds() <= idle_after_s:
        return None
    return (f"no worker with {gpus} GPU(s) has polled the queue {name} of {pool} in the last "
            f"{idle_after_s:.0f} s: the stage waits there until one starts "
            "(scripts/prefect_worker.sh on a machine with the GPUs, docs/prefect.md)")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="Set up the lab's work pool (scripts/prefect_pool.sh) "
                                "or a worker's queues (scripts/prefect_worker.sh).")
    p.add_argument("--worker-queues", action="store_true", help="create the queues a worker with "
                   "this machine's GPUs polls (WORKER_GPUS to override) and print them, one a line")
    args = p.parse_args(argv)
    if args.worker_queues:
        print("\n".join(ensure_queues(worker_queues(worker_gpus()))))
    else:
        print(ensure_zombie_automation())


if __name__ == "__main__":
    main()
