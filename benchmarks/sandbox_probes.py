"""Hostile checks and the harness that runs them straight in a sandbox worker: what the measure
of what each part of the sandbox's OS layer stops (benchmarks/sandbox_layers.py, issue 35) and the
tests of that layer (tests/test_sandbox.py, tests/test_sandbox_os_layer.py) share, in one place.

A probe is a model-written check that got past the static check (rewards/sandbox/policy.py) and
recovered `os` (`escaped`); `worker_status` sends it to a worker without that check, so only the
process and OS layers (rewards/sandbox/worker.py) stand in its way. `ACTIONS` are the things such a
check did to an ordinary user's files and processes when the issue measured it. It lives here, not
under rewards/sandbox/: nothing in training or scoring uses it, and that folder is an input of the
`synthesize` stage (dvc.yaml), which a new file there would mark as changed.
"""

from __future__ import annotations

import json
import os
import pwd
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from core.params import ROOT
from rewards.sandbox import pool

# The ordinary user the probes run as when the caller is root (created once, no home, no shell).
PROBE_USER = "style-sandbox-test"

# What a check that recovered `os` (as `g`) tries, one line each, with placeholders the caller
# fills: VICTIM (a file the user may write), DIR (its folder), NAME (a /dev/shm name), SIBLING (a
# process of the user's), TRAINER (the process that runs the sandbox).
ACTIONS = {
    "mkdir_dev_shm": "g['mkdir']('/dev/shm/' + NAME)",
    "list_dev_shm": "assert g['listdir']('/dev/shm') is not None",
    "rename": "g['rename'](VICTIM, VICTIM + '.moved')",
    "chmod": "g['chmod'](VICTIM, 0o600)",
    "symlink": "g['symlink'](VICTIM, DIR + '/link')",
    "unlink": "g['unlink'](VICTIM)",
    "read": "assert g['stat'](VICTIM).st_size > 0",
    "list_root": "assert len(g['listdir']('/')) > 0",
    "kill_sibling": "g['kill'](SIBLING, 9)",
    "signal_trainer": "g['kill'](TRAINER, 0)",
}


class ProbeUnavailable(RuntimeError):
    """This machine cannot run a probe the way asked (no `useradd` to make its user)."""


def worker_status(source: str) -> tuple[str, frozenset[str]]:
    """Send an UNVALIDATED check `source` straight to a new worker and score it once: its status
    ("1" the check returned True, "0" anything else) and the hardening the worker applied."""
    worker = pool._Worker(256 * 1024 * 1024, startup_seconds=20.0)
    try:
        payload = {"cpu": 0.5, "disable_after": 1, "checks": [[0, source]],
                   "responses": [[0, "r"]], "cells": [[0, 0]]}
        if not worker.submit(json.dumps(payload).encode() + b"\n", 1, 10.0):
            raise RuntimeError("the sandbox worker did not take the probe")
        line = worker.readline(10.0)
        status = worker.statuses(0, 1)
    finally:
        worker.kill()
    if line != b"done":
        raise RuntimeError(f"the sandbox worker answered {line!r}, not b'done'")
    return status, worker.hardening


def escaped(action: str) -> str:
    """A check that recovers ``os`` through ``__subclasses__`` (which the static layer refuses)
    and returns True only if ``action`` succeeded."""
    return (
        "def find_os():\n"
        "    for c in ().__class__.__base__.__subclasses__():\n"
        "        if c.__name__ == '_wrap_close':\n"
        "            return c.__init__.__globals__\n"
        "def check(response):\n"
        "    g = find_os()\n"
        "    try:\n"
        f"        {action}\n"
        "    except Exception:\n"
        "        return False\n"
        "    return True\n"
    )


def needed_paths() -> list[Path]:
    """What a run as an ordinary user must reach: the interpreter's installation, the venv, the
    repository."""
    return [Path(os.path.realpath(sys.base_prefix)), Path(sys.prefix), ROOT]


def open_paths_script() -> list[str]:
    """Shell lines that, in a private mount namespace, open the folders the interpreter and the
    repository need to an ordinary user: each closed parent becomes an empty tmpfs with only the
    one entry needed bind-mounted back."""
    lines: list[str] = []
    for blocked, child in unsearchable_parents(needed_paths()):
        b, c = shlex.quote(str(blocked)), shlex.quote(str(child))
        lines += ["t=$(mktemp -d)", f'mount --bind {c} "$t"',
                  f"mount -t tmpfs -o mode=0755 tmpfs {b}", f"mkdir -p {c}", f'mount --move "$t" {c}']
    return lines


def unsearchable_parents(paths: list[Path]) -> list[tuple[Path, Path]]:
    """(blocked folder, its child on the way) for every folder others cannot search."""
    out: dict[Path, Path] = {}
    for path in paths:
        for parent in reversed(path.parents):
            if parent == Path("/"):
                continue
            if not os.stat(parent).st_mode & 0o001:
                child = path.relative_to(parent).parts[0]
                out.setdefault(parent, parent / child)
                break
    return sorted(out.items())


def ensure_user(name: str = PROBE_USER) -> pwd.struct_passwd:
    """The ordinary user `name`, created (a system user, no home, no login shell) if missing;
    `ProbeUnavailable` where there is no `useradd`."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    useradd = shutil.which("useradd")
    if useradd is None:
        raise ProbeUnavailable("no useradd: cannot create the ordinary user the probes run as")
    subprocess.run([useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                   check=True, capture_output=True, timeout=60)
    return pwd.getpwnam(name)
