#!/usr/bin/env bash
# The vLLM server of a server-mode training (grpo.vllm_mode: server; docs/gpu.md), from vLLM's own
# environment: VLLM_ENV (default .venv-vllm, made on first use) holds vLLM 0.30.0 with the fastapi
# it asks for, so the server never runs beside the fastapi prefect needs (with fastapi>=0.137 and
# prometheus-fastapi-instrumentator<8.0.2 it answers 500 to every request). VLLM_ENV=.venv runs
# it from the project's environment (make setup's CPU build; the instrumentator is pinned there).
#   scripts/vllm_server.sh MODEL [--host H] [--port P] [--tp N] [--max-model-len N] [--cpu]
# The host and port must be the run's grpo.vllm_server_host/vllm_server_port.
set -euo pipefail
cd "$(dirname "$0")/.."
VLLM_ENV="${VLLM_ENV:-.venv-vllm}"
if [ ! -x "$VLLM_ENV/bin/python" ]; then
  python3 -m venv "$VLLM_ENV"
  "$VLLM_ENV/bin/pip" install -q --upgrade "pip>=24"
  if "${PYTHON:-.venv/bin/python}" -c "import torch, sys; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
    "$VLLM_ENV/bin/pip" install -q torch==2.13.0 -r configs/gpu-requirements.txt
  else
    "$VLLM_ENV/bin/pip" install -q torch==2.13.0
    PY="$VLLM_ENV/bin/python" scripts/install_vllm.sh
  fi
fi
exec "${PYTHON:-.venv/bin/python}" -m models.vllm_engine serve --python "$VLLM_ENV/bin/python" "$@"
