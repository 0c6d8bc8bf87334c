"""Running DVC stages from Prefect: the DAG read from DVC, one stage run, its record in dvc.lock.

DVC owns the DAG, the hashes, the cache and the remote; these helpers let several stages run at
once, which `dvc repro` cannot do in one workspace: it holds the repository lock for as long as a
stage's command runs. The design (docs/pipeline.md, "How stages run side by side"):

- **In place, one workspace (`reproduce_in_place`).** DVC is asked, under the lock, what a stage
  needs (`dvc repro -s STAGE --dry`: run it, restore it from the run-cache, or nothing). To run
  it, its outputs are removed and its command (read from DVC) runs *without* the lock, as many at
  once as the pipeline allows; then `dvc commit -f STAGE` records it in dvc.lock and in DVC's
  run-cache, under the lock again. The lock is held for seconds per stage, never for a training.
  Stages of a matrix write disjoint outputs, and a stage only starts once the stages it depends
  on are recorded, so two commands never touch the same file.
- **On a worker (`reproduce_on_worker`).** A worker is a separate clone: it checks out the
  coordinator's commit, restores the stage's upstream outputs from the DVC remote's run-cache
  (`dvc repro --pull`), runs the stage in place and pushes the result with its run-cache entry
  (`push_stage`).
  The coordinator then restores the stage from that entry (`restore_from_remote`) without
  running anything. Models, data and the `cache: false` metrics all travel through the DVC
  remote; nothing is copied by hand.

Commands stream their output into the Prefect task log and die with their whole process group at
the timeout (Prefect's own timeout cannot interrupt a thread blocked on a child process).

**Fencing a Crashed attempt.** The pool's automation (tasks/pool.py) marks a flow run Crashed when
its heartbeats stop, and the pipeline retries the stage elsewhere; but a worker cut off from the
API (a network partition, a stuck heartbeat thread) may still be running the first attempt, which
would then write beside its retry (outputs, the run-cache entry, the MLflow run the retry
supersedes). A worker's stage therefore runs under a fence (`flow_run_fence`): every few
seconds it reads its own flow run's state, and the stage's process group is killed, and nothing
committed or pushed, as soon as that state is no longer Running or could not be confirmed for
`FENCE_LEASE_S`, shorter than the automation's window. A look at the state that gets no answer
within `FENCE_ANSWER_S` counts as unconfirmed (a partition that drops packets would hold Prefect's
client for minutes of timeouts and retries); so an attempt stops at most `FENCE_STOP_WITHIN_S`
after its last confirmed Running, which came before it was marked Crashed, and the pipeline
retries a Crashed stage only after waiting that long (`outlive_crashed_attempt`): the retry
starts once the first attempt has stopped itself, whatever failed.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from core.params import ROOT

# Matrix stages are named `<stage>@<method>-<seed>` by DVC; a seed the claims' plan added to one
# arm (params `extra_runs`) is `<stage>_extra@<method>-<seed>`.
MATRIX = re.compile(r"^(?P<kind>[^@]+)@(?P<method>.+)-(?P<seed>-?\d+)$")
EXTRA = "_extra"
# The base's further sampling draws (params `base_draws`): `evaluate_base_draw@<d>`.
BASE_DRAW = re.compile(r"^evaluate_base_draw@(?P<draw>\d+)$")
# What a stage that ran nothing reports (`reproduce_in_place`).
UP_TO_DATE = ("skip", "recorded")


def stage_kind(stage: str) -> str:
    """`train` for `train@a-0` and `train_extra@a-3`; a foreach stage's name without its item;
    the stage's name for any other stage.

    >>> stage_kind("train_extra@rlme-3"), stage_kind("evaluate@rlme-0"), stage_kind("report")
    ('train', 'evaluate', 'report')
    >>> stage_kind("evaluate_base_draw@2")
    'evaluate_base_draw'
    """
    m = MATRIX.match(stage)
    return m["kind"].removesuffix(EXTRA) if m else stage.partition("@")[0]


def run_of(stage: str) -> tuple[str, int | None]:
    """(method, seed) of a train or evaluate stage; ("base", None) for `evaluate_base` (and any
    stage that is neither), ("base", d) for the base's draw d, `evaluate_base_draw@<d>`.

    >>> run_of("train_extra@rlme-3"), run_of("evaluate_base"), run_of("evaluate_base_draw@2")
    (('rlme', 3), ('base', None), ('base', 2))
    """
    if m := MATRIX.match(stage):
        return m["method"], int(m["seed"])
    draw = BASE_DRAW.match(stage)
    return "base", int(draw["draw"]) if draw else None


class StageFailed(RuntimeError):
    """A DVC stage (or a DVC command around it) failed; the message says which and why in a line."""


class StageInputError(StageFailed):
    """The stage rejected its input (exit 2: bad params, malformed rows, a missing file): the same
    input fails the same way, so the pipeline does not retry it."""


class Fenced(StageFailed):
    """This attempt lost its claim to the stage (its flow run is no longer Running, or that could
    not be confirmed for the lease): it was stopped before writing anything more."""


# The exit code of a user error (core/cli.py `run_main`: "fix your input").
USER_ERROR_EXIT = 2
# A fenced attempt stops itself when it could not confirm that its flow run is Running for this
# long; two thirds of the zombie automation's window (tasks/pool.py, 90 s), so a worker cut off
# from the API usually stops before the automation marks it Crashed. What guarantees it has
# stopped before the retry starts is the pipeline's wait (`outlive_crashed_attempt`).
FENCE_LEASE_S = 60.0
FENCE_EVERY_S = 10.0
# A command that has exited but left a process of its group holding its output open (a study's
# inner pipeline killed while its temporary Prefect server runs) is ended after this long, so the
# caller is not left reading a pipe that never closes.
ORPHANS_GRACE_S = 30.0
# A look at the flow run's state that has not answered after this long counts as unconfirmed (the
# read goes on in the background; the lease decides meanwhile).
FENCE_ANSWER_S = 5.0
# The longest a fenced attempt runs on after its last confirmation of Running: the lease, then at
# most one interval and one unanswered look before the fence notices. The pipeline waits this
# long after a Crashed attempt before its retry.
FENCE_STOP_WITHIN_S = FENCE_LEASE_S + FENCE_EVERY_S + FENCE_ANSWER_S
_sleep = time.sleep
# A fence: None while this attempt may go on writing, else why not.
Fence = Callable[[], "str | None"]


def reason(tail: list[str]) -> str:
    """The one line of a failed command's output that says why: its `error: ...` line (a user
    error, core/cli.py), else the last exception line of a traceback, else its last line.

    >>> reason(["Traceback (most recent call last):", '  File "x.py"', "KeyError: 'a'", "done"])
    "KeyError: 'a'"
    >>> reason(["loading", "error: params.yaml: grpo.lr: unknown key"])
    'params.yaml: grpo.lr: unknown key'
    """
    import re

    for line in reversed(tail):
        if line.startswith("error: "):
            return line.removeprefix("error: ")
    for line in reversed(tail):
        if re.match(r"^[\w.]*(Error|Exception|Interrupt|Exit)\b", line):
            return line
    return tail[-1] if tail else "no output"


def failure(stage: str, rc: int, tail: list[str]) -> StageFailed:
    """The exception for a stage command that exited `rc`: one line naming the stage and why."""
    kind = StageInputError if rc == USER_ERROR_EXIT else StageFailed
    why = f"killed by {signal.Signals(-rc).name}" if rc < 0 else reason(tail)
    return kind(f"stage {stage} failed (exit {rc}): {why}")


# One DVC command at a time from this process: DVC's repository lock is per workspace and fails
# at once when taken (`--wait-for-lock` covers other processes, e.g. a user's `dvc status`).
_DVC_LOCK = threading.Lock()
_TAIL = 15


def stage_env(threads: int | None = None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a stage runs in: this interpreter's bin first, `threads` CPU threads,
    `extra` on top (e.g. the pipeline invocation's MLflow parent run)."""
    env = dict(os.environ, **(extra or {}))
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    env.setdefault("DVC_NO_ANALYTICS", "1")
    if threads:
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[var] = str(threads)
    return env


