"""Stage `premises`: the study's base measured against the premises of the label-free claims.

Loads the base (`base_model.path`, else the built tiny base), samples the arith test split
(`eval.n_test` rows, 16 samples each at `eval.temperature`, drawn with `seed`, by the evaluate
stage's sampler) and writes `data/eval/base/premises.json`: token entropy, self-certainty AUROC
for correctness, pass@1, pass@16, maj@16 and whether each premise of `evals.premises.PREMISES`
holds (docs/premises.md); on a base whose SFT saw a share of these items (`arith_leak`, the
`leaked` preset: docs/bases.md) pass@1 on those and on the others apart. The file is in git
(dvc.yaml: `cache: false`) and holds no wall time, so a re-run that measures the same leaves it as
it was; the time goes to the ignored `premises_times.json` beside it.
"""

from __future__ import annotations

import json
import time

from prefect import flow

from core import paths
from core.cli import parser, run_main
from core.devices import cpu_kind
from core.io import write_json
from core.params import Params, load

# The benchmark the premises are stated on: the tiny world's arithmetic (a local GSM8K or MATH
# file takes its place under data.source: external).
TASK = "arith"


def premises(params: Params, *, device=None) -> dict:
    """Measure the base's premises and write them (module docstring); returns what was written."""
    from core.devices import training_device
    from evals.premises import VERSION, K, measure_premises, verdicts
    from evals.registry import load_rows
    from flows.evaluate import attach_sampler
    from models.policy import load_policy
    from models.tiny import is_leaked, leaks
    from rewards.chat import ChatFormat

    folder = paths.base_model_dir(params)
    rows = load_rows(paths.PREPARED, TASK, "test", params.eval.n_test)
    if not rows:
        raise FileNotFoundError(f"{paths.PREPARED / f'{TASK}_test.jsonl'}: no test rows to measure "
                                "the base's premises on; run the prepare stage first")
    sft = params.base_model.sft
    if not params.base_model.path and leaks([sft.mix, sft.roles.mix if sft.roles else {}]):
        # The `leaked` base saw these items' answers in its SFT: pass@1 on them and on the
        # others apart (evals/premises.py, `leak_memorised`).
        rows = [{**r, "leaked": is_leaked(r["id"])} for r in rows]
    start = time.time()
    if device is None:  # a GPU preset on a machine without CUDA fails here, naming the reason
        device = training_device(params.base_model.device, params.preset)
    model, tokenizer = load_policy(folder, device=device)
    attach_sampler(params, folder, model)  # sampled as the evaluate stage samples the base
    ev = params.eval
    out = measure_premises(model, tokenizer, rows, k=K, temperature=ev.temperature,
                           max_new_tokens=ev.max_new_tokens, batch_size=ev.batch_size,
                           seed=params.seed, chat=ChatFormat.from_params(params))
    out.update(verdicts(out))
    out.update({"task": TASK, "temperature": ev.temperature, "max_new_tokens": ev.max_new_tokens,
                "seed": params.seed, "version": VERSION,
                # what bitwise equality of a re-run needs (flows/revalidate.py)
                "machine": cpu_kind()})
    target = paths.eval_dir("base", None)
    write_json(target / "premises.json", out)
    # The wall time beside the record, not in it (as flows/evaluate.py keeps times.json).
    write_json(target / "premises_times.json", {"premises_seconds": round(time.time() - start, 1)})
    return out


@flow(name="premises", log_prints=True)
def premises_flow(preset: str | None = None) -> dict:
    """Measure the base's premises."""
    return premises(load(preset=preset))


def main() -> None:
    args = parser(__doc__).parse_args()
    print(json.dumps(premises(load(args.params, preset=args.preset)), indent=1, sort_keys=True))


if __name__ == "__main__":
    run_main(main)
