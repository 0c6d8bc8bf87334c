"""The style-check sandbox's OS layer (rewards/sandbox/worker.py: `isolate`, `lock_down`) on its
own: the static check bypassed and `os` recovered, as a model-written check that got past
rewards/sandbox/policy.py would have it, nothing the trainer's user can touch is touched.

Issue 35 measured what such a check did when the trainer was an ordinary user (no chroot, no
setuid: the usual case on GPU clusters): it made a directory in /dev/shm, renamed, chmod-ed,
symlinked and deleted a file the user could write, and killed a sibling process. Each of those
is a test here; they run as whoever runs pytest, and `test_os_layer_holds_for_an_ordinary_user`
runs them again as a real non-root user when pytest runs as root. Where the kernel refuses the
namespaces or seccomp, the tests skip and say what is missing (they would fail otherwise).
"""

from __future__ import annotations

import logging
import os
import pwd
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.sandbox_probes import (
    ACTIONS,
    PROBE_USER,
    ProbeUnavailable,
    ensure_user,
    escaped,
    needed_paths,
    open_paths_script,
    worker_status,
)
from rewards.sandbox import pool

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]
TEST_USER = PROBE_USER


def kernel_refusal() -> str | None:
    """Why this kernel or system cannot give the worker its OS layer, or None if it can: probed
    apart from the sandbox (util-linux `unshare` as this user; libseccomp; seccomp in the kernel)."""
    flags = ["--mount", "--pid", "--net", "--ipc", "--fork"]
    if os.geteuid() != 0:
        flags = ["--user", "--map-root-user", *flags]
    if shutil.which("unshare") is None:
        return "no unshare(1) to probe namespaces with"
    probe = subprocess.run(["unshare", *flags, "true"], capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        return f"the kernel refuses namespaces to this user: {probe.stderr.strip()[-200:]}"
    if "Seccomp:" not in Path("/proc/self/status").read_text():
        return "the kernel has no seccomp"
    if not pool.seccomp_program():
        return "libseccomp cannot be loaded (pyseccomp needs the libseccomp2 system package)"
    return None


@pytest.fixture(scope="module")
def hardening() -> frozenset[str]:
    """What a worker started here reports. Skips, saying why, where the kernel refuses the OS
    layer; fails where the kernel allows it and the worker still lacks part of it."""
    _, applied = worker_status("def check(response):\n    return True\n")
    missing = pool.OS_LAYER - applied
    if missing:
        refusal = kernel_refusal()
        if refusal is not None:
            pytest.skip(f"the sandbox's OS layer is not available here ({refusal}): no "
                        f"{sorted(missing)}")
        pytest.fail(f"the kernel allows it, but the worker runs without {sorted(missing)} "
                    f"(took effect: {sorted(applied)})")
    return applied


@pytest.fixture()
def sibling() -> Iterator[subprocess.Popen]:
    """A process of the trainer's own user, which a check must not be able to signal."""
    proc = subprocess.Popen(["sleep", "120"])
    yield proc
    proc.kill()
    proc.wait()




@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_os_layer_stops_a_check_that_recovered_os(hardening: frozenset[str], tmp_path: Path,
                                                  sibling: subprocess.Popen, action: str) -> None:
    tmp_path.chmod(0o777)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    victim.chmod(0o666)
    name = f"style-sandbox-probe-{os.getpid()}"
    code = (ACTIONS[action].replace("VICTIM", repr(str(victim))).replace("DIR", repr(str(tmp_path)))
            .replace("NAME", repr(name)).replace("SIBLING", str(sibling.pid))
            .replace("TRAINER", str(os.getpid())))
    try:
        status, _ = worker_status(escaped(code))
    finally:
        leftover = Path("/dev/shm") / name
        if leftover.exists():
            leftover.rmdir()
    assert status == "0", f"{action} succeeded inside the sandbox"
    assert victim.read_text() == "keep"
    assert victim.stat().st_mode & 0o777 == 0o666
    assert sorted(p.name for p in tmp_path.iterdir()) == ["victim.txt"]
    assert not (Path("/dev/shm") / name).exists()
    assert sibling.poll() is None


def test_libc_reached_through_ctypes_is_still_filtered(hardening: frozenset[str],
                                                       tmp_path: Path) -> None:
    """The worker loads ctypes for the lock-down itself; a check that finds it calls libc
    directly, below anything Python-level. chroot and seccomp still hold."""
    tmp_path.chmod(0o777)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    victim.chmod(0o666)
    source = (
        "def find_cdll():\n"
        "    for c in ().__class__.__base__.__subclasses__():\n"
        "        if c.__name__ == 'CDLL':\n"
        "            return c\n"
        "def check(response):\n"
        "    libc = find_cdll()(None)\n"
        f"    return libc.unlink({str(victim).encode()!r}) == 0 or libc.getppid() > 1\n"
    )
    status, _ = worker_status(source)
    assert status == "0"
    assert victim.read_text() == "keep"


def test_worker_sees_a_pid_namespace_of_its_own(hardening: frozenset[str]) -> None:
    """PID 2 of a new PID namespace (its init, PID 1, only waits for it)."""
    assert worker_status(escaped("assert g['getpid']() == 2"))[0] == "1"


def test_a_missing_os_layer_is_said_once(caplog: pytest.LogCaptureFixture,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool, "_WARNED_LAYERS", set())
    with caplog.at_level(logging.WARNING, logger=pool.__name__):
        pool._warn_missing_os_layer(frozenset({"chroot", "seccomp", "nofile"}))
        pool._warn_missing_os_layer(frozenset({"chroot", "seccomp", "nofile"}))
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "netns, pidns" in warnings[0], warnings


def test_seccomp_program_is_compiled_by_libseccomp() -> None:
    program = pool.seccomp_program()
    assert program and len(program) % 8 == 0  # struct sock_filter instructions


# ---- the same tests as a real non-root user -------------------------------------------------


def _ensure_user() -> pwd.struct_passwd:
    try:
        return ensure_user(TEST_USER)
    except ProbeUnavailable as e:
        pytest.skip(f"{e}: the OS-layer tests run as that user")


@pytest.mark.skipif(os.geteuid() != 0, reason="already an ordinary user: the tests above are that run")
def test_os_layer_holds_for_an_ordinary_user() -> None:
    """Rerun this file's OS-layer tests and tests/test_sandbox.py's worker-layer tests as a
    non-root user. The interpreter may live where that user cannot search (pyenv under a 0700
    /root): the run gets a private mount namespace where each such folder is a 0755 tmpfs holding
    only the one entry needed, bind-mounted back; nothing changes outside that namespace."""
    for tool in ("unshare", "setpriv", "mount"):
        if shutil.which(tool) is None:
            pytest.skip(f"no {tool}: cannot run the tests as an ordinary user")
    closed = [p for p in needed_paths() if not os.stat(p).st_mode & 0o001]
    if closed:  # e.g. a clone made straight into `mktemp -d` (mode 0700): no parent to stand in for
        pytest.skip(f"{closed[0]} is closed to other users (mode {oct(os.stat(closed[0]).st_mode & 0o777)}): "
                    "an ordinary user cannot run the tests from it")
    user = _ensure_user()
    lines = ["set -eu", *open_paths_script()]
    pytest_args = ["tests/test_sandbox_os_layer.py", "tests/test_sandbox.py", "-k",
                   "(os_layer or worker_layer or libc or pid_namespace) and not ordinary_user and not as_root",
                   "-q", "-rs", "-p", "no:cacheprovider", "-o", "addopts="]
    lines.append(
        f"exec setpriv --reuid={user.pw_uid} --regid={user.pw_gid} --clear-groups "
        "--inh-caps=-all --bounding-set=-all -- env -i PATH=/usr/bin:/bin HOME=/tmp "
        "PYTHONDONTWRITEBYTECODE=1 " + shlex.join([sys.executable, "-m", "pytest", *pytest_args]))
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                           "\n".join(lines)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-6000:]
    if "skipped" in out.splitlines()[-1]:
        pytest.skip("as an ordinary user: " + "; ".join(
            line for line in out.splitlines() if line.startswith("SKIPPED"))[:500])
    assert " passed" in out.splitlines()[-1], out[-3000:]
    print(out.splitlines()[-1])
