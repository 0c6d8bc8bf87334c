"""The `pipeline` Prefect flow: the DAG of dvc.yaml, scheduled by Prefect, stages side by side.

The graph is read from DVC itself (`tasks.stages.stage_graph`), never written down twice. Each
stage becomes a Prefect task run as soon as every stage it depends on has finished, with at most
`pipeline.max_parallel` running at once; a stage that still fails after its retries stops only
the stages downstream of it, the others go on (like `dvc repro --keep-going`), and the flow fails
at the end naming them. When it ends, dvc.lock records every stage that ran, so `dvc status` is
clean and a following `dvc repro` runs nothing.

Two executors (params `pipeline.executor`):

- `local`: every stage runs in this workspace (`tasks.stages.reproduce_in_place`: DVC's lock is
  held only to plan and record a stage, not while it trains);
- `pool`: every stage is a flow run of the `stage` deployment, picked up by any worker of the
  deployment's work pool (one worker per GPU or machine, each in its own clone). Data and models
  move through the DVC remote; a stage whose worker dies is marked Crashed by Prefect's zombie
  automation (scripts/prefect_pool.sh) and retried, usually on another worker.

`python -m flows.pipeline` runs it from a shell; `prefect deployment run 'pipeline/on-demand'`
through a work pool (prefect.yaml).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Collection
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.task_runners import ThreadPoolTaskRunner

from core.params import ROOT, Params, ParamsError, load
from flows.pipeline_checks import (
    check_command_line,
    check_pipeline,
    check_study,
    quick_selection,
    study_names,
)
from flows.pipeline_plan import dry_run_text, plan_text, study_plan, study_runs
from flows.pipeline_schedule import (
    PROGRESS_EVERY_S,
    TIMEOUT_MARGIN,
    GpuId,
    GpuPool,
    arm_of,
    deepest_first,
    depths,
    gpus_needed,
    is_extra,
    place_stages,
    plan_rounds,
    pool_gpus,
    recorded_seconds,
    retryable,
    select,
    share_cores,
    stage_timeout,
    starts,
    study_seconds,
    times_path,
    visible_gpus,
    write_times,
)
from flows.pipeline_schedule import progress_artifact as _progress_artifact
from flows.pipeline_schedule import show_progress as _show_progress
from tasks import stages as st
from tasks.progress import Board

# Re-exported: the scheduling and planning pieces are imported from here by tests and tools.
__all__ = ["GpuId", "GpuPool", "TIMEOUT_MARGIN", "depths", "gpus_needed", "plan_text", "pool_gpus",
           "share_cores", "starts", "study_runs", "visible_gpus", "deepest_first", "recorded_seconds",
           "select", "write_times", "quick_selection", "study_names", "is_extra", "arm_of",
           "plan_rounds", "study_plan", "check_pipeline", "check_study", "dry_run_text"]
# Matrix stages (`train@a-0`, `train_extra@a-3`): tasks/stages.py.
_MATRIX, EXTRA, stage_kind = st.MATRIX, st.EXTRA, st.stage_kind
UP_TO_DATE = st.UP_TO_DATE


@task(name="dvc-stage", task_run_name="{stage}", retry_delay_seconds=5,
      retry_condition_fn=retryable)
def run_stage(stage: str, force: bool = False, timeout_s: float | None = None,
              threads: int | None = None, extra_env: dict[str, str] | None = None,
              keep_recorded: bool = False) -> dict:
    """Bring one DVC stage up to date in this workspace."""
    logger = get_run_logger()
    action = st.reproduce_in_place(stage, ROOT, force=force, timeout_s=timeout_s, threads=threads,
                                   log=logger.info, extra_env=extra_env,
                                   keep_recorded=keep_recorded)
    return _finish(stage, action)


@task(name="pool-stage", task_run_name="{stage}", retry_delay_seconds=5,
      retry_condition_fn=retryable)
def run_stage_on_pool(stage: str, rev: str, upstream: list[str], deployment: str,
                      force: bool = False, timeout_s: float | None = None,
                      extra_env: dict[str, str] | None = None, gpus: int = 0) -> dict:
    """Run one DVC stage as a flow run on a work-pool worker that has its `gpus` GPUs (the pool's
    queue for that count, tasks/pool.py), then record it here."""
    from prefect.deployments import run_deployment

    from tasks import pool

    logger = get_run_logger()
    action = "run" if force else st.plan(stage, ROOT, pull=True)
    if action == "skip":
        return _finish(stage, "skip")
    if action == "restore":  # a worker already ran it (e.g. before the coordinator restarted)
        st.restore_from_remote(stage, ROOT, log=logger.info)
        return _finish(stage, "restore")
    parameters = {"stage": stage, "rev": rev, "upstream": upstream, "force": force,
                  "timeout_s": timeout_s, "extra_env": extra_env}
    if gpus:  # the worker checks it has them (a worker started by hand polls every queue)
        parameters["gpus"] = gpus
        if idle := pool.unserved(gpus):
            logger.warning("%s: %s", stage, idle)
    run = run_deployment(deployment, parameters=parameters, flow_run_name=stage, timeout=None,
                         poll_interval=5, work_queue_name=pool.queue_for(gpus))
    state = run.state
    if state is not None and state.is_crashed():  # its worker may be alive, cut off from the API
        st.outlive_crashed_attempt(stage, log=logger.info)
    if state is None or not state.is_completed():
        message = (state.message if state else "") or ""
        kind = st.StageInputError if "StageInputError" in message else st.StageFailed
        raise kind(f"stage {stage}: flow run {run.name} ended "
                   f"{state.name if state else 'without a state'}: {_exception_text(message)}")
    logger.info("%s finished on a worker (flow run %s); restoring it here", stage, run.name)
    st.restore_from_remote(stage, ROOT, log=logger.info)
    return _finish(stage, "run")


def _parent_run(params, order: list[str]) -> tuple[str, dict[str, str]]:
    """The MLflow parent run of this invocation and the environment that makes the stages' new
    runs its children (tasks/tracking.py), tagged with the Prefect flow run and git commit."""
    from prefect.runtime import flow_run

    from tasks import tracking

    flow_run_id = str(flow_run.id or "")
    parent = tracking.start_parent(f"pipeline {flow_run.name or ''}".strip(), {
        "stage": "pipeline", "prefect_flow_run_id": flow_run_id,
        "prefect_flow_run_name": str(flow_run.name or ""), "git_commit": tracking.git_commit(),
        "preset": params.preset or "default", "stages": str(len(order))})
    return parent, {tracking.PARENT_ENV: parent, tracking.FLOW_RUN_ENV: flow_run_id}


def _exception_text(message: str) -> str:
    """A Prefect state message without its wrapper: "Task run encountered an exception
    StageFailed: stage x failed (exit 1): ..." -> "stage x failed (exit 1): ..."."""
    import re

    return re.sub(r"^.*?encountered an exception:?\s*(\w+(Error|Failed): )?", "", message,
                  flags=re.S).strip() or message