def dvc_executable() -> str:
    local = Path(sys.executable).parent / "dvc"
    return str(local) if local.exists() else (shutil.which("dvc") or "dvc")


def run_command(cmd: list[str] | str, cwd, log: Callable[[str], object], timeout_s: float | None = None,
                env: dict[str, str] | None = None, fence: Fence | None = None,
                fence_every_s: float | None = None,
                orphans_grace_s: float = ORPHANS_GRACE_S) -> tuple[int, list[str], bool]:
    """Run `cmd` (a string runs in a shell), streaming output lines to `log`; kill its process
    group after `timeout_s` seconds, or as soon as `fence` (asked every `fence_every_s` seconds)
    gives a reason: then `Fenced` is raised. Processes of its group still holding its output
    `orphans_grace_s` after it exited are killed. Returns (exit code, last lines, timed out)."""
    every = FENCE_EVERY_S if fence_every_s is None else fence_every_s
    tail: deque[str] = deque(maxlen=_TAIL)
    fenced: list[str] = []
    with subprocess.Popen(cmd, cwd=cwd, env=env or stage_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, start_new_session=True,
                          shell=isinstance(cmd, str)) as proc:
        timer = threading.Timer(timeout_s, lambda: os.killpg(proc.pid, signal.SIGKILL)) \
            if timeout_s else None
        if timer:
            timer.start()
        done = threading.Event()
        watcher = threading.Thread(target=_watch_fence, daemon=True,
                                   args=(fence, every, done, fenced, proc.pid)) \
            if fence else None
        if watcher:
            watcher.start()
        reaper = threading.Thread(target=_reap_orphans, args=(proc, orphans_grace_s, done), daemon=True)
        reaper.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                line = line.rstrip()
                if line:
                    tail.append(line)
                    log(line)
            rc = proc.wait()
        finally:
            timed_out = bool(timer) and not timer.is_alive() and proc.returncode == -signal.SIGKILL
            if timer:
                timer.cancel()
            done.set()
            if watcher:
                watcher.join()
    if fenced:
        raise Fenced(f"stopped: {fenced[0]}")
    return rc, list(tail), timed_out


