#!/usr/bin/env bash
# `make gpu-smoke`: the GPU path right the first time (docs/gpu.md, "First run"). On one GPU, a
# random-weight Qwen3-shaped model built locally trains two GRPO steps of rlvr, rlme, dro and
# rlcer (bf16, vLLM colocate) and goes through one evaluate stage; one PASS/FAIL/SKIP line per
# check, exit status = the number of FAILs. `--cpu`: the same on the CPU without vLLM (the slow
# suite runs it). `--work DIR`: keep the scratch folder there (default: a temporary one).
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 DVC_NO_ANALYTICS=1 DO_NOT_TRACK=1 MLFLOW_DISABLE_TELEMETRY=true
export PREFECT_SERVER_ANALYTICS_ENABLED=false TOKENIZERS_PARALLELISM=false
exec "${PYTHON:-.venv/bin/python}" scripts/gpu_smoke.py "$@"