def _finish(stage: str, action: str) -> dict:
    record = st.stage_outputs(stage, ROOT) if action not in UP_TO_DATE else {}
    if record:
        rows = "\n".join(f"| {k} | {v} |" for k, v in record.items())
        create_markdown_artifact(markdown=f"### {stage}\n| key | value |\n|---|---|\n{rows}\n",
                                 key=stage.replace("@", "-").replace("_", "-").lower(),
                                 description=f"outputs of {stage}")
    return {"action": action, **record}


@flow(name="pipeline", log_prints=True, task_runner=ThreadPoolTaskRunner(max_workers=32))
def pipeline(methods: list[str] | None = None, seeds: list[int] | None = None,
             stages: list[str] | None = None, force: bool = False,
             max_parallel: int | None = None, executor: str | None = None,
             retries: int | None = None, stage_timeout_s: int | None = None,
             threads_per_stage: int | None = None, times_file: str | None = None,
             extend: bool = True, keep_recorded: bool = False,
             leave_out: list[str] | None = None) -> dict:
    """Bring the DAG (or the part for `methods`, `seeds`, `stages`) up to date; unset arguments
    come from params `pipeline`. `force` re-runs the selected train/evaluate stages (and any
    named in `stages`), not what they depend on. `times_file`: where to record each stage's wall
    time and what it did (`flows.pipeline_schedule.times_path`: the command line's default is
    reports/last_run/, ignored by git; a run of record's is reports/times/, docs/speed.md). The whole study
    (nothing selected) with `extend` runs the pilot first, then the seeds the claims plan from
    it, then the report (`extend_by_plan`; their times in `<times_file>.plan.json`); with
    `methods` alone, the same for those arms.
    `keep_recorded` (local executor; a study's resumed call): a run whose results of record are
    current keeps them instead of training again for its checkpoint (`tasks.stages.recorded`).
    The times file is rewritten as each stage ends, so a call stopped by hand keeps them.
    `leave_out`: arms none of whose stages run (in a preset study, by plan, those waiting for
    their claim's preconditions: `waiting_arms`).
    Its parameters are checked first (`flows.pipeline_checks.check_pipeline`): an unknown method,
    seed, stage or executor, or a file params names that is missing, fails the flow run at once
    in one line, before any stage (a deployment run's parameters included)."""
    params = load()
    graph = st.stage_graph(ROOT)
    check_pipeline(params, graph, methods=methods, seeds=seeds, stages=stages, executor=executor,
                   max_parallel=max_parallel, retries=retries, stage_timeout_s=stage_timeout_s,
                   threads_per_stage=threads_per_stage, leave_out=leave_out)
    logger = get_run_logger()
    cfg = params.pipeline
    limit = max_parallel or cfg.max_parallel
    how = executor or cfg.executor
    fixed = threads_per_stage or cfg.threads_per_stage  # None: share the cores (`share_cores`)
    timeout = stage_timeout_s or cfg.stage_timeout_s
    # By plan: the whole study, or the arms `methods` names (their planned seeds only).
    by_plan = extend and seeds is None and stages is None
    # By plan: the pilot first (every stage but the planned seeds', the report's and, in a
    # preset study, the arms that wait for their claim's preconditions, unless `methods` names them).
    waiting = (waiting_arms(params) - set(methods or ())) if by_plan else set()
    roots = [s for s in graph if not is_extra(s) and s != "report"] if by_plan else stages
    order = select(graph, methods, seeds, roots, {*waiting, *(leave_out or [])})
    need = {s: gpus_needed(s, params) for s in order}
    gpus = visible_gpus(cfg.gpus) if how == "local" else []
    pool = GpuPool(gpus, cfg.stages_per_gpu) if gpus else None
    if pool is not None:  # a stage that can never get its GPUs would wait forever
        short = sorted(s for s in order if need[s] > len(pool))
        if short:
            raise ParamsError(f"{short[0]} needs {need[short[0]]} GPUs but pipeline.gpus gives "
                              f"{len(pool)} ({gpus}); lower grpo.num_processes or add GPUs")
    parent, extra_env = _parent_run(params, order)
    forced = {s for s in order if force and (_MATRIX.match(s) or s in (stages or []))}
    logger.info("%d stages, up to %d at once (%s executor, %s)%s", len(order), limit, how,
                f"{fixed} CPU thread(s) per stage" if fixed else
                f"the {os.cpu_count()} CPU cores shared by the stages running",
                f"; GPUs {gpus}, {cfg.stages_per_gpu} stage(s) per GPU" if pool else "")
    if waiting:
        logger.info("preconditions first: the pilot leaves out %s (only comparisons waiting for "
                    "their claim's preconditions read them; the plan runs them once those hold)",
                    ", ".join(sorted(waiting)))
    if how == "pool":
        rev = st.committed_revision(ROOT)
        up_to_date = [s for s in order if s not in forced and st.plan(s, ROOT) == "skip"]
        st.publish_run_cache(ROOT, up_to_date, log=logger.info)
        submit = run_stage_on_pool.with_options(retries=retries if retries is not None else cfg.retries)

        def start(s: str, threads: int):  # a worker's threads are its own (threads_per_stage)
            return submit.submit(s, rev, sorted(graph[s] & set(order)), cfg.stage_deployment,
                                 force=s in forced, timeout_s=stage_timeout(s, timeout, seen),
                                 extra_env=extra_env, gpus=pool_gpus(s, need, params))
    else:
        local = run_stage.with_options(retries=retries if retries is not None else cfg.retries)

        def start(s: str, threads: int):
            env = extra_env
            if held.get(s):  # the GPUs this stage was given, and only those
                env = {**extra_env, "CUDA_VISIBLE_DEVICES": ",".join(map(str, held[s]))}
            return local.submit(s, force=s in forced, timeout_s=stage_timeout(s, timeout, seen),
                                threads=threads,
                                extra_env=env, keep_recorded=keep_recorded)

    results: dict[str, dict] = {}
    failed: dict[str, str] = {}
    blocked: list[str] = []
    running: dict = {}
    held: dict[str, list[GpuId]] = {}  # stage -> the GPUs it runs on (given back when it ends)
    pending = list(order)
    depth = depths(graph, order)
    expected = recorded_seconds()
    # An explicit `stage_timeout_s` is the limit as given; params' is a floor (`stage_timeout`).
    seen = {} if stage_timeout_s else {s: max(expected.get(s, 0.0), t)
                                       for s, t in {**expected, **study_seconds()}.items()}
    # Arms with an evaluation on disk (a resumed study's record laid back): finish them first.
    evaluated = {f.parent.parent.name for f in (ROOT / "data" / "eval").glob("*/seed*/metrics.json")}
    board, shown, bar = Board(), time.monotonic(), _progress_artifact(len(order))
    began, timed = time.monotonic(), {}  # stage -> (start, end), seconds since `began`
    while pending or running:
        ready = []
        for s in list(pending):
            upstream = graph[s] & set(order)
            if upstream & (set(failed) | set(blocked)):
                pending.remove(s)
                blocked.append(s)
            elif upstream <= set(results):
                ready.append(s)
        started = evaluated | {m["method"] for s in (*results, *running) if (m := _MATRIX.match(s))}
        ready = deepest_first(ready, depth, expected, started)
        placed = place_stages(ready, limit - len(running), need, pool)
        for (s, gpus), (_, threads) in zip(placed, starts([s for s, _ in placed], len(running),
                                                           limit, os.cpu_count() or 1, fixed)):
            pending.remove(s)
            held[s] = gpus or []
            running[s] = start(s, threads)
            board.start(s, time.monotonic())
            timed[s] = (time.monotonic() - began, None)
        time.sleep(0.5)
        ended = False
        for s, future in list(running.items()):
            state = future.state
            if state.is_final():
                del running[s]
                board.end(s)
                timed[s] = (timed[s][0], time.monotonic() - began)
                if pool is not None:
                    pool.give(held.pop(s, []))
                ended = True
                if state.is_completed():
                    results[s] = future.result()
                else:
                    failed[s] = _exception_text(state.message or state.name)
                    logger.error("%s failed: %s", s, failed[s])
        if ended and times_file:  # as it goes: a call stopped by hand keeps what it did
            write_times(Path(times_file), timed, results, failed, time.monotonic() - began, limit,
                        finished=False)
        if ended or time.monotonic() - shown >= PROGRESS_EVERY_S:
            shown = time.monotonic()
            _show_progress(board, running, params.preset, len(results) + len(failed) + len(blocked),
                           len(order), logger, bar)
    ran = [s for s, r in results.items() if r.get("action") not in UP_TO_DATE]
    if times_file:
        write_times(Path(times_file), timed, results, failed, time.monotonic() - began, limit)
    logger.info("pipeline: %d stages ran or restored, %d up to date, %d failed, %d not run",
                len(ran), len(results) - len(ran), len(failed), len(blocked))
    from tasks import tracking

    tracking.end_parent(parent, {"stages_ran": len(ran), "stages_up_to_date": len(results) - len(ran),
                                 "stages_failed": len(failed), "stages_not_run": len(blocked)},
                        ok=not failed)
    if failed:
        kind = st.StageInputError if all(_user_error(m) for m in failed.values()) else st.StageFailed
        raise kind("; ".join(failed.values())
                   + (f" ({len(blocked)} downstream stage(s) not run)" if blocked else ""))
    if by_plan:  # the plan is fixed now, from the pilot alone; then its seeds and the report
        from tasks import studies

        plan_times = Path(times_file).with_suffix(".plan.json") if times_file else None
        part = studies.round_times(plan_times) if plan_times else None

        still = set(waiting)  # the arms that wait, fewer as their preconditions hold

        def plan() -> list[str]:
            added = extend_by_plan(params, logger.info, waiting=still, methods=methods)
            still.difference_update(arm_of(s) for s in added)
            return added

        def run(chosen: list[str]) -> dict:
            # `methods` again: the report pulls in only the named arms' stages, not every
            # arm's (a `--methods` call that reached the report retrained the whole study).
            out = pipeline(stages=chosen, methods=methods, max_parallel=max_parallel,
                           executor=executor, retries=retries, stage_timeout_s=stage_timeout_s,
                           threads_per_stage=threads_per_stage,
                           times_file=str(part) if part else None, extend=False,
                           keep_recorded=keep_recorded, leave_out=sorted(still))
            if part and plan_times:
                studies.merge_times(plan_times, part)
            return out

        if plan_times:
            st.remove(plan_times)
        results.update(plan_rounds(plan, run))
        results.update(run(["report"]))
    return results


