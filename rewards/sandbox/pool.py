"""The trainer side of the style-check sandbox: worker processes, deadlines, retries, counters.

See :mod:`rewards.sandbox` for the design and :mod:`rewards.sandbox.worker` for the protocol.
A call is a list of cells (response, check). The parent sends them to a worker and watches the
worker's progress in shared memory: a cell that shows no status for the wall limit has hung.
When a cell hangs or crashes, or the worker leaves after a cell (memory grew, timeout
swallowed), the cells not yet answered go to a fresh worker.
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import json
import logging
import mmap
import os
import secrets
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Sequence

from rewards.sandbox import worker as protocol
from rewards.sandbox.policy import static_rejection_reason

try:
    import resource
except ImportError:  # pragma: no cover - non-Unix; the worker refuses to start there
    resource = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

DEFAULT_CPU_SECONDS = 0.2
DEFAULT_MEMORY_MB = 512
RECYCLE_MARGIN_BYTES = 32 * 1024 * 1024
WORKER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
# Fixed glibc mmap threshold: freed large blocks go back to the kernel at once instead of
# raising the threshold and lingering in the heap (which would look like leftover memory).
MALLOC_MMAP_THRESHOLD = 128 * 1024
SHM_CELLS = 65536  # status bytes shared with a worker; a longer call goes in several batches
# What the worker needs once it serves batches (measured with strace on CPython 3.11: reading
# the batch, reporting, memory, the CPU timer and RLIMIT_CPU re-arming, exiting). Everything else
# (open, unlink, rename, chmod, mkdir, symlink, kill, fork, socket, ptrace, mount, chroot,
# unshare, setns, ...) fails with EPERM. prlimit64 is allowed on the worker itself only (pid 0).
SECCOMP_ALLOWED = (
    "read", "write", "pread64", "readv", "writev", "close", "lseek",
    "brk", "mmap", "munmap", "mremap", "madvise", "mprotect",
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "restart_syscall",
    "setitimer", "getitimer", "getrusage", "times", "clock_gettime", "clock_getres",
    "gettimeofday", "time", "nanosleep", "clock_nanosleep",
    "getpid", "gettid", "futex", "getrandom", "sched_yield", "exit", "exit_group",
)
# The hardening a worker reports in its ready line when the OS layer is whole.
OS_LAYER = frozenset({"chroot", "pidns", "netns", "seccomp"})

Cell = tuple[int, int]  # (response id, check id)

_STATUS_COUNTER = {protocol.RAISED: "raised", protocol.TIMED_OUT: "timed_out",
                   protocol.NON_BOOL: "non_bool", protocol.CRASHED: "crashed",
                   protocol.SKIPPED: "skipped"}
_HANGS = (protocol.TIMED_OUT, protocol.CRASHED)
REJECTED = "r"
OUTCOMES = {protocol.TRUE: "true", protocol.FALSE: "false", REJECTED: "rejected",
            **_STATUS_COUNTER}


@dataclasses.dataclass
class SandboxCounters:
    """Running totals since the sandbox was created, for logging (e.g. as MLflow metrics).

    ``rejected`` counts sources per call, ``recycled`` worker replacements because memory grew,
    ``worker_restarts`` every replacement; the others count cells.
    """

    rejected: int = 0
    raised: int = 0
    timed_out: int = 0
    non_bool: int = 0
    crashed: int = 0
    skipped: int = 0
    worker_restarts: int = 0
    recycled: int = 0

    def as_dict(self) -> dict[str, int]:
        """Plain dict copy, ready for a metrics logger."""
        return dataclasses.asdict(self)


class SandboxError(RuntimeError):
    """The worker process cannot be started at all (an environment problem, not a bad check)."""


class _Worker:
    """One worker process plus a line reader with deadlines on its stdout."""

    def __init__(self, memory_bytes: int, startup_seconds: float,
                 margin_bytes: int = RECYCLE_MARGIN_BYTES, hash_seed: int = 0) -> None:
        if resource is None:
            raise SandboxError("the style-check sandbox needs a Unix system (module 'resource')")
        # The worker's empty root (as root directly, as an ordinary user in a user namespace).
        jail = tempfile.mkdtemp(prefix="style-sandbox-")
        # -s -S -B -P: -I without its -E, so that PYTHONHASHSEED (the only variable) applies.
        shm_fd = _shared_memory_fd(SHM_CELLS)
        program = seccomp_program()
        bpf_fd = _bytes_fd(program) if program else None
        command = [sys.executable, "-s", "-S", "-B", "-P", WORKER_SCRIPT, "--worker",
                   str(memory_bytes), str(margin_bytes), str(shm_fd), str(SHM_CELLS), jail,
                   "-" if bpf_fd is None else str(bpf_fd)]
        env = {"PYTHONHASHSEED": str(hash_seed),
               "MALLOC_MMAP_THRESHOLD_": str(MALLOC_MMAP_THRESHOLD)}
        passed = (shm_fd,) if bpf_fd is None else (shm_fd, bpf_fd)
        try:
            self.shm = mmap.mmap(shm_fd, SHM_CELLS)
            self._start(command, env, passed)
            ready = self.readline(startup_seconds) or b""
        finally:
            for fd in passed:
                os.close(fd)
            if jail is not None:
                try:
                    os.rmdir(jail)
                except OSError as exc:
                    logger.warning("could not remove the sandbox jail %s: %s", jail, exc)
        if not ready.startswith(b"ready"):
            self.kill()
            raise SandboxError(f"the style-check worker did not start within {startup_seconds}s")
        self.hardening = frozenset(ready.decode("ascii", "replace")[len("ready"):].strip().split(","))
        logger.debug("style-check worker %d started with %s", self.proc.pid, sorted(self.hardening))
        if os.geteuid() == 0 and "nobody" not in self.hardening:
            logger.warning("style-check worker runs as root: chroot/setuid failed (%s)",
                           sorted(self.hardening))
        _warn_missing_os_layer(self.hardening)

    def _start(self, command: list[str], env: dict[str, str], fds: tuple[int, ...]) -> None:
        try:
            self.proc = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, env=env, start_new_session=True, close_fds=True,
                pass_fds=fds,
            )
        except OSError as exc:
            raise SandboxError(f"cannot start the style-check worker {command[0]}: {exc}") from exc
        self.pid = os.getpid()
        assert self.proc.stdout is not None and self.proc.stdin is not None  # both are PIPEs
        self._fd = self.proc.stdout.fileno()
        self._buffer = bytearray()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._fd, selectors.EVENT_READ)
        self._in_fd = self.proc.stdin.fileno()
        os.set_blocking(self._in_fd, False)
        self._write_selector = selectors.DefaultSelector()
        self._write_selector.register(self._in_fd, selectors.EVENT_WRITE)

    def readline(self, timeout: float) -> bytes | None:
        """Next line without its newline; ``None`` on timeout, ``b''`` when the worker is gone."""
        deadline = time.monotonic() + timeout
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[:end + 1]
                return line
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._selector.select(remaining):
                return None
            chunk = os.read(self._fd, 65536)
            if not chunk:
                return b""
            self._buffer.extend(chunk)

    def submit(self, payload: bytes, cells: int, timeout: float) -> bool:
        """Clear the status bytes of ``cells`` cells and send the batch."""
        self.shm[:cells] = bytes(cells)
        return self.send(payload, timeout)

    def progress(self, cells: int) -> int:
        """How many of the batch's first ``cells`` cells have a status."""
        done = self.shm.find(b"\0", 0, cells)
        return cells if done < 0 else done

    def statuses(self, start: int, stop: int) -> str:
        """The status characters the worker wrote for cells ``start`` to ``stop``."""
        return self.shm[start:stop].decode("ascii", "replace")

    def send(self, payload: bytes, timeout: float) -> bool:
        """Write a whole batch; False if the worker is gone or stops reading for ``timeout``."""
        view = memoryview(payload)
        deadline = time.monotonic() + timeout
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._write_selector.select(remaining):
                return False
            try:
                written = os.write(self._in_fd, view)
            except BlockingIOError:
                continue
            except OSError:
                return False
            view = view[written:]
        return True

    def kill(self) -> None:
        _stop_process(self.proc, grace_seconds=0.0)
        self._selector.close()
        self._write_selector.close()


