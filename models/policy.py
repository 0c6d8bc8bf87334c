"""Loading a policy (the tiny base model, a checkpoint, or a real model from a local path)."""

from __future__ import annotations

from pathlib import Path


def load_policy(path: str | Path, *, for_training: bool = False):
    """(model, tokenizer) from a local transformers folder; a clear error if it is missing.

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
    dtype = torch.float32 if not torch.cuda.is_available() else torch.bfloat16
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    if not for_training:
        model.eval()
    return model, tokenizer