def extend_by_plan(params: Params, log=print, write: bool = True,
                   waiting: Collection[str] = (), methods: Collection[str] | None = None) -> list[str]:
    """The claims' plan for this workspace's study from its pilot seeds (tasks/studies.py,
    `plan`): logged with its cost, written as params `extra_runs` (unless `write` is False: a dry
    run); returns the planned seeds' stages, and the pilot stages of the arms the pilot left
    out (`waiting`) that the plan now gives seeds (their claim's preconditions hold). With
    `methods` (`--methods`), the plan of those arms only: the other arms' `extra_runs` stay as
    params has them, and only the named arms' stages are returned."""
    from tasks import studies

    name = studies.study_name(ROOT)
    arms = list(methods) if methods else list(params.methods)
    planned, extra, cost = study_plan(ROOT, name, arms, list(params.seeds), named=bool(methods))
    log(plan_text(name, planned, extra, cost))
    if methods:
        kept = {k: {"method": r.method, "seed": r.seed} for k, r in params.extra_runs.items()
                if r.method not in arms}
        extra = {**kept, **extra}
    if write and studies.write_extra_runs(ROOT / "params.yaml", extra):
        log(f"params.yaml: extra_runs set to the plan's {len(extra)} run(s)")
    extra = {k: v for k, v in extra.items() if v["method"] in arms}
    woke = sorted(a for a in waiting if planned.get(a, 0) > 0 and a in arms)
    pilot = [f"{kind}@{a}-{s}" for a in woke for s in params.seeds for kind in ("train", "evaluate")]
    return pilot + [f"{kind}{EXTRA}@{key}" for key in extra for kind in ("train", "evaluate")]