@functools.lru_cache(maxsize=1)
def seccomp_program() -> bytes:
    """The worker's seccomp filter as BPF, compiled by libseccomp (through ``pyseccomp``): the
    system calls in :data:`SECCOMP_ALLOWED` pass, every other one fails with EPERM, and a call
    made through another architecture's ABI kills the worker (libseccomp's default). Empty (and
    a warning) where libseccomp cannot be loaded."""
    try:
        import pyseccomp as seccomp  # type: ignore[import-untyped]
    except Exception as exc:  # ImportError, or the library itself missing (OSError, AttributeError)
        logger.warning("style-check sandbox: no seccomp filter (pyseccomp/libseccomp unavailable: "
                       "%s); install the libseccomp2 system package", exc)
        return b""
    rules = seccomp.SyscallFilter(seccomp.ERRNO(errno.EPERM))
    for name in SECCOMP_ALLOWED:
        try:
            rules.add_rule(seccomp.ALLOW, name)
        except (OSError, ValueError):  # a system call this architecture does not have
            continue
    rules.add_rule(seccomp.ALLOW, "prlimit64", seccomp.Arg(0, seccomp.EQ, 0))
    with tempfile.TemporaryFile() as handle:
        rules.export_bpf(handle)
        handle.seek(0)
        return handle.read()


