"""Stage `evaluate`: held-out benchmarks for one policy (`--method rlvr --seed 0`, or `--method base`,
and `--method base --draw 2`: the base's further sampling draws, params `base_draws`).

Writes `data/eval/<method>/seed<S>/metrics.json` (`data/eval/base/metrics.json`,
`data/eval/base/draw<D>/metrics.json`) (tracked by DVC as metrics) and logs the same numbers to
the method's MLflow run (the one `train` opened, read from `run.json`; `base` gets its own run
per sampling seed). Beside it, `items.json`: every benchmark's per-item scores
(`evals/items.py`; in git, not a DVC metric), which the report's claims table pairs by item.
"""

from __future__ import annotations

import json
import logging
import time
from functools import partial

from prefect import flow

from core import paths
from core.cli import parser, run_main
from core.devices import cpu_kind
from core.io import read_json, write_json
from core.methods import load_ref
from core.methods import method as registered
from core.params import Params, load
from evals.registry import headline

log = logging.getLogger(__name__)


def evaluate(params: Params, name: str, seed: int | None = None, *, device=None,
             draw: int | None = None) -> dict:
    """Benchmarks for `name` (a method trained with `seed`, or `base`: its evaluation at the
    params' `seed`, or its `draw` d, sampled with seed `seed` + d).

    The policy is read-only here: held on `device` (default: this process's GPU, else the CPU;
    `core.devices.training_device`) in that device's compute dtype (bf16 on CUDA), so GSM8K's
    thousands of long samples never run on the CPU beside a GPU."""
    import mlflow

    from core.devices import training_device
    from evals.dilution import score_samples
    from evals.registry import load_rows
    from evals.self_eval import self_eval_auroc
    from evals.suite import evaluate_policy
    from flows.configure import evaluate_budgets, self_eval_probe
    from models.policy import load_policy
    from rewards.chat import ChatFormat
    from tasks import tracking

    if name == "base":
        seed, trained = None, list(params.methods)  # the base is scored on every method's task
        if draw is not None and draw not in params.base_draws:
            raise ValueError(f"base draw {draw} is not in params base_draws {params.base_draws}")
    elif draw is not None:
        raise ValueError(f"--draw is the base's (params base_draws), not {name}'s")
    else:
        seed, trained = (params.seeds[0] if seed is None else seed), [name]
    budgets = evaluate_budgets(params, trained)  # unknown names fail here, listing the known ones
    policy = paths.policy_dir(params, name, seed)
    if name != "base" and not (policy / "config.json").exists():
        # A fresh clone has the run's record (run.json, in git) but not its weights (DVC's cache).
        preset = f" --preset {params.preset}" if params.preset else ""
        raise FileNotFoundError(f"{policy}: no trained checkpoint of {name} seed {seed}; train it first "
                                f"(python -m flows.train --method {name} --seed {seed}{preset}), or "
                                "`dvc pull` it from a DVC remote that has it")
    start = time.time()
    if device is None:  # a GPU preset on a machine without CUDA fails here, naming the reason
        device = training_device(params.base_model.device, params.preset)
    model, tokenizer = load_policy(policy, device=device)
    attach_sampler(params, policy, model)
    chat = ChatFormat.from_params(params)  # prompts through the chat template, as in training
    if name != "base":  # with the thinking setting the method trained with
        chat = chat.with_thinking(params.method_grpo(name).enable_thinking)
    sample_seed = params.seed + (draw or 0) if seed is None else seed
    # Where this evaluation's record goes: a trained run's seed, or the base's draw.
    key = draw if name == "base" else seed
    family, cfg = params.method_config(name) if name != "base" else ("base", None)
    # arith_ref's samples also give paper 003 Fig. 3's numbers (evals/dilution.py).
    scorers = {"arith_ref": partial(score_samples, model, tokenizer, batch_size=params.eval.batch_size)}
    items: dict[str, dict] = {}  # benchmark -> per-item scores (items.json)
    metrics = evaluate_policy(model, tokenizer, paths.PREPARED, params.eval.benchmarks,
                              params.eval, sample_seed, chat=chat, items=items, scorers=scorers)
    for task, budget in budgets.items():
        ev = params.eval.model_copy(update={"max_new_tokens": budget})
        metrics.update(evaluate_policy(model, tokenizer, paths.PREPARED, [task], ev, sample_seed,
                                       chat=chat, items=items, scorers=scorers))
    benchmarks = [*params.eval.benchmarks, *budgets]
    if "arith" in benchmarks:  # can the policy judge its own arith solutions? (RLME's signal)
        rows = load_rows(paths.PREPARED, "arith", "val", params.eval.n_test)
        metrics.update(self_eval_auroc(
            model, tokenizer, rows, self_eval_probe(params, None if name == "base" else name),
            k=params.eval.heldout_k, temperature=params.eval.temperature,
            max_new_tokens=params.eval.max_new_tokens, batch_size=params.eval.batch_size,
            seed=sample_seed, chat=chat))
    hook = registered(family).evaluate if name != "base" else None
    if hook:  # the method's own extra evaluation (its registry entry), e.g. RLCER's rubric hints
        metrics.update(load_ref(hook)(
            model, tokenizer, cfg, params, prepared=paths.PREPARED, benchmarks=benchmarks,
            seed=seed, chat=chat))
    seconds = round(time.time() - start, 1)
    metrics["machine"] = cpu_kind()  # what bitwise equality of a re-run needs (flows/revalidate.py)
    write_json(paths.eval_dir(name, key) / "items.json", items)
    write_json(paths.eval_dir(name, key) / "metrics.json", metrics)
    # The wall time beside the record, not in it: metrics.json is in git (dvc.yaml: cache: false),
    # and a re-run that scores the same must leave it and dvc.lock as they were. times.json is
    # ignored (data/.gitignore); the committed stage times are reports/times/ and studies/.
    write_json(paths.eval_dir(name, key) / "times.json", {"eval_seconds": seconds})
    # The run's headline numbers alone: the narrow file `dvc metrics show` prints (one row a run).
    write_json(paths.eval_dir(name, key) / "headline.json", headline(metrics))
    tracking.setup()
    if name == "base":
        # One run per (base model, data, sampling seed): a re-evaluation writes into it again.
        match = {"reward_method": "base", "seed": str(sample_seed), "stage": "evaluate",
                 "data_hash": tracking.data_hash(paths.PREPARED),
                 "base_hash": tracking.data_hash(paths.base_model_dir(params), "*.safetensors")}
        run_id = tracking.training_run_id(match, resumable=False)
        with tracking.run(f"base-seed{sample_seed}", {**match, "git_commit": tracking.git_commit()},
                          run_id=run_id):
            tracking.log_metrics({f"test/{k}": v for k, v in {**metrics, "eval_seconds": seconds}.items()})
    else:
        run_id = read_json(paths.checkpoint_dir(name, seed) / "run.json")["run_id"]
        with mlflow.start_run(run_id=run_id):
            tracking.log_metrics({f"test/{k}": v for k, v in {**metrics, "eval_seconds": seconds}.items()})
    return metrics