def waiting_arms(params: Params) -> set[str]:
    """The arms of this preset study that no claim needs run before its preconditions hold:
    planned 0 seeds before any run (`evals.claims.seed_plan`), e.g. weak_evaluator's anchored
    arms, read only by the anchoring claim's comparisons, while whether unanchored RLME hacks
    is undecided. The pilot leaves them out; `extend_by_plan` runs their pilot once the plan
    gives them seeds. None in the default study: `make study` runs every arm, as `dvc repro`."""
    from evals.claims import planned_seeds
    from tasks import studies

    name = studies.study_name(ROOT)
    if not name:
        return set()
    return {a for a, n in planned_seeds({}, name).items() if n == 0 and a in params.methods}


@flow(name="stage", log_prints=True)
def stage_flow(stage: str, rev: str, upstream: list[str] | None = None, force: bool = False,
               timeout_s: float | None = None, extra_env: dict[str, str] | None = None,
               gpus: int = 0) -> str:
    """One DVC stage on this worker's clone (the pool executor's unit of work)."""
    from pathlib import Path

    from tasks.pool import worker_gpus

    logger = get_run_logger()
    if Path.cwd().resolve() != ROOT.resolve():  # another checkout's code would write elsewhere
        raise st.StageFailed(f"this flow run imports the code of {ROOT} but runs in {Path.cwd()}: "
                             "start workers with scripts/prefect_worker.sh in their own clone")
    if gpus and (have := worker_gpus()) < gpus:  # a worker that polls every queue took it
        raise st.StageFailed(f"{stage} needs {gpus} GPU(s) but this worker has {have}: start "
                             "workers with scripts/prefect_worker.sh, which polls only the "
                             "queues of the stages its GPUs can run")
    threads = load().pipeline.threads_per_stage
    from prefect.runtime import flow_run

    # Stop this attempt before it writes once its flow run is Crashed (its retry runs elsewhere).
    fence = st.flow_run_fence(str(flow_run.id)) if flow_run.id else None
    return st.reproduce_on_worker(stage, rev, upstream or [], ROOT, force=force,
                                  timeout_s=timeout_s, threads=threads, log=logger.info,
                                  extra_env=extra_env, fence=fence)