_WARNED_LAYERS: set[str] = set()


def _warn_missing_os_layer(hardening: frozenset[str]) -> None:
    """Once per process and missing layer: say which part of the OS layer the kernel refused."""
    missing = sorted(OS_LAYER - hardening - _WARNED_LAYERS)
    if not missing:
        return
    _WARNED_LAYERS.update(missing)
    logger.warning("style-check sandbox: the worker runs without %s (the kernel or the system "
                   "refused it; took effect: %s); the static check and the process limits still "
                   "apply", ", ".join(missing), ", ".join(sorted(hardening)) or "nothing")


def _bytes_fd(data: bytes) -> int:
    """A descriptor of an anonymous file holding ``data``, for a worker to read."""
    fd = _shared_memory_fd(0)
    os.write(fd, data)
    return fd


def _shared_memory_fd(size: int) -> int:
    """An anonymous file of ``size`` zero bytes (memfd where the system has it)."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("style-sandbox-status")  # close-on-exec; pass_fds hands it over
    else:  # pragma: no cover - non-Linux
        handle = tempfile.TemporaryFile()
        fd = os.dup(handle.fileno())
        handle.close()
    os.ftruncate(fd, size)
    return fd


def _stop_process(proc: subprocess.Popen | None, grace_seconds: float = 1.0) -> None:
    """Close the worker's stdin so it exits, kill it if it has not within the grace time."""
    if proc is None:
        return
    for stream in (proc.stdin, proc.stdout):
        if stream is None:
            continue
        try:
            stream.close()
        except OSError:
            pass
    if proc.poll() is None and grace_seconds > 0:
        try:
            proc.wait(timeout=grace_seconds)
        except subprocess.TimeoutExpired:
            pass
    if proc.returncode is None:
        # The worker proper and its namespace's init are in the session the worker started (and
        # killed with their parent anyway, by PR_SET_PDEATHSIG); the group id cannot have been
        # reused while `proc` is not reaped.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()


def _finalize(box: list[_Worker | None]) -> None:
    worker = box[0]
    box[0] = None
    if worker is not None and worker.pid == os.getpid():
        _stop_process(worker.proc)


@dataclasses.dataclass
class _Plan:
    """Deduplicated sources, responses and cells of a call, and where each group's cells are."""

    sources: list[str]
    responses: list[str]
    cells: list[Cell]
    layout: list[tuple[list[int | None], list[int]]]


