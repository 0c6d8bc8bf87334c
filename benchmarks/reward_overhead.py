"""Reward overhead of each registered method against `random`, measured in one run.

For each method, blocks of GRPO steps run on the same base model, data and seed; blocks of the
methods are interleaved (random, rlvr, random, rlvr, ...) so machine noise hits all of them alike.
Each block runs in a fresh spawned process, so its peak RSS is its own. Per method it reports the
median GRPO step wall time (generation, reward, loss and update, timed by a callback), the reward
time per completion (the method's reward callables, timed around each call), the overhead against
`random`, and the peak memory.

    python -m benchmarks.reward_overhead --steps 8 --repeats 2 [--preset ci]

Prints a markdown table and writes `benchmarks/results/reward_overhead.json` (git-tracked; dvc.yaml
lists it as a metric, so `dvc metrics show` and `dvc metrics diff` include it).
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


def _block(method: str, steps: int, preset: str | None, out_dir: str,
           settings_of: str | None = None) -> dict:
    """One block of `steps` GRPO steps from the base model (runs in a spawned process), with the
    task and GRPO settings of `settings_of` (default: the method's own)."""
    from core import paths
    from core.cli import quiet_libraries
    from core.params import load
    from flows.train import make_plan, task_rows
    from models import grpo
    from models.policy import load_policy

    quiet_libraries()
    params = load(preset=preset)
    g = params.method_grpo(settings_of or method).model_copy(
        update={"max_steps": steps, "logging_steps": 1, "save_steps": steps * 10})
    reward_times: list[float] = []
    base = paths.base_model_dir(params)
    model, tokenizer = load_policy(base, for_training=True)
    plan = make_plan(params, method, params.seeds[0], model, tokenizer)
    if plan.trainer_cls is None:  # DRO and RLCER score inside their trainer, which needs its own
        plan.reward_funcs = [_timed(f, reward_times) for f in plan.reward_funcs]  # objects
    rows = task_rows(paths.PREPARED, g.task)
    shutil.rmtree(out_dir, ignore_errors=True)  # a block never resumes an earlier one
    timer = _StepTimer()
    grpo.train(base, rows, plan, g, seed=params.seeds[0], output_dir=Path(out_dir),
               callbacks=[timer], model=model, tokenizer=tokenizer)
    return {"step_times": timer.times, "reward_times": reward_times,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _baselines(methods: list[str], preset: str | None) -> dict[str, str]:
    """Method -> the `random` run it is compared with: `random` under the method's own task and
    GRPO settings (RLME's G = 6, RLVRR's facts task, ...), one per distinct setting."""
    from core.params import load

    params = load(preset=preset)
    key = {m: params.method_grpo(m).model_dump_json() for m in methods}
    label = {}
    for m in methods:
        same = [n for n in methods if key[n] == key[m]]
        label[m] = "random" if key[m] == key["random"] else f"random[{same[0]}]"
    return label


def measure(methods: list[str], steps: int, repeats: int, preset: str | None, work: Path) -> dict:
    ctx = mp.get_context("spawn")
    baseline = _baselines(methods, preset)
    runs = {m: (m, None) for m in methods}  # label -> (method, settings_of)
    runs.update({b: ("random", b[len("random["):-1]) for b in baseline.values() if b != "random"})
    raw: dict[str, dict[str, list[float]]] = {k: {"step": [], "reward": [], "rss": []} for k in runs}
    for r in range(repeats):
        for label, (method, settings_of) in runs.items():
            with ctx.Pool(1) as pool:
                res = pool.apply(_block, (method, steps, preset, str(work / f"{label}-{r}"), settings_of))
            # The first step of a block pays one-off costs (compilation, allocator warm-up).
            raw[label]["step"] += res["step_times"][1:]
            raw[label]["reward"] += res["reward_times"][1:]
            raw[label]["rss"].append(res["peak_rss_mb"])
    out = {}
    for m in methods:
        v, base = raw[m], statistics.median(raw[baseline[m]]["step"])
        med = statistics.median(v["step"])
        out[m] = {"median_step_s": med, "baseline": baseline[m], "baseline_step_s": base,
                  "overhead_vs_random": (med - base) / base,
                  # DRO and RLCER score inside their trainer: only the step time sees them.
                  "reward_ms_per_completion": 1000 * statistics.median(v["reward"]) if v["reward"] else None,
                  "peak_rss_mb": max(v["rss"]), "steps_measured": len(v["step"])}
    return out


def table(results: dict) -> str:
    lines = ["| method | median step (s) | random, same settings (s) | overhead vs random | "
             "reward (ms / completion) | peak RSS (MB) |", "|---|---|---|---|---|---|"]
    for m, r in results.items():
        ms = r["reward_ms_per_completion"]
        lines.append(f"| {m} | {r['median_step_s']:.3f} | {r['baseline_step_s']:.3f} | "
                     f"{100 * r['overhead_vs_random']:+.1f}% | "
                     f"{'in trainer' if ms is None else f'{ms:.3f}'} | {r['peak_rss_mb']:.0f} |")
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
    write_json(ROOT / "benchmarks" / "results" / "reward_overhead.json",
               {"machine": machine, "steps": args.steps, "repeats": args.repeats, "results": results})
    print(f"Reward overhead ({machine}; {args.repeats} x {args.steps} steps per method, interleaved)")
    print(table(results))


if __name__ == "__main__":
    main()
