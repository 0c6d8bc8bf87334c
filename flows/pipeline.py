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
from collections.abc import Callable, Collection
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.task_runners import ThreadPoolTaskRunner

from core.params import ROOT, Params, ParamsError, load
from tasks import stages as st
from tasks.progress import Board

# Where `make run` (quick.json) and `make study` (study.json) record their stage times.
TIMES = ROOT / "reports" / "times"
# Matrix stages (`train@a-0`, `train_extra@a-3`): tasks/stages.py.
_MATRIX, EXTRA, stage_kind = st.MATRIX, st.EXTRA, st.stage_kind
UP_TO_DATE = st.UP_TO_DATE


def select(graph: dict[str, set[str]], methods: list[str] | None = None,
           seeds: list[int] | None = None, stages: list[str] | None = None,
           leave_out: Collection[str] = ()) -> list[str]:
    """The stages to bring up to date, in a dependency order: `stages` (default: every stage)
    restricted to `methods` and `seeds`, plus everything they depend on; no stage of an arm in
    `leave_out` (one waiting for its claim's preconditions) unless a chosen stage needs it.

    >>> g = {"prepare": set(), "train@a-0": {"prepare"}, "train@a-1": {"prepare"},
    ...      "train@b-0": {"prepare"}, "report": {"train@a-0", "train@a-1", "train@b-0"}}
    >>> select(g, methods=["a"], seeds=[0])
    ['prepare', 'train@a-0', 'report']
    >>> select(g, leave_out=["b"])
    ['prepare', 'train@a-0', 'train@a-1', 'report']
    """
    known = sorted({m["method"] for s in graph if (m := _MATRIX.match(s))})
    unknown = sorted(set(methods or []) - set(known))
    if unknown:
        raise ParamsError(f"methods {unknown} have no DVC stage; add them to `methods` in "
                          f"params.yaml (stages exist for: {', '.join(known)})")
    missing = sorted(set(stages or []) - set(graph))
    if missing:
        raise ParamsError(f"no DVC stage named {missing}; `dvc stage list` shows them")

    def wanted(stage: str) -> bool:
        m = _MATRIX.match(stage)
        if m is None:
            return True
        return ((methods is None or m["method"] in methods) and m["method"] not in leave_out
                and (seeds is None or int(m["seed"]) in seeds))

    roots = [s for s in (stages or graph) if wanted(s)]
    chosen: set[str] = set()
    todo = list(roots)
    while todo:
        s = todo.pop()
        if s not in chosen:
            chosen.add(s)
            # A matrix stage pulls in everything it needs; an aggregate such as `report` (it
            # reports whatever exists) does not pull in other methods' or seeds' stages.
            todo.extend(d for d in graph[s] if _MATRIX.match(s) or wanted(d))
    order: list[str] = []
    done: set[str] = set()
    names = list(graph)  # dvc.yaml order breaks ties, so the order is stable
    while len(order) < len(chosen):
        for s in names:
            if s in chosen and s not in done and (graph[s] & chosen) <= done:
                order.append(s)
                done.add(s)
    return order


def depths(graph: dict[str, set[str]], order: list[str]) -> dict[str, int]:
    """Each stage's depth in the selected DAG: the longest chain of selected stages above it.

    >>> g = {"prepare": set(), "train@a-0": {"prepare"}, "evaluate@a-0": {"train@a-0"}}
    >>> depths(g, ["prepare", "train@a-0", "evaluate@a-0"])
    {'prepare': 0, 'train@a-0': 1, 'evaluate@a-0': 2}
    """
    chosen, out = set(order), {}
    for s in order:  # a dependency order: a stage's upstream is already placed
        out[s] = 1 + max((out[d] for d in graph[s] & chosen), default=-1)
    return out


