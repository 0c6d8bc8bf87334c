#!/usr/bin/env bash
# `make gpu-smoke`: the GPU path right the first time (docs/gpu.md, "First run"). On one GPU,
# within `--budget-s` (default 480 s) and in order of importance: the 1-GPU rlvr preset's batch
# at Qwen3-0.6B's size without and with vLLM (measured peak memory against core/memory.py's
# estimate), the confidence rewards and RLCER at the preset's bounds, vLLM's weight sync, then the
# first smoke (two GRPO steps of rlvr, rlme, dro, rlcer and one evaluate stage on a small random
# Qwen3); on two GPUs also a 2-process training and a vLLM server reused by two trainings.
# `--list` prints the checks; one PASS/FAIL/SKIP line per check, a TIME line per check, exit
# status = the number of FAILs. `--cpu`: the first smoke on the CPU without vLLM, the GPU checks
# SKIP (the slow suite runs it). `--work DIR`: keep the scratch folder (default: a temporary one).
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 DVC_NO_ANALYTICS=1 DO_NOT_TRACK=1 MLFLOW_DISABLE_TELEMETRY=true
export PREFECT_SERVER_ANALYTICS_ENABLED=false TOKENIZERS_PARALLELISM=false
exec "${PYTHON:-.venv/bin/python}" scripts/gpu_smoke.py "$@"
