#!/usr/bin/env bash
# A shared MLflow tracking server for a pool of workers: runs and metrics in a database
# ($MLFLOW_BACKEND_URI, default sqlite under ./mlflow/), artifacts proxied by the server into
# $MLFLOW_ARTIFACTS (default ./mlflow/server-artifacts), API and UI on
# http://${MLFLOW_HOST:-127.0.0.1}:${MLFLOW_PORT:-5000}. Workers point MLFLOW_TRACKING_URI at it.
# Leave it running; Ctrl-C stops it.
#
# Authentication (needed before MLFLOW_HOST=0.0.0.0): MLFLOW_AUTH=1 runs MLflow's basic-auth app
# (`--app-name basic-auth`, needs the Flask-WTF package: `pip install 'mlflow[auth]'`).
#   MLFLOW_ADMIN_USER      admin user created on the first start (default admin)
#   MLFLOW_ADMIN_PASSWORD  its password, at least 12 characters; required. MLflow only reads it
#                          when the admin user does not exist yet: change it later through the
#                          update-password API, not here.
#   MLFLOW_AUTH_DIR        where the auth config (basic_auth.ini), the user database
#                          (basic_auth.db) and the Flask CSRF key live (default ./mlflow)
#   MLFLOW_FLASK_SERVER_SECRET_KEY  CSRF key of the signup page; generated once into
#                          $MLFLOW_AUTH_DIR/flask_secret_key when unset
#   MLFLOW_WORKER_USER, MLFLOW_WORKER_PASSWORD (12+ characters)  the pool's workers' own user,
#                          created (or its password reset) once the server answers. It reads
#                          every experiment (default_permission = READ) and writes only to the
#                          lab's: MLFLOW_WORKER_EXPERIMENTS (comma-separated, default
#                          nolabel-rl-lab, tasks/tracking.py's experiment; created if missing),
#                          with MLFLOW_WORKER_PERMISSION on each (default EDIT: runs are
#                          created, logged to and ended, never deleted; a retried training
#                          ends its crashed attempt's run as superseded, tasks/tracking.py).
#                          Workers never need the admin login.
# Other users get `default_permission = READ`; the admin creates them (REST API or /signup).
# Clients send MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD.
# Host-header check: MLflow accepts localhost and private-network addresses by default; to reach it
# by a DNS name set MLFLOW_SERVER_ALLOWED_HOSTS (read by `mlflow server` itself).
#
# A host other than loopback (127.x, ::1, localhost) is refused unless MLFLOW_AUTH=1: an open
# server lets anyone who reaches the port read and rewrite every run. LAB_INSECURE_NO_AUTH=1
# overrides that, for a network you trust completely, and says so loudly.
# What the server creates (the user database, runs, artifacts) is private to its user (umask
# 077). MLflow's job runner (huey consumers, for GenAI jobs the lab does not use) is off, so
# stopping the server leaves no process behind.
set -euo pipefail
cd "$(dirname "$0")/.."
export MLFLOW_DISABLE_TELEMETRY=true MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false
umask 077
host="${MLFLOW_HOST:-127.0.0.1}"
port="${MLFLOW_PORT:-5000}"
# Loopback: 127.x.y.z, ::1, localhost (a name such as 127.example.org is no address of ours).
if [[ ! "$host" =~ ^(127(\.[0-9]{1,3}){3}|localhost|::1|\[::1\])$ ]]; then
  if [[ "${MLFLOW_AUTH:-0}" != 1 ]]; then
    if [[ "${LAB_INSECURE_NO_AUTH:-0}" != 1 ]]; then
      echo "mlflow_server.sh: refusing to listen on $host without authentication: set MLFLOW_AUTH=1 (docs/shared_servers.md), or LAB_INSECURE_NO_AUTH=1 on a network you trust completely" >&2
      exit 2
    fi
    echo "mlflow_server.sh: WARNING: LAB_INSECURE_NO_AUTH=1: listening on $host WITHOUT AUTHENTICATION; anyone who reaches port $port can read and rewrite every run" >&2
  fi