def deepest_first(ready: list[str], depth: dict[str, int],
                  expected: dict[str, float] | None = None, started: set[str] | None = None) -> list[str]:
    """The ready stages, the deepest first: a finished training is evaluated before the next one
    starts, so results arrive as soon as they can and an interrupted run leaves whole runs, not
    trained models waiting for their evaluation. Among stages of one depth, the longest expected
    first (`expected`: seconds a stage took when last recorded; a stage never recorded counts as
    the longest): with two slots, a long training started last would run alone at the end.
    Ties keep DAG order. A ready stage outside the arms' matrix comes before them all: the base's
    evaluation is short and every claim against the base reads it, so a study stopped half way
    must not leave it behind trainings (measured: a second base's study stopped after 6 runs had
    no evaluation of its new base, so no claim against that base could be read):

    >>> deepest_first(["train@a-0", "evaluate_base"], {"train@a-0": 2, "evaluate_base": 1})
    ['evaluate_base', 'train@a-0']
    >>> deepest_first(["train@a-1", "train@b-0", "evaluate@a-0"],
    ...               {"train@a-1": 1, "train@b-0": 1, "evaluate@a-0": 2})
    ['evaluate@a-0', 'train@a-1', 'train@b-0']
    >>> deepest_first(["train@a-0", "train@b-0", "train@c-0"], {"train@a-0": 1, "train@b-0": 1,
    ...               "train@c-0": 1}, {"train@a-0": 300.0, "train@b-0": 900.0})
    ['train@c-0', 'train@b-0', 'train@a-0']

    A seed never recorded costs what the same method's recorded seeds cost (`make run` records
    seed 0 only), so one method's seeds stay together and an interrupted study leaves whole arms
    (all their pilot seeds), not every arm's seeds 1-2 without its seed 0:

    >>> deepest_first(["train@a-0", "train@b-1", "train@a-1", "train@b-2"],
    ...               dict.fromkeys(["train@a-0", "train@b-1", "train@a-1", "train@b-2"], 1),
    ...               {"train@a-0": 300.0, "train@b-0": 900.0})
    ['train@b-1', 'train@b-2', 'train@a-0', 'train@a-1']

    And a method already begun (`started`: a stage of it done or running in this call, or an
    evaluation of it on disk, as a resumed study's record leaves) comes before one not begun, so
    its arm is finished first:

    >>> deepest_first(["train@b-0", "train@a-2"], {"train@b-0": 1, "train@a-2": 1}, started={"a"})
    ['train@a-2', 'train@b-0']
    """
    expected = expected or {}
    per_method: dict[tuple[str, str], float] = {}
    for stage, seconds in expected.items():
        if m := _MATRIX.match(stage):
            key = (m["kind"].removesuffix(EXTRA), m["method"])
            per_method[key] = max(per_method.get(key, 0.0), seconds)

    def cost(stage: str) -> float:
        if stage in expected:
            return expected[stage]
        m = _MATRIX.match(stage)
        return per_method.get((m["kind"].removesuffix(EXTRA), m["method"]), float("inf")) if m else float("inf")

    def begun(stage: str) -> bool:
        m = _MATRIX.match(stage)
        return m is not None and m["method"] in (started or set())

    return sorted(ready, key=lambda s: (_MATRIX.match(s) is not None, -depth[s], not begun(s), -cost(s)))


def recorded_seconds(folder: Path = ROOT / "reports" / "times") -> dict[str, float]:
    """Each stage's longest wall time among the recorded runs (`write_times`), for scheduling."""
    from core.io import read_json

    out: dict[str, float] = {}
    for f in sorted(Path(folder).glob("*.json")):
        try:
            stages = read_json(f)["stages"]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a scheduling hint, never worth failing a run for
        for stage, t in stages.items():
            if isinstance(t, dict) and t.get("action") not in ("skip", "not run") and t.get("seconds"):
                out[stage] = max(out.get(stage, 0.0), float(t["seconds"]))
    return out


# A stage's timeout is there to catch a hung stage, not a slow one: a stage with a recorded wall
# time gets at least this many times it. (`--study cot_reference` rebuilding its base beside a CI
# rehearsal ran past the flat 90 min, 1.2x the 73 min its record took, was killed three quarters
# through its second phase and began again from that phase's start.)
TIMEOUT_MARGIN = 3.0