@task(name="study-workspace", task_run_name="{preset}: workspace")
def prepare_study(preset: str) -> dict:
    """`.studies/<preset>` at HEAD with the last record laid back in (tasks/studies.py); a
    `<study>.seed<N>` name is that study on a second base."""
    from tasks import studies

    return studies.prepare(preset, ROOT, log=get_run_logger().info)


@task(name="study-pipeline", task_run_name="{preset}: pipeline")
def run_study_pipeline(preset: str, args: list[str]) -> int:
    """This flow's pipeline in the study's workspace; its exit code."""
    from tasks import studies

    return studies.run(preset, args, ROOT, log=get_run_logger().info)


@task(name="study-record", task_run_name="{preset}: record")
def record_study(preset: str, study: dict, finished: bool) -> str:
    """Copy the workspace's results of record into studies/<preset>/, then bring the report
    stage here up to date (its claims table reads them)."""
    from tasks import studies

    logger = get_run_logger()
    rec = studies.record(study, finished, ROOT)
    logger.info("study %s recorded in %s (%s)", study.get("name") or preset, rec.relative_to(ROOT),
                "finished" if finished else "partial: run it again to resume")
    if (ROOT / "data" / "eval").is_dir():
        st.reproduce_in_place("report", ROOT, log=logger.info)
    else:  # the report stage depends on the default study's evaluations
        logger.info("the report here waits for the default study's evaluations (data/eval): "
                    "`make study` writes them, then the report reads this study too")
    return str(rec)


