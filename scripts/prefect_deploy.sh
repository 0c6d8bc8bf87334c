#!/usr/bin/env bash
# One machine: set up the work pool and deployments (scripts/prefect_pool.sh), then run a worker
# in this checkout (scripts/prefect_worker.sh). A pool of workers runs the two scripts apart.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/prefect_pool.sh
exec scripts/prefect_worker.sh
