"""Sandbox for model-written style checks (SPEC.md section 9; RLVRR paper 002, section 3.3).

RLVRR's style reward runs ``def check(response) -> bool`` functions that an LLM wrote. That is
untrusted code running inside a training job, so it is contained in layers, each of which
would stop the common attacks on its own:

1. Static validation in the parent (:func:`static_rejection_reason`), before anything runs:
   the module may hold only assignments, helper functions and exactly one ``def check(x)``;
   no imports, classes, decorators, ``with``, ``global``, generators, ``async``, ``match`` or
   bare ``except``; no name starting with ``__``; no attribute starting with ``_`` or with a
   frame/code/traceback prefix (``gi_ f_ co_ tb_ cr_ ag_``); no ``.format``/``.format_map``
   (format strings do attribute look-ups the AST cannot see) or ``.mro``; no attribute
   assignment; no call or mention of ``open exec eval compile getattr type ...``.
2. A separate worker process, a bare interpreter (``python -I -S -B``) that imports nothing but
   the standard library. Checks see only a small builtins dict and read-only proxies of ``re``,
   ``math``, ``string`` and ``json`` (the real modules reach ``codecs.open`` and friends).
   The worker caps its address space (``RLIMIT_AS``), forbids new file descriptors
   (``RLIMIT_NOFILE``: no file, socket or pipe can be opened), file writes (``RLIMIT_FSIZE``),
   core dumps, new processes (``RLIMIT_NPROC``) and ``socket`` imports, lowers the recursion
   limit, and bounds CPU per call with a profiling timer plus a ``RLIMIT_CPU`` backstop. Run
   as root (common in containers, where the kernel ignores ``RLIMIT_NPROC``), it also chroots
   into an empty, deleted directory and drops to uid ``nobody``. Run as an ordinary user, a
   check that somehow got past layer 1 could still unlink or signal what that user owns: the
   static layer is the one that must hold there.
3. The parent enforces a wall-clock limit per call; a hang or crash kills the worker, scores
   that call and the remaining checks of that response False, counts it, and the next call
   gets a fresh worker. Nothing a check does can raise in the caller.

All checks x all responses of a training step travel in one round trip: the worker streams one
line per (response, check) cell back, so the parent can tell exactly which call hung.

Choices that are ours: the per-call wall limit defaults to ``1 + 5 * cpu_seconds`` seconds
(generous, because a loaded training box must not kill honest checks); within one batch a
check that timed out ``disable_after_timeouts`` times (default 1) is not run again and scores
False (counted as ``skipped``), so one broken check cannot cost seconds per completion.
Counters: ``rejected`` counts sources per call; the other counters count cells.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import json
import logging
import math
import os
import re
import selectors
import signal
import string
import subprocess
import sys
import tempfile
import threading
import time
import types
import warnings
import weakref
from collections.abc import Sequence

try:
    import resource
except ImportError:  # pragma: no cover - non-Unix; the worker refuses to start there
    resource = None  # type: ignore[assignment]

VERSION = "1"

logger = logging.getLogger(__name__)

MAX_SOURCE_CHARS = 20_000
DEFAULT_CPU_SECONDS = 0.2
DEFAULT_MEMORY_MB = 512
RECURSION_LIMIT = 200

FORBIDDEN_NAMES = frozenset({
    "open", "exec", "eval", "compile", "__import__", "input", "globals", "locals", "vars",
    "getattr", "setattr", "delattr", "hasattr", "breakpoint", "help", "memoryview", "type",
    "object", "super", "classmethod", "staticmethod", "property", "dir", "id", "print",
    "exit", "quit", "copyright", "credits", "license", "format", "BaseException",
    "SystemExit", "KeyboardInterrupt", "GeneratorExit", "os", "sys", "subprocess", "socket",
    "builtins", "importlib", "shutil", "pathlib", "io", "ctypes", "pickle", "marshal",
    "signal", "resource", "threading", "multiprocessing", "gc", "inspect",
})
FORBIDDEN_ATTRIBUTES = frozenset({"format", "format_map", "mro"})
FORBIDDEN_ATTRIBUTE_PREFIXES = ("_", "gi_", "f_", "co_", "tb_", "cr_", "ag_", "func_", "im_")
_FORBIDDEN_NODES: tuple[type[ast.AST], ...] = (
    ast.Import, ast.ImportFrom, ast.ClassDef, ast.AsyncFunctionDef, ast.Await, ast.AsyncFor,
    ast.AsyncWith, ast.With, ast.Global, ast.Nonlocal, ast.Yield, ast.YieldFrom, ast.Match,
)
_TOP_LEVEL_NODES: tuple[type[ast.AST], ...] = (ast.FunctionDef, ast.Assign, ast.AnnAssign)


@dataclasses.dataclass
class SandboxCounters:
    """Running totals since the sandbox was created, for logging (e.g. as MLflow metrics)."""

    rejected: int = 0
    raised: int = 0
    timed_out: int = 0
    non_bool: int = 0
    crashed: int = 0
    skipped: int = 0
    worker_restarts: int = 0

    def as_dict(self) -> dict[str, int]:
        """Plain dict copy, ready for a metrics logger."""
        return dataclasses.asdict(self)


class SandboxError(RuntimeError):
    """The worker process cannot be started at all (an environment problem, not a bad check)."""


def _identifier_problem(node: ast.AST) -> str | None:
    names: list[str] = []
    if isinstance(node, ast.Name):
        names.append(node.id)
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        names.append(node.name)
    elif isinstance(node, ast.arg):
        names.append(node.arg)
    elif isinstance(node, ast.keyword) and node.arg is not None:
        names.append(node.arg)
    elif isinstance(node, ast.ExceptHandler) and node.name is not None:
        names.append(node.name)
    for name in names:
        if name.startswith("__"):
            return f"dunder or mangled name {name!r}"
        if name in FORBIDDEN_NAMES:
            return f"forbidden name {name!r}"
    if isinstance(node, ast.Attribute):
        attr = node.attr
        if attr in FORBIDDEN_ATTRIBUTES or attr.startswith(FORBIDDEN_ATTRIBUTE_PREFIXES):
            return f"forbidden attribute {attr!r}"
        if not isinstance(node.ctx, ast.Load):
            return f"attribute assignment to {attr!r}"
    return None


def static_rejection_reason(source: str) -> str | None:
    """Why a style-check source is refused before it runs, or ``None`` if it may run.

    The synthesis stage can call this to drop bad checks early; the sandbox calls it on every
    source it is given (cached, since training re-sends the same few sources every step).

    >>> static_rejection_reason("def check(response):\\n    return len(response.split()) < 50")
    >>> static_rejection_reason("import os\\ndef check(response):\\n    return True")
    'forbidden statement Import'
    >>> static_rejection_reason("def check(r):\\n    return '{0.__class__}'.format(r) != ''")
    "forbidden attribute 'format'"
    """
    if not isinstance(source, str):
        return f"source is {type(source).__name__}, not str"
    if len(source) > MAX_SOURCE_CHARS:
        return f"source longer than {MAX_SOURCE_CHARS} characters"
    return _cached_rejection_reason(source)


@functools.lru_cache(maxsize=4096)
def _cached_rejection_reason(source: str) -> str | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. invalid escapes in model-written regexes
            tree = ast.parse(source, mode="exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return f"does not parse: {type(exc).__name__}"
    for node in ast.walk(tree):
        if isinstance(node, _FORBIDDEN_NODES):
            return f"forbidden statement {type(node).__name__}"
        if isinstance(node, (ast.FunctionDef, ast.Lambda)) and getattr(node, "decorator_list", None):
            return "decorators are not allowed"
        if isinstance(node, ast.ExceptHandler) and node.type is None:
            return "bare 'except:' is not allowed"
        problem = _identifier_problem(node)
        if problem is not None:
            return problem
    checks = 0
    for statement in tree.body:
        is_docstring = isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
        if not (is_docstring or isinstance(statement, _TOP_LEVEL_NODES)):
            return f"top-level {type(statement).__name__} (only assignments and defs allowed)"
        if isinstance(statement, ast.FunctionDef) and statement.name == "check":
            checks += 1
            args = statement.args
            if (len(args.posonlyargs) + len(args.args) != 1 or args.vararg or args.kwarg
                    or args.kwonlyargs):
                return "check must take exactly one parameter"
    if checks != 1:
        return f"expected exactly one top-level 'def check(response)', found {checks}"
    return None


class _CpuTimeout(BaseException):
    """Raised inside a check by the profiling timer; BaseException so ``except Exception`` misses it."""


_TIMER_ARMED = False
_TIMER_FIRED = False


def _on_cpu_timer(signum: int, frame: object) -> None:
    global _TIMER_FIRED
    if _TIMER_ARMED:
        _TIMER_FIRED = True
        raise _CpuTimeout()


def _safe_builtins() -> dict[str, object]:
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


def _provided_modules() -> dict[str, types.SimpleNamespace]:
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


NOBODY_ID = 65534


def _lock_down_worker(memory_bytes: int, jail: str | None) -> list[str]:
    """Apply the process limits once every import is done; return what took effect.

    If the worker runs as root it first chroots into an empty directory (which the parent then
    deletes, so nothing can be created there) and drops to uid/gid ``nobody``: a check that got
    past the static validator still sees no files, cannot signal the trainer, and is held by
    ``RLIMIT_NPROC``, which the kernel does not enforce for root.
    """
    applied: list[str] = []
    for name in ("socket", "_socket", "ssl", "_ssl", "select", "_posixsubprocess", "mmap"):
        sys.modules[name] = None  # type: ignore[assignment]
    # New descriptors take the lowest free number, so a limit equal to it refuses every new one.
    lowest_free = os.open(os.devnull, os.O_RDONLY)
    os.close(lowest_free)
    if jail is not None and os.geteuid() == 0:
        try:
            os.chroot(jail)
            os.chdir("/")
            applied.append("chroot")
            os.setgroups([])
            os.setgid(NOBODY_ID)
            os.setuid(NOBODY_ID)
            applied.append("nobody")
        except OSError:
            pass
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
    return applied


def _run_cell(code: object, namespace_base: dict[str, object], response: str, cpu_seconds: float,
              cpu_hard: int) -> str:
    """Run one check on one response in the worker; return a one-letter status."""
    global _TIMER_ARMED, _TIMER_FIRED
    namespace = dict(namespace_base)
    soft = int(math.ceil(time.process_time() + cpu_seconds)) + 1
    if cpu_hard == resource.RLIM_INFINITY or soft < cpu_hard:
        resource.setrlimit(resource.RLIMIT_CPU, (soft, cpu_hard))
    status = "e"
    try:
        try:
            _TIMER_FIRED = False
            _TIMER_ARMED = True
            signal.setitimer(signal.ITIMER_PROF, cpu_seconds, max(cpu_seconds / 4, 0.01))
            if isinstance(code, BaseException):
                raise code
            exec(code, namespace)  # noqa: S102 - validated, restricted builtins, in the sandbox
            result = namespace["check"](response)
        finally:
            _TIMER_ARMED = False
            signal.setitimer(signal.ITIMER_PROF, 0, 0)
        if _TIMER_FIRED:
            status = "t"
        elif result is True:
            status = "1"
        elif result is False:
            status = "0"
        else:
            status = "n"
        del result
    except _CpuTimeout:
        status = "t"
    except BaseException:  # noqa: BLE001 - anything a check raises scores False
        status = "e"
    finally:
        namespace.clear()
    return status


def _worker_main(memory_bytes: int, jail: str | None) -> None:
    """Entry point of the worker process: read JSON batches, stream one line per cell."""
    proto_in = sys.stdin.buffer
    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)
    namespace_base: dict[str, object] = {"__builtins__": _safe_builtins(), **_provided_modules()}
    json.loads(json.dumps({"warm": ["up", 1.0]}))
    re.compile(r"(?i)\w+\s*[-*]").findall("warm up - *")
    applied = _lock_down_worker(memory_bytes, jail)
    cpu_hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    codes: dict[str, object] = {}
    proto_out.write(("ready " + ",".join(applied) + "\n").encode())
    while True:
        line = proto_in.readline()
        if not line:
            return
        batch = json.loads(line)
        cpu_seconds = float(batch["cpu"])
        disable_after = int(batch["disable_after"])
        sources = {int(cid): src for cid, src in batch["checks"]}
        responses = {int(rid): text for rid, text in batch["responses"]}
        timeouts = {int(cid): int(n) for cid, n in batch.get("timeouts", [])}
        for rid, cid in batch["cells"]:
            if disable_after and timeouts.get(cid, 0) >= disable_after:
                status = "s"
            else:
                source = sources[cid]
                if source not in codes:
                    if len(codes) > 512:
                        codes.clear()
                    try:
                        codes[source] = compile(source, "<style-check>", "exec", dont_inherit=True)
                    except BaseException as exc:  # noqa: BLE001 - scored as raised
                        codes[source] = RuntimeError(f"compile failed: {type(exc).__name__}")
                status = _run_cell(codes[source], namespace_base, responses[rid], cpu_seconds, cpu_hard)
                if status == "t":
                    timeouts[cid] = timeouts.get(cid, 0) + 1
            proto_out.write(f"{rid} {cid} {status}\n".encode())


_STATUS_COUNTER = {"e": "raised", "t": "timed_out", "n": "non_bool", "c": "crashed", "s": "skipped"}
_VALID_STATUSES = frozenset({"0", "1", "e", "t", "n", "s"})


def _parse_status(line: bytes | None, cell: tuple[int, int]) -> str | None:
    """The status in a worker line if it is well-formed and about ``cell``, else ``None``."""
    if not line:
        return None
    parts = line.decode("ascii", "replace").split()
    if len(parts) != 3 or parts[2] not in _VALID_STATUSES:
        return None
    if parts[0] != str(cell[0]) or parts[1] != str(cell[1]):
        return None
    return parts[2]


class _Worker:
    """One worker process plus a line reader with deadlines on its stdout."""

    def __init__(self, memory_bytes: int, startup_seconds: float) -> None:
        if resource is None:
            raise SandboxError("the style-check sandbox needs a Unix system (module 'resource')")
        jail = tempfile.mkdtemp(prefix="style-sandbox-") if os.geteuid() == 0 else None
        command = [sys.executable, "-I", "-S", "-B", os.path.abspath(__file__), "--worker",
                   str(memory_bytes), jail or "-"]
        try:
            try:
                self.proc = subprocess.Popen(
                    command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL, env={}, start_new_session=True, close_fds=True,
                )
            except OSError as exc:
                raise SandboxError(f"cannot start the style-check worker {command[0]}: {exc}") from exc
            self.pid = os.getpid()
            self._fd = self.proc.stdout.fileno()
            self._buffer = bytearray()
            self._selector = selectors.DefaultSelector()
            self._selector.register(self._fd, selectors.EVENT_READ)
            self._in_fd = self.proc.stdin.fileno()
            os.set_blocking(self._in_fd, False)
            self._write_selector = selectors.DefaultSelector()
            self._write_selector.register(self._in_fd, selectors.EVENT_WRITE)
            ready = self.readline(startup_seconds) or b""
        finally:
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
        if jail is not None and "nobody" not in self.hardening:
            logger.warning("style-check worker runs as root: chroot/setuid failed (%s)",
                           sorted(self.hardening))

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


def _stop_process(proc: subprocess.Popen | None, grace_seconds: float = 1.0) -> None:
    """Close the worker's stdin so it exits, kill it if it has not within the grace time."""
    if proc is None:
        return
    for stream in (proc.stdin, proc.stdout):
        try:
            stream.close()
        except OSError:
            pass
    if proc.poll() is None and grace_seconds > 0:
        try:
            proc.wait(timeout=grace_seconds)
        except subprocess.TimeoutExpired:
            pass
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def _finalize(box: list[_Worker | None]) -> None:
    worker = box[0]
    box[0] = None
    if worker is not None and worker.pid == os.getpid():
        _stop_process(worker.proc)


