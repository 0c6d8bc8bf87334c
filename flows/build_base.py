"""Stage `build_base`: the tokenizer and tiny Llama trained from scratch (SFT) under data/base_model.

With `base_model.path` set (a local checkpoint such as a Qwen3 folder) nothing is trained: the stage
checks the folder loads and records what it is.
"""

from __future__ import annotations

import json
import time

from prefect import flow

from core import paths
from core.cli import parser, run_main
from core.io import write_json
from core.params import Params, load


def build_base(params: Params) -> dict:
    from models.policy import load_policy
    from models.tiny import train_base

    start = time.time()
    if params.base_model.path:
        model, tokenizer = load_policy(paths.base_model_dir(params))
        info = {"source": str(paths.base_model_dir(params)), "vocab_size": len(tokenizer),
                "parameters": sum(p.numel() for p in model.parameters())}
    else:
        info = train_base(paths.PREPARED, paths.BASE_MODEL, params.base_model, params.seed,
                          work_dir=paths.DATA / "work" / "sft")
        info["source"] = "tiny"
    info["build_seconds"] = round(time.time() - start, 1)
    write_json(paths.DATA / "base_model_info.json", info)
    return info


@flow(name="build_base", log_prints=True)
def build_base_flow(preset: str | None = None) -> dict:
    """Build (or check) the base model."""
    return build_base(load(preset=preset))


def main() -> None:
    args = parser(__doc__).parse_args()
    print(json.dumps(build_base(load(args.params, preset=args.preset))))


if __name__ == "__main__":
    run_main(main)