def _reap_orphans(proc: subprocess.Popen, grace_s: float, done: threading.Event) -> None:
    """Once `proc` has exited, give its output `grace_s` seconds to close (`done`); then kill what
    is left of its process group, whose last member holds the pipe the caller reads."""
    proc.wait()
    if not done.wait(grace_s):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


def _watch_fence(fence: Fence, every_s: float, done: threading.Event, fenced: list[str],
                 pgid: int) -> None:
    """Ask `fence` every `every_s` seconds until `done`; on a reason, kill the process group."""
    while not done.wait(every_s):
        why = fence()
        if why:
            fenced.append(why)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            return


def check_fence(fence: Fence | None, before: str) -> None:
    """Raise `Fenced` if this attempt may no longer write (asked right `before` a write)."""
    why = fence() if fence else None
    if why:
        raise Fenced(f"stopped before {before}: {why}")


def flow_run_fence(flow_run_id: str, lease_s: float = FENCE_LEASE_S,
                   read_state: Callable[[str], str] | None = None,
                   clock: Callable[[], float] = time.monotonic,
                   answer_within_s: float | None = None) -> Fence:
    """A fence for the flow run `flow_run_id` (a worker's `stage_flow`): None while the run is
    Running; a reason once it is in any other state (Crashed by the zombie automation,
    Cancelled), or once it has not been confirmed Running for `lease_s` seconds. `read_state` (the
    state's type name, e.g. "RUNNING") defaults to asking the Prefect API; each look runs in a
    thread of its own and is waited on for `answer_within_s` (default `FENCE_ANSWER_S`) at most,
    so an API that never answers cannot hold the fence past its lease. A confirmation counts
    from the moment its look began."""
    read = read_state or _prefect_state_type
    last_ok = clock()
    looking: list[tuple[float, threading.Event, dict]] = []  # the look in flight, if any
    lock = threading.Lock()

    def look() -> tuple[float, threading.Event, dict]:
        began, answered, box = clock(), threading.Event(), {}

        def ask() -> None:
            try:
                box["state"] = read(flow_run_id)
            except Exception as exc:  # noqa: BLE001 - any failure to confirm counts against the lease
                box["error"] = exc
            answered.set()

        # In this context's copy: the Prefect settings the caller runs under hold in the thread.
        threading.Thread(target=contextvars.copy_context().run, args=(ask,), daemon=True,
                         name=f"fence {flow_run_id}").start()
        return began, answered, box

    def fence() -> str | None:
        nonlocal last_ok
        with lock:
            if not looking:
                looking.append(look())
            began, answered, box = looking[0]
            answered.wait(FENCE_ANSWER_S if answer_within_s is None else answer_within_s)
            why: object = "no answer yet"
            if answered.is_set():
                looking.clear()
                if "error" in box:
                    why = f"{type(box['error']).__name__}: {box['error']}"
                elif box["state"] != "RUNNING":
                    return f"flow run {flow_run_id} is {box['state']} (its retry may be running elsewhere)"
                else:
                    last_ok = max(last_ok, began)
            if clock() - last_ok > lease_s:
                return (f"flow run {flow_run_id} not confirmed Running for {lease_s:g} s "
                        f"({why}); its retry may be running elsewhere")
            return None

    return fence


