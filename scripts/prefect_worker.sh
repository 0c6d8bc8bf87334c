#!/usr/bin/env bash
# One worker of `lab-pool`, running flow runs in THIS clone (LAB_ROOT), one at a time (WORKER_LIMIT
# to change). Start one per GPU or machine, each in its own clone of the repository, with the
# same PREFECT_API_URL, MLFLOW_TRACKING_URI and DVC remote (docs/prefect.md, "A pool of workers").
set -euo pipefail
source "$(dirname "$0")/prefect_env.sh"
# Flow runs import this clone's code (not another checkout's editable install) and run in it.
export LAB_ROOT="$PWD" PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# Heartbeats let the pool's automation (tasks/pool.py) crash a run whose worker died.
export PREFECT_FLOWS_HEARTBEAT_FREQUENCY="${PREFECT_FLOWS_HEARTBEAT_FREQUENCY:-30}"
exec prefect worker start --pool lab-pool --limit "${WORKER_LIMIT:-1}" \
  --name "${WORKER_NAME:-$(hostname)-$(basename "$PWD")}"
