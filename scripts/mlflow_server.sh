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
# Other users get `default_permission = READ`; the admin creates them (REST API or /signup).
# Clients send MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD.
# Host-header check: MLflow accepts localhost and private-network addresses by default; to reach it
# by a DNS name set MLFLOW_SERVER_ALLOWED_HOSTS (read by `mlflow server` itself).
set -euo pipefail
cd "$(dirname "$0")/.."
export MLFLOW_DISABLE_TELEMETRY=true
backend="${MLFLOW_BACKEND_URI:-sqlite:///$PWD/mlflow/server.db}"
artifacts="${MLFLOW_ARTIFACTS:-$PWD/mlflow/server-artifacts}"
app=()
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

exec .venv/bin/mlflow server \
  --backend-store-uri "$backend" \
  --serve-artifacts --artifacts-destination "$artifacts" \
  --host "${MLFLOW_HOST:-127.0.0.1}" --port "${MLFLOW_PORT:-5000}" -w 1 \
  "${app[@]}"
