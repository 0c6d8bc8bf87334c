"""Reward overhead of each registered method against `random`, measured in one run.

For each method, blocks of GRPO steps run on the same base model, data and seed; blocks of the
methods are interleaved (random, rlvr, random, rlvr, ...) so machine noise hits all of them alike.
Each block runs in a fresh spawned process, so its peak RSS is its own. Per method it reports the
median GRPO step wall time (generation, reward, loss and update, timed by a callback), the reward
time per completion (the method's reward callables, timed around each call), the overhead against
`random`, and the peak memory.

    python -m benchmarks.reward_overhead --steps 8 --repeats 2 [--preset ci] [--methods ...]

Prints a markdown table and writes `benchmarks/results/reward_overhead.json` (git-tracked; dvc.yaml
lists it as a metric, so `dvc metrics show` and `dvc metrics diff` include it).

Without a built base (`data/base_model`) and world (`data/prepared`), the blocks train a randomly
initialised Llama of `base_model.arch` with a tokenizer trained on a freshly generated world
(`benchmarks.bench_forward_cost.policy_and_tokenizer`); the JSON names which model was used. A
random model never stops early, so every completion runs to `max_completion_length`: the dearest
case for the rewards that read every completion token.

The confidence rewards (`self_certainty`, `entropy`: one no-grad teacher-forced pass over prompt +
completion per generation batch, models/confidence_trainer.py) are also timed against the pass the
lab measures every model-scored reward by: TRL's policy log-prob pass over the same batch
(`confidence_passes` in the JSON; target, as for DRO's R3: at most 1.3x).
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


class _TimedObject:
    """`_timed` for a reward object whose attributes must stay reachable (a `trainer` handed over
    after construction, as the confidence rewards need): reads and writes go to the object."""

    def __init__(self, fn, sink: list[float]):
        object.__setattr__(self, "_fn", fn)
        object.__setattr__(self, "_sink", sink)

    def __call__(self, *args, **kwargs):
        start = time.perf_counter()
        out = self._fn(*args, **kwargs)
        self._sink.append((time.perf_counter() - start) / max(1, len(kwargs.get("completions", out))))
        return out

    def __getattr__(self, name):
        return getattr(self._fn, name)

    def __setattr__(self, name, value):
        setattr(self._fn, name, value)


def assets(preset: str | None, work: Path) -> tuple[Path, Path, str]:
    """(base model folder, prepared data folder, what the model is): the built ones if they
    exist, else a random model of `base_model.arch` and a generated world under `work`."""
    from benchmarks.bench_forward_cost import policy_and_tokenizer
    from core import paths
    from core.params import load

    params = load(preset=preset)
    base = paths.base_model_dir(params)
    prepared = paths.PREPARED if (paths.PREPARED / "arith_train.jsonl").exists() else work / "prepared"
    if (base / "config.json").exists() and prepared == paths.PREPARED:
        return base, prepared, str(base)
    model, tokenizer, source = policy_and_tokenizer(params, work)  # generates work/prepared if needed
    if (base / "config.json").exists():
        return base, prepared, str(base)
    base = work / "random_base"
    model.save_pretrained(base)
    tokenizer.save_pretrained(base)
    return base, prepared, source


def _block(method: str, steps: int, preset: str | None, out_dir: str,
           settings_of: str | None = None, base_dir: str | None = None,
           prepared_dir: str | None = None) -> dict:
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
    base = Path(base_dir) if base_dir else paths.base_model_dir(params)
    model, tokenizer = load_policy(base, for_training=True)
    plan = make_plan(params, method, params.seeds[0], model, tokenizer)
    if plan.trainer_cls is None:  # DRO and RLCER score inside their trainer, which needs its own
        plan.reward_funcs = [_TimedObject(f, reward_times) if hasattr(f, "trainer")
                             else _timed(f, reward_times) for f in plan.reward_funcs]  # objects
    rows = task_rows(Path(prepared_dir) if prepared_dir else paths.PREPARED, g.task)
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


def measure(methods: list[str], steps: int, repeats: int, preset: str | None, work: Path,
            base_dir: Path | None = None, prepared_dir: Path | None = None) -> dict:
    ctx = mp.get_context("spawn")
    where = (str(base_dir) if base_dir else None, str(prepared_dir) if prepared_dir else None)
    baseline = _baselines(methods, preset)
    runs = {m: (m, None) for m in methods}  # label -> (method, settings_of)
    runs.update({b: ("random", b[len("random["):-1]) for b in baseline.values() if b != "random"})
    raw: dict[str, dict[str, list[float]]] = {k: {"step": [], "reward": [], "rss": []} for k in runs}
    for r in range(repeats):
        for label, (method, settings_of) in runs.items():
            with ctx.Pool(1) as pool:
                res = pool.apply(_block, (method, steps, preset, str(work / f"{label}-{r}"), settings_of,
                                          *where))
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


def confidence_passes(preset: str | None, base_dir: Path, prepared_dir: Path, repeats: int = 15,
                      rollouts: int = 32, new_tokens: int = 64) -> dict:
    """Median seconds of each confidence pass (`models.confidence_trainer.score_completions`, as the
    reward runs it) and of TRL's policy log-prob pass (no grad, no entropy) over the same batch of
    `rollouts` completions of exactly `new_tokens` tokens, interleaved, after two warm-up rounds."""
    import torch
    from datasets import Dataset
    from trl import GRPOTrainer

    from benchmarks.bench_forward_cost import policy_inputs, sample
    from core.io import read_jsonl
    from core.params import load
    from models.confidence_trainer import score_completions
    from models.grpo import grpo_config
    from models.policy import load_policy

    params = load(preset=preset)
    g = params.method_grpo("self_certainty")
    model, tokenizer = load_policy(base_dir, for_training=True)
    source = read_jsonl(prepared_dir / "arith_train.jsonl")[:rollouts // g.num_generations]
    rows = [{"prompt": r["prompt"]} for r in source for _ in range(g.num_generations)]
    trainer = GRPOTrainer(model=model, reward_funcs=[lambda **kw: [0.0] * len(kw["completions"])],
                          args=grpo_config(g, seed=params.seed, output_dir=base_dir.parent / "passes"),
                          train_dataset=Dataset.from_list(rows), processing_class=tokenizer)
    model = trainer.model.eval()
    prompts = [r["prompt"] for r in rows]
    completion_ids = sample(model, tokenizer, prompts, new_tokens, params.seed)
    ids, mask, keep = policy_inputs(tokenizer, prompts, completion_ids)

    def policy_pass():
        with torch.no_grad():
            trainer._get_per_token_logps_and_entropies(model, ids, mask, keep, batch_size=len(rows))

    passes = {f"{score} pass": (lambda score=score: score_completions(model, tokenizer, prompts, completion_ids, score))
              for score in ("self_certainty", "neg_entropy", "logprob")}
    passes["policy log-probs"] = policy_pass
    times: dict[str, list[float]] = {name: [] for name in passes}
    for r in range(repeats + 2):
        for name, fn in passes.items():
            start = time.perf_counter()
            fn()
            if r >= 2:
                times[name].append(time.perf_counter() - start)
    median = {name: statistics.median(t) for name, t in times.items()}
    policy = median["policy log-probs"]
    return {"rollouts": len(rows), "completion_tokens": new_tokens, "repeats": repeats,
            "torch_threads": torch.get_num_threads(), "median_s": median,
            "ratio_vs_policy": {name: t / policy for name, t in median.items() if name != "policy log-probs"},
            "target_ratio": 1.3}


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
    p.add_argument("--out", type=Path, default=None,
                   help="result file (default benchmarks/results/reward_overhead.json, the DVC metric)")
    p.add_argument("--pass-repeats", type=int, default=15,
                   help="timed rounds of the confidence passes against the policy log-prob pass (0: skip)")
    args = p.parse_args()
    methods = args.methods or ["random"] + sorted(m for m in METHODS if m != "random")
    if "random" not in methods:
        methods = ["random", *methods]
    work = ROOT / "data" / "benchmarks" / "work"
    base, prepared, model = assets(args.preset, work)
    results = measure(methods, args.steps, args.repeats, args.preset, work, base, prepared)
    machine = f"{platform.machine()}, {mp.cpu_count()} cores, Python {platform.python_version()}"
    record = {"machine": machine, "model": model, "steps": args.steps, "repeats": args.repeats,
              "results": results}
    out = args.out or ROOT / "benchmarks" / "results" / "reward_overhead.json"
    write_json(out, record)  # the blocks' results are kept even if the pass timing fails
    if args.pass_repeats and {"self_certainty", "entropy"} & set(methods):
        record["confidence_passes"] = confidence_passes(args.preset, base, prepared, args.pass_repeats)
        write_json(out, record)
    print(f"Reward overhead ({machine}; {model}; {args.repeats} x {args.steps} steps per method, interleaved)")
    print(table(results))
    if "confidence_passes" in record:
        ratios = record["confidence_passes"]["ratio_vs_policy"]
        print("Confidence passes / policy log-prob pass: "
              + ", ".join(f"{name} {r:.2f}x" for name, r in ratios.items()) + " (target 1.3x)")


if __name__ == "__main__":
    main()
