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
#
# An open Prefect API is code execution on every worker of the pool: whoever reaches it can start
# a deployment run that checks out any git revision, with any environment, on a worker
# (flows/pipeline.py `stage_flow`). So a host other than loopback (127.x, ::1, localhost) is
# refused unless PREFECT_SERVER_API_AUTH_STRING is set; LAB_INSECURE_NO_AUTH=1 overrides that, for
# a network you trust completely, and says so loudly. Basic auth is no encryption: put a TLS proxy
# in front and firewall the port to the workers (docs/shared_servers.md).
set -euo pipefail
cd "$(dirname "$0")/.."
export PREFECT_HOME="${PREFECT_HOME:-$PWD/.prefect}"
export PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1
umask 077
host="${PREFECT_HOST:-127.0.0.1}"
# Loopback: 127.x.y.z, ::1, localhost (a name such as 127.example.org is no address of ours).
if [[ ! "$host" =~ ^(127(\.[0-9]{1,3}){3}|localhost|::1|\[::1\])$ ]]; then
  if [[ -z "${PREFECT_SERVER_API_AUTH_STRING:-}" ]]; then
    if [[ "${LAB_INSECURE_NO_AUTH:-0}" != 1 ]]; then
      echo "prefect_server.sh: refusing to listen on $host without authentication (an open Prefect API runs any code on every worker): set PREFECT_SERVER_API_AUTH_STRING=user:password (docs/shared_servers.md), or LAB_INSECURE_NO_AUTH=1 on a network you trust completely" >&2
      exit 2
    fi
    echo "prefect_server.sh: WARNING: LAB_INSECURE_NO_AUTH=1: listening on $host WITHOUT AUTHENTICATION; anyone who reaches this port can run code on every worker" >&2
  fi
fi
mkdir -p "$PREFECT_HOME"
exec .venv/bin/prefect server start --host "$host" --port "${PREFECT_PORT:-4200}"
