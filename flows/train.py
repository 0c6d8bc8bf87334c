"""Stage `train`: GRPO on the base model with one reward method and seed (`--method rlvr --seed 0`).

Outputs, for method M and seed S, under `data/checkpoints/M/seedS/`: `final` (weights + tokenizer)
and `run.json` (the MLflow run id, read by `evaluate`); `data/plots/M/seedS/{train,heldout}.json`
(per-step curves for `dvc plots` and the report). TRL's resumable `checkpoint-<step>` folders sit beside `final`;
they are reused only when the training config hash matches, so a changed param never resumes a
stale run.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path

from prefect import flow

from core import paths
from core.cli import parser, run_main
from core.codedeps import files_digest
from core.io import read_jsonl, write_json
from core.params import Params, load
from rewards import MethodContext, build_plan, reward_version

log = logging.getLogger(__name__)

# Fields the policy does not need at train time (the SFT target would leak the answer style).
_DROP = ("demonstration", "family", "split")


def task_rows(prepared: Path, task: str, split: str = "train") -> list[dict]:
    rows = read_jsonl(prepared / f"{task}_{split}.jsonl", required=("id", "prompt"))
    return [{"prompt_id": r["id"], **{k: v for k, v in r.items() if k not in _DROP + ("id",)}}
            for r in rows]


def config_hash(params: Params, method: str, seed: int) -> str:
    """What a run's checkpoints depend on: its resolved settings and code (`flows.configure`),
    the seed, the data and the base weights. Checkpoints are resumed only when it matches, so a
    changed param, file or base model never resumes a stale run, and editing another method's
    code never discards this one's."""
    from flows.configure import train_config

    base = paths.base_model_dir(params)
    # Relative to the checkout, so that a worker in another clone computes the same hash.
    where = str(base.relative_to(paths.ROOT)) if base.is_relative_to(paths.ROOT) else str(base)
    relevant = {"seed": seed, "config": train_config(params, method), "base": where,
                "data": files_digest(list(paths.PREPARED.glob("*.jsonl"))),
                "weights": files_digest(list(Path(base).glob("*.safetensors")))}
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:16]