class StyleSandbox:
    """A persistent sandbox worker that scores many checks x many responses per round trip.

    Holds a worker process (started lazily, restarted after a hang or crash) and the counters.
    Use as a context manager or call :meth:`close`; a forgotten sandbox is cleaned up at exit.
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
        self.counters = SandboxCounters()
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
        cpu = self.cpu_seconds if cpu_seconds is None else float(cpu_seconds)
        if cpu <= 0:
            raise ValueError(f"cpu_seconds must be > 0, got {cpu}")
        source_ids: dict[str, int] = {}
        response_ids: dict[str, int] = {}
        cells: dict[tuple[int, int], None] = {}
        layout: list[tuple[list[int | None], list[int]]] = []
        for sources, responses in groups:
            cids: list[int | None] = []
            for source in sources:
                reason = static_rejection_reason(source)
                if reason is not None:
                    self.counters.rejected += 1
                    self._warn_once(source, f"style check rejected before running: {reason}")
                    cids.append(None)
                else:
                    cids.append(source_ids.setdefault(source, len(source_ids)))
            rids = [response_ids.setdefault(str(text), len(response_ids)) for text in responses]
            layout.append((cids, rids))
            for rid in rids:
                for cid in cids:
                    if cid is not None:
                        cells[(rid, cid)] = None
        statuses: dict[tuple[int, int], str] = {}
        if cells:
            ordered = sorted(cells)
            with self._lock:
                statuses = self._execute(ordered, list(source_ids), list(response_ids), cpu)
        return [
            [[cid is not None and statuses.get((rid, cid)) == "1" for rid in rids] for cid in cids]
            for cids, rids in layout
        ]

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
            worker = _Worker(self.memory_bytes, self.startup_seconds)
        except SandboxError:
            worker = _Worker(self.memory_bytes, self.startup_seconds)
        self._box[0] = worker
        self._started_once = True
        return worker

    def _kill_worker(self) -> None:
        worker = self._box[0]
        self._box[0] = None
        if worker is not None:
            worker.kill()

    def _execute(self, cells: list[tuple[int, int]], sources: list[str], responses: list[str],
                 cpu: float) -> dict[tuple[int, int], str]:
        wall = self.wall_seconds if self.wall_seconds is not None else 1.0 + 5.0 * cpu
        results: dict[tuple[int, int], str] = {}
        pending = cells
        while pending:
            timeouts: dict[int, int] = {}
            for (_, cid), status in results.items():
                if status in ("t", "c"):
                    timeouts[cid] = timeouts.get(cid, 0) + 1
            payload = json.dumps({
                "cpu": cpu,
                "disable_after": self.disable_after_timeouts,
                "timeouts": sorted(timeouts.items()),
                "checks": [[cid, sources[cid]] for cid in sorted({c for _, c in pending})],
                "responses": [[rid, responses[rid]] for rid in sorted({r for r, _ in pending})],
                "cells": pending,
            }).encode() + b"\n"
            worker = self._worker()
            if not worker.send(payload, self.startup_seconds):
                self._kill_worker()
                worker = self._worker()
                if not worker.send(payload, self.startup_seconds):
                    self._kill_worker()
                    raise SandboxError("the style-check worker does not accept input")
            pending = self._collect(worker, pending, results, wall)
        self._log_batch(results)
        for status in results.values():
            counter = _STATUS_COUNTER.get(status)
            if counter is not None:
                setattr(self.counters, counter, getattr(self.counters, counter) + 1)
        return results

    def _collect(self, worker: _Worker, pending: list[tuple[int, int]],
                 results: dict[tuple[int, int], str], wall: float) -> list[tuple[int, int]]:
        """Read one line per pending cell; on a hang or crash return the cells still to run."""
        for index, cell in enumerate(pending):
            line = worker.readline(wall)
            status = _parse_status(line, cell)
            if status is not None:
                results[cell] = status
                continue
            results[cell] = "t" if line is None else "c"
            self._kill_worker()
            rid, cid = cell
            rest = pending[index + 1:]
            for other in rest:
                if other[0] == rid:
                    results[other] = "s"
            hangs = sum(1 for (_, c), s in results.items() if c == cid and s in ("t", "c"))
            disabled = self.disable_after_timeouts and hangs >= self.disable_after_timeouts
            remaining = []
            for other in rest:
                if other in results:
                    continue
                if disabled and other[1] == cid:
                    results[other] = "s"
                else:
                    remaining.append(other)
            return remaining
        return []

    def _log_batch(self, results: dict[tuple[int, int], str]) -> None:
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
    """SPEC section 9 entry point: ``result[n][r]`` = check ``n`` on response ``r``, one round trip.

    False for a rejected, raising, non-bool, timed-out or crashed check; never raises for
    anything a check does.
    """
    return default_sandbox().run(sources, responses, cpu_seconds)


if __name__ == "__main__" and sys.argv[1:2] == ["--worker"]:
    _worker_main(int(sys.argv[2]), sys.argv[3] if sys.argv[3:4] != ["-"] else None)
