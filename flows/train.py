"""Stage `train`: GRPO on the base model with one reward method and seed (`--method rlvr --seed 0`).

Outputs, for method M and seed S, under `data/checkpoints/M/seedS/`: `final` (weights + tokenizer)
and `run.json` (the MLflow run id, read by `evaluate`); `data/plots/M/seedS/{train,heldout}.json`
(per-step curves for `dvc plots` and the report). TRL's resumable `checkpoint-<step>` folders sit beside `final`;
they are reused only when the training config hash matches, so a changed param never resumes a
stale run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from prefect import flow

from core import paths, ranks
from core.cli import parser, run_main
from core.codedeps import files_digest
from core.devices import cpu_kind
from core.io import read_jsonl, write_json
from core.methods import metric_prefixes
from core.params import ROOT, Params, ResolvedMethod, load
from evals.urlvr import PREFIX as URLVR_PREFIX
from rewards import MethodContext, build_plan, reward_version

log = logging.getLogger(__name__)

# Fields the policy does not need at train time (the SFT target would leak the answer style).
_DROP = ("demonstration", "family", "split")


def plot_rows(history: list[dict]) -> list[dict]:
    """The held-out curve as DVC plots read it: numbers (or null) only. DVC drops a whole overlay
    chart when one run's row holds a list, such as the callback's per-row collapse `events`
    (run.json's `collapse_events` keeps them)."""
    return [{k: v for k, v in row.items() if v is None or isinstance(v, (int, float, str))}
            for row in history]

def task_rows(prepared: Path, task: str, split: str = "train") -> list[dict]:
    rows = read_jsonl(prepared / f"{task}_{split}.jsonl", required=("id", "prompt"))
    return [{"prompt_id": r["id"], **{k: v for k, v in r.items() if k not in _DROP + ("id",)}}
            for r in rows]


def config_hash(params: Params, method: str | ResolvedMethod, seed: int) -> str:
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


def heldout_settings(ev, max_completion_length: int, split: str):
    """The eval settings of a held-out evaluation during training (`split` val: the monitor's and
    the best checkpoint's; test: the collapse label's curve, test.json). Its samples get the
    completion budget the method trains with (GenRM answers are long). Neither draws the majority
    vote's extra samples: the label reads only each checkpoint's headline (flows/alarms.py,
    `independent_label`; the claims' `test_rise_fall`), and at the defaults (eval.maj_k 8,
    eval.heldout_k 2) the vote was two thirds of all held-out samples, the largest part of a
    training stage (`benchmarks/profile_run.py`). The samples the headline reads are drawn in
    their own seeded call (models/generation.py), so they and the training are the same without it.

    >>> from core.params import load
    >>> ev = heldout_settings(load().eval, 200, "test")
    >>> ev.max_new_tokens, ev.maj_k, load().eval.maj_k
    (200, None, 8)
    """
    return ev.model_copy(update={"max_new_tokens": max(ev.max_new_tokens, max_completion_length),
                                 "maj_k": None, "n_test": ev.heldout_n or ev.n_test})


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


def curves(history: list[dict]) -> list[dict]:
    """Per-step training curve rows from TRL's log history (for dvc plots and the report), with
    the metrics the methods log themselves (each registry entry's `metrics` prefixes)."""
    keys = {"reward": "reward", "reward_std": "reward_std", "entropy": "entropy",
            "completion_length": "completions/mean_length", "clipped_ratio": "completions/clipped_ratio"}
    prefixes = (*metric_prefixes(), URLVR_PREFIX)  # URLVR's measures: every method logs them (models/grpo.py)
    rows = []
    for h in history:
        if "reward" in h and "step" in h:
            extra = {k: v for k, v in h.items() if k.startswith(prefixes)}
            rows.append({"step": h["step"], **{k: h[v] for k, v in keys.items() if v in h}, **extra})
    return rows


def make_plan(params: Params, method: str | ResolvedMethod, seed: int, model, tokenizer, *,
              components: Path | None = None):
    """The `MethodPlan` of a method or variant (a name, or resolved once by the caller) for the
    policy `model` (reward functions, trainer)."""
    run = params.resolve(method) if isinstance(method, str) else method
    from rewards.chat import ChatFormat

    ctx = MethodContext(name=run.name, family=run.family, cfg=run.cfg, grpo=run.grpo, seed=seed,
                        policy=model, tokenizer=tokenizer, components=components or paths.COMPONENTS,
                        chat=ChatFormat.from_params(params).with_thinking(run.grpo.enable_thinking))
    return build_plan(ctx)


def check_vllm(g):
    """The run's GRPO settings with vLLM checked (`g`, or `g` without vLLM): a run with
    `grpo.use_vllm` needs vLLM able to sample in this process, in colocate and server mode alike
    (TRL's client pushes the weights over vLLM's NCCL code), and server mode needs CUDA for that
    push. On the CPU, where vLLM's CPU build cannot run, one line says why and the run samples
    with the lab's samplers (the default asks for vLLM where `make setup` could install it); on
    a GPU it is an error, in one line, before the model is loaded."""
    if not g.use_vllm:
        return g
    import torch

    from core.params import ParamsError
    from models.vllm_engine import unavailable

    reason = unavailable()
    if reason and not torch.cuda.is_available():
        log.warning("grpo.use_vllm is on, but %s: sampling rollouts with the lab's samplers", reason)
        return g.model_copy(update={"use_vllm": False})
    if reason:
        raise ParamsError(f"grpo.use_vllm is on ({g.vllm_mode} mode) but {reason}; or set "
                          "grpo.use_vllm: false to sample with the lab's samplers (a GPU preset's "
                          "grpo.steps_per_generation bounds that rollout batch)")
    if g.vllm_mode == "server" and not torch.cuda.is_available():
        raise ParamsError("grpo.vllm_mode is server, which pushes the policy's weights to the server "
                          "over vLLM's NCCL weight-transfer engine: that needs CUDA. On the CPU use "
                          "grpo.vllm_mode: colocate (a CPU server serves generation only)")
    return g


class LaunchError(RuntimeError):
    """The launch does not give the number of processes that was asked for."""


def launch(expected: int | None = None, timeout_s: float | None = None) -> int:
    """Join the launcher's process group (its collectives wait up to `timeout_s`, params
    `grpo.ddp_timeout_s`), say how many processes this training runs on, and refuse a launch
    that does not give the `expected` number (`--num-processes`)."""
    world, rank, backend = ranks.init(timeout_s)
    if rank == 0:
        log.info("training on %d process%s (torch.distributed backend: %s); rank 0 writes the files "
                 "and the MLflow run", world, "" if world == 1 else "es", backend)
    if expected is not None and expected != world:
        raise LaunchError(
            f"--num-processes {expected} was asked for but this launch runs {world} process(es) "
            f"(WORLD_SIZE={os.environ.get('WORLD_SIZE', 'unset')}); see docs/multiprocess.md, e.g. "
            f"accelerate launch --config_file configs/accelerate/cpu_2proc.yaml -m flows.train ...")
    return world


def setup_run(params: Params, run: ResolvedMethod, seed: int, rows: list[dict], *,
              device=None, components: Path | None = None):
    """(policy, tokenizer, plan, training rows) of a run, every model where the trainer will use it.

    The policy is loaded with float32 (master) weights straight onto `device` (default: the
    process's `models.policy.training_device`), before the method's plan is built: its builders
    put what they load (RLME's frozen and path evaluators, RLCER's judge) on the policy's device,
    and DRO's static pre-filter samples there, under the trainer's bf16 autocast on CUDA.
    Tests pass `device="meta"` to check where every model lands without running one."""
    from models.policy import autocast, load_policy, training_device

    if device is None:
        device = training_device(params.base_model.device, params.preset)
    model, tokenizer = load_policy(paths.base_model_dir(params), for_training=True, device=device)
    plan = make_plan(params, run, seed, model, tokenizer, components=components)  # a bad path fails here
    if plan.select_rows is not None:  # e.g. DRO's static pre-filter, with the step-0 policy
        select = plan.select_rows

        def selected() -> list[dict]:
            with autocast(device):
                return select(rows)

        rows = ranks.on_main(selected)  # computed once, the same rows on every rank
        log.info("%s trains on %d selected rows", run.name, len(rows))
    return model, tokenizer, plan, rows


def train(params: Params, method: str | ResolvedMethod, seed: int,
          num_processes: int | None = None, device=None) -> dict:
    """Train `method`; returns a summary (final train reward, held-out history, run id).

    On N ranks (`accelerate launch`, docs/multiprocess.md) every rank trains; only the main one
    prepares the output folder, opens the MLflow run, evaluates held-out data and writes files.
    The other ranks return a summary without the run's results. `device`: where this process
    trains (default: `models.policy.training_device`, accelerate's choice)."""
    from evals.suite import evaluate_policy
    from models import grpo
    from models.callbacks import HeldoutCallback, MetricsCallback
    from models.policy import autocast, training_device
    from rewards.chat import ChatFormat
    from tasks import tracking

    # Resolved once per run (here, or by the caller); unknown names fail here, listing the known ones.
    run = params.resolve(method) if isinstance(method, str) else method
    # Before any work: a launch that cannot be honoured, or a GPU preset on a machine without
    # CUDA, fails in seconds.
    launch(num_processes, run.grpo.ddp_timeout_s)
    device = training_device(params.base_model.device, params.preset) if device is None else device
    run = dataclasses.replace(run, grpo=check_vllm(run.grpo))
    method = run.name
    family, g = run.family, run.grpo
    prepared, base = paths.PREPARED, paths.base_model_dir(params)
    # The base this run starts from, by DVC's md5 of its folder (run.json; evals/lineage.py keeps
    # runs of different bases apart). Imported by name: provenance, not code the training runs.
    base_md5 = importlib.import_module("evals.lineage").dir_md5(base) if Path(base).is_dir() else None
    started = time.monotonic()
    rows = task_rows(prepared, g.task)
    out = paths.checkpoint_dir(method, seed)
    main = ranks.is_main()
    digest = config_hash(params, run, seed)
    if main:
        _prepare_output(out, digest)
    ranks.barrier()  # no rank looks for checkpoints while the main one may be deleting stale ones
    model, tokenizer, plan, rows = setup_run(params, run, seed, rows, device=device)

    # Every prompt through the chat template, if any, with the method's thinking setting.
    chat = ChatFormat.from_params(params).with_thinking(g.enable_thinking)
    heldout_ev = {split: heldout_settings(params.eval, g.max_completion_length, split)
                  for split in ("val", "test")}

    def heldout(model, split: str = "val") -> dict:  # the float32 policy samples under bf16 autocast
        with autocast(device):
            return evaluate_policy(model, tokenizer, prepared, [g.task], heldout_ev[split], seed,
                                   split=split, n=None, k=params.eval.heldout_k, greedy=False,
                                   chat=chat)

    def sink(metrics: dict, step: int) -> None:
        tracking.log_metrics({f"heldout/{k}": v for k, v in metrics.items()}, step=step)

    def on_event(event) -> None:
        tracking.set_tags({f"collapse.{event.kind}": f"step {event.step}: {event.message}"})

    from evals.registry import headline_metrics
    from models.collapse import CollapseConfig, CollapseMonitor

    # The metric the best checkpoint and the collapse monitor maximise (arith_cf: counterfactual
    # accuracy; its benchmark's own headline, the cheat rate, would reward copying).
    headline = headline_metrics(g.task)[0]
    monitor = CollapseMonitor(CollapseConfig(**params.collapse.model_dump()))
    callback = HeldoutCallback(heldout, g.heldout_every, headline, monitor,
                               best_dir=out / "best", tokenizer=tokenizer, sink=sink,
                               on_event=on_event, reward_key=plan.monitor_reward or "reward",
                               label_fn=lambda model: heldout(model, "test"))
    tags = {"reward_method": method, "method_family": family, "task": g.task,
            "reward_version": reward_version(family),
            "seed": str(seed), "git_commit": tracking.git_commit(),
            "data_hash": tracking.data_hash(prepared), "config_hash": digest,
            "preset": params.preset or "default", "stage": "train"}
    logged = params.model_dump(exclude={"presets"})
    run_id = None
    if main:  # one MLflow run per (method, seed, config): the main process opens and writes it
        resumable = any(out.glob("checkpoint-*"))
        run_id = tracking.training_run_id({"stage": "train", "reward_method": method, "seed": str(seed),
                                           "config_hash": digest}, resumable)
    tracked = (tracking.run(f"{method}-seed{seed}", tags, {"lab": logged}, run_id=run_id) if main
               else contextlib.nullcontext())
    with tracked as active:  # None on the other ranks
        history = grpo.train(base, rows, plan, g, seed=seed, output_dir=out,
                             callbacks=[callback, MetricsCallback(plan.loggers, tracking.log_metrics)],
                             report_to=["mlflow"], run_name=f"{method}-seed{seed}",
                             model=model, tokenizer=tokenizer, chat=chat)
        if main:
            tracking.log_model_pointer(out / "final")
            tracking.set_tags({"collapsed": str(bool(monitor.events)).lower(),
                               "best_step": str(monitor.best_step)})
            run_id = active.info.run_id
    if not main:  # files, plots and run.json are the main process's
        return {"method": method, "seed": seed, "rank": ranks.rank(), "config_hash": digest}
    callback.publish_best()  # `best/` from the kept copy (DVC may have deleted it before a rerun)
    curve = curves(history)
    write_json(paths.plots_dir(method, seed) / "train.json", curve)
    write_json(paths.plots_dir(method, seed) / "heldout.json", plot_rows(callback.history))
    # The test split at each checkpoint: the independent collapse label's curve (flows/alarms.py).
    write_json(paths.plots_dir(method, seed) / "test.json", callback.label_history)
    summary = {"method": method, "run_id": run_id, "seed": seed, "config_hash": digest,
               "base_model_md5": base_md5, "machine": cpu_kind(),
               "steps": curve[-1]["step"] if curve else 0,
               "final_reward": curve[-1].get("reward") if curve else None,
               "collapsed": bool(monitor.events),
               "collapse_events": [vars(e) for e in monitor.events],
               "best_step": monitor.best_step, "best_heldout": monitor.best_heldout,
               "best_checkpoint": str((out / "best").relative_to(paths.ROOT))
               if (out / "best").exists() else None,
               "heldout": callback.history}
    write_json(out / "run.json", summary)
    # The wall time beside the record, not in it: run.json is in git (dvc.yaml: cache: false), and
    # a re-run that trains the same weights must leave it and dvc.lock as they were. times.json is
    # ignored (data/.gitignore); the committed stage times are reports/times/ and studies/.
    seconds = round(time.monotonic() - started, 1)
    write_json(out / "times.json", {"train_seconds": seconds})
    return {**summary, "train_seconds": seconds}


@flow(name="train", log_prints=True)
def train_flow(method: str, seed: int = 0, preset: str | None = None) -> dict:
    """GRPO-train one method with one seed."""
    return train(load(preset=preset), method, seed)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--method", required=True, help="reward method, e.g. rlvr or random")
    p.add_argument("--seed", type=int, default=None, help="GRPO seed (default: the first of `seeds`)")
    p.add_argument("--num-processes", type=int, default=_env_processes(),
                   help="processes this launch must run on (accelerate launch); exit 2 if it does "
                        "not (default: $LAB_NUM_PROCESSES, else unchecked)")
    args = p.parse_args()
    params = load(args.params, preset=args.preset)
    run = params.resolve(args.method)
    if "WORLD_SIZE" not in os.environ and run.grpo.num_processes > 1:
        # Not under a launcher, and the run asks for N processes: relaunch under accelerate.
        sys.exit(relaunch(run.grpo.num_processes, run.grpo.accelerate_config, sys.argv[1:]))
    try:
        summary = train(params, run, params.seeds[0] if args.seed is None else args.seed,
                        num_processes=args.num_processes)
    except LaunchError as e:
        if ranks.is_main():
            print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    if ranks.is_main():
        print(json.dumps({k: v for k, v in summary.items() if k != "heldout"}))


# A training across machines (docs/multiprocess.md, "Across machines"): the same command on
# every machine, each told its rank and the address of machine 0 through these variables.
MACHINE_ENV = ("NUM_MACHINES", "MACHINE_RANK", "MAIN_PROCESS_IP", "MAIN_PROCESS_PORT")
MULTI_NODE_CONFIG = "configs/accelerate/multi_node.yaml"


def machine_flags(n: int, env: Mapping[str, str] | None = None) -> list[str]:
    """accelerate's flags for a launch across machines, from the environment: NUM_MACHINES,
    MACHINE_RANK (0 on the machine at MAIN_PROCESS_IP), MAIN_PROCESS_IP, MAIN_PROCESS_PORT
    (optional: the config's). None set: one machine, no flags. `n` (grpo.num_processes) is the
    total over all machines and must split evenly.

    >>> machine_flags(8, {"NUM_MACHINES": "2", "MACHINE_RANK": "1", "MAIN_PROCESS_IP": "10.0.0.1",
    ...                   "MAIN_PROCESS_PORT": "29500"})
    ['--num_machines', '2', '--machine_rank', '1', '--main_process_ip', '10.0.0.1', '--main_process_port', '29500']
    >>> machine_flags(8, {}), machine_flags(8, {"NUM_MACHINES": "1"})
    ([], [])
    """
    env = os.environ if env is None else env
    given = {k: env[k].strip() for k in MACHINE_ENV if env.get(k, "").strip()}
    if not given or given == {"NUM_MACHINES": "1"}:
        return []
    missing = [k for k in ("NUM_MACHINES", "MACHINE_RANK", "MAIN_PROCESS_IP") if k not in given]
    if missing:
        raise LaunchError(f"a training across machines needs {', '.join(MACHINE_ENV[:3])} on every "
                          f"machine; {', '.join(missing)} unset (docs/multiprocess.md)")
    bad = [k for k in ("NUM_MACHINES", "MACHINE_RANK", "MAIN_PROCESS_PORT")
           if k in given and not given[k].isdigit()]
    if bad:
        raise LaunchError(f"{', '.join(f'{k}={given[k]!r}' for k in bad)}: not a number")
    machines, rank = int(given["NUM_MACHINES"]), int(given["MACHINE_RANK"])
    if machines < 1 or rank >= machines or n % machines:
        raise LaunchError(f"NUM_MACHINES={machines}, MACHINE_RANK={rank}: the rank must be below "
                          f"the number of machines, and grpo.num_processes ({n}, the total over "
                          "all machines) a multiple of it")
    flags = ["--num_machines", str(machines), "--machine_rank", str(rank),
             "--main_process_ip", given["MAIN_PROCESS_IP"]]
    return flags + (["--main_process_port", given["MAIN_PROCESS_PORT"]]
                    if "MAIN_PROCESS_PORT" in given else [])


def accelerate_command(n: int, config: str | None, argv: list[str],
                       env: Mapping[str, str] | None = None) -> list[str]:
    """The `accelerate launch` command line that runs this training on `n` processes: the given
    config file (relative to the repository) or, by default, the multi-GPU config with CUDA and the
    CPU one (torchrun over gloo) without, the multi-machine one across machines (`machine_flags`:
    this machine's rank and machine 0's address, from `env`); `--num-processes n` makes the
    launched run check it.

    >>> cmd = accelerate_command(2, "configs/accelerate/cpu_2proc.yaml", ["--method", "rlvr"], {})
    >>> " ".join(cmd[3:9])
    'launch --config_file configs/accelerate/cpu_2proc.yaml --num_processes 2 -m'
    >>> " ".join(cmd[9:])
    'flows.train --method rlvr --num-processes 2'
    >>> cmd = accelerate_command(8, None, ["--method", "rlvr"], {"NUM_MACHINES": "2",
    ...     "MACHINE_RANK": "0", "MAIN_PROCESS_IP": "10.0.0.1"})
    >>> " ".join(cmd[3:])  # doctest: +NORMALIZE_WHITESPACE
    'launch --config_file configs/accelerate/multi_node.yaml --num_processes 8 --num_machines 2
     --machine_rank 0 --main_process_ip 10.0.0.1 -m flows.train --method rlvr --num-processes 8'
    """
    machines = machine_flags(n, env)
    if config is None and machines:
        config = MULTI_NODE_CONFIG
    if config is None:
        import torch

        name = "multi_gpu.yaml" if torch.cuda.is_available() else "cpu_2proc.yaml"
        config = f"configs/accelerate/{name}"
    return [sys.executable, "-m", "accelerate.commands.accelerate_cli", "launch", "--config_file",
            config, "--num_processes", str(n), *machines, "-m", "flows.train", *argv,
            "--num-processes", str(n)]


def relaunch(n: int, config: str | None, argv: list[str]) -> int:
    """Run this training on `n` processes through `accelerate launch` (on this machine, or this
    machine's share of a launch across machines); its exit code, 2 for a launch that cannot be
    built (one line)."""
    import subprocess

    try:
        cmd = accelerate_command(n, config, argv)
    except LaunchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    log.info("grpo.num_processes = %d: relaunching with %s", n, " ".join(cmd[3:]))
    return subprocess.call(cmd, cwd=ROOT)


def _env_processes() -> int | None:
    value = os.environ.get("LAB_NUM_PROCESSES", "").strip()
    return int(value) if value.isdigit() else None


if __name__ == "__main__":
    run_main(main)
