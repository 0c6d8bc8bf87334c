# Sourced by the Prefect scripts: this checkout's venv first, its Prefect home, the API of the
# Prefect server (PREFECT_API_URL, default the local server on PREFECT_PORT), no telemetry.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$PWD/.venv/bin:$PATH"
export PREFECT_HOME="${PREFECT_HOME:-$PWD/.prefect}"
export PREFECT_API_URL="${PREFECT_API_URL:-http://127.0.0.1:${PREFECT_PORT:-4200}/api}"
export PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1
