"""Sandbox for model-written style checks (the RLVRR paper, section 3.3).

RLVRR's style reward runs ``def check(response) -> bool`` functions that an LLM wrote. That is
untrusted code running inside a training job, so it is contained in layers, each of which
would stop the common attacks on its own:

1. Static validation in the parent (:mod:`rewards.sandbox.policy`): a module of assignments,
   helper functions and one ``def check(x)``; no imports, classes, ``with``, generators, bare
   ``except``, dunder names, private or frame attributes, ``.format``, attribute assignment,
   ``open exec eval getattr type ...``, and no ``continue``/``break``/``return`` inside a
   ``finally`` block (which would discard the CPU-timeout exception).
2. A separate worker process (:mod:`rewards.sandbox.worker`), a bare interpreter
   (``python -s -S -B -P``; its environment holds only a hash seed and a glibc malloc setting)
   that imports nothing but the standard library. Checks see a small builtins dict and
   read-only proxies of ``re``, ``math``, ``string`` and ``json``. The worker caps its address
   space (``RLIMIT_AS``), forbids new file descriptors, file writes, core dumps, new processes
   and ``socket`` imports, lowers the recursion limit, and bounds CPU per cell with a
   profiling timer plus a ``RLIMIT_CPU`` backstop. The OS layer then holds even against a
   check that got past layer 1 and recovered ``os`` or ``ctypes``: new mount, PID, network and
   IPC namespaces (and, for a trainer that is not root, an unprivileged user namespace), a
   chroot into an empty, deleted directory (no ``/dev/shm``, no file of the trainer's), uid
   ``nobody`` when the trainer is root, and a seccomp filter compiled by libseccomp (the
   ``pyseccomp`` package over the system's ``libseccomp2``) that lets through only the system
   calls serving a batch needs. Where the kernel refuses namespaces or seccomp the worker runs
   without them and the trainer logs one warning naming what is missing.
   tests/test_sandbox_os_layer.py runs the hostile checks as root and as an ordinary user.
   What each part stops, measured as an ordinary user on that file's actions (mkdir in
   /dev/shm, list /dev/shm and /, stat, rename, chmod, symlink and unlink a file the user may
   write, kill a sibling, signal the trainer), the static check bypassed: without the OS layer
   every action but the two listings (refused by ``RLIMIT_NOFILE``) got through; the namespaces
   and chroot without seccomp stopped every one, and so did seccomp without them. Each is a
   whole layer; together they also stop a check that calls libc through ``ctypes``.
3. The parent (:mod:`rewards.sandbox.pool`) enforces a wall-clock limit per cell and never
   raises for anything a check does. All cells of a call go to the worker in one round trip;
   the worker reports each cell's status in shared memory, so the parent knows which cell hung.

Isolation: every cell (check x response) is a function of its own check and response only.

- Each cell execs the check into a fresh namespace, which is cleared afterwards, and the
  worker then collects cyclic garbage (a self-referencing list dies with its cell).
- If the worker's address space is still more than ``recycle_margin_bytes`` above its idle
  size after that (memory held by a library cache, fragmentation), the worker is replaced
  before the next cell (``recycled``); what stays below the margin (e.g. ``re``'s cache of
  compiled patterns) cannot take more than the margin from a later cell. Compile failures are
  cached per source, MemoryError never. All workers of one sandbox share a hash seed, so set
  order does not depend on which worker ran a cell.
- A hang (wall limit; e.g. a loop inside C such as ``sum(range(10**15))``) or a crash (e.g. a
  segfault) costs its own cell only: it is counted on that cell, and the cells not yet
  answered run on a fresh worker. A check that survives its CPU-timeout exception anyway is
  scored as timed out at the timer's next tick and the worker replaced.

Choices that are ours: the per-cell wall limit defaults to ``1 + 5 * cpu_seconds`` seconds
(generous, because a loaded training box must not kill honest checks); within one call a check
that timed out or crashed ``disable_after_timeouts`` times (default 1) is not run again and
scores False (``skipped``). Counters: ``rejected`` counts sources per call, ``recycled`` and
``worker_restarts`` count worker replacements, the others count cells.
"""

from __future__ import annotations

from rewards.sandbox.policy import (
    FORBIDDEN_ATTRIBUTE_PREFIXES,
    FORBIDDEN_ATTRIBUTES,
    FORBIDDEN_NAMES,
    MAX_SOURCE_CHARS,
    static_rejection_reason,
)
from rewards.sandbox.pool import (
    DEFAULT_CPU_SECONDS,
    DEFAULT_MEMORY_MB,
    SandboxCounters,
    SandboxError,
    StyleSandbox,
    default_sandbox,
    run_style_checks,
)
from rewards.sandbox.worker import RECURSION_LIMIT

VERSION = "1"

__all__ = [
    "DEFAULT_CPU_SECONDS",
    "DEFAULT_MEMORY_MB",
    "FORBIDDEN_ATTRIBUTES",
    "FORBIDDEN_ATTRIBUTE_PREFIXES",
    "FORBIDDEN_NAMES",
    "MAX_SOURCE_CHARS",
    "RECURSION_LIMIT",
    "VERSION",
    "SandboxCounters",
    "SandboxError",
    "StyleSandbox",
    "default_sandbox",
    "run_style_checks",
    "static_rejection_reason",
]
