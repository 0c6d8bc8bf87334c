"""The shared servers (scripts/mlflow_server.sh, scripts/prefect_server.sh) with authentication on
refuse a request without credentials and serve one with them; the real clients get through.
MLflow's worker user writes to the lab's experiment only, the user database is private to the
server's user, and stopping the server leaves no process behind (issue 35). Each server is
started once, on 127.0.0.1; that a non-loopback host without auth is refused (no server started)
is in tests/test_safety.py."""

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
MLFLOW_USER, MLFLOW_PASSWORD = "admin", "pool-admin-pw-0123"
WORKER_USER, WORKER_PASSWORD, WORKER_EXPERIMENT = "worker", "pool-worker-pw-0123", "pool-lab"
PREFECT_AUTH = "admin:secret"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(log: Path, n: int = 4000) -> str:
    return log.read_text(errors="replace")[-n:] if log.exists() else "(no log)"


def _processes_mentioning(marker: str) -> list[str]:
    """Command lines of the live processes whose command line or environment holds `marker`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline or marker.encode() in environ:
            found.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
    return found


def _processes_in_group(pgid: int) -> list[str]:
    """Command lines of the live processes of process group `pgid` (zombies, dead but not yet
    reaped by whoever adopted them, are not counted)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            if state != "Z" and os.getpgid(int(proc.name)) == pgid:
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return found