def stage_timeout(stage: str, floor: float, seen: dict[str, float]) -> float:
    """The seconds `stage` may run before it is killed (and retried): params
    `pipeline.stage_timeout_s`, or `TIMEOUT_MARGIN` times its longest recorded wall time here or
    in the study's record (`study_seconds`), whichever is longer.

    >>> stage_timeout("build_base", 5400, {"build_base": 4356.3})
    13068.9
    >>> stage_timeout("report", 5400, {"report": 60.0}), stage_timeout("train@rlvr-0", 5400, {})
    (5400, 5400)
    """
    return max(floor, round(TIMEOUT_MARGIN * seen.get(stage, 0.0), 1))


def study_seconds(root: Path = ROOT) -> dict[str, float]:
    """In a study's workspace, each stage's longest wall time over its record's calls
    (tasks/studies.py `recorded_calls`); {} in the default study, whose times are
    `reports/times` (`recorded_seconds`)."""
    from tasks import studies

    name = studies.study_name(root)
    return (studies.recorded_stage_seconds(studies.record_dir(name, studies.main_checkout(root)))
            if name else {})


def retryable(task, task_run, state) -> bool:
    """Prefect's retry condition: a stage that rejected its input (exit 2) is not retried, since
    the same params or rows fail the same way; anything else (a crash, a killed worker, a
    timeout) is."""
    exc = state.data if isinstance(state.data, BaseException) else None
    return not isinstance(exc, st.StageInputError) and "StageInputError" not in (state.message or "")