@flow(name="study", log_prints=True)
def study(preset: str, seeds: list[int] | None = None, force: bool = False,
          max_parallel: int | None = None, threads_per_stage: int | None = None,
          extend: bool = True, methods: list[str] | None = None) -> str:
    """A preset's own study (its arms, on its own base where the preset changes it) in
    `.studies/<preset>`, recorded in `studies/<preset>/` (tasks/studies.py); partial progress is
    recorded too. `<study>.seed<N>`:
    that study's arms on a second base. Its pipeline runs the claims' plan unless `extend` is off.
    `methods` / `seeds`: only those of its arms (the runs one claim needs); the record keeps the
    others' runs and stays partial. Its parameters are checked first (`check_study`): an unknown
    preset, arm or seed, or a missing file its params name, fails the flow run at once."""
    from tasks import studies

    check_study(preset, methods, seeds)
    info = prepare_study(preset)
    args = [f"--{k.replace('_', '-')}={v}" for k, v in (("max_parallel", max_parallel),
                                                          ("threads", threads_per_stage)) if v]
    args += ["--seeds", *map(str, seeds)] if seeds else []
    args += ["--methods", *methods] if methods else []
    # Its stage times, recorded beside its results (studies/<name>/times.json), seeds chosen or not.
    args += ["--times-file", str(studies.workspace(preset, ROOT) / studies.TIMES_FILE)]
    args += ["--force"] if force else []
    args += [] if extend else ["--no-extend"]
    # A study resumed on another disk (a fresh clone) keeps the runs of its record whose inputs
    # are unchanged rather than training them again for their checkpoints.
    args += ["--keep-recorded"]
    rc = run_study_pipeline(preset, args)
    rec = record_study(preset, info, rc == 0 and not methods and not seeds)
    if rc != 0:
        raise st.StageFailed(f"study {preset}: its pipeline failed (exit {rc}); what finished "
                             f"is recorded in {rec}")
    return rec


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--study", nargs="+", metavar="PRESET", default=None,
                   help="run these presets' own studies (presets.<preset>.methods on that "
                   "preset's base) in .studies/<preset>, recorded in studies/<preset>/; "
                   "`all`: every preset that names arms")
    p.add_argument("--quick", action="store_true", help="the methods and seeds of params "
                   "pipeline.quick (make run): a first look, not the study")
    p.add_argument("--methods", nargs="+", default=None, help="only these methods (and what they need)")
    p.add_argument("--seeds", nargs="+", type=int, default=None, help="only these seeds")
    p.add_argument("--stages", nargs="+", default=None, help="only these DVC stages (and upstream)")
    p.add_argument("--force", action="store_true", help="re-run the selected train/evaluate stages")
    p.add_argument("--max-parallel", type=int, default=None, help="default: params pipeline.max_parallel")
    p.add_argument("--executor", choices=["local", "pool"], default=None)
    p.add_argument("--threads", type=int, default=None, help="CPU threads per stage "
                   "(default: params pipeline.threads_per_stage, else the cores shared by the stages running)")
    p.add_argument("--base-seed", type=int, default=None, metavar="N", help="with --study: each "
                   "study on a second base built with top-level seed N (recorded as <study>.seed<N>; "
                   "the default study's claim arms are `default`)")
    p.add_argument("--no-extend", action="store_true", help="run the pilot seeds only, not the "
                   "seeds the claims' power rule plans from them (params extra_runs)")
    p.add_argument("--keep-recorded", action="store_true", help="a run whose results of record "
                   "(dvc.lock and the files in git) are current keeps them when its checkpoints "
                   "are not on this disk, instead of training again (local executor; every "
                   "--study call does)")
    p.add_argument("--times-file", default=None, metavar="PATH", help="write each stage's wall "
                   "time to PATH (default: reports/last_run/quick.json for --quick, study.json "
                   "for the whole study, ignored by git; none for a partial run)")
    p.add_argument("--record-times", action="store_true", help="write the stage times to the "
                   "committed record instead, reports/times/quick.json or study.json (README's "
                   "`make run` line and docs/speed.md read them)")
    p.add_argument("--dry-run", action="store_true", help="print which stages would run and why "
                   "(DVC's status), how long that takes from the recorded stage times, and the "
                   "claims' plan (seeds per arm, the seeds it adds, their cost); run nothing")
    args = p.parse_args()
    try:  # bad input is refused before Prefect starts or any stage runs, dry run included
        check_command_line(args)
    except ParamsError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(st.USER_ERROR_EXIT) from None
    if args.dry_run:
        raise SystemExit(dry_run(args))
    if args.study:
        raise SystemExit(run_studies(args))
    if args.quick:
        args.methods, args.seeds = quick_selection(load(), args.methods, args.seeds)
    times = times_path(args.quick, bool(args.methods or args.seeds or args.stages),
                       args.record_times, args.times_file)
    state = pipeline(methods=args.methods, seeds=args.seeds, stages=args.stages, force=args.force,
                     max_parallel=args.max_parallel, executor=args.executor,
                     threads_per_stage=args.threads, times_file=str(times) if times else None,
                     extend=not args.no_extend, keep_recorded=args.keep_recorded,
                     return_state=True)
    if not state.is_completed():
        message = _exception_text(state.message or state.name)
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(st.USER_ERROR_EXIT if _user_error(message) or "ParamsError" in (
            state.message or "") else 1)


