"""What each part of the style-check sandbox's OS layer stops, measured (issue 35).

    python -m benchmarks.sandbox_layers              # as whoever runs it
    python -m benchmarks.sandbox_layers --as-user    # as root: again as an ordinary user

Each action of benchmarks/sandbox_probes.py (mkdir in /dev/shm, list /dev/shm and /, stat,
rename, chmod, symlink and unlink a file the user may write, kill a sibling, signal the trainer)
is run by a check that got past the static check (it recovers `os`, `probes.escaped`),
straight in a worker (`probes.worker_status`), under four configurations of the
worker's OS layer (rewards/sandbox/worker.py): whole; namespaces and chroot without seccomp;
seccomp without namespaces and chroot; neither. The process limits (RLIMIT_*) stay on in all four.
A part is switched off here only, from outside: seccomp by giving the worker no filter, the
namespaces and chroot by starting the worker through a wrapper that replaces `isolate` and passes
no jail. Prints a table ("stopped" or "through" per action) and writes
`benchmarks/results/sandbox_layers.json` (the runs of this invocation, keyed by user id).
As root without chroot there is no drop to `nobody` either, so the "neither" row as root is a
worker running as root.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "sandbox_layers.json"
CONFIGS = {  # label: (namespaces and chroot, seccomp)
    "whole OS layer": (True, True),
    "namespaces+chroot only": (True, False),
    "seccomp only": (False, True),
    "neither": (False, False),
}


def _wrapper(folder: Path, worker_script: str) -> Path:
    """A worker entry point that runs rewards/sandbox/worker.py's `main` without namespaces and
    without a jail (everything else as the real worker)."""
    path = folder / "worker_without_namespaces.py"
    path.write_text(textwrap.dedent(f"""\
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("sandbox_worker", {worker_script!r})
        worker = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(worker)
        worker.isolate = lambda libc: []
        a = sys.argv
        worker.main(int(a[2]), int(a[3]), int(a[4]), int(a[5]), None,
                    int(a[7]) if a[7:8] not in ([], ["-"]) else None)
    """))
    folder.chmod(0o755)
    path.chmod(0o644)
    return path


def measure() -> dict:
    """{configuration: {"worker": what the worker reports, "actions": {action: outcome}}}."""
    from benchmarks.sandbox_probes import ACTIONS, escaped, worker_status
    from rewards.sandbox import pool

    real_program, real_script = pool.seccomp_program, pool.WORKER_SCRIPT
    wrapper = _wrapper(Path(tempfile.mkdtemp(prefix="sandbox-layers-")), str(real_script))
    table: dict = {}
    try:
        for label, (namespaces, seccomp) in CONFIGS.items():
            pool.seccomp_program = real_program if seccomp else (lambda: b"")  # type: ignore[assignment]
            pool.WORKER_SCRIPT = real_script if namespaces else str(wrapper)
            outcomes, reported = {}, frozenset()
            for action, code in sorted(ACTIONS.items()):
                folder = Path(tempfile.mkdtemp(prefix="sandbox-layers-victim-"))
                folder.chmod(0o777)
                victim = folder / "victim.txt"
                victim.write_text("keep")
                victim.chmod(0o666)
                sibling = subprocess.Popen(["sleep", "120"])
                name = f"sandbox-layers-probe-{os.getpid()}"
                source = (code.replace("VICTIM", repr(str(victim))).replace("DIR", repr(str(folder)))
                          .replace("NAME", repr(name)).replace("SIBLING", str(sibling.pid))
                          .replace("TRAINER", str(os.getpid())))
                try:
                    status, reported = worker_status(escaped(source))
                finally:
                    sibling.kill()
                    sibling.wait()
                    probe = Path("/dev/shm") / name
                    if probe.is_dir():
                        probe.rmdir()
                outcomes[action] = "through" if status == "1" else "stopped"
            table[label] = {"worker": sorted(reported), "actions": outcomes}
    finally:
        pool.seccomp_program, pool.WORKER_SCRIPT = real_program, real_script
    return table


def as_ordinary_user() -> dict:
    """`measure()` again as the probes' ordinary user (benchmarks/sandbox_probes.py), in a private
    mount namespace that opens the interpreter's folders to it (as the OS layer's tests do)."""
    from benchmarks.sandbox_probes import ensure_user, open_paths_script

    user = ensure_user()
    lines = ["set -eu", *open_paths_script()]
    lines.append(
        f"exec setpriv --reuid={user.pw_uid} --regid={user.pw_gid} --clear-groups "
        "--inh-caps=-all --bounding-set=-all -- env -i PATH=/usr/bin:/bin HOME=/tmp "
        "PYTHONDONTWRITEBYTECODE=1 "
        + shlex.join([sys.executable, "-m", "benchmarks.sandbox_layers", "--json"]))
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                           "\n".join(lines)], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"the run as {user.pw_name} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def render(uid: int, table: dict) -> str:
    actions = sorted(next(iter(table.values()))["actions"])
    lines = [f"uid {uid}:", "| OS layer | " + " | ".join(actions) + " | got through |",
             "|---|" + "---|" * len(actions) + "---|"]
    for label, row in table.items():
        through = sum(v == "through" for v in row["actions"].values())
        lines.append(f"| {label} | " + " | ".join(row["actions"][a] for a in actions)
                     + f" | {through} of {len(actions)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--as-user", action="store_true",
                        help="as root: measure again as an ordinary user")
    parser.add_argument("--json", action="store_true",
                        help="print only this user's measurement as one JSON line")
    args = parser.parse_args(argv)
    uid = os.geteuid()
    table = measure()
    if args.json:
        print(json.dumps({"uid": uid, "configurations": table}))
        return
    runs = [{"uid": uid, "configurations": table}]
    if args.as_user and uid == 0:
        runs.append(as_ordinary_user())
    for run in runs:
        print(render(run["uid"], run["configurations"]))
    OUT.write_text(json.dumps({"actions_from": "tests/test_sandbox_os_layer.py", "runs": runs},
                              indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
