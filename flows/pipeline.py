"""The `pipeline` Prefect flow: every DVC stage, in dependency order, as retried Prefect tasks.

DVC owns the DAG and the cache (`dvc repro` alone reproduces everything); this flow adds what DVC
lacks: schedules (deployments in prefect.yaml), retries, timeouts and a failure view in the Prefect
UI. Stages run one at a time because DVC holds a repo-wide lock.
"""

from __future__ import annotations

from prefect import flow, get_run_logger

from core.params import load
from tasks.stages import run_stage


def stage_order(methods: list[str], seeds: list[int]) -> list[str]:
    """The DAG of dvc.yaml, flattened in dependency order (matrix stages are `train@<m>-<seed>`)."""
    order = ["prepare", "synthesize", "build_base", "evaluate_base"]
    for m in methods:
        for s in seeds:
            order += [f"train@{m}-{s}", f"evaluate@{m}-{s}"]
    return order + ["report"]


@flow(name="pipeline", log_prints=True)
def pipeline(methods: list[str] | None = None, force: bool = False, retries: int = 1,
             stage_timeout_s: int = 3600) -> dict:
    """Run prepare -> build_base -> train/evaluate per method -> report; fail on the first stage
    that still fails after its retries (nothing downstream of it runs)."""
    logger = get_run_logger()
    params = load()
    methods = methods or params.methods
    unknown = sorted(set(methods) - set(params.methods))
    if unknown:
        raise ValueError(f"methods {unknown} have no DVC stage; add them to `methods` in params.yaml "
                         f"(known: {params.methods})")
    results = {}
    task = run_stage.with_options(retries=retries)
    for stage in stage_order(methods, params.seeds):
        results[stage] = task(stage, force=force, timeout_s=stage_timeout_s)
    logger.info("pipeline finished: %s", ", ".join(results))
    return results


if __name__ == "__main__":
    pipeline()