def share_cores(cores: int, active: int) -> int:
    """CPU threads of a stage that starts while `active` stages (itself included) run: the cores
    split evenly, at least one each. A stage that runs alone (the base build, the report) gets
    every core; two train stages on a 2-core laptop get one each. A stage keeps its threads
    until it ends; a stage starts only when another ends or is ready with it, so the sum never
    exceeds the cores by more than rounding.

    >>> share_cores(2, 1), share_cores(2, 2), share_cores(16, 3), share_cores(2, 5)
    (2, 1, 5, 1)
    """
    return max(1, cores // max(1, active))


def starts(ready: list[str], running: int, limit: int, cores: int,
           fixed: int | None = None) -> list[tuple[str, int]]:
    """The ready stages to start now (up to `limit` running in all) and each one's CPU threads:
    `fixed`, or the cores shared by every stage that will then be running (`share_cores`).

    >>> starts(["build_base"], 0, 2, 2)
    [('build_base', 2)]
    >>> starts(["train@a-0", "train@b-0", "train@c-0"], 0, 2, 2)
    [('train@a-0', 1), ('train@b-0', 1)]
    >>> starts(["evaluate@a-0"], 1, 2, 2), starts(["x"], 2, 2, 2), starts(["x", "y"], 0, 2, 8, fixed=3)
    ([('evaluate@a-0', 1)], [], [('x', 3), ('y', 3)])
    """
    chosen = ready[:max(0, limit - running)]
    return [(s, fixed or share_cores(cores, running + len(chosen))) for s in chosen]


GpuId = int | str  # an index, or a `GPU-<uuid>` / `MIG-<uuid>` as CUDA_VISIBLE_DEVICES names it


class GpuPool:
    """The GPUs the local executor hands to stages (params `pipeline.gpus`, `stages_per_gpu`): a
    stage that needs n GPUs starts only when n distinct GPUs have a free slot, and gets them
    through CUDA_VISIBLE_DEVICES; the least loaded GPUs go first. An id is whatever names the
    device to CUDA: an index, a GPU UUID or a MIG instance (`core.devices.parse_visible_devices`).

    >>> pool = GpuPool([0, 1], per_gpu=1)
    >>> pool.take(1), pool.take(2), pool.take(1), pool.take(1), pool.take(0)
    ([0], None, [1], None, [])
    >>> pool.give([0]); pool.take(1)
    [0]
    >>> GpuPool(["MIG-bbbb-2222", "MIG-aaaa-1111"]).take(2)
    ['MIG-bbbb-2222', 'MIG-aaaa-1111']
    """

    def __init__(self, gpus: list[GpuId], per_gpu: int = 1) -> None:
        self.load = dict.fromkeys(gpus, 0)
        self.order = {gpu: i for i, gpu in enumerate(self.load)}  # as given: CUDA's order
        self.per_gpu = per_gpu

    def __len__(self) -> int:
        return len(self.load)

    def take(self, n: int) -> list[GpuId] | None:
        """n GPU ids with a free slot (now taken), or None if there are not n of them."""
        free = sorted((load, self.order[gpu], gpu) for gpu, load in self.load.items()
                      if load < self.per_gpu)
        if len(free) < n:
            return None
        chosen = [gpu for _, _, gpu in sorted(free[:n], key=lambda f: f[1])]
        for gpu in chosen:
            self.load[gpu] += 1
        return chosen

    def give(self, gpus: list[GpuId]) -> None:
        for gpu in gpus:
            self.load[gpu] -= 1


def visible_gpus(configured: list[int] | None) -> list[GpuId]:
    """The GPU ids stages may use: `configured` (params `pipeline.gpus`), else the devices
    CUDA_VISIBLE_DEVICES names (indices, GPU UUIDs or MIG ids: a machine that names its GPUs by
    UUID is scheduled as one that numbers them), else those `nvidia-smi -L` lists (a GPU split
    into MIG instances: its instances); none on a machine without GPUs."""
    from core.devices import visible_gpu_ids

    if configured is not None:
        return list(configured)
    return list(visible_gpu_ids())


def gpus_needed(stage: str, params: Params) -> int:
    """GPUs a stage runs on: a training `grpo.num_processes` (its method's), an evaluation one,
    anything else (data, configure, report) none.

    >>> from core.params import load
    >>> p = load(preset="qwen3_0p6b_8gpu")
    >>> gpus_needed("train@rlvr-0", p), gpus_needed("evaluate@rlvr-0", p), gpus_needed("report", p)
    (4, 1, 0)
    """
    m = _MATRIX.match(stage)
    kind = stage_kind(stage)
    if kind == "train" and m:
        return params.method_grpo(m["method"]).num_processes
    return 1 if kind in ("evaluate", "evaluate_base") else 0


def pool_gpus(stage: str, need: dict[str, int], params: Params) -> int:
    """GPUs the pool executor asks a worker for: the stage's need where the run needs CUDA
    (params `base_model.device: cuda`, the GPU presets), else none: a study that runs wherever
    torch does (the tiny world) goes to any worker, GPUs or not.

    >>> from core.params import load
    >>> need = {"train@rlvr-0": 4, "report": 0}
    >>> pool_gpus("train@rlvr-0", need, load(preset="qwen3_0p6b_8gpu")), pool_gpus("report", need, load())
    (4, 0)
    >>> pool_gpus("train@rlvr-0", need, load())
    0
    """
    return need.get(stage, 0) if params.base_model.device == "cuda" else 0


def place_stages(ready: list[str], slots: int, need: dict[str, int],
                 pool: GpuPool | None) -> list[tuple[str, list[GpuId] | None]]:
    """Up to `slots` of the ready stages to start now, in order, each with the GPUs it takes
    (None without a pool). A stage whose GPUs are all busy waits; one behind it that fits (or
    needs none) may start.

    >>> pool = GpuPool([0], per_gpu=1)
    >>> place_stages(["train@a-0", "train@b-0", "report"], 2, {"train@a-0": 1, "train@b-0": 1,
    ...              "report": 0}, pool)
    [('train@a-0', [0]), ('report', [])]
    >>> place_stages(["x", "y"], 1, {}, None)
    [('x', None)]
    """
    chosen: list[tuple[str, list[GpuId] | None]] = []
    for s in ready:
        if len(chosen) >= slots:
            break
        if pool is None:
            chosen.append((s, None))
            continue
        gpus = pool.take(need.get(s, 0))
        if gpus is not None:
            chosen.append((s, gpus))
    return chosen


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
    time and what it did (a result of record, committed: docs/speed.md). The whole study
    (nothing selected) with `extend` runs the pilot first, then the seeds the claims plan from
    it, then the report (`extend_by_plan`; their times in `<times_file>.plan.json`); with
    `methods` alone, the same for those arms.
    `keep_recorded` (local executor; a study's resumed call): a run whose results of record are
    current keeps them instead of training again for its checkpoint (`tasks.stages.recorded`).
    The times file is rewritten as each stage ends, so a call stopped by hand keeps them.
    `leave_out`: arms none of whose stages run (in a preset study, by plan, those waiting for
    their claim's preconditions: `waiting_arms`)."""
    logger = get_run_logger()
    params = load()
    cfg = params.pipeline
    limit = max_parallel or cfg.max_parallel
    how = executor or cfg.executor
    fixed = threads_per_stage or cfg.threads_per_stage  # None: share the cores (`share_cores`)
    timeout = stage_timeout_s or cfg.stage_timeout_s
    graph = st.stage_graph(ROOT)
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


def plan_rounds(plan: Callable[[], list[str]], run: Callable[[list[str]], dict]) -> dict:
    """Run the plan's stages, then ask the plan again, until it adds no stage. Preconditions
    first (evals/claims.py, `seed_plan`): a claim's comparisons are planned once its
    preconditions hold, which only the precondition's own planned seeds can show; the numbers
    come from the pilot alone in every round, so asking again moves none of them."""
    results: dict = {}
    done: set[str] = set()
    while added := [s for s in plan() if s not in done]:
        results.update(run(added))
        done.update(added)
    return results


def is_extra(stage: str) -> bool:
    """A stage of a seed the claims' plan added (`train_extra@...`, `evaluate_extra@...`)."""
    return (m := _MATRIX.match(stage)) is not None and m["kind"].endswith(EXTRA)


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


def arm_of(stage: str) -> str | None:
    """The arm a train/evaluate stage runs (`train@rlme-0`, `evaluate_extra@rlme-3`: `rlme`)."""
    return m["method"] if (m := _MATRIX.match(stage)) else None


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


def plan_text(name: str, planned: dict[str, int], extra: dict[str, dict], cost: str) -> str:
    """The plan in a few lines: seeds per arm, the seeds it adds, what they cost.

    >>> print(plan_text("", {"rlme": 5, "rlvr": 3}, {"rlme-3": {"method": "rlme", "seed": 3},
    ...                  "rlme-4": {"method": "rlme", "seed": 4}}, "2 more runs"))
    plan (default study, from the pilot seeds): rlme 5 seeds, rlvr 3 seeds
      adds rlme seeds 3, 4; cost: 2 more runs
    """
    head = (f"plan ({name or 'default'} study, from the pilot seeds): "
            + (", ".join(f"{a} {n} seeds" if n else f"{a} waits for its claim's preconditions"
                         for a, n in planned.items()) or "no arm of it is in a claim"))
    adds: dict[str, list[int]] = {}
    for run in extra.values():
        adds.setdefault(run["method"], []).append(run["seed"])
    more = "; ".join(f"{a} seeds {', '.join(map(str, s))}" for a, s in adds.items())
    return head + "\n  " + (f"adds {more}; cost: {cost}" if adds else "adds no seed beyond the pilot")


def write_times(path: Path, timed: dict[str, tuple[float, float | None]], results: dict[str, dict],
                failed: dict[str, str], wall_s: float, max_parallel: int,
                finished: bool = True) -> None:
    """Each stage's start and wall seconds (from the pipeline's start) and what it did (`run`,
    `restore`, `skip`, `recorded`, `failed`; `running` and no seconds while the call goes on),
    with the whole run's wall time so far, whether it `finished`, and the machine: how long a
    `make run` or a study took here, committed like the other results (docs/speed.md)."""
    import platform

    from core.io import write_json

    stages = {}
    for s, (start, end) in sorted(timed.items(), key=lambda kv: kv[1][0]):
        action = "failed" if s in failed else results.get(s, {}).get(
            "action", "running" if end is None else "not run")
        stages[s] = {"start_s": round(start, 1),
                     "seconds": None if end is None else round(end - start, 1), "action": action}
    write_json(path, {"wall_seconds": round(wall_s, 1), "finished": finished,
                      "max_parallel": max_parallel,
                      "machine": {"cpu": platform.processor() or platform.machine(),
                                  "cores": os.cpu_count()},
                      "stages": stages})


# The seeds-by-plan helpers read runs the way the report does (flows/report_collect.py), so
# they live here, above tasks/ (which imports nothing from flows/).
def study_runs(data_dir: Path, name: str = "", root: Path = ROOT) -> dict:
    """The runs under a study's `data_dir` (its lineage read from the dvc.lock beside it), named
    as evals/claims.yaml names them: `<name>/<arm>` outside the default study. A preset's runs
    get their training times from its record's times files (`studies/<name>/` under `root`), as
    the report gives them, so the plan's cost counts the trainings."""
    from flows.report_collect import add_train_seconds, collect
    from tasks.studies import record_dir

    found = collect(Path(data_dir), folder=f"studies/{name}" if name else "")
    if name:
        add_train_seconds(found.runs, record_dir(name, Path(root)))
    prefix = f"{name}/" if name else ""
    return {prefix + method: seeds for method, seeds in found.runs.items()}


def study_plan(root: Path, name: str, methods: list[str], seeds: list[int],
               data_dir: Path | None = None, named: bool = False
               ) -> tuple[dict[str, int], dict[str, dict], str]:
    """The study's plan from its pilot: seeds per arm (`evals.claims.planned_seeds`, arms of
    `methods` only), the `extra_runs` that run it, and what the runs not yet made cost. A claim
    may read runs of other studies (a precondition measured in a preset's study): their records
    in `studies/` are read beside this study's own runs, as the report reads them. `named`
    (a `--methods` call): a control shared with arms not named gets the seeds the named arms'
    comparisons need (`evals.claims.seed_plan`). A preset's study reads the default study's runs
    too (the `data/` of the checkout its workspace belongs to): a precondition measured on the
    default arms (gates_and_filter_add: the gates fire on arith) holds for its plan as it holds
    in the report, not undecided for want of them."""
    from evals.claims import extra_runs, plan_cost, planned_seeds, study_of
    from flows.report_collect import collect_studies
    from tasks.studies import main_checkout

    others = collect_studies(Path(root) / "studies").runs
    if name:
        main = main_checkout(root)
        others = {**study_runs(main / "data", "", main), **others}
    runs = {**{a: r for a, r in others.items() if study_of(a) != name},
            **study_runs(data_dir or Path(root) / "data", name, root)}
    planned = {a: n for a, n in planned_seeds(runs, name, methods=methods if named else None).items()
               if a in methods}
    return planned, extra_runs(planned, seeds), plan_cost(runs, name, planned)


# How often the pipeline logs its progress line while stages run (also whenever a stage ends).
PROGRESS_EVERY_S = 60


def _progress_artifact(total: int) -> object | None:
    """A progress bar in the Prefect UI's flow-run page (None where the API refuses it)."""
    from prefect.artifacts import create_progress_artifact

    try:
        return create_progress_artifact(0.0, key="pipeline-progress",
                                        description=f"stages done of {total}")
    except Exception:  # noqa: BLE001 - progress is never worth failing the study for
        return None


def _show_progress(board: Board, running: dict, preset: str | None, done: int, total: int,
                   logger, bar: object | None) -> None:
    """Log the progress line (stages done / total, each running training's step of its total
    and ETA from its MLflow run, tasks/progress.py) and move the Prefect UI's progress bar."""
    from tasks import tracking

    now = time.monotonic()
    for s in running:
        m = _MATRIX.match(s)
        if m is None or stage_kind(s) != "train":
            continue
        try:
            seen = tracking.training_progress(m["method"], int(m["seed"]), preset)
        except Exception:  # noqa: BLE001 - a busy sqlite store must not stop the study
            seen = None
        if seen:
            board.observe(s, seen[0], seen[1], now)
    logger.info(board.line(done, total, now))
    if bar is not None:
        from prefect.artifacts import update_progress_artifact

        try:
            update_progress_artifact(bar, 100.0 * done / max(1, total))  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001
            pass


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
    others' runs and stays partial."""
    from tasks import studies

    if methods:
        arms = studies.study_arms(preset, ROOT)[0]
        if not set(methods) <= set(arms):
            raise ParamsError(f"--methods {sorted(set(methods) - set(arms))} are not arms of the "
                              f"study {preset}; its arms: {arms}")
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


def quick_selection(params: Params, methods: list[str] | None,
                    seeds: list[int] | None) -> tuple[list[str], list[int]]:
    """`--quick`: params `pipeline.quick` where the command line names nothing; every method must
    be an arm of the study (`methods`), whose stages the quick run picks from."""
    quick = params.pipeline.quick
    chosen = methods or quick.methods
    extra = [m for m in chosen if m not in params.methods]
    if extra:
        raise ParamsError(f"pipeline.quick.methods {extra} are not in `methods` (the quick run "
                          "picks from the study's stages)")
    return chosen, seeds if seeds is not None else quick.seeds


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
    p.add_argument("--times-file", default=None, metavar="PATH", help="record each stage's wall "
                   "time in PATH (default: reports/times/quick.json for --quick, study.json for "
                   "the whole study, none for a partial run)")
    p.add_argument("--dry-run", action="store_true", help="print the claims' plan (seeds per arm "
                   "from the pilot, the seeds it adds, their cost) and run nothing")
    args = p.parse_args()
    if args.dry_run:
        raise SystemExit(dry_run(args))
    if args.base_seed is not None and not args.study:
        print("error: --base-seed names the second base of a study: use it with --study",
              file=sys.stderr)
        raise SystemExit(st.USER_ERROR_EXIT)
    if args.study:
        raise SystemExit(run_studies(args))
    if args.quick:
        args.methods, args.seeds = quick_selection(load(), args.methods, args.seeds)
    # `make run` and `make study` record their stage times (reports/times/); a partial run not.
    partial = args.methods or args.seeds or args.stages
    times = TIMES / ("quick.json" if args.quick else "study.json") if args.quick or not partial else None
    times = Path(args.times_file) if args.times_file else times
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


def study_names(names: list[str], base_seed: int | None = None) -> list[str]:
    """The studies `--study NAMES [--base-seed N]` runs: `all` is every preset that names arms
    (with a base seed, the default study's claim arms too), each `<name>.seed<N>` on a second base.

    >>> study_names(["hint_copier", "default.seed1"]), study_names(["hint_copier"], 2)
    (['hint_copier', 'default.seed1'], ['hint_copier.seed2'])
    """
    from evals.claims import second_base_study
    from tasks.studies import study_presets

    chosen = list(names)
    if names == ["all"]:
        chosen = (["default"] if base_seed is not None else []) + study_presets(ROOT)
    if base_seed is None:
        return chosen
    return [second_base_study("" if n == "default" else n, base_seed) for n in chosen]


def dry_run(args: argparse.Namespace) -> int:
    """`--dry-run`: the plan of this workspace's study (or of each `--study`'s record, from its
    committed runs in studies/<name>/) and its cost; nothing runs, nothing is written."""
    from tasks import studies

    try:
        if not args.study:
            extend_by_plan(load(), print, write=False, methods=args.methods)
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
