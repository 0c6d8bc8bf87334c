"""Where the default run's time goes: each stage split into its parts, with achieved FLOP/s next to
this machine's measured matmul peak.

    python -m benchmarks.profile_run                  # after the base is built (make run / dvc repro)
    python -m benchmarks.profile_run --threads 2      # GRPO and evaluation on 2 threads (default 1)

It runs short slices of the default run's own code paths with the default params (the same
trainers, batch shapes and generation calls) and scales each part by how often the default run
does it: SFT phases by their steps, GRPO by `grpo.max_steps` (held-out evaluations by
`max_steps / heldout_every + 1`), evaluation once per policy. Rows:

- SFT (phase 1, phase 2): data collation, forward, backward, optimiser step; the share of padded
  tokens in the batches.
- GRPO (rlvr): generation, reward, the loss pass (forward + backward), optimiser and the rest of
  the step, one held-out evaluation (the val split, then the collapse label's test split, as
  `flows/train.py` runs them).
- evaluate (the base on the arith benchmarks): sampling, scoring, the self-evaluation probe.

FLOPs count the matmul weights (N, the tied LM head included; the embedding lookup is not a
matmul): 2·N per token forward, 6·N forward + backward, on the tokens that are not padding
("useful"). Generation counts every generated token of every row, including rows that had already
stopped and keep being padded until the longest finishes. The attention scores are left out (at
these lengths ~8% of the weight FLOPs). `GFLOP/s` is useful FLOPs over the part's wall time; `% peak`
compares it with the best of the matmul shapes measured at the start with the same threads.

Prints a table and writes `benchmarks/results/profile_run.json`. Machine otherwise idle.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch

from core import paths
from core.params import ROOT, load

RESULTS = ROOT / "benchmarks" / "results" / "profile_run.json"
RESULTS_GENERATE = RESULTS.with_name("profile_run_generate.json")  # with --sampler generate


class Clock:
    """Wall seconds and counters per part, filled by wrapped methods. A part is timed once where
    its wrapped methods nest (the lab's rollout hook handing a call to TRL's own generation, both
    `generation`): only the outermost call counts.

    >>> class T:
    ...     def outer(self): return self.inner()
    ...     def inner(self): return 1
    >>> clock = Clock(); _ = clock.wrap(T, "outer", "gen"); _ = clock.wrap(T, "inner", "gen")
    >>> T().outer(), clock.calls["gen"]
    (1, 1)
    """

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.count: dict[str, float] = defaultdict(float)
        self.running: set[str] = set()

    def wrap(self, obj, name: str, part: str, after=None):
        """Replace `obj.name` by a timed version (`after(result, args, kwargs)` adds counters)."""
        inner = getattr(obj, name)

        def timed(*args, **kwargs):
            if part in self.running:  # inside an outer call of the same part: counted there
                return inner(*args, **kwargs)
            self.running.add(part)
            start = time.perf_counter()
            try:
                out = inner(*args, **kwargs)
            finally:
                self.running.discard(part)
            self.seconds[part] += time.perf_counter() - start
            self.calls[part] += 1
            if after is not None:
                after(out, args, kwargs)
            return out

        setattr(obj, name, timed)
        return inner


@contextlib.contextmanager
def patched(pairs):
    """Restore every (object, attribute, original) afterwards."""
    try:
        yield
    finally:
        for obj, name, original in pairs:
            setattr(obj, name, original)


def matmul_peak(threads: int) -> dict[str, float]:
    """GFLOP/s of fp32 matmuls: the SFT's largest layer shape and a large square one."""
    torch.set_num_threads(threads)
    out = {}
    for m, k, n in [(3200, 192, 768), (3200, 512, 192), (2048, 2048, 2048)]:
        a, b = torch.randn(m, k), torch.randn(k, n)
        for _ in range(3):
            a @ b
        reps, start = 0, time.perf_counter()
        while time.perf_counter() - start < 1.0:
            a @ b
            reps += 1
        out[f"{m}x{k}x{n}"] = 2 * m * k * n * reps / (time.perf_counter() - start) / 1e9
    return out


def matmul_weights(model) -> int:
    """Weights that take part in matmuls: every parameter but the input embedding, plus the LM
    head (tied to the embedding, so not counted twice among the parameters)."""
    emb = model.get_input_embeddings().weight
    rest = sum(p.numel() for p in model.parameters() if p is not emb)
    return rest + emb.numel()  # the LM head multiplies by the (tied) embedding matrix