def _prepare_output(out: Path, digest: str) -> None:
    """Keep resumable checkpoints only if they were made with the same config."""
    stamp = out / "config_hash"
    if out.exists() and (not stamp.exists() or stamp.read_text() != digest):
        for p in out.glob("checkpoint-*"):
            shutil.rmtree(p)
        shutil.rmtree(out / "final", ignore_errors=True)
        shutil.rmtree(out / "best", ignore_errors=True)
        shutil.rmtree(out / ".best", ignore_errors=True)
        shutil.rmtree(out / "heldout_state", ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    stamp.write_text(digest)


# Prefixes of the metrics a method's trainer logs itself (DRO gates, RLCER roles, ...).
_METHOD_LOGS = ("dro", "rlcer", "rlme", "rlvrr", "genrm", "hybrid")


def curves(history: list[dict]) -> list[dict]:
    """Per-step training curve rows from TRL's log history (for dvc plots and the report)."""
    keys = {"reward": "reward", "reward_std": "reward_std", "entropy": "entropy",
            "completion_length": "completions/mean_length", "clipped_ratio": "completions/clipped_ratio"}
    rows = []
    for h in history:
        if "reward" in h and "step" in h:
            extra = {k: v for k, v in h.items() if k.split("/")[0] in _METHOD_LOGS}
            rows.append({"step": h["step"], **{k: h[v] for k, v in keys.items() if v in h}, **extra})
    return rows


def make_plan(params: Params, method: str, seed: int, model, tokenizer, *,
              prepared: Path | None = None, components: Path | None = None):
    """The `MethodPlan` of a method or variant for the policy `model` (reward functions, trainer)."""
    family, cfg = params.method_config(method)
    ctx = MethodContext(name=method, family=family, cfg=cfg, grpo=params.method_grpo(method),
                        params=params, seed=seed, policy=model, tokenizer=tokenizer,
                        prepared=prepared or paths.PREPARED,
                        components=components or paths.COMPONENTS)
    return build_plan(ctx)


def train(params: Params, method: str, seed: int) -> dict:
    """Train `method`; returns a summary (final train reward, held-out history, run id)."""
    from evals.suite import evaluate_policy
    from models import grpo
    from models.callbacks import HeldoutCallback, MetricsCallback
    from models.policy import load_policy
    from tasks import tracking

    family, cfg = params.method_config(method)  # unknown names fail here, listing the known ones
    g = params.method_grpo(method)
    prepared, base = paths.PREPARED, paths.base_model_dir(params)
    rows = task_rows(prepared, g.task)
    out = paths.checkpoint_dir(method, seed)
    digest = config_hash(params, method, seed)
    _prepare_output(out, digest)
    model, tokenizer = load_policy(base, for_training=True)
    plan = make_plan(params, method, seed, model, tokenizer)  # a bad evaluator path fails here
    if plan.select_rows is not None:  # e.g. DRO's static pre-filter, with the step-0 policy
        rows = plan.select_rows(rows)
        log.info("%s trains on %d selected rows", method, len(rows))

    # Held-out samples get the completion budget the method trains with (GenRM answers are long).
    heldout_ev = params.eval.model_copy(
        update={"max_new_tokens": max(params.eval.max_new_tokens, g.max_completion_length)})

    def heldout(model) -> dict:
        return evaluate_policy(model, tokenizer, prepared, [g.task], heldout_ev,
                               seed, split="val", n=None, k=params.eval.heldout_k,
                               greedy=False)

    def sink(metrics: dict, step: int) -> None:
        tracking.log_metrics({f"heldout/{k}": v for k, v in metrics.items()}, step=step)

    def on_event(event) -> None:
        tracking.set_tags({f"collapse.{event.kind}": f"step {event.step}: {event.message}"})

    from evals.suite import BENCHMARKS
    from models.collapse import CollapseConfig, CollapseMonitor

    headline = f"{g.task}/{BENCHMARKS[g.task][2]}"
    monitor = CollapseMonitor(CollapseConfig(**params.collapse.model_dump()))
    callback = HeldoutCallback(heldout, g.heldout_every, headline, monitor,
                               best_dir=out / "best", tokenizer=tokenizer, sink=sink,
                               on_event=on_event, reward_key=plan.monitor_reward or "reward")
    tags = {"reward_method": method, "method_family": family, "task": g.task,
            "reward_version": reward_version(family),
            "seed": str(seed), "git_commit": tracking.git_commit(),
            "data_hash": tracking.data_hash(prepared), "config_hash": digest,
            "preset": params.preset or "default", "stage": "train"}
    logged = params.model_dump(exclude={"presets"})
    resumable = any(out.glob("checkpoint-*"))
    run_id = tracking.training_run_id({"stage": "train", "reward_method": method, "seed": str(seed),
                                       "config_hash": digest}, resumable)
    with tracking.run(f"{method}-seed{seed}", tags, {"lab": logged}, run_id=run_id) as run:
        history = grpo.train(base, rows, plan, g, seed=seed, output_dir=out,
                             callbacks=[callback, MetricsCallback(plan.loggers, tracking.log_metrics)],
                             report_to=["mlflow"], run_name=f"{method}-seed{seed}",
                             model=model, tokenizer=tokenizer)
        tracking.log_model_pointer(out / "final")
        tracking.set_tags({"collapsed": str(bool(monitor.events)).lower(),
                           "best_step": str(monitor.best_step)})
        run_id = run.info.run_id
    callback.publish_best()  # `best/` from the kept copy (DVC may have deleted it before a rerun)
    curve = curves(history)
    write_json(paths.plots_dir(method, seed) / "train.json", curve)
    write_json(paths.plots_dir(method, seed) / "heldout.json", callback.history)
    summary = {"method": method, "run_id": run_id, "seed": seed, "config_hash": digest,
               "steps": curve[-1]["step"] if curve else 0,
               "final_reward": curve[-1].get("reward") if curve else None,
               "collapsed": bool(monitor.events),
               "collapse_events": [vars(e) for e in monitor.events],
               "best_step": monitor.best_step, "best_heldout": monitor.best_heldout,
               "best_checkpoint": str((out / "best").relative_to(paths.ROOT))
               if (out / "best").exists() else None,
               "heldout": callback.history}
    write_json(out / "run.json", summary)
    return summary


@flow(name="train", log_prints=True)
def train_flow(method: str, seed: int = 0, preset: str | None = None) -> dict:
    """GRPO-train one method with one seed."""
    return train(load(preset=preset), method, seed)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--method", required=True, help="reward method, e.g. rlvr or random")
    p.add_argument("--seed", type=int, default=None, help="GRPO seed (default: the first of `seeds`)")
    args = p.parse_args()
    params = load(args.params, preset=args.preset)
    summary = train(params, args.method, params.seeds[0] if args.seed is None else args.seed)
    print(json.dumps({k: v for k, v in summary.items() if k != "heldout"}))


if __name__ == "__main__":
    run_main(main)
