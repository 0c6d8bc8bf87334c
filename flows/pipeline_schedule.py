"""The pipeline's scheduling, without Prefect: which stages, in which order, on how many cores and
GPUs, and the stage times it records (flows/pipeline.py runs them; its module docstring says how).

Everything here is a pure function of the DAG (`tasks.stages.stage_graph`), params and the
recorded stage times, so it is tested without a server (tests/test_stages.py,
tests/test_pipeline_plan.py, tests/test_gpu_infra_pool.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection
from pathlib import Path

from core.params import ROOT, Params, ParamsError
from tasks import stages as st
from tasks.progress import Board

# The committed record of what `make run` (quick.json) and `make study` (study.json) cost here
# (README's `make run` line, docs/speed.md): written only on purpose (`--record-times`).
TIMES = ROOT / "reports" / "times"
# Where every call writes its stage times by default: ignored by git (`/reports/*`), so a re-run
# leaves `git status` clean; the scheduler and the dry run read it beside the record.
LAST_RUN = ROOT / "reports" / "last_run"
# Matrix stages (`train@a-0`, `train_extra@a-3`): tasks/stages.py.
_MATRIX, EXTRA, stage_kind = st.MATRIX, st.EXTRA, st.stage_kind

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

    The base's further draws (`evaluate_base_draw@<d>`) follow the seeds chosen: draw d with
    seed d, every draw when no seeds are named.

    >>> g = {"prepare": set(), "train@a-0": {"prepare"}, "train@a-1": {"prepare"},
    ...      "evaluate_base_draw@1": {"prepare"}, "evaluate_base_draw@2": {"prepare"}}
    >>> select(g, seeds=[1]), len(select(g))
    (['prepare', 'train@a-1', 'evaluate_base_draw@1'], 5)
    """
    known = sorted({m["method"] for s in graph if (m := _MATRIX.match(s))})
    unknown = sorted(set(methods or []) - set(known))
    if unknown:
        raise ParamsError(f"methods {unknown} have no DVC stage; add them to `methods` in "
                          f"params.yaml (stages exist for: {', '.join(known)})")
    have = sorted({int(m["seed"]) for s in graph if (m := _MATRIX.match(s))
                   and (methods is None or m["method"] in methods)})
    absent = sorted(set(seeds or []) - set(have))
    if absent:
        raise ParamsError(f"seeds {absent} have no DVC stage{' of ' + ', '.join(methods) if methods else ''}; "
                          f"add them to `seeds` in params.yaml (stages exist for seeds: "
                          f"{', '.join(map(str, have))})")
    missing = sorted(set(stages or []) - set(graph))
    if missing:
        raise ParamsError(f"no DVC stage named {missing}; `dvc stage list` shows them")

    def wanted(stage: str) -> bool:
        if draw := st.BASE_DRAW.match(stage):  # the base sampled like the seeds chosen
            return seeds is None or int(draw["draw"]) in seeds
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
    chosen, out = set(order), dict[str, int]()
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


def recorded_seconds(*folders: Path) -> dict[str, float]:
    """Each stage's longest wall time among the runs recorded in `folders` (`write_times`; default
    the record, `TIMES`, and this checkout's last calls, `LAST_RUN`), for scheduling."""
    from core.io import read_json

    out: dict[str, float] = {}
    for f in sorted(f for folder in folders or (TIMES, LAST_RUN) for f in Path(folder).glob("*.json")):
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
    return 1 if kind in ("evaluate", "evaluate_base", "evaluate_base_draw") else 0


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


def write_times(path: Path, timed: dict[str, tuple[float, float | None]], results: dict[str, dict],
                failed: dict[str, str], wall_s: float, max_parallel: int,
                finished: bool = True) -> None:
    """Each stage's start and wall seconds (from the pipeline's start) and what it did (`run`,
    `restore`, `skip`, `recorded`, `failed`; `running` and no seconds while the call goes on),
    with the whole run's wall time so far, whether it `finished`, and the machine: how long a
    `make run` or a study took here (`times_path` says where: a run of record's is committed,
    docs/speed.md)."""
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


def arm_of(stage: str) -> str | None:
    """The arm a train/evaluate stage runs (`train@rlme-0`, `evaluate_extra@rlme-3`: `rlme`)."""
    return m["method"] if (m := _MATRIX.match(stage)) else None


def times_path(quick: bool, partial: bool, record: bool = False, given: str | None = None) -> Path | None:
    """Where a call writes its stage times: `given`; else `make run`'s (`quick`) and the whole
    study's go to `reports/last_run/` (ignored by git: a re-run leaves `git status` clean), or
    with `record` to the committed `reports/times/`; a partial run writes none.

    >>> [str(times_path(*a).relative_to(ROOT)) for a in ((True, True), (False, False, True))]
    ['reports/last_run/quick.json', 'reports/times/study.json']
    >>> times_path(False, True) is None, str(times_path(True, False, True, "/tmp/t.json"))
    (True, '/tmp/t.json')
    """
    if given:
        return Path(given)
    if not quick and partial:
        return None
    return (TIMES if record else LAST_RUN) / ("quick.json" if quick else "study.json")


# How often the pipeline logs its progress line while stages run (also whenever a stage ends).
PROGRESS_EVERY_S = 60


def progress_artifact(total: int) -> object | None:
    """A progress bar in the Prefect UI's flow-run page (None where the API refuses it)."""
    from prefect.artifacts import create_progress_artifact

    try:
        return create_progress_artifact(0.0, key="pipeline-progress",
                                        description=f"stages done of {total}")
    except Exception:  # noqa: BLE001 - progress is never worth failing the study for
        return None


def show_progress(board: Board, running: dict, preset: str | None, done: int, total: int,
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