def _wait_for_line(proc: subprocess.Popen, log: Path, text: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in _tail(log, 100_000):
            return
        if proc.poll() is not None:
            pytest.fail(f"server exited with {proc.returncode} before saying {text!r}:\n{_tail(log)}")
        time.sleep(1)
    pytest.fail(f"no {text!r} after {timeout:.0f} s:\n{_tail(log)}")


def _request(url: str, *, auth: str | None = None, data: dict | None = None) -> int:
    body = None if data is None else json.dumps(data).encode()
    req = urllib.request.Request(url, data=body, method="GET" if body is None else "POST")
    if body is not None:
        req.add_header("Content-Type", "application/json")
    if auth is not None:
        req.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code


def _clean_env(prefixes: tuple[str, ...]) -> dict[str, str]:
    """The ambient environment without any setting of these tools (a developer's own
    MLFLOW_TRACKING_URI or PREFECT_API_URL must not leak into the servers under test)."""
    return {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}


def _start(script: str, env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(["bash", str(ROOT / "scripts" / script)], cwd=ROOT, env=env,
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def _wait_healthy(proc: subprocess.Popen, url: str, log: Path, timeout: float = 150) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"server exited with {proc.returncode} before {url} answered:\n{_tail(log)}")
        try:
            if _request(url) == 200:
                return
        except OSError:
            pass
        time.sleep(1)
    pytest.fail(f"{url} not healthy after {timeout:.0f} s:\n{_tail(log)}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        pass
    try:  # the server's own children (uvicorn workers) share its process group
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


MLFLOW_CLIENT = """
import sys
from mlflow.tracking import MlflowClient
c = MlflowClient(tracking_uri=sys.argv[1])
exp = c.create_experiment("pool-auth")
run = c.create_run(exp)
c.log_metric(run.info.run_id, "loss", 0.25, step=1)
c.log_text(run.info.run_id, "hello", "note.txt")
c.set_terminated(run.info.run_id)
assert [m.value for m in c.get_metric_history(run.info.run_id, "loss")] == [0.25]
print("OK", run.info.run_id)
"""


def test_mlflow_server_refuses_unauthenticated_requests(tmp_path):
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    artifacts = tmp_path / "artifacts"
    env = {**_clean_env(("MLFLOW_",)), "MLFLOW_AUTH": "1", "MLFLOW_PORT": str(port),
           "MLFLOW_BACKEND_URI": f"sqlite:///{tmp_path / 'server.db'}",
           "MLFLOW_ARTIFACTS": str(artifacts), "MLFLOW_AUTH_DIR": str(tmp_path / "auth"),
           "MLFLOW_ADMIN_USER": MLFLOW_USER, "MLFLOW_ADMIN_PASSWORD": MLFLOW_PASSWORD,
           "MLFLOW_WORKER_USER": WORKER_USER, "MLFLOW_WORKER_PASSWORD": WORKER_PASSWORD,
           "MLFLOW_WORKER_EXPERIMENTS": WORKER_EXPERIMENT}
    log = tmp_path / "mlflow_server.log"
    proc = _start("mlflow_server.sh", env, log)
    try:
        _wait_healthy(proc, f"{base}/health", log)
        _wait_for_line(proc, log, f"on experiment {WORKER_EXPERIMENT!r}")
        assert (tmp_path / "auth" / "basic_auth.db").exists(), _tail(log)
        assert (tmp_path / "auth" / "basic_auth.db").stat().st_mode & 0o077 == 0  # private
        # MLflow's job runner is off: before issue 35 it ran 7 huey consumers beside the server,
        # which a stop that signals the server alone left running.
        runners = [c for c in _processes_in_group(proc.pid) if "huey" in c or "_job_runner" in c]
        assert not runners, runners
        assert MLFLOW_PASSWORD not in (tmp_path / "auth" / "basic_auth.ini").read_text()
        search = f"{base}/api/2.0/mlflow/experiments/search?max_results=1"
        assert _request(search) == 401, _tail(log)
        assert _request(search, auth=f"{MLFLOW_USER}:{MLFLOW_PASSWORD}") == 200, _tail(log)
        assert _request(search, auth=f"{MLFLOW_USER}:wrong-password-0") == 401, _tail(log)

        client_env = {**_clean_env(("MLFLOW_",)), "MLFLOW_TRACKING_USERNAME": MLFLOW_USER,
                      "MLFLOW_TRACKING_PASSWORD": MLFLOW_PASSWORD,
                      "MLFLOW_DISABLE_TELEMETRY": "true"}
        done = subprocess.run([sys.executable, "-c", MLFLOW_CLIENT, base], cwd=tmp_path,
                              env=client_env, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0 and "OK" in done.stdout, (
            f"{done.stdout}\n{done.stderr[-3000:]}\n--- server log ---\n{_tail(log)}")
        run_id = done.stdout.split()[-1]
        # the artifact went through the server's proxy into MLFLOW_ARTIFACTS
        assert list(artifacts.rglob(f"{run_id}/**/note.txt")), _tail(log)

        # the same client without credentials is refused
        bare = subprocess.run([sys.executable, "-c", MLFLOW_CLIENT, base], cwd=tmp_path,
                              env=_clean_env(("MLFLOW_",)) | {"MLFLOW_DISABLE_TELEMETRY": "true"},
                              capture_output=True, text=True, timeout=180)
        assert bare.returncode != 0 and "401" in bare.stderr, bare.stderr[-3000:]

        # the workers' user: runs in the lab's experiment only, no admin rights
        worker = f"{WORKER_USER}:{WORKER_PASSWORD}"
        api = f"{base}/api/2.0/mlflow"
        lab = json.loads(urllib.request.urlopen(urllib.request.Request(
            f"{api}/experiments/get-by-name?experiment_name={WORKER_EXPERIMENT}", headers={
                "Authorization": "Basic " + base64.b64encode(worker.encode()).decode()}),
            timeout=30).read())["experiment"]["experiment_id"]
        other = json.loads(urllib.request.urlopen(urllib.request.Request(
            f"{api}/experiments/get-by-name?experiment_name=pool-auth", headers={
                "Authorization": "Basic " + base64.b64encode(worker.encode()).decode()}),
            timeout=30).read())["experiment"]["experiment_id"]
        assert _request(f"{api}/runs/create", auth=worker, data={"experiment_id": lab}) == 200
        assert _request(f"{api}/runs/create", auth=worker, data={"experiment_id": other}) == 403
        # (any user may create an experiment of its own: MLflow's model; none of anyone else's)
        assert _request(f"{api}/experiments/delete", auth=worker, data={"experiment_id": other}) == 403
        assert _request(f"{base}/api/2.0/mlflow/users/create", auth=worker,
                        data={"username": "intruder", "password": "intruder-pw-0123"}) == 403
        # EDIT (the default) is enough for a retry, and deleting a run is not allowed
        retry = subprocess.run(
            [sys.executable, "-c", WORKER_RETRY, WORKER_EXPERIMENT], cwd=ROOT, text=True,
            capture_output=True, timeout=180,
            env={**_clean_env(("MLFLOW_",)), "MLFLOW_TRACKING_URI": base,
                 "MLFLOW_TRACKING_USERNAME": WORKER_USER, "MLFLOW_TRACKING_PASSWORD": WORKER_PASSWORD,
                 "MLFLOW_EXPERIMENT_NAME": WORKER_EXPERIMENT, "MLFLOW_DISABLE_TELEMETRY": "true"})
        assert retry.returncode == 0 and "DELETE REFUSED" in retry.stdout, (
            f"{retry.stdout}\n{retry.stderr[-3000:]}\n--- server log ---\n{_tail(log)}")
        assert "PERMISSION_DENIED" in retry.stdout or "403" in retry.stdout, retry.stdout
        # Stopped as `kill PID` (a supervisor, a shell's job control) stops it: the signal goes
        # to the script alone, not to its process group. The script before issue 35 left MLflow's
        # 7 huey job consumers running then (a group kill, as `_stop` does, hid them).
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=120)
        time.sleep(2)
        left = _processes_mentioning(str(tmp_path)) + _processes_in_group(proc.pid)
    finally:
        _stop(proc)
    assert not left, left


# A training retried after a crash, run as the workers' user: the crashed attempt's run is ended
# as superseded (tasks/tracking.py, training_run_id), which EDIT allows; deleting it is refused.
WORKER_RETRY = """
import sys
from mlflow.tracking import MlflowClient
from tasks import tracking
tracking.setup()
c = MlflowClient()
match = {"stage": "train", "reward_method": "rlvr", "seed": "0"}
exp = c.get_experiment_by_name(sys.argv[1])
crashed = c.create_run(exp.experiment_id, tags=match).info.run_id
assert tracking.training_run_id(match, resumable=False) is None
r = c.get_run(crashed)
assert r.info.status == "KILLED" and tracking.SUPERSEDED in r.data.tags, r
assert tracking.previous_runs(match) == []
try:
    c.delete_run(crashed)
    print("DELETED")
except Exception as e:
    print("DELETE REFUSED", e)
"""


PREFECT_CLIENT = """
import asyncio
from prefect.client.orchestration import get_client
async def main():
    async with get_client() as c:
        print("OK", len(await c.read_flows()))
asyncio.run(main())
"""


def test_prefect_server_refuses_unauthenticated_requests(tmp_path):
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {**_clean_env(("PREFECT_",)), "PREFECT_PORT": str(port),
           "PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_SERVER_API_AUTH_STRING": PREFECT_AUTH,
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
    log = tmp_path / "prefect_server.log"
    proc = _start("prefect_server.sh", env, log)
    try:
        _wait_healthy(proc, f"{api}/health", log)  # the health probe needs no credentials
        assert _request(f"{api}/flows/filter", data={}) == 401, _tail(log)
        assert _request(f"{api}/flows/filter", data={}, auth=PREFECT_AUTH) == 200, _tail(log)
        assert _request(f"{api}/flows/filter", data={}, auth="admin:wrong") == 401, _tail(log)

        client_env = {**_clean_env(("PREFECT_",)), "PREFECT_API_URL": api,
                      "PREFECT_API_AUTH_STRING": PREFECT_AUTH,
                      "PREFECT_HOME": str(tmp_path / "client"), "DO_NOT_TRACK": "1"}
        done = subprocess.run([sys.executable, "-c", PREFECT_CLIENT], cwd=tmp_path, env=client_env,
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0 and "OK" in done.stdout, (
            f"{done.stdout}\n{done.stderr[-3000:]}\n--- server log ---\n{_tail(log)}")
    finally:
        _stop(proc)
