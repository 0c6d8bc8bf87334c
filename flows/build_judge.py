"""Stage `build_judge` (on demand, not in dvc.yaml): the tiny world's judge under data/judge_model.

A copy of the base model fine-tuned on "Is the answer correct?" alone (`base_model.judge`,
`world.roles.judge_rows`): an external RLME evaluator for the `rlme_judge` variant. It writes
`data/judge_model_info.json` with the judge's AUROC on the base model's own sampled val solutions
(`judge/auroc_q0`, the measure the live evaluator is judged by) beside the base's own
(`self_eval/auroc_q0`). With `base_model.path` set, bring your own judge: point an evaluator's
`source` at its folder instead.
"""

from __future__ import annotations

import json
import time

from prefect import flow

from core import paths
from core.cli import parser, run_main
from core.io import write_json
from core.params import Params, ParamsError, load

JUDGE_DIR = paths.DATA / "judge_model"


def build_judge(params: Params) -> dict:
    from evals.registry import load_rows
    from evals.self_eval import self_eval_auroc
    from models.policy import load_policy
    from models.tiny import train_judge

    if params.base_model.path or params.base_model.judge is None:
        raise ParamsError("build_judge trains the tiny world's judge: it needs base_model.judge and "
                         "no base_model.path (with a real model, point an evaluator's source at "
                         "your own judge folder)")
    start = time.time()
    info = train_judge(paths.PREPARED, paths.BASE_MODEL, JUDGE_DIR, params.base_model,
                       params.seed, work_dir=paths.DATA / "work" / "judge")
    base, tok = load_policy(paths.BASE_MODEL)
    judge = load_policy(JUDGE_DIR)
    rows = load_rows(paths.PREPARED, "arith", "val", params.eval.n_test)
    kw = dict(k=params.eval.heldout_k, temperature=params.eval.temperature,
              max_new_tokens=params.eval.max_new_tokens, batch_size=params.eval.batch_size,
              seed=params.seed)
    for prefix, j in (("judge", judge), ("self_eval", None)):
        info.update(self_eval_auroc(base, tok, rows, params.reward.rlme, judge=j, prefix=prefix, **kw))
    info["build_seconds"] = round(time.time() - start, 1)
    write_json(paths.DATA / "judge_model_info.json", info)
    return info


@flow(name="build_judge", log_prints=True)
def build_judge_flow(preset: str | None = None) -> dict:
    """Build the tiny world's judge (an external RLME evaluator)."""
    return build_judge(load(preset=preset))


def main() -> None:
    args = parser(__doc__).parse_args()
    print(json.dumps(build_judge(load(args.params, preset=args.preset)), indent=1))


if __name__ == "__main__":
    run_main(main)
