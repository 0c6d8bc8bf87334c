#!/usr/bin/env bash
# A local Prefect server: state in $PREFECT_HOME/prefect.db (sqlite, default ./.prefect), UI and
# API on http://${PREFECT_HOST:-127.0.0.1}:${PREFECT_PORT:-4200}. Leave it running; Ctrl-C stops it.
#
# Authentication (needed before PREFECT_HOST=0.0.0.0): Prefect's basic auth, one shared
# "user:password" string.
#   server:           PREFECT_SERVER_API_AUTH_STRING=user:password  (set before running this)
#   clients, workers: PREFECT_API_URL=http://HOST:4200/api PREFECT_API_AUTH_STRING=user:password
# With it set every API request without that Authorization: Basic header gets 401, except
# GET /api/health and /api/ready (probes).
set -euo pipefail
cd "$(dirname "$0")/.."
export PREFECT_HOME="${PREFECT_HOME:-$PWD/.prefect}"
export PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1
mkdir -p "$PREFECT_HOME"
exec .venv/bin/prefect server start --host "${PREFECT_HOST:-127.0.0.1}" --port "${PREFECT_PORT:-4200}"