class StyleSandbox:
    """A persistent sandbox worker that scores many checks x many responses per round trip.

    Holds a worker process (started lazily, replaced after a hang, a crash or memory growth)
    and the counters. Use as a context manager or call :meth:`close`; a forgotten sandbox is
    cleaned up at exit. ``recycle_margin_bytes`` is how far the worker's address space may grow
    over its idle size before it is replaced (default: 32 MiB, at most 1/8 of the memory cap).
    """

    def __init__(
        self,
        cpu_seconds: float = DEFAULT_CPU_SECONDS,
        memory_mb: int = DEFAULT_MEMORY_MB,
        wall_seconds: float | None = None,
        disable_after_timeouts: int = 1,
        startup_seconds: float = 20.0,
    ) -> None:
        if cpu_seconds <= 0 or memory_mb <= 0:
            raise ValueError(f"cpu_seconds and memory_mb must be > 0, got {cpu_seconds}, {memory_mb}")
        self.cpu_seconds = float(cpu_seconds)
        self.memory_bytes = int(memory_mb) * 1024 * 1024
        self.wall_seconds = wall_seconds
        self.disable_after_timeouts = int(disable_after_timeouts)
        self.startup_seconds = float(startup_seconds)
        self.recycle_margin_bytes = min(RECYCLE_MARGIN_BYTES, self.memory_bytes // 8)
        self.counters = SandboxCounters()
        # One hash seed per sandbox: set and dict order is the same in every worker.
        self._hash_seed = secrets.randbelow(2**32)
        self._lock = threading.Lock()
        self._box: list[_Worker | None] = [None]
        self._started_once = False
        self._warned: dict[int, None] = {}
        self._finalizer = weakref.finalize(self, _finalize, self._box)

    def __reduce__(self) -> tuple[type[StyleSandbox], tuple[float, int, float | None, int, float]]:
        """Pickle the settings only (a copy gets its own worker), so reward objects holding a
        sandbox stay picklable as TRL expects."""
        return (StyleSandbox, (self.cpu_seconds, self.memory_bytes // (1024 * 1024),
                               self.wall_seconds, self.disable_after_timeouts, self.startup_seconds))

    def __enter__(self) -> StyleSandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the worker; a later call starts a new one."""
        with self._lock:
            _finalize(self._box)
            self._started_once = False

    def run(self, sources: Sequence[str], responses: Sequence[str],
            cpu_seconds: float | None = None) -> list[list[bool]]:
        """``result[n][r]`` is True only if check ``n`` returned exactly ``True`` on response ``r``."""
        return self.run_groups([(sources, responses)], cpu_seconds)[0]

    def run_groups(self, groups: Sequence[tuple[Sequence[str], Sequence[str]]],
                   cpu_seconds: float | None = None) -> list[list[list[bool]]]:
        """Score several (checks, responses) groups, e.g. one per prompt, in one round trip.

        Only the cells of each group run (a prompt's checks never see another prompt's
        completions); identical sources and responses are sent once.
        """
        return [[[status == protocol.TRUE for status in row] for row in group]
                for group in self._group_statuses(groups, cpu_seconds)]

    def run_outcomes(self, sources: Sequence[str], responses: Sequence[str],
                     cpu_seconds: float | None = None) -> list[list[str]]:
        """Like :meth:`run`, but each cell's outcome by name: ``true``, ``false``, ``rejected``,
        ``raised``, ``timed_out``, ``non_bool``, ``crashed`` or ``skipped``."""
        statuses = self._group_statuses([(sources, responses)], cpu_seconds)[0]
        return [[OUTCOMES[status] for status in row] for row in statuses]

    def _group_statuses(self, groups: Sequence[tuple[Sequence[str], Sequence[str]]],
                        cpu_seconds: float | None) -> list[list[list[str]]]:
        cpu = self.cpu_seconds if cpu_seconds is None else float(cpu_seconds)
        if cpu <= 0:
            raise ValueError(f"cpu_seconds must be > 0, got {cpu}")
        plan = self._plan(groups)
        statuses: dict[Cell, str] = {}
        if plan.cells:
            with self._lock:
                statuses = self._execute(plan, cpu)
        return [
            [[REJECTED if cid is None else statuses[(rid, cid)] for rid in rids] for cid in cids]
            for cids, rids in plan.layout
        ]

    def _plan(self, groups: Sequence[tuple[Sequence[str], Sequence[str]]]) -> _Plan:
        source_ids: dict[str, int] = {}
        response_ids: dict[str, int] = {}
        cells: dict[Cell, None] = {}
        layout: list[tuple[list[int | None], list[int]]] = []
        for sources, responses in groups:
            cids = [self._source_id(source, source_ids) for source in sources]
            rids = [response_ids.setdefault(str(text), len(response_ids)) for text in responses]
            layout.append((cids, rids))
            for rid in rids:
                for cid in cids:
                    if cid is not None:
                        cells[(rid, cid)] = None
        return _Plan(list(source_ids), list(response_ids), sorted(cells), layout)

    def _source_id(self, source: object, source_ids: dict[str, int]) -> int | None:
        reason = static_rejection_reason(source)
        if reason is not None:
            self.counters.rejected += 1
            self._warn_once(source, f"style check rejected before running: {reason}")
            return None
        assert isinstance(source, str)  # static_rejection_reason rejects anything else
        return source_ids.setdefault(source, len(source_ids))

    def _warn_once(self, source: object, message: str) -> None:
        """Warn the first time a source is rejected; training re-sends it every step."""
        key = hash(source) if isinstance(source, str) else id(type(source))
        if key in self._warned:
            logger.debug(message)
            return
        if len(self._warned) > 1024:
            self._warned.clear()
        self._warned[key] = None
        logger.warning(message)

    def _worker(self) -> _Worker:
        worker = self._box[0]
        if worker is not None and worker.pid != os.getpid():
            worker = None  # inherited through fork: that process belongs to the parent
        if worker is not None and worker.proc.poll() is None:
            return worker
        if worker is not None:
            worker.kill()
        if self._started_once:
            self.counters.worker_restarts += 1
        try:
            worker = self._new_worker()
        except SandboxError:
            worker = self._new_worker()
        self._box[0] = worker
        self._started_once = True
        return worker

    def _new_worker(self) -> _Worker:
        return _Worker(self.memory_bytes, self.startup_seconds, self.recycle_margin_bytes,
                       self._hash_seed)

    def _kill_worker(self) -> None:
        worker = self._box[0]
        self._box[0] = None
        if worker is not None:
            worker.kill()

    def _execute(self, plan: _Plan, cpu: float) -> dict[Cell, str]:
        wall = self.wall_seconds if self.wall_seconds is not None else 1.0 + 5.0 * cpu
        results: dict[Cell, str] = {}
        pending = plan.cells
        while pending:
            batch = pending[:SHM_CELLS]
            worker = self._send(self._payload(plan, batch, results, cpu), len(batch))
            answered, culprit = self._collect(worker, batch, results, wall)
            pending = self._still_to_run(pending[answered:], results, culprit)
        self._log_batch(results)
        for status in results.values():
            counter = _STATUS_COUNTER.get(status)
            if counter is not None:
                setattr(self.counters, counter, getattr(self.counters, counter) + 1)
        return results

    def _payload(self, plan: _Plan, batch: list[Cell], results: dict[Cell, str],
                 cpu: float) -> bytes:
        timeouts: dict[int, int] = {}
        for (_, cid), status in results.items():
            if status in _HANGS:
                timeouts[cid] = timeouts.get(cid, 0) + 1
        return json.dumps({
            "cpu": cpu,
            "disable_after": self.disable_after_timeouts,
            "timeouts": sorted(timeouts.items()),
            "checks": [[cid, plan.sources[cid]] for cid in sorted({c for _, c in batch})],
            "responses": [[rid, plan.responses[rid]] for rid in sorted({r for r, _ in batch})],
            "cells": batch,
        }).encode() + b"\n"

    def _send(self, payload: bytes, cells: int) -> _Worker:
        for _ in range(2):
            worker = self._worker()
            if worker.submit(payload, cells, self.startup_seconds):
                return worker
            self._kill_worker()
        raise SandboxError("the style-check worker does not accept input")

    def _collect(self, worker: _Worker, batch: list[Cell], results: dict[Cell, str],
                 wall: float) -> tuple[int, int | None]:
        """Wait for the worker to finish ``batch``; record the statuses it wrote. Returns how many
        cells have a result and the check of the cell that ended the worker, if one did."""
        cells = len(batch)
        poll = min(max(wall / 4, 0.005), 0.25)
        seen, since = 0, time.monotonic()
        while True:
            line = worker.readline(poll)
            done = worker.progress(cells)
            if line is None:
                now = time.monotonic()
                if done != seen:
                    seen, since = done, now
                if now - since < wall:
                    continue
            if line == protocol.DONE and done == cells:
                return self._record(worker, batch, cells, results), None
            if line not in (protocol.RECYCLE, protocol.ABANDON) or done == 0:
                return self._fail(worker, batch, results, seen if line is None else None)
            # The worker left after cell done-1: its memory grew, or that check swallowed a timeout.
            answered = self._record(worker, batch, done, results)
            self._kill_worker()
            if line == protocol.RECYCLE:
                self.counters.recycled += 1
                return answered, None
            return answered, batch[answered - 1][1]

    def _record(self, worker: _Worker, batch: list[Cell], done: int,
                results: dict[Cell, str]) -> int:
        """Copy the first ``done`` statuses; stop at one that is not a status (a broken worker)."""
        for index, status in enumerate(worker.statuses(0, done)):
            if status not in protocol.STATUSES:
                return index
            results[batch[index]] = status
        return done

    def _fail(self, worker: _Worker, batch: list[Cell], results: dict[Cell, str],
              hung_at: int | None) -> tuple[int, int | None]:
        """The worker hung (``hung_at``: the cell that made no progress) or died: kill it and
        blame the first cell without a status, unless that cell only started after the hang."""
        self._kill_worker()
        answered = self._record(worker, batch, worker.progress(len(batch)), results)
        if answered == len(batch) or (hung_at is not None and answered != hung_at):
            return answered, None
        culprit = batch[answered]
        results[culprit] = protocol.TIMED_OUT if hung_at is not None else protocol.CRASHED
        return answered + 1, culprit[1]

    def _still_to_run(self, rest: list[Cell], results: dict[Cell, str],
                      cid: int | None) -> list[Cell]:
        """``rest`` minus the cells of check ``cid`` if it has now hung too often (skipped)."""
        if cid is None:
            return rest
        hangs = sum(1 for (_, c), s in results.items() if c == cid and s in _HANGS)
        if not (self.disable_after_timeouts and hangs >= self.disable_after_timeouts):
            return rest
        for other in rest:
            if other[1] == cid:
                results[other] = protocol.SKIPPED
        return [other for other in rest if other[1] != cid]

    def _log_batch(self, results: dict[Cell, str]) -> None:
        tally: dict[str, int] = {}
        for status in results.values():
            if status in _STATUS_COUNTER:
                tally[_STATUS_COUNTER[status]] = tally.get(_STATUS_COUNTER[status], 0) + 1
        if not tally:
            return
        summary = ", ".join(f"{n} {name}" for name, n in sorted(tally.items()))
        severe = any(k in tally for k in ("timed_out", "crashed"))
        logger.log(logging.WARNING if severe else logging.INFO,
                   "style checks scored 0: %s (of %d calls)", summary, len(results))


_default_sandbox: StyleSandbox | None = None
_default_lock = threading.Lock()


def default_sandbox() -> StyleSandbox:
    """The process-wide sandbox behind :func:`run_style_checks`, started on first use."""
    global _default_sandbox
    with _default_lock:
        if _default_sandbox is None:
            _default_sandbox = StyleSandbox()
        return _default_sandbox


def run_style_checks(sources: list[str], responses: list[str],
                     cpu_seconds: float = DEFAULT_CPU_SECONDS) -> list[list[bool]]:
    """``result[n][r]`` = check ``n`` on response ``r``, in one round trip (the function
    :mod:`rewards.reference_chain` calls). False for a rejected, raising, non-bool, timed-out
    or crashed check; never raises for anything a check does."""
    return default_sandbox().run(sources, responses, cpu_seconds)
