"""Reward overhead of each registered method against `random` (SPEC 8), measured in one run.

For each method, blocks of GRPO steps run on the same base model, data and seed; blocks of the
methods are interleaved (random, rlvr, random, rlvr, ...) so machine noise hits all of them alike.
Each block runs in a fresh spawned process, so its peak RSS is its own. Per method it reports the
median GRPO step wall time (generation, reward, loss and update, timed by a callback), the reward time per completion (the method's reward
callables, timed around each call), the overhead against `random`, and the peak memory.

    python -m benchmarks.reward_overhead --steps 8 --repeats 2 [--preset ci]

Prints a markdown table and writes `data/benchmarks/reward_overhead.json`.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import platform
import resource
import shutil
import statistics
import time
from pathlib import Path


def _timed(fn, sink: list[float]):
    """Wrap a TRL reward callable so each call's wall time per completion lands in `sink`."""
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        out = fn(*args, **kwargs)
        sink.append((time.perf_counter() - start) / max(1, len(kwargs.get("completions", out))))
        return out
    wrapper.__name__ = getattr(fn, "__name__", type(fn).__name__)
    return wrapper


class _StepTimer:
    """Wall time of each optimizer step, from `on_step_begin` to `on_step_end`."""

    def __new__(cls):
        from transformers import TrainerCallback

        class StepTimer(TrainerCallback):
            def __init__(self):
                self.times, self._t = [], None

            def on_step_begin(self, args, state, control, **kwargs):
                self._t = time.perf_counter()

            def on_step_end(self, args, state, control, **kwargs):
                self.times.append(time.perf_counter() - self._t)

        return StepTimer()


def _block(method: str, steps: int, preset: str | None, out_dir: str) -> dict:
    """One block of `steps` GRPO steps from the base model (runs in a spawned process)."""
    from core import paths
    from core.cli import quiet_libraries
    from core.params import load
    from flows.train import make_plan, task_rows
    from models import grpo
    from models.policy import load_policy

    quiet_libraries()
    params = load(preset=preset)
    g = params.method_grpo(method).model_copy(update={"max_steps": steps, "logging_steps": 1,
                                                      "save_steps": steps * 10})
    reward_times: list[float] = []
    base = paths.base_model_dir(params)
    model, tokenizer = load_policy(base, for_training=True)
    plan = make_plan(params, method, params.seeds[0], model, tokenizer)
    plan.reward_funcs = [_timed(f, reward_times) for f in plan.reward_funcs]
    rows = task_rows(paths.PREPARED, g.task)
    shutil.rmtree(out_dir, ignore_errors=True)  # a block never resumes an earlier one
    timer = _StepTimer()
    grpo.train(base, rows, plan, g, seed=params.seeds[0], output_dir=Path(out_dir),
               callbacks=[timer], model=model, tokenizer=tokenizer)
    return {"step_times": timer.times, "reward_times": reward_times,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def measure(methods: list[str], steps: int, repeats: int, preset: str | None, work: Path) -> dict:
    ctx = mp.get_context("spawn")
    raw: dict[str, dict[str, list[float]]] = {m: {"step": [], "reward": [], "rss": []} for m in methods}
    for r in range(repeats):
        for m in methods:
            with ctx.Pool(1) as pool:
                res = pool.apply(_block, (m, steps, preset, str(work / f"{m}-{r}")))
            # The first step of a block pays one-off costs (compilation, allocator warm-up).
            raw[m]["step"] += res["step_times"][1:]
            raw[m]["reward"] += res["reward_times"][1:]
            raw[m]["rss"].append(res["peak_rss_mb"])
    base = statistics.median(raw["random"]["step"])
    out = {}
    for m, v in raw.items():
        med = statistics.median(v["step"])
        out[m] = {"median_step_s": med, "overhead_vs_random": (med - base) / base,
                  "reward_ms_per_completion": 1000 * statistics.median(v["reward"]),
                  "peak_rss_mb": max(v["rss"]), "steps_measured": len(v["step"])}
    return out


def table(results: dict) -> str:
    lines = ["| method | median step (s) | overhead vs random | reward (ms / completion) | peak RSS (MB) |",
             "|---|---|---|---|---|"]
    for m, r in results.items():
        lines.append(f"| {m} | {r['median_step_s']:.3f} | {100 * r['overhead_vs_random']:+.1f}% | "
                     f"{r['reward_ms_per_completion']:.3f} | {r['peak_rss_mb']:.0f} |")
    return "\n".join(lines)


def main() -> None:
    from core.io import write_json
    from core.params import ROOT
    from rewards import METHODS

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=8, help="GRPO steps per block")
    p.add_argument("--repeats", type=int, default=2, help="interleaved blocks per method")
    p.add_argument("--preset", default=None)
    p.add_argument("--methods", nargs="*", default=None, help="default: every registered method")
    args = p.parse_args()
    methods = args.methods or ["random"] + sorted(m for m in METHODS if m != "random")
    if "random" not in methods:
        methods = ["random", *methods]
    work = ROOT / "data" / "benchmarks" / "work"
    results = measure(methods, args.steps, args.repeats, args.preset, work)
    machine = f"{platform.machine()}, {mp.cpu_count()} cores, Python {platform.python_version()}"
    write_json(ROOT / "data" / "benchmarks" / "reward_overhead.json",
               {"machine": machine, "steps": args.steps, "repeats": args.repeats, "results": results})
    print(f"Reward overhead ({machine}; {args.repeats} x {args.steps} steps per method, interleaved)")
    print(table(results))


if __name__ == "__main__":
    main()
