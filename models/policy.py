"""Loading a policy (the tiny base model, a checkpoint, or a real model from a local path).

A policy loaded for training has float32 weights (the optimiser's master weights; on CUDA the
trainer computes under bf16 autocast); a read-only one is held on the trainer's device in its
compute dtype (core/devices.py, which says why). On a CPU both are float32 on the CPU.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.devices import autocast, compute_dtype, place, training_device

__all__ = ["autocast", "compute_dtype", "load_policy", "place", "training_device"]


def load_policy(path: str | Path, *, for_training: bool = False, device: Any = None):
    """(model, tokenizer) from a local transformers folder; a clear error if it is missing.

    `for_training`: float32 weights (the optimiser's master weights), in train mode, on the CPU
    (the trainer moves them) unless `device` is given. Otherwise the model is read-only: in eval
    mode, on `device` (default: `training_device()`) in its `compute_dtype`.
    Tokenizers pad on the left for generation; a tokenizer without a pad token uses EOS.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path)
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"{path}: not a model folder (no config.json); build the base model "
                                "first (`dvc repro build_base`) or set base_model.path")
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if for_training:
        target = torch.device(device) if device is not None else torch.device("cpu")
        dtype = torch.float32
    else:
        target = torch.device(device) if device is not None else training_device()
        dtype = compute_dtype(target)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    if target.type != "cpu":
        model.to(target)
    if not for_training:
        model.eval()
    return model, tokenizer