def outlive_crashed_attempt(stage: str, log: Callable[[str], object] = print) -> None:
    """Wait until a Crashed attempt of `stage` has certainly stopped itself (its fence gives it at
    most `FENCE_STOP_WITHIN_S` after its last confirmed Running, which came before the Crash),
    so that its retry never writes beside it. The pipeline calls this before retrying."""
    log(f"{stage}: its attempt was marked Crashed; waiting {FENCE_STOP_WITHIN_S:g} s for its "
        "fence to stop it in case its worker is alive but cut off, before the retry")
    _sleep(FENCE_STOP_WITHIN_S)


def _prefect_state_type(flow_run_id: str) -> str:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        run = client.read_flow_run(flow_run_id)
    return run.state.type.name if run.state is not None else "UNKNOWN"


def dvc(args: list[str], root: Path, log: Callable[[str], object] = lambda _: None,
        what: str | None = None) -> list[str]:
    """Run one DVC command in `root` under the lock; raise StageFailed naming `what` on failure."""
    with _DVC_LOCK:
        rc, tail, _ = run_command([dvc_executable(), "--wait-for-lock", *args], root, log)
    if rc != 0:
        raise StageFailed(f"{what or 'dvc ' + args[0]} failed (dvc exit {rc}): {reason(tail)}")
    return tail


def stage_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """The DAG of dvc.yaml as DVC builds it: stage name -> the stages it depends on."""
    from dvc.repo import Repo

    # From the project's root: DVC names a stage of another folder's dvc.yaml by its path.
    with _DVC_LOCK, contextlib.chdir(root), Repo(str(root)) as repo:
        graph = repo.index.graph  # edges point from a stage to the stages it depends on
        return {s.addressing: {d.addressing for d in graph.successors(s)} for s in graph.nodes}


def stage_command(stage: str, root: Path = ROOT) -> tuple[str, list[Path]]:
    """The stage's resolved command and the outputs DVC removes before running it."""
    from dvc.repo import Repo

    with _DVC_LOCK, Repo(str(root)) as repo:
        (st,) = repo.stage.collect(_address(stage, root))
        outs = [Path(o.fs_path) for o in st.outs if not o.persist]
        cmd = st.cmd if isinstance(st.cmd, str) else " && ".join(st.cmd)
    return cmd, outs


def _address(stage: str, root: Path) -> str:
    # A bare target is resolved against the current directory; name the project's dvc.yaml.
    return f"{Path(root).resolve() / 'dvc.yaml'}:{stage}"


def plan(stage: str, root: Path = ROOT, pull: bool = False) -> str:
    """What `dvc repro -s STAGE` would do now: `skip` (up to date), `restore` (DVC's run-cache
    holds outputs for the current inputs) or `run`. With `pull`, the outputs a run-cache entry
    names are downloaded from the DVC remote first (as `dvc repro --pull` does).

    Asked through DVC's API rather than `dvc repro --dry`, whose run-cache answer uses the input
    hashes recorded in dvc.lock rather than the workspace's (so it claims "cached" for a stage
    whose inputs have just changed). DVC is pinned (pyproject.toml); tests/test_stages.py covers
    each answer.
    """
    from dvc.dependency.base import DependencyDoesNotExistError
    from dvc.repo import Repo
    from dvc.stage.serialize import to_single_stage_lockfile

    # DVC's API resolves some paths against the current directory: work from the project root.
    with _DVC_LOCK, contextlib.chdir(root), Repo(str(root)) as repo, repo.lock:
        (st,) = repo.stage.collect(_address(stage, root))
        if not st.changed():
            return "skip"
        if pull:  # the remote's run-cache entries (small files), as `dvc repro --pull` does
            repo.stage_cache.pull(None)
        try:
            if not run_cache_applies(st):
                return "run"
            # The decision of dvc.stage.cache.StageCache.restore (DVC 3.67), without its
            # checkout: inputs unchanged -> the outputs recorded in dvc.lock; else the run-cache
            # entry keyed by the inputs as they are now.
            if (not st.changed_stage() and st.deps_cached()
                    and all(bool(o.hash_info) for o in st.outs)):
                entry = to_single_stage_lockfile(st)
            else:
                st.save_deps()  # hash the inputs as they are now (in memory only)
                entry = repo.stage_cache._load(st)
        except (DependencyDoesNotExistError, FileNotFoundError):
            return "run"  # an input is missing: the command will fail and name it
        if not entry:
            return "run"
        cached = repo.stage_cache._create_stage(entry, wdir=st.wdir)
        if pull:
            for objs in cached.get_used_objs().values():
                repo.cloud.pull(objs)
        return "restore" if cached.outs_cached() else "run"