def profile_sft(params, phase_name: str, steps: int, work: Path, grouped: bool, base: Path) -> dict:
    """`steps` optimiser steps of one base-model SFT phase, from the model it starts from (phase 2:
    the built base), with the loss by length groups or in one padded pass (`length_groups`)."""
    from transformers import TrainerCallback

    from models import tiny
    from models.policy import load_policy

    cfg = params.base_model
    cfg = cfg.model_copy(update={"sft": cfg.sft.model_copy(update={"length_groups": grouped})})
    prepared = paths.PREPARED
    if phase_name == "phase1":
        tokenizer = tiny.build_tokenizer(tiny.corpus(prepared), cfg.vocab_size)
        model = tiny.build_model(cfg.arch, tokenizer, params.seed)
        phase, mix, seed, total = cfg.sft, cfg.sft.mix, params.seed, cfg.sft.steps
    else:
        model, tokenizer = load_policy(base, for_training=True)
        phase, mix, seed, total = cfg.sft.roles, cfg.sft.roles.mix, params.seed + 1, cfg.sft.roles.steps
    rows = tiny.sft_rows(prepared, mix, steps * cfg.sft.batch_size, seed)
    trainer = tiny.sft_trainer(model, tokenizer, rows, phase.model_copy(update={"steps": steps}),
                               cfg, seed, work / phase_name)
    clock = Clock()
    tokens = {"useful": 0, "padded": 0}

    def count(batch, args, kwargs):
        mask = batch["attention_mask"]
        tokens["useful"] += int(mask.sum())
        tokens["padded"] += mask.numel()

    clock.wrap(trainer, "data_collator", "collate", count)
    clock.wrap(trainer, "compute_loss", "forward")
    clock.wrap(trainer, "training_step", "forward+backward")

    class Steps(TrainerCallback):
        def on_step_begin(self, *a, **k):
            self.t0 = time.perf_counter()

        def on_pre_optimizer_step(self, *a, **k):
            self.t1 = time.perf_counter()

        def on_optimizer_step(self, *a, **k):
            clock.seconds["optimizer"] += time.perf_counter() - self.t1

        def on_step_end(self, *a, **k):
            clock.seconds["step"] += time.perf_counter() - self.t0

    trainer.add_callback(Steps())
    start = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - start
    n = matmul_weights(model)
    s = clock.seconds
    parts = {
        "collate": (s["collate"], None),
        "forward": (s["forward"], 2 * n * tokens["useful"]),
        "backward": (s["forward+backward"] - s["forward"], 4 * n * tokens["useful"]),
        "optimizer": (s["optimizer"], None),
        "other": (wall - s["collate"] - s["forward+backward"] - s["optimizer"], None),
    }
    how = "length groups" if grouped else "one padded pass"
    return {"stage": f"build_base {phase_name} ({how})", "threads": torch.get_num_threads(),
            "measured_steps": steps, "default_steps": total,
            "scale": total / steps, "wall": wall, "parts": parts,
            "padding_share": 1 - tokens["useful"] / tokens["padded"],
            "useful_tokens_per_step": tokens["useful"] / steps}


