"""The style-check worker process (layer 2 of :mod:`rewards.sandbox`).

Run as a script by :mod:`rewards.sandbox.pool`, never imported into the worker from the
package: ``python -s -S -B -P worker.py --worker MEMORY_BYTES MARGIN_BYTES SHM_FD SHM_SIZE
JAIL SECCOMP_FD``. It imports only the standard library. Protocol:

- stdin: one JSON batch per line, ``{"cpu", "disable_after", "timeouts", "checks",
  "responses", "cells"}``;
- shared memory (``SHM_FD``, mapped before the lock-down): byte ``i`` is zero until cell ``i``
  of the batch is done, then its status (one of :data:`STATUSES`). The parent reads progress
  there, so a cell costs no system call to report and a hang or crash is pinned on the first
  cell without a status;
- stdout: ``ready <limits that took effect>`` once, then per batch ``done``, or ``recycle``
  (the address space is still more than MARGIN_BYTES over its idle size after the cell) or
  ``abandon`` (the check kept running after its CPU-timeout exception), after which the worker
  exits.

Every cell execs the check's module code into a fresh namespace; afterwards the namespace is
cleared and cyclic garbage collected (objects alive at start-up and the batch itself are frozen
out of the collector, so a collection costs well under a microsecond).

The OS layer (:func:`isolate`, :func:`lock_down`), once every import is done:

- namespaces: new mount, PID, network, IPC and UTS namespaces, plus an unprivileged user
  namespace when the trainer is not root (the trainer's uid mapped to 0 inside, nothing else).
  The process the trainer started waits for a child that is PID 1 of the new PID namespace and
  waits in turn for the worker proper (PID 2: not the namespace's init, so the kernel's default
  signal actions, e.g. ``RLIMIT_CPU``'s SIGXCPU, still end it). The worker sees no other process;
- an empty root: ``chroot`` into a directory the parent deletes once the worker is ready (no
  ``/dev``, ``/dev/shm``, ``/proc`` or ``/tmp``; nothing can be created in a deleted directory),
  then, for a root trainer, uid/gid ``nobody``;
- a seccomp filter, compiled by libseccomp in the parent (:func:`rewards.sandbox.pool.seccomp_program`)
  and passed in as BPF: only the system calls serving a batch needs are allowed, every other one
  fails with EPERM.

Where the kernel refuses a namespace or seccomp the worker runs without it and its ``ready`` line
says so (the parent warns once).
"""

from __future__ import annotations

import gc
import io
import json
import math
import mmap
import os
import re
import signal
import string
import sys
import time
import types

try:
    import resource
except ImportError:  # pragma: no cover - non-Unix; the parent refuses to start a worker there
    resource = None  # type: ignore[assignment]

RECURSION_LIMIT = 200
NOBODY_ID = 65534
# <linux/sched.h>, <linux/prctl.h>, <linux/seccomp.h>
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
PR_SET_PDEATHSIG, PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS = 1, 22, 38
SECCOMP_MODE_FILTER = 2
BPF_INSTRUCTION_BYTES = 8  # struct sock_filter
MAX_CACHED_CODES = 512
BLOCKED_MODULES = ("socket", "_socket", "ssl", "_ssl", "select", "_posixsubprocess", "mmap")

TRUE, FALSE, RAISED, TIMED_OUT, NON_BOOL, SKIPPED, CRASHED = "1", "0", "e", "t", "n", "s", "c"
STATUSES = frozenset({TRUE, FALSE, RAISED, TIMED_OUT, NON_BOOL, SKIPPED})  # CRASHED: parent only
DONE, RECYCLE, ABANDON = b"done", b"recycle", b"abandon"


class _CpuTimeout(BaseException):
    """Raised inside a check by the profiling timer; BaseException so ``except Exception`` misses it."""


class _CompileFailure:
    """Cached stand-in for a source that does not compile (never for a MemoryError)."""


