"""The Prefect work pool's safety net: a flow run whose worker died is marked Crashed.

A worker killed mid-stage (machine lost, process killed) leaves its flow run `Running` forever, so
the pipeline would wait on it forever. Prefect's documented answer (docs: "Detect zombie flows"):
workers' flow runs emit a heartbeat event every `PREFECT_FLOWS_HEARTBEAT_FREQUENCY` seconds
(scripts/prefect_worker.sh sets 30), and an automation marks a run Crashed when no heartbeat or
final state follows within a few periods. The pipeline's task then fails and is retried, and
another worker of the pool picks the new flow run up.
"""

from __future__ import annotations

from datetime import timedelta

NAME = "lab: crash zombie flow runs"


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


if __name__ == "__main__":
    print(ensure_zombie_automation())
