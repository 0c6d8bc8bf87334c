#!/usr/bin/env bash
# One worker of `lab-pool`, running flow runs in THIS clone (LAB_ROOT), one at a time (WORKER_LIMIT
# to change). Start one per GPU or machine, each in its own clone of the repository, with the
# same PREFECT_API_URL, MLFLOW_TRACKING_URI and DVC remote (docs/prefect.md, "A pool of workers").
# It polls only the queues of the stages its GPUs can run (tasks/pool.py): `default` and gpus-1 ..
# gpus-N for the N GPUs it sees (CUDA_VISIBLE_DEVICES, indices, GPU-<uuid> or MIG-<uuid>, else
# nvidia-smi; WORKER_GPUS=N overrides the count).
set -euo pipefail
source "$(dirname "$0")/prefect_env.sh"
# Flow runs import this clone's code (not another checkout's editable install) and run in it.
export LAB_ROOT="$PWD" PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# Heartbeats let the pool's automation (tasks/pool.py) crash a run whose worker died.
export PREFECT_FLOWS_HEARTBEAT_FREQUENCY="${PREFECT_FLOWS_HEARTBEAT_FREQUENCY:-30}"
queues=()
while read -r queue; do
  queues+=(--work-queue "$queue")
done < <(python -m tasks.pool --worker-queues)
if [[ ${#queues[@]} -eq 0 ]]; then
  echo "error: python -m tasks.pool --worker-queues named no queue" >&2
  exit 1
fi
exec prefect worker start --pool lab-pool --limit "${WORKER_LIMIT:-1}" "${queues[@]}" \
  --name "${WORKER_NAME:-$(hostname)-$(basename "$PWD")}"