_COMPILE_FAILED = _CompileFailure()
_Code = types.CodeType | _CompileFailure
_TIMER_ARMED = False
_TIMER_FIRED = False
_CURRENT_INDEX = 0
_PROTO_OUT: io.RawIOBase | None = None
_SHM: mmap.mmap | None = None


def _on_cpu_timer(signum: int, frame: object) -> None:
    """SIGPROF: raise the timeout in the check; if it is still running at the next tick, the
    check swallowed the first one, so report the cell timed out and exit."""
    global _TIMER_FIRED
    if not _TIMER_ARMED:
        return
    if _TIMER_FIRED:
        try:
            if _SHM is not None and _PROTO_OUT is not None:  # both set by main() before any check
                _SHM[_CURRENT_INDEX] = ord(TIMED_OUT)
                _PROTO_OUT.write(ABANDON + b"\n")
        finally:
            os._exit(0)
    _TIMER_FIRED = True
    raise _CpuTimeout()


def safe_builtins() -> dict[str, object]:
    """The only builtins a check sees."""
    import builtins

    names = (
        "abs", "all", "any", "bool", "callable", "chr", "dict", "divmod", "enumerate", "filter",
        "float", "frozenset", "int", "isinstance", "issubclass", "iter", "len", "list", "map",
        "max", "min", "next", "ord", "range", "repr", "reversed", "round", "set", "slice",
        "sorted", "str", "sum", "tuple", "zip", "Exception", "ArithmeticError",
        "AssertionError", "AttributeError", "IndexError", "KeyError", "LookupError",
        "OverflowError", "RuntimeError", "StopIteration", "TypeError", "UnicodeError",
        "ValueError", "ZeroDivisionError",
    )
    return {name: getattr(builtins, name) for name in names}


def provided_modules() -> dict[str, types.SimpleNamespace]:
    """Read-only stand-ins for re, math, string and json exposing only their public helpers."""
    re_names = ("compile", "search", "match", "fullmatch", "findall", "finditer", "sub", "subn",
                "split", "escape", "error")
    re_flags = ("A", "ASCII", "I", "IGNORECASE", "M", "MULTILINE", "S", "DOTALL", "X",
                "VERBOSE", "U", "UNICODE", "NOFLAG")
    re_proxy = types.SimpleNamespace(**{n: getattr(re, n) for n in re_names},
                                     **{n: int(getattr(re, n)) for n in re_flags})
    math_proxy = types.SimpleNamespace(**{n: getattr(math, n) for n in dir(math)
                                          if not n.startswith("_")})
    string_proxy = types.SimpleNamespace(**{n: getattr(string, n) for n in (
        "ascii_letters", "ascii_lowercase", "ascii_uppercase", "digits", "hexdigits",
        "octdigits", "printable", "punctuation", "whitespace", "capwords")})
    json_proxy = types.SimpleNamespace(loads=json.loads, dumps=json.dumps,
                                       JSONDecodeError=json.JSONDecodeError)
    return {"re": re_proxy, "math": math_proxy, "string": string_proxy, "json": json_proxy}


class AddressSpace:
    """The worker's virtual memory size (what ``RLIMIT_AS`` caps), read from a ``statm``
    descriptor opened before the lock-down; 0 where ``/proc`` is missing."""

    def __init__(self) -> None:
        try:
            self._fd: int | None = os.open("/proc/self/statm", os.O_RDONLY)
        except OSError:
            self._fd = None
        self._page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

    @property
    def available(self) -> bool:
        return self._fd is not None

    def size(self) -> int:
        if self._fd is None:
            return 0
        data = os.pread(self._fd, 64, 0)
        return int(data[:data.find(b" ")]) * self._page