def profile_grpo(params, method: str, steps: int, work: Path, base: Path) -> dict:
    """`steps` GRPO steps of `method` from the base, with the held-out evaluation the run makes."""
    from trl import GRPOTrainer

    from evals.suite import evaluate_policy
    from flows.train import heldout_settings, make_plan, task_rows
    from models import grpo
    from models.callbacks import HeldoutCallback
    from models.policy import load_policy

    run = params.resolve(method)
    g = run.grpo.model_copy(update={"max_steps": steps, "save_steps": 10_000})
    model, tokenizer = load_policy(base, for_training=True)
    plan = make_plan(params, run, 0, model, tokenizer)
    n = matmul_weights(model)
    clock = Clock()
    flops: dict[str, float] = defaultdict(float)
    ev = {split: heldout_settings(params.eval, g.max_completion_length, split) for split in ("val", "test")}

    def heldout(m, split: str = "val") -> dict:  # as flows/train.py: val, then the label's test split
        return evaluate_policy(m, tokenizer, paths.PREPARED, [g.task], ev[split], 0, split=split,
                               k=params.eval.heldout_k, greedy=False)

    def gen_flops(out, args, kwargs):
        completion_ids, _ = out
        lengths = [len(c) for c in completion_ids]
        flops["generation"] += 2 * n * len(lengths) * max(lengths, default=0)  # every row, every step
        flops["useful_generated"] += sum(lengths)

    def loss_flops(out, args, kwargs):
        inputs = kwargs["inputs"] if "inputs" in kwargs else args[2]  # (trainer, model, inputs)
        useful = int(inputs["completion_mask"].sum() + inputs["prompt_mask"].sum())
        flops["loss"] += 6 * n * useful

    originals = [
        (GRPOTrainer, "_generate_single_turn",
         clock.wrap(GRPOTrainer, "_generate_single_turn", "generation", gen_flops)),
        # The lab sampler's path (models/grpo.py): it replaces the method on the trainer.
        (grpo, "lab_rollouts", clock.wrap(grpo, "lab_rollouts", "generation", gen_flops)),
        (GRPOTrainer, "_calculate_rewards", clock.wrap(GRPOTrainer, "_calculate_rewards", "reward")),
        (GRPOTrainer, "_generate_and_score_completions",
         clock.wrap(GRPOTrainer, "_generate_and_score_completions", "prepare")),
        (GRPOTrainer, "compute_loss", clock.wrap(GRPOTrainer, "compute_loss", "loss forward", loss_flops)),
        (GRPOTrainer, "training_step", clock.wrap(GRPOTrainer, "training_step", "training_step")),
        (HeldoutCallback, "_evaluate", clock.wrap(HeldoutCallback, "_evaluate", "heldout")),
    ]
    callback = HeldoutCallback(heldout, g.heldout_every, "x", label_fn=lambda m: heldout(m, "test"))
    with patched(originals):
        start = time.perf_counter()
        grpo.train(base, task_rows(paths.PREPARED, g.task), plan, g, seed=0,
                   output_dir=work / method, callbacks=[callback], model=model, tokenizer=tokenizer)
        wall = time.perf_counter() - start
    s = clock.seconds
    evals = clock.calls["heldout"]
    per_eval = s["heldout"] / max(1, evals)
    train_wall = wall - s["heldout"]
    scale = run.grpo.max_steps / steps
    default_evals = run.grpo.max_steps // run.grpo.heldout_every + 1
    parts = {
        "generation": (s["generation"], flops["generation"]),
        "reward": (s["reward"], None),
        "other scoring": (s["prepare"] - s["generation"] - s["reward"], None),
        "loss forward": (s["loss forward"], flops["loss"] / 3),
        "loss backward": (s["training_step"] - s["prepare"] - s["loss forward"], flops["loss"] * 2 / 3),
        "optimizer+other": (train_wall - s["training_step"], None),
    }
    return {"stage": f"train@{method}", "threads": torch.get_num_threads(), "measured_steps": steps,
            "default_steps": run.grpo.max_steps,
            "scale": scale, "wall": wall, "parts": parts,
            "heldout": {"seconds_each": per_eval, "default_count": default_evals},
            "generated_tokens_per_step": flops["useful_generated"] / steps}


def profile_evaluate(params, base: Path) -> dict:
    """The evaluate stage of a method on the arith benchmarks, with the base as the policy."""
    import evals.self_eval as self_eval_mod
    import evals.suite as suite
    from evals.registry import load_rows
    from flows.configure import self_eval_probe
    from models.policy import load_policy

    model, tokenizer = load_policy(base)
    n = matmul_weights(model)
    clock = Clock()
    flops: dict[str, float] = defaultdict(float)

    def gen_flops(out, args, kwargs):
        lengths = [len(tokenizer(t, add_special_tokens=False)["input_ids"]) for ts in out for t in ts]
        flops["sampling"] += 2 * n * sum(lengths)

    originals = [(suite, "generate", clock.wrap(suite, "generate", "sampling", gen_flops))]
    with patched(originals):
        start = time.perf_counter()
        suite.evaluate_policy(model, tokenizer, paths.PREPARED, params.eval.benchmarks, params.eval,
                              params.seed)
        bench = time.perf_counter() - start
    originals = [(self_eval_mod, "generate",
                  clock.wrap(self_eval_mod, "generate", "self-eval sampling", gen_flops))]
    with patched(originals):
        start = time.perf_counter()
        rows = load_rows(paths.PREPARED, "arith", "val", params.eval.n_test)
        self_eval_mod.self_eval_auroc(model, tokenizer, rows, self_eval_probe(params, None),
                                      k=params.eval.heldout_k, max_new_tokens=params.eval.max_new_tokens,
                                      batch_size=params.eval.batch_size, seed=params.seed)
        probe = time.perf_counter() - start
    s = clock.seconds
    parts = {
        "sampling": (s["sampling"], flops["sampling"]),
        "scoring": (bench - s["sampling"], None),
        "self-eval sampling": (s["self-eval sampling"], None),
        "self-eval scoring": (probe - s["self-eval sampling"], None),
    }
    return {"stage": f"evaluate (arith benchmarks: {', '.join(params.eval.benchmarks)})",
            "threads": torch.get_num_threads(),
            "measured_steps": 1, "default_steps": 1, "scale": 1.0, "wall": bench + probe,
            "parts": parts}


