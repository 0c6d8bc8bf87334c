#!/usr/bin/env bash
# Register the deployments of prefect.yaml against the local server and run the worker that
# executes them (a `process` work pool: each flow run is a subprocess in this checkout).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
export PREFECT_HOME="${PREFECT_HOME:-$PWD/.prefect}"
export PREFECT_API_URL="${PREFECT_API_URL:-http://127.0.0.1:${PREFECT_PORT:-4200}/api}"
export LAB_ROOT="$PWD" PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1
prefect work-pool inspect lab-pool >/dev/null 2>&1 || prefect work-pool create lab-pool --type process
prefect --no-prompt deploy --all
exec prefect worker start --pool lab-pool