def isolate(libc: object | None) -> list[str]:
    """New namespaces for the worker (see the module doc); returns the ones that took effect.

    The calling process and the PID namespace's init only wait for their child and exit with its
    status (they close every descriptor first, so the parent sees the worker's pipe close when the
    worker dies); only the worker itself (PID 2) returns from this function. A kernel that refuses
    namespaces (no user namespaces for unprivileged users, a seccomp profile) leaves the worker as
    it was: it returns ``[]`` and the ready line lacks ``pidns``.
    """
    if libc is None:
        return []
    root = os.geteuid() == 0
    uid, gid = os.geteuid(), os.getegid()
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
    if not root:
        flags |= CLONE_NEWUSER
    if libc.unshare(flags) != 0:  # type: ignore[attr-defined]
        return []
    applied = ["mountns", "pidns", "netns", "ipcns"]
    if not root:
        try:
            for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"),
                               ("gid_map", f"0 {gid} 1")):
                fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
                try:
                    os.write(fd, text.encode())
                finally:
                    os.close(fd)
            applied.append("userns")
        except OSError:
            pass
    _fork_and_wait()  # the caller stays outside the PID namespace and waits for its init
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # type: ignore[attr-defined]
    _fork_and_wait()  # the init (PID 1) waits for the worker (PID 2)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # type: ignore[attr-defined]
    return applied


def _fork_and_wait() -> None:
    """Return in the child; in the parent, wait for the child and exit with its status."""
    pid = os.fork()
    if pid == 0:
        return
    os.closerange(0, 1 << 16)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries; belt and braces
            continue
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if code >= 0 else 128 - code)


def lock_down(memory_bytes: int, jail: str | None, real_root: bool = False,
              libc: object | None = None, seccomp_bpf: bytes = b"") -> list[str]:
    """Apply the process limits once every import is done; return what took effect.

    The worker chroots into an empty directory (which the parent then deletes, so nothing can be
    created there): as root directly, as an ordinary user inside the user namespace that
    :func:`isolate` made. A root trainer's worker then drops to uid/gid ``nobody``: a check that
    got past the static validator still sees no files, cannot signal the trainer, and is held by
    ``RLIMIT_NPROC``, which the kernel does not enforce for root. Last, the seccomp filter.
    """
    applied: list[str] = []
    for name in BLOCKED_MODULES:
        # None in sys.modules makes `import name` fail (documented); typeshed does not allow it.
        sys.modules[name] = None  # type: ignore[assignment]
    # New descriptors take the lowest free number, so a limit equal to it refuses every new one.
    lowest_free = os.open(os.devnull, os.O_RDONLY)
    os.close(lowest_free)
    if jail is not None:
        applied.extend(_jail(jail, drop_to_nobody=real_root))
    limits = [
        ("core", resource.RLIMIT_CORE, 0),
        ("fsize", resource.RLIMIT_FSIZE, 0),
        ("as", resource.RLIMIT_AS, memory_bytes),
        ("nproc", getattr(resource, "RLIMIT_NPROC", None), 0),
        ("nofile", resource.RLIMIT_NOFILE, lowest_free),
    ]
    for label, which, value in limits:
        if which is None:
            continue
        try:
            resource.setrlimit(which, (value, value))
            applied.append(label)
        except (ValueError, OSError):
            pass
    sys.setrecursionlimit(RECURSION_LIMIT)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGPROF, _on_cpu_timer)
    if libc is not None and seccomp_bpf and _load_seccomp(libc, seccomp_bpf):
        applied.append("seccomp")
    return applied


def _jail(jail: str, drop_to_nobody: bool) -> list[str]:
    applied: list[str] = []
    try:
        os.chroot(jail)
        os.chdir("/")
        applied.append("chroot")
        if drop_to_nobody:
            os.setgroups([])
            os.setgid(NOBODY_ID)
            os.setuid(NOBODY_ID)
            applied.append("nobody")
    except OSError:
        pass
    return applied


