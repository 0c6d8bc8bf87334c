#!/usr/bin/env bash
# A local Prefect server: state in $PREFECT_HOME/prefect.db (sqlite, default ./.prefect), UI and
# API on http://127.0.0.1:${PREFECT_PORT:-4200}. Leave it running; Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
export PREFECT_HOME="${PREFECT_HOME:-$PWD/.prefect}"
export PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1
mkdir -p "$PREFECT_HOME"
exec .venv/bin/prefect server start --host 127.0.0.1 --port "${PREFECT_PORT:-4200}"
