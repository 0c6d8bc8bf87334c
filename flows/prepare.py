"""Stage `prepare`: the tiny world (or local GSM8K-format files) as JSONL under data/prepared/.

`python -m flows.prepare` runs it directly (what DVC calls); `prepare_flow` is the Prefect flow.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from core import paths
from core.cli import parser, run_main
from core.io import write_json, write_jsonl
from core.params import Params, load
from world import generate_world
from world.external import prepare_gsm8k


def prepare(params: Params, out_dir: Path = paths.PREPARED) -> dict[str, int]:
    """Write every family's splits; external data, when chosen, replaces the `arith` files."""
    counts = generate_world(params.world, out_dir)
    if params.data.source == "external":
        for split, rows in prepare_gsm8k(params.data.external, params.world.seed).items():
            write_jsonl(out_dir / f"arith_{split}.jsonl", rows)
            counts[f"arith_{split}"] = len(rows)
    write_json(out_dir / "counts.json", counts)
    return counts


@flow(name="prepare", log_prints=True)
def prepare_flow(preset: str | None = None) -> dict[str, int]:
    """Generate or load the data."""
    return prepare(load(preset=preset))


def main() -> None:
    args = parser(__doc__).parse_args()
    print(prepare(load(args.params, preset=args.preset)))


if __name__ == "__main__":
    run_main(main)
