"""Where every model of a run lives, and in which precision (docs/gpu.md, "Precision and devices").

Two rules:

- A model that is trained keeps float32 weights, so its AdamW moments and master weights are
  float32: at the learning rates of the GPU presets (5e-7 to 2e-6) a bf16 weight would round most
  updates away. On CUDA its forward and backward passes still run in bf16, under autocast (TRL's
  `bf16=True`, models/grpo.py), which is how TRL itself loads a policy.
- A model that is only read (the evaluate stage's policy, RLME's frozen and path evaluators,
  RLCER's judge) is held on the trainer's device (`training_device`) in that device's compute
  dtype (`compute_dtype`: bf16 on a CUDA device that supports it, float32 elsewhere).

On a CPU nothing changes: every model is float32 on the CPU. torch is imported lazily (this module
is in `core`, whose other users import no torch).

A GPU preset says so (params `base_model.device: cuda`): without CUDA, `training_device` then
fails at once with the reason (`require_cuda`) instead of training on the CPU without a word.
The GPUs a machine offers, as CUDA names them (indices, `GPU-<uuid>`, `MIG-<uuid>`), are read
here too (`visible_gpu_ids`), for the pipeline's GPU scheduling and the work pool's queues.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
from typing import Any

from core.params import ParamsError

__all__ = ["CUDA_DRIVER_FLOOR", "DeviceError", "autocast", "compute_dtype", "cpu_kind",
           "cuda_unavailable_reason", "model_device", "nvidia_smi_devices",
           "parse_visible_devices", "place", "require_cuda", "training_device", "visible_gpu_ids"]

# The oldest NVIDIA driver that runs CUDA 13 code: PyPI's Linux wheels of torch 2.13 and vLLM 0.30
# (the project's pins) are CUDA 13 builds.
CUDA_DRIVER_FLOOR = 580


class DeviceError(ParamsError):
    """A preset asks for a device this machine cannot give (a user's error: one line, exit 2)."""


def training_device(required: str = "auto", preset: str | None = None) -> Any:
    """The device this process trains on: `cuda:<LOCAL_RANK>` with CUDA (accelerate's choice for
    the process), else the CPU. A run's models go there before its trainer is built, so that a
    pre-filter, a frozen evaluator or a judge never runs on the CPU beside a GPU.

    `required` is params `base_model.device`: with `cuda` (a GPU preset; `preset` names it in the
    message) a machine where CUDA is unavailable raises `DeviceError` (`require_cuda`).

    >>> import torch
    >>> training_device() == (torch.device("cuda", torch.cuda.current_device())
    ...                       if torch.cuda.is_available() else torch.device("cpu"))
    True
    """
    import torch

    if required == "cuda":
        require_cuda(preset)
    if not torch.cuda.is_available():
        return torch.device("cpu")
    local = os.environ.get("LOCAL_RANK", "").strip()
    return torch.device("cuda", int(local) if local.isdigit() else torch.cuda.current_device())


def compute_dtype(device: Any) -> Any:
    """The dtype a read-only model is held in on `device`: bf16 on CUDA (where supported), else
    float32.

    >>> compute_dtype("cpu"), compute_dtype("meta")
    (torch.float32, torch.float32)
    """
    import torch

    device = torch.device(device)
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float32


def autocast(device: Any) -> contextlib.AbstractContextManager:
    """bf16 autocast on a CUDA device (the precision the trainer computes in), else nothing: for
    passes of the float32 policy outside the trainer's own step (held-out sampling, DRO's static
    pre-filter).

    >>> with autocast("cpu"):
    ...     pass
    """
    import torch

    device = torch.device(device)
    if compute_dtype(device) == torch.bfloat16:
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def model_device(model: Any) -> Any:
    """The device a model's inputs go to: its `device` attribute, else its first parameter's."""
    import torch

    device = getattr(model, "device", None)
    if isinstance(device, torch.device):
        return device
    return next(model.parameters()).device


def place(model: Any, device: Any, *, read_only: bool = True) -> Any:
    """`model` on `device`; a read-only model also in that device's `compute_dtype` (a trained one
    keeps its float32 weights). Returns the model.

    >>> import torch
    >>> place(torch.nn.Linear(2, 2), "meta").weight.device
    device(type='meta')
    """
    import torch

    device = torch.device(device)
    if read_only:
        return model.to(device=device, dtype=compute_dtype(device))
    return model.to(device)


def require_cuda(preset: str | None = None) -> None:
    """Nothing where torch sees a CUDA device; else `DeviceError`: one line naming the reason and
    the driver floor of the pinned CUDA 13 wheels."""
    import torch

    if torch.cuda.is_available():
        return
    who = f"preset {preset}" if preset else "this run"
    raise DeviceError(
        f"{who} sets base_model.device: cuda, but torch sees no CUDA device here "
        f"({cuda_unavailable_reason()}); PyPI's torch 2.13 and vLLM 0.30 Linux wheels are CUDA 13 "
        f"builds that need an NVIDIA driver >= {CUDA_DRIVER_FLOOR} (`nvidia-smi` shows it; "
        "docs/gpu.md, section 1). On a machine without a GPU, run without the GPU preset")


def cuda_unavailable_reason() -> str:
    """Why torch sees no CUDA device, as far as this machine tells: a CPU build of torch, GPUs
    hidden by CUDA_VISIBLE_DEVICES, no NVIDIA driver, or a driver older than the floor."""
    import torch

    if torch.version.cuda is None:
        return f"torch {torch.__version__} is a CPU build"
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    if hidden is not None and not parse_visible_devices(hidden):
        return f"CUDA_VISIBLE_DEVICES={hidden!r} hides every GPU"
    driver = _driver_version()
    if driver is None:
        return "no NVIDIA driver found"
    major = driver.split(".")[0]
    if not major.isdigit() or int(major) < CUDA_DRIVER_FLOOR:
        return (f"NVIDIA driver {driver} is older than {CUDA_DRIVER_FLOOR}; this torch is built "
                f"for CUDA {torch.version.cuda}")
    return (f"NVIDIA driver {driver}, torch built for CUDA {torch.version.cuda}, yet "
            "torch.cuda.is_available() is False")


def _driver_version() -> str | None:
    """The NVIDIA kernel driver's version ("580.65.06"), or None without one."""
    import shutil
    import subprocess

    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as f:
            m = re.search(r"Kernel Module[^\d]*(\d+\.\d+(?:\.\d+)?)", f.read())
        if m:
            return m.group(1)
    except OSError:
        pass
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[0] if out else None


# One CUDA device name: an index, a GPU UUID (or a prefix of one), or a MIG instance (its UUID,
# or the older `MIG-GPU-<uuid>/<gpu instance>/<compute instance>`).
_DEVICE_ID = re.compile(r"\d+|GPU-[0-9A-Fa-f-]+|MIG-(?:GPU-)?[0-9A-Fa-f-]+(?:/\d+/\d+)?")


def parse_visible_devices(value: str) -> list[str]:
    """The devices a CUDA_VISIBLE_DEVICES value names, as CUDA reads it: left to right up to the
    first entry that names no device (CUDA ignores the rest; "-1" or "" hides every GPU).
    Indices, GPU UUIDs and MIG ids are all device names.

    >>> parse_visible_devices("0,2")
    ['0', '2']
    >>> parse_visible_devices("GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f, MIG-ba1e4b3a-4e3b-5d6c")
    ['GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f', 'MIG-ba1e4b3a-4e3b-5d6c']
    >>> parse_visible_devices("MIG-GPU-5c89852c-d268/1/0"), parse_visible_devices("1,-1,2")
    (['MIG-GPU-5c89852c-d268/1/0'], ['1'])
    >>> parse_visible_devices("-1"), parse_visible_devices("")
    ([], [])
    """
    out = []
    for entry in value.split(","):
        entry = entry.strip()
        if not _DEVICE_ID.fullmatch(entry):
            break
        out.append(entry)
    return out


def nvidia_smi_devices(listing: str) -> list[str]:
    """The CUDA devices an `nvidia-smi -L` listing shows: each GPU's index, or, for a GPU split
    into MIG instances (where CUDA cannot use the GPU itself), each instance's MIG UUID.

    >>> nvidia_smi_devices(
    ...     "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa-1111)\\n"
    ...     "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-bbbb-2222)\\n"
    ...     "  MIG 3g.20gb     Device  0: (UUID: MIG-cccc-3333)\\n"
    ...     "  MIG 3g.20gb     Device  1: (UUID: MIG-dddd-4444)\\n")
    ['0', 'MIG-cccc-3333', 'MIG-dddd-4444']
    """
    gpus: list[tuple[str, list[str]]] = []
    for line in listing.splitlines():
        if m := re.match(r"GPU (\d+):", line.strip()):
            gpus.append((m.group(1), []))
        elif (m := re.search(r"\(UUID: (MIG-[^)\s]+)\)", line)) and gpus:
            gpus[-1][1].append(m.group(1))
    return [d for index, migs in gpus for d in (migs or [index])]


def visible_gpu_ids(env: dict[str, str] | None = None) -> list[str]:
    """The GPUs this machine offers a stage: the devices of CUDA_VISIBLE_DEVICES where it is set,
    else those `nvidia-smi -L` lists; none on a machine without GPUs.

    >>> visible_gpu_ids({"CUDA_VISIBLE_DEVICES": "GPU-aaaa-1111,GPU-bbbb-2222"})
    ['GPU-aaaa-1111', 'GPU-bbbb-2222']
    """
    import shutil
    import subprocess

    env = dict(os.environ) if env is None else env
    if env.get("CUDA_VISIBLE_DEVICES") is not None:
        return parse_visible_devices(env["CUDA_VISIBLE_DEVICES"])
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return nvidia_smi_devices(out)


def cpu_kind() -> str:
    """What a CPU run's numbers depend on besides the code and its inputs: the architecture, the
    vector instructions torch dispatches to, the processor model and torch's version. Recorded
    with each run (run.json, metrics.json: `machine`); `make revalidate` asks for bitwise equality
    only between runs of one kind (flows/revalidate.py).

    >>> k = cpu_kind(); k.startswith(platform.machine()) and "torch" in k
    True
    """
    import torch

    model = ""
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next((line.split(":", 1)[1].strip() for line in f
                          if line.startswith("model name")), "")
    model = model or platform.processor()
    isa = torch.backends.cpu.get_cpu_capability()
    return " ".join(x for x in (platform.machine(), isa, model, f"torch {torch.__version__}") if x)
