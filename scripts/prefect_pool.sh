#!/usr/bin/env bash
# Set up the work pool once, against the Prefect server in PREFECT_API_URL: the `lab-pool`
# process pool (POOL_LIMIT: flow runs at once across all its workers; unset = no limit), the
# deployments of prefect.yaml, and the automation that marks a dead worker's flow run Crashed
# (tasks/pool.py). Idempotent. Then start workers with scripts/prefect_worker.sh.
set -euo pipefail
source "$(dirname "$0")/prefect_env.sh"
prefect work-pool inspect lab-pool >/dev/null 2>&1 || prefect work-pool create lab-pool --type process
if [[ -n "${POOL_LIMIT:-}" ]]; then
  prefect work-pool set-concurrency-limit lab-pool "$POOL_LIMIT"
fi
# LAB_ROOT stays unset here, so `{{ $LAB_ROOT }}` in prefect.yaml is filled in by each worker at
# run time: every worker runs flows in its own clone.
env -u LAB_ROOT prefect --no-prompt deploy --all
python -m tasks.pool