def attach_sampler(params: Params, folder, model) -> str:
    """With `eval.sampler: vllm`, an engine built from the policy's `folder` samples this stage
    (`models.vllm_engine.attach`); where vLLM cannot run, one line says why and the lab's
    samplers are used. Returns the sampler used."""
    if params.eval.sampler != "vllm":
        return "lab"
    from models import vllm_engine

    reason = vllm_engine.unavailable()
    if reason:
        log.warning("eval.sampler is vllm, but %s: sampling with the lab's samplers", reason)
        return "lab"
    # The model's whole context: vLLM sizes its KV cache by memory, not by this length. On a GPU
    # the engine takes the share of memory training gives it (the policy stays there too, for
    # the scorers that read its log-probabilities).
    import torch

    extra = ({"gpu_memory_utilization": params.grpo.vllm_gpu_memory_utilization}
             if torch.cuda.is_available() else {})
    llm = vllm_engine.engine(folder, max_model_len=model.config.max_position_embeddings,
                             seed=params.seed, **extra)
    vllm_engine.attach(model, llm)
    return "vllm"


@flow(name="evaluate", log_prints=True)
def evaluate_flow(method: str, seed: int = 0, preset: str | None = None,
                  draw: int | None = None) -> dict:
    """Evaluate one policy on the held-out benchmarks."""
    return evaluate(load(preset=preset), method, seed, draw=draw)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--method", required=True, help="a trained method, or `base`")
    p.add_argument("--seed", type=int, default=None, help="GRPO seed of the trained policy")
    p.add_argument("--draw", type=int, default=None,
                   help="the base's further sampling draw (params base_draws)")
    args = p.parse_args()
    print(json.dumps(evaluate(load(args.params, preset=args.preset), args.method, args.seed,
                              draw=args.draw), indent=1))


if __name__ == "__main__":
    run_main(main)