def run_cache_applies(stage) -> bool:
    """Whether DVC's run cache can hold `stage` (a `dvc.stage.Stage`): a command, local inputs
    that hash, local outputs in the repository, none persistent, not always changed.

    Our own copy of `dvc.stage.cache._can_hash` (DVC 3.67): DVC offers no public API for it, and a
    private name may go in any release; tests/test_stages.py runs `plan` through every answer.
    """
    if stage.is_callback or stage.always_changed or not (stage.cmd and stage.deps and stage.outs):
        return False
    return (all(d.protocol == "local" and d.def_path and d.get_hash() for d in stage.deps)
            and all(o.protocol == "local" and o.def_path and not o.persist and o.is_in_repo
                    for o in stage.outs))


def recorded(stage: str, root: Path = ROOT) -> bool:
    """Whether `stage` may keep its record instead of running: a study resumed on another disk
    (a fresh clone) has its results of record (git) but not the models DVC cached where it last
    ran, and retraining a run only to rebuild a checkpoint nothing will read costs its training
    again. True when, against dvc.lock: the stage's definition is unchanged; every input present
    is unchanged, and an input missing is another stage's output recorded with the same hash;
    every output present is unchanged (at least one: its result of record), the others are only
    missing; and every stage that reads a missing output is itself recorded (an evaluation whose
    code changed makes its training run again). Opt-in (`reproduce_in_place(keep_recorded=)`):
    `make run` and `dvc repro` still train.
    """
    from dvc.repo import Repo

    with _DVC_LOCK, contextlib.chdir(root), Repo(str(root)) as repo, repo.lock:
        stages = {s.addressing: s for s in repo.index.stages}
        target = stages.get(_address(stage, root)) or stages.get(stage)
        produced = {(str(o.fs_path), o.hash_info) for s in stages.values() for o in s.outs}
        return target is not None and _recorded(target, stages, produced, set())


def _recorded(stage, stages: dict, produced: set, seen: set[str]) -> bool:
    if stage.addressing in seen:
        return True
    seen.add(stage.addressing)
    if not stage.outs or any(not o.hash_info for o in stage.outs) or stage.changed_stage():
        return False  # never recorded, or its command or definition changed
    absent = False  # an input or output recorded but not on this disk: else up to date or changed
    for dep in stage.deps:
        if dep.status():
            if getattr(dep, "exists", True) or (str(dep.fs_path), dep.hash_info) not in produced:
                return False  # changed, or missing and no stage recorded it
            absent = True
    missing = []
    for out in stage.outs:
        if out.status():
            if out.exists:
                return False  # changed since it was recorded
            missing.append(str(out.fs_path))
    if len(missing) == len(stage.outs) or not (absent or missing):
        return False  # nothing of record on this disk, or nothing absent
    readers = [s for s in stages.values() if s is not stage and any(
        _within(str(d.fs_path), m) or _within(m, str(d.fs_path)) for d in s.deps for m in missing)]
    return all(_recorded(r, stages, produced, seen) for r in readers)