def _load_seccomp(libc: object, program: bytes) -> bool:
    """Install a BPF seccomp filter (``no_new_privs`` first, as an unprivileged process must)."""
    import ctypes

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    count = len(program) // BPF_INSTRUCTION_BYTES
    if count == 0 or count * BPF_INSTRUCTION_BYTES != len(program) or count > 0xFFFF:
        return False
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = SockFprog(count, ctypes.cast(buffer, ctypes.c_void_p))
    ulong = ctypes.c_ulong
    prctl = libc.prctl  # type: ignore[attr-defined]
    if prctl(PR_SET_NO_NEW_PRIVS, ulong(1), ulong(0), ulong(0), ulong(0)) != 0:
        return False
    return bool(prctl(PR_SET_SECCOMP, ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog),
                      ulong(0), ulong(0)) == 0)


def _libc() -> object | None:
    """The C library through ctypes (for unshare and prctl), or None where it cannot be loaded."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True)
    except (ImportError, OSError):
        return None


class CpuBackstop:
    """``RLIMIT_CPU`` soft limit at least ``cpu_seconds + SLACK`` above the CPU used when a cell
    starts: SIGXCPU ends a check stuck in C code that the profiling timer cannot interrupt.

    Re-armed only when needed: CPU time grows no faster than wall time in this one-threaded
    process, so a limit stays valid until the monotonic clock has moved by its headroom.
    """

    SLACK = 0.5

    def __init__(self) -> None:
        self._hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        self._valid_until = -math.inf
        self._cpu_seconds = -1.0

    def arm(self, cpu_seconds: float) -> None:
        if cpu_seconds == self._cpu_seconds and time.monotonic() < self._valid_until:
            return
        now_wall, now_cpu = time.monotonic(), time.process_time()
        soft = int(math.ceil(now_cpu + cpu_seconds)) + 1
        if self._hard != resource.RLIM_INFINITY and soft >= self._hard:
            return
        resource.setrlimit(resource.RLIMIT_CPU, (soft, self._hard))
        self._cpu_seconds = cpu_seconds
        self._valid_until = now_wall + (soft - now_cpu - cpu_seconds - self.SLACK)


def compiled(codes: dict[str, _Code], source: str) -> _Code:
    """Code object for ``source`` (cached), or ``_COMPILE_FAILED``. A MemoryError is not cached:
    it says nothing about the source."""
    code = codes.get(source)
    if code is not None:
        return code
    try:
        code = compile(source, "<style-check>", "exec", dont_inherit=True)
    except MemoryError:
        return _COMPILE_FAILED
    except BaseException:  # e.g. SyntaxError, RecursionError: deterministic
        code = _COMPILE_FAILED
    if len(codes) >= MAX_CACHED_CODES:
        codes.clear()
    codes[source] = code
    return code


def run_cell(code: _Code, namespace_base: dict[str, object], response: str,
             cpu_seconds: float) -> str:
    """Run one check on one response; return its status. Never raises."""
    global _TIMER_ARMED, _TIMER_FIRED
    if isinstance(code, _CompileFailure):
        return RAISED
    namespace = dict(namespace_base)
    status = RAISED
    try:
        try:
            _TIMER_FIRED = False
            _TIMER_ARMED = True
            signal.setitimer(signal.ITIMER_PROF, cpu_seconds, max(cpu_seconds / 4, 0.01))
            exec(code, namespace)  # validated, restricted builtins, in the sandbox
            check = namespace["check"]
            if not callable(check):
                raise TypeError("check is not callable")
            result = check(response)
        finally:
            _TIMER_ARMED = False
            signal.setitimer(signal.ITIMER_PROF, 0, 0)
        if _TIMER_FIRED:
            status = TIMED_OUT
        elif result is True:
            status = TRUE
        elif result is False:
            status = FALSE
        else:
            status = NON_BOOL
        del result
    except _CpuTimeout:
        status = TIMED_OUT
    except BaseException:  # anything a check raises scores False
        status = RAISED
    finally:
        namespace.clear()
    return status


class Batch:
    """One decoded request."""

    def __init__(self, line: bytes) -> None:
        batch = json.loads(line)
        self.cpu_seconds = float(batch["cpu"])
        self.disable_after = int(batch["disable_after"])
        self.timeouts = {int(cid): int(n) for cid, n in batch.get("timeouts", [])}
        self.sources = {int(cid): src for cid, src in batch["checks"]}
        self.responses = {int(rid): text for rid, text in batch["responses"]}
        self.cells = [(int(rid), int(cid)) for rid, cid in batch["cells"]]

    def disabled(self, cid: int) -> bool:
        return bool(self.disable_after) and self.timeouts.get(cid, 0) >= self.disable_after


def serve(proto_in: io.BufferedReader, proto_out: io.RawIOBase, shm: mmap.mmap,
          namespace_base: dict[str, object], memory: AddressSpace, margin_bytes: int) -> None:
    """Answer batches until stdin closes or the worker has to be replaced."""
    global _CURRENT_INDEX
    backstop = CpuBackstop()
    codes: dict[str, _Code] = {}
    baseline = memory.size()
    while True:
        idle = memory.size()
        line = proto_in.readline()
        if not line:
            return
        batch = Batch(line)
        del line
        gc.collect()
        gc.freeze()  # the batch is acyclic and freed by reference counting; keep it out of gc
        limit = baseline + margin_bytes + max(0, memory.size() - idle)
        for index, (rid, cid) in enumerate(batch.cells):
            _CURRENT_INDEX = index
            if batch.disabled(cid):
                status = SKIPPED
            else:
                backstop.arm(batch.cpu_seconds)
                code = compiled(codes, batch.sources[cid])
                status = run_cell(code, namespace_base, batch.responses[rid], batch.cpu_seconds)
                if status == TIMED_OUT:
                    batch.timeouts[cid] = batch.timeouts.get(cid, 0) + 1
                gc.collect()
            shm[index] = ord(status)
            if memory.size() > limit:
                proto_out.write(RECYCLE + b"\n")
                os._exit(0)
        del batch
        proto_out.write(DONE + b"\n")


def main(memory_bytes: int, margin_bytes: int, shm_fd: int, shm_size: int,
         jail: str | None, seccomp_fd: int | None = None) -> None:
    """Entry point: set up the protocol channels and the check environment, lock down, serve."""
    global _PROTO_OUT, _SHM
    # A BufferedReader at runtime; typeshed types sys.stdin.buffer as BinaryIO (the worker keeps
    # its imports to the few modules it needs, not typing).
    proto_in: io.BufferedReader = sys.stdin.buffer  # type: ignore[assignment]
    proto_out: io.RawIOBase = os.fdopen(os.dup(1), "wb", buffering=0)
    shm = mmap.mmap(shm_fd, shm_size)
    os.close(shm_fd)
    _PROTO_OUT, _SHM = proto_out, shm
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)
    namespace_base: dict[str, object] = {"__builtins__": safe_builtins(), **provided_modules()}
    json.loads(json.dumps({"warm": ["up", 1.0]}))
    re.compile(r"(?i)\w+\s*[-*]").findall("warm up - *")
    seccomp_bpf = b""
    if seccomp_fd is not None:
        seccomp_bpf = os.pread(seccomp_fd, 1 << 20, 0)
        os.close(seccomp_fd)
    real_root = os.geteuid() == 0
    libc = _libc()
    applied = isolate(libc)  # from here on this is the worker proper (PID 2 of its namespace)
    memory = AddressSpace()  # /proc/self of this process, opened before the chroot
    applied += lock_down(memory_bytes, jail, real_root, libc, seccomp_bpf)
    for name in ("ctypes", "_ctypes"):
        sys.modules[name] = None  # type: ignore[assignment]
    if memory.available:
        applied.append("vmsize")
    gc.collect()
    gc.freeze()
    proto_out.write(("ready " + ",".join(applied) + "\n").encode())
    serve(proto_in, proto_out, shm, namespace_base, memory, margin_bytes)


if __name__ == "__main__" and sys.argv[1:2] == ["--worker"]:
    main(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
         sys.argv[6] if sys.argv[6:7] != ["-"] else None,
         int(sys.argv[7]) if sys.argv[7:8] not in ([], ["-"]) else None)