def run_studies(args: argparse.Namespace) -> int:
    """`--study P [P ...]`: each preset's study in turn (a failed one does not stop the next)."""
    if args.stages or args.quick:
        print("error: --study runs the preset's own arms (presets.<preset>.methods; --methods "
              "picks some of them); --stages and --quick do not apply", file=sys.stderr)
        return st.USER_ERROR_EXIT
    failed = []
    for preset in study_names(args.study, args.base_seed):
        state = study(preset, seeds=args.seeds, force=args.force, max_parallel=args.max_parallel,
                      threads_per_stage=args.threads, extend=not args.no_extend,
                      methods=args.methods, return_state=True)
        if not state.is_completed():
            message = _exception_text(state.message or state.name)
            print(f"error: study {preset}: {message}", file=sys.stderr)
            failed.append((preset, message))
    if any("ParamsError" in m or "not defined" in m or "names no arms" in m or "not arms of" in m
           or "runs in this workspace" in m for _, m in failed):
        return st.USER_ERROR_EXIT
    return 1 if failed else 0


def dry_run(args: argparse.Namespace) -> int:
    """`--dry-run`: in this workspace, which stages the call would run and why (DVC's status
    against dvc.lock: a fresh clone has no checkpoint, so its trainings run), how long that takes
    here from the recorded stage times (`flows.pipeline_plan.dry_run_text`), then the claims' plan
    where the call runs one; for each `--study`, the plan from its record (studies/<name>/) and
    its cost. Nothing runs, nothing is written."""
    from tasks import studies

    try:
        if not args.study:
            params = load()
            methods, seeds = args.methods, args.seeds
            if args.quick:
                methods, seeds = quick_selection(params, methods, seeds)
            graph = st.stage_graph(ROOT)
            order = select(graph, methods, seeds, args.stages)
            print(dry_run_text(graph, order, args.max_parallel or params.pipeline.max_parallel))
            if not args.no_extend and seeds is None and args.stages is None:  # as the run plans
                extend_by_plan(params, print, write=False, methods=methods)
            return 0
        for name in study_names(args.study, args.base_seed):
            methods, seeds = studies.study_arms(name, ROOT)
            if args.methods:  # the plan of the named arms only, as the run would extend them
                methods = [m for m in methods if m in args.methods]
            data = studies.record_dir(name, ROOT) / "data"
            planned, extra, cost = study_plan(ROOT, name, methods, seeds, data,
                                              named=bool(args.methods))
            print(plan_text(name, planned, extra, cost)
                  + ("" if data.is_dir() else f"\n  (no record in {data.parent.relative_to(ROOT)} yet: "
                     "its pilot runs first)"))
    except ParamsError as e:
        print(f"error: {e}", file=sys.stderr)
        return st.USER_ERROR_EXIT
    return 0


def _user_error(message: str) -> bool:
    return f"(exit {st.USER_ERROR_EXIT})" in message


if __name__ == "__main__":
    from core.cli import quiet_libraries

    quiet_libraries()
    main()