def output_hash(stage: str, path: str, root: Path = ROOT) -> str | None:
    """The hash dvc.lock records for `stage`'s output `path` (as dvc.yaml names it), provided the
    file or folder in `root` is that very output; else None (never recorded, changed, absent)."""
    from dvc.repo import Repo

    with _DVC_LOCK, contextlib.chdir(root), Repo(str(root)) as repo, repo.lock:
        (st,) = repo.stage.collect(_address(stage, root))
        for out in st.outs:
            if out.def_path == path:
                return None if not out.hash_info or out.status() else str(out.hash_info.value)
    return None


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def remove(path: Path) -> None:
    """Delete a file, a link or a folder tree; nothing if absent."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def reproduce_in_place(stage: str, root: Path = ROOT, *, force: bool = False,
                       timeout_s: float | None = None, threads: int | None = None,
                       log: Callable[[str], object] = print,
                       extra_env: dict[str, str] | None = None, fence: Fence | None = None,
                       keep_recorded: bool = False) -> str:
    """Bring `stage` up to date in `root` as `dvc repro -s` would, holding DVC's lock only around
    the bookkeeping. Returns `skip` (up to date), `restore` (from the run-cache) or `run`; with
    `keep_recorded`, `recorded` for a stage whose record stands though its cached outputs are not
    on this disk (`recorded`: nothing runs, dvc.lock keeps its entry).
    Under a `fence`, the command is killed and nothing recorded once the fence says so."""
    action = "run" if force else plan(stage, root)
    if action == "skip":
        log(f"{stage}: up to date")
        return action
    if action == "run" and keep_recorded and not force and recorded(stage, root):
        log(f"{stage}: recorded (its results of record are current; its cached outputs are not "
            "on this disk)")
        return "recorded"
    if action == "restore":
        dvc(["repro", "-s", stage], root, log, what=f"restoring {stage} from the run-cache")
        return action
    cmd, outs = stage_command(stage, root)
    for out in outs:
        remove(out)
    if force:  # a forced training starts afresh instead of resuming its finished run
        for resumable in {c for out in outs for c in out.parent.glob("checkpoint-*")}:
            remove(resumable)
    log(f"{stage}: {cmd}")
    check_fence(fence, f"running {stage}")
    rc, tail, timed_out = run_command(cmd, root, log, timeout_s,
                                      env=stage_env(threads, extra_env), fence=fence)
    if timed_out:
        raise StageFailed(f"stage {stage} timed out after {timeout_s:g} s and was killed")
    if rc != 0:
        raise failure(stage, rc, tail)
    check_fence(fence, f"recording {stage}")
    dvc(["commit", "-f", stage], root, log, what=f"recording {stage} in dvc.lock")
    return action


def git(args: list[str], root: Path) -> str:
    r = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=300,
                       check=False)
    if r.returncode != 0:
        raise StageFailed(f"git {' '.join(args)} failed in {root}: {r.stderr.strip()[-500:]}")
    return r.stdout.strip()


# Tracked files the pipeline itself rewrites while it runs: results, not code or params. (Here, not
# in core/paths.py: that file is in every run's code digest, flows/configure.py.)
RESULT_PATHS = ("dvc.lock", "data/", "reports/", "studies/")


def code_changes(porcelain: str) -> list[str]:
    """The changed tracked paths in `git status --porcelain` output that are not results
    (RESULT_PATHS): the code and params that differ from the commit.

    >>> code_changes(" M dvc.lock\\n M flows/report.py\\n M reports/summary.md")
    ['flows/report.py']
    """
    changed = [line.split(maxsplit=1)[1] for line in porcelain.splitlines() if line.strip()]
    return [p for p in changed if not p.startswith(RESULT_PATHS)]


def committed_revision(root: Path = ROOT) -> str:
    """HEAD, provided the code and params in `root` are committed (workers run that commit; the
    results the pipeline rewrites, RESULT_PATHS, may differ from it)."""
    dirty = code_changes(git(["status", "--porcelain", "--untracked-files=no"], root))
    if dirty:
        raise StageFailed("the pool executor runs the committed code on every worker; commit "
                          f"(and push to the workers' git remote) first: {', '.join(dirty[:8])}")
    return git(["rev-parse", "HEAD"], root)


def reproduce_on_worker(stage: str, rev: str, upstream: list[str], root: Path = ROOT, *,
                        force: bool = False, timeout_s: float | None = None,
                        threads: int | None = None, log: Callable[[str], object] = print,
                        extra_env: dict[str, str] | None = None, fence: Fence | None = None) -> str:
    """In a worker's clone: check out `rev`, restore `upstream` from the DVC remote, reproduce
    `stage`, push its outputs and run-cache entry to the remote; under `fence`
    (`flow_run_fence`), nothing is run, recorded or pushed once this attempt is fenced off."""
    git(["fetch", "--quiet", "origin"], root)
    git(["checkout", "--quiet", "--force", "--detach", rev], root)
    if upstream:
        # Restores each upstream stage from the remote's run-cache (runs one only if no worker
        # has recorded it: then this is still correct, just slower).
        dvc(["repro", "--pull", *upstream], root, log, what=f"restoring the inputs of {stage}")
    action = reproduce_in_place(stage, root, force=force, timeout_s=timeout_s, threads=threads,
                                log=log, extra_env=extra_env, fence=fence)
    if action != "run":  # a run records its run-cache entry itself; make sure the others have one
        check_fence(fence, f"recording {stage}")
        dvc(["commit", "-f", stage], root, log, what=f"recording {stage}")
    check_fence(fence, f"pushing {stage}")
    push_stage(stage, root, log)
    return action


def push_stage(stage: str, root: Path = ROOT, log: Callable[[str], object] = print) -> None:
    """Send a recorded stage's run-cache entry and every output it names to the DVC remote.

    `dvc push --run-cache` sends the entries but only the outputs DVC caches, not the
    `cache: false` metrics and curves, without which the entry cannot be restored elsewhere; the
    run-cache holds a copy of those too, and this pushes them (as `dvc repro --pull` pulls them).

    The outputs go first, the entry last: the coordinator and other workers take an entry on the
    remote as "this stage is done", so a worker killed mid-push must leave no entry that names
    outputs the remote does not have (the remote's objects are content-addressed, so outputs
    pushed without their entry are harmless).
    """
    from dvc.repo import Repo

    with _DVC_LOCK, contextlib.chdir(root), Repo(str(root)) as repo, repo.lock:
        (st,) = repo.stage.collect(_address(stage, root))
        entry = repo.stage_cache._load(st)
        if not entry:
            raise StageFailed(f"{stage}: no run-cache entry to push (record it with dvc commit -f)")
        cached = repo.stage_cache._create_stage(entry, wdir=st.wdir)
        for objs in cached.get_used_objs().values():
            repo.cloud.push(objs)
        repo.stage_cache.push(None)
    log(f"{stage}: pushed to the DVC remote with its run-cache entry")


def publish_run_cache(root: Path = ROOT, stages: list[str] | None = None,
                      log: Callable[[str], object] = print) -> None:
    """Make stages that are up to date here restorable by workers: record their run-cache entry
    (`dvc repro` skips it for stages with `cache: false` outputs) and push everything."""
    for stage in stages or []:
        dvc(["commit", "-f", stage], root, log, what=f"recording {stage}")
        push_stage(stage, root, log)


def restore_from_remote(stage: str, root: Path = ROOT, log: Callable[[str], object] = print) -> None:
    """Record a stage a worker ran: restore it from the remote's run-cache, never run it here."""
    action = plan(stage, root, pull=True)
    if action == "run":
        raise StageFailed(f"{stage}: the worker finished but the DVC remote has no run-cache "
                          "entry matching this workspace (different code, params or inputs?)")
    if action == "restore":
        dvc(["repro", "-s", stage], root, log, what=f"restoring {stage} from the run-cache")


def stage_outputs(stage: str, root: Path = ROOT) -> dict:
    """Small records a stage leaves behind (metrics, collapse verdict) for the flow's result."""
    kind, _, item = stage.partition("@")
    method, _, seed = item.rpartition("-")
    files = {"evaluate_base": root / "data" / "eval" / "base" / "metrics.json",
             "evaluate_base_draw": root / "data" / "eval" / "base" / f"draw{item}" / "metrics.json",
             "evaluate": root / "data" / "eval" / method / f"seed{seed}" / "metrics.json",
             "train": root / "data" / "checkpoints" / method / f"seed{seed}" / "run.json",
             "build_base": root / "data" / "base_model_info.json"}
    f = files.get(kind)
    if f is None or not f.exists():
        return {}
    record = json.loads(f.read_text())
    return {k: v for k, v in record.items() if k != "heldout"} if isinstance(record, dict) else {}