def table(results: list[dict], peaks: dict[int, float]) -> str:
    """Markdown: each stage's parts, scaled to the default run, with achieved FLOP/s against the
    matmul peak of the stage's thread count."""
    lines = ["| stage (threads) | part | measured s | default run s | share | useful GFLOP/s | % of peak |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in results:
        peak = peaks[r["threads"]]
        total = sum(sec for sec, _ in r["parts"].values()) * r["scale"]
        if "heldout" in r:
            total += r["heldout"]["seconds_each"] * r["heldout"]["default_count"]
        for part, (sec, fl) in r["parts"].items():
            rate = fl / sec / 1e9 if fl and sec > 0 else None
            lines.append(f"| {r['stage']} ({r['threads']}) | {part} | {sec:.1f} | {sec * r['scale']:.0f} | "
                         f"{sec * r['scale'] / total:.0%} | {'' if rate is None else f'{rate:.0f}'} | "
                         f"{'' if rate is None else f'{rate / peak:.0%}'} |")
        if "heldout" in r:
            h = r["heldout"]
            sec = h["seconds_each"] * h["default_count"]
            lines.append(f"| {r['stage']} ({r['threads']}) | held-out evaluation ({h['default_count']}×) | "
                         f"{h['seconds_each']:.1f} each | {sec:.0f} | {sec / total:.0%} | | |")
        extra = ""
        if "padding_share" in r:
            extra = f" (padding {r['padding_share']:.0%} of batch tokens)"
        lines.append(f"| **{r['stage']}** ({r['threads']}) | **total**{extra} | {r['wall']:.1f} | "
                     f"**{total:.0f}** | | | |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1,
                   help="threads of GRPO and evaluation (a train stage beside another: 1)")
    p.add_argument("--sft-threads", type=int, default=torch.get_num_threads(),
                   help="threads of the SFT phases (the base build runs alone: every core)")
    p.add_argument("--sft-steps", type=int, default=30)
    p.add_argument("--grpo-steps", type=int, default=10)
    p.add_argument("--method", default="rlvr")
    p.add_argument("--base", type=Path, default=None, help="the base model (default: the built one)")
    p.add_argument("--parts", nargs="+", default=["sft", "grpo", "evaluate"],
                   choices=["sft", "grpo", "evaluate"])
    p.add_argument("--sampler", choices=["lab", "generate"], default="lab",
                   help="generate: the lab sampler switched off in this process, so GRPO rollouts and "
                        "evaluations go through transformers' generate (the before of docs/speed.md's profile "
                        f"table; default --out then {RESULTS_GENERATE.name})")
    p.add_argument("--out", type=Path, default=None, help=f"default {RESULTS.name} in benchmarks/results/")
    args = p.parse_args()
    if args.sampler == "generate":
        import models.sampler

        models.sampler.supports = lambda model: False  # grpo.py and generation.py look it up per call
    args.out = args.out or (RESULTS_GENERATE if args.sampler == "generate" else RESULTS)
    import logging

    logging.basicConfig(level=logging.WARNING)
    params = load()
    peaks = {n: matmul_peak(n) for n in sorted({args.threads, args.sft_threads})}
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        base = args.base or paths.base_model_dir(params)
        built = (base / "config.json").exists()
        if not built:
            print(f"no model in {base}: SFT phase 1 only (build the base for the rest)")
        torch.set_num_threads(args.sft_threads)
        for phase in ("phase1", "phase2") if "sft" in args.parts else ():
            if phase == "phase1" or built:  # before (one padded pass) and after (length groups)
                results += [profile_sft(params, phase, args.sft_steps, work, g, base)
                            for g in (False, True)]
        torch.set_num_threads(args.threads)
        if built and "grpo" in args.parts:
            results.append(profile_grpo(params, args.method, args.grpo_steps, work, base))
        if built and "evaluate" in args.parts:
            results.append(profile_evaluate(params, base))
    for n, shapes in peaks.items():
        print(f"matmul peak, fp32, {n} thread(s): "
              + ", ".join(f"{k}: {v:.0f} GFLOP/s" for k, v in shapes.items()))
    print(table(results, {n: max(shapes.values()) for n, shapes in peaks.items()}))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    from benchmarks.sampling import cpu

    args.out.write_text(json.dumps({"threads": args.threads, "sft_threads": args.sft_threads,
                                    "sampler": args.sampler, "machine": cpu(),
                                    "matmul_gflops": peaks, "stages": results}, indent=1, default=str))
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")


if __name__ == "__main__":
    main()
