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
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

__all__ = ["autocast", "compute_dtype", "model_device", "place", "training_device"]


def training_device() -> Any:
    """The device this process trains on: `cuda:<LOCAL_RANK>` with CUDA (accelerate's choice for
    the process), else the CPU. A run's models go there before its trainer is built, so that a
    pre-filter, a frozen evaluator or a judge never runs on the CPU beside a GPU.

    >>> import torch
    >>> training_device() == (torch.device("cuda", torch.cuda.current_device())
    ...                       if torch.cuda.is_available() else torch.device("cpu"))
    True
    """
    import torch

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