fi
backend="${MLFLOW_BACKEND_URI:-sqlite:///$PWD/mlflow/server.db}"
artifacts="${MLFLOW_ARTIFACTS:-$PWD/mlflow/server-artifacts}"
app=()
if [[ -n "${MLFLOW_WORKER_USER:-}" ]]; then
  if [[ "${MLFLOW_AUTH:-0}" != 1 ]]; then
    echo "mlflow_server.sh: MLFLOW_WORKER_USER needs MLFLOW_AUTH=1" >&2
    exit 2
  fi
  if (( ${#MLFLOW_WORKER_PASSWORD} < 12 )); then
    echo "mlflow_server.sh: MLFLOW_WORKER_PASSWORD must be at least 12 characters (MLflow's password policy)" >&2
    exit 2
  fi
fi
if [[ "${MLFLOW_AUTH:-0}" == 1 ]]; then
  auth_dir="${MLFLOW_AUTH_DIR:-$PWD/mlflow}"
  if [[ -z "${MLFLOW_ADMIN_PASSWORD:-}" ]]; then
    echo "mlflow_server.sh: MLFLOW_AUTH=1 needs MLFLOW_ADMIN_PASSWORD (12+ characters) for the admin user" >&2
    exit 2
  fi
  if (( ${#MLFLOW_ADMIN_PASSWORD} < 12 )); then
    echo "mlflow_server.sh: MLFLOW_ADMIN_PASSWORD must be at least 12 characters (MLflow's password policy)" >&2
    exit 2
  fi
  mkdir -p "$auth_dir"
  auth_dir="$(cd "$auth_dir" && pwd)"
  # A user database made before the umask: private too.
  if [[ -e "$auth_dir/basic_auth.db" ]]; then chmod 600 "$auth_dir/basic_auth.db"; fi
  # The password goes through MLflow's own env var (it overrides admin_password in the INI), so it
  # is never written to disk.
  cat > "$auth_dir/basic_auth.ini" <<EOF
[mlflow]
default_permission = READ
database_uri = sqlite:///$auth_dir/basic_auth.db
admin_username = ${MLFLOW_ADMIN_USER:-admin}
authorization_function = mlflow.server.auth:authenticate_request_basic_auth
EOF
  export MLFLOW_AUTH_CONFIG_PATH="$auth_dir/basic_auth.ini"
  export MLFLOW_AUTH_ADMIN_USERNAME="${MLFLOW_ADMIN_USER:-admin}"
  export MLFLOW_AUTH_ADMIN_PASSWORD="$MLFLOW_ADMIN_PASSWORD"
  if [[ -z "${MLFLOW_FLASK_SERVER_SECRET_KEY:-}" ]]; then
    key_file="$auth_dir/flask_secret_key"
    if [[ ! -s "$key_file" ]]; then
      (umask 077 && .venv/bin/python -c 'import secrets; print(secrets.token_hex(32))' > "$key_file")
    fi
    MLFLOW_FLASK_SERVER_SECRET_KEY="$(cat "$key_file")"
    export MLFLOW_FLASK_SERVER_SECRET_KEY
  fi
  app=(--app-name basic-auth)
fi

case "$artifacts" in *://*) ;; *) mkdir -p "$artifacts" ;; esac

server=(.venv/bin/mlflow server
  --backend-store-uri "$backend"
  --serve-artifacts --artifacts-destination "$artifacts"
  --host "$host" --port "$port" -w 1
  "${app[@]}")
if [[ -z "${MLFLOW_WORKER_USER:-}" ]]; then
  exec "${server[@]}"
fi

# With a worker user: the server runs as a child; the user is made once it answers.
"${server[@]}" &
server_pid=$!
trap 'kill -TERM "$server_pid" 2>/dev/null || true; wait "$server_pid"' INT TERM
case "$host" in
  0.0.0.0|"") url_host=127.0.0.1 ;;
  ::|"[::]") url_host="[::1]" ;;
  *:*) url_host="[${host#[}"; url_host="${url_host%]}]" ;;
  *) url_host="$host" ;;
esac
if ! MLFLOW_TRACKING_URI="http://$url_host:$port" \
     MLFLOW_TRACKING_USERNAME="${MLFLOW_ADMIN_USER:-admin}" \
     MLFLOW_TRACKING_PASSWORD="$MLFLOW_ADMIN_PASSWORD" \
     .venv/bin/python -c '
import os, time, urllib.request

from mlflow import MlflowClient
from mlflow.exceptions import MlflowException
from mlflow.server.auth.client import AuthServiceClient

uri = os.environ["MLFLOW_TRACKING_URI"]
for _ in range(300):  # a first start (database migrations) takes a while
    try:
        with urllib.request.urlopen(uri + "/health", timeout=5) as r:
            if r.status == 200:
                break
    except OSError:
        pass
    time.sleep(1)
user, password = os.environ["MLFLOW_WORKER_USER"], os.environ["MLFLOW_WORKER_PASSWORD"]
permission = os.environ.get("MLFLOW_WORKER_PERMISSION", "EDIT")
auth, client = AuthServiceClient(uri), MlflowClient(uri)
try:
    auth.create_user(user, password)
except MlflowException:  # the user exists: the password given now is the one that counts
    auth.update_user_password(user, password)
names = os.environ.get("MLFLOW_WORKER_EXPERIMENTS", "nolabel-rl-lab").split(",")
for name in filter(None, (n.strip() for n in names)):
    exp = client.get_experiment_by_name(name)
    exp_id = exp.experiment_id if exp else client.create_experiment(name)
    try:
        auth.grant_user_permission(user, "experiment", exp_id, permission)
    except MlflowException:  # granted before: replace it
        auth.revoke_user_permission(user, "experiment", exp_id)
        auth.grant_user_permission(user, "experiment", exp_id, permission)
    print(f"mlflow_server.sh: worker user {user!r}: {permission} on experiment {name!r}", flush=True)
'; then
  echo "mlflow_server.sh: could not set up the worker user $MLFLOW_WORKER_USER; stopping" >&2
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_pid" || true
  exit 1
fi
wait "$server_pid"
