"""Stage `synthesize`: RLVRR components (key points, keywords, style checks) per `facts` prompt.

Reads `data/prepared/facts_{train,val}.jsonl`, writes `data/components/facts_{split}.jsonl` and
`facts_{split}.stats.json` (kept / dropped counts) beside each (docs/methods/shared.md; schema in
synthesis/README.md). `python -m flows.synthesize` runs it directly (what DVC calls);
`synthesize_flow` is the Prefect flow. Retries live in the llm backend's HTTP client, per
request: a Prefect task retry would redo a whole split.
"""

from __future__ import annotations

import sys
from pathlib import Path

from prefect import flow

from core import paths
from core.cli import parser, run_main
from core.io import read_jsonl
from core.params import Params, SynthesizeConfig, load
from synthesis import stats_path, synthesize, write_components

COMPONENTS = paths.COMPONENTS
TASK = "facts"
SPLITS = ("train", "val")


def synthesize_split(cfg: SynthesizeConfig, prepared_dir: Path, out_dir: Path, split: str,
                     client=None) -> dict[str, int]:
    """One split: read the prepared rows, synthesise and validate, write components + stats."""
    rows = read_jsonl(prepared_dir / f"{TASK}_{split}.jsonl", required=("id", "prompt", "references"))
    components, stats = synthesize(rows, cfg, client=client)
    write_components(out_dir / f"{TASK}_{split}.jsonl", components, stats)
    return stats.as_dict()


def synthesize_stage(params: Params, prepared_dir: Path = paths.PREPARED,
                     out_dir: Path = COMPONENTS, client=None) -> dict[str, dict[str, int]]:
    """Every split of the stage; returns the stats per split (also written beside the files)."""
    cfg: SynthesizeConfig = params.synthesize
    return {split: synthesize_split(cfg, Path(prepared_dir), Path(out_dir), split, client)
            for split in SPLITS}


@flow(name="synthesize", log_prints=True)
def synthesize_flow(preset: str | None = None) -> dict[str, dict[str, int]]:
    """Synthesise and validate the RLVRR components."""
    return synthesize_stage(load(preset=preset))


def main() -> None:
    from core.llm import LlmEndpointError

    args = parser(__doc__).parse_args()
    try:
        stats = synthesize_stage(load(args.params, preset=args.preset))
    except LlmEndpointError as e:
        # An unreachable or misconfigured synthesis server is a user error: one line, exit 2.
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    for split, counts in stats.items():
        print(f"{split}: {counts} -> {stats_path(COMPONENTS / f'{TASK}_{split}.jsonl')}")


if __name__ == "__main__":
    run_main(main)
