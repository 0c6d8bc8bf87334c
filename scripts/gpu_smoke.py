"""The GPU path in a few minutes (`make gpu-smoke`, scripts/gpu_smoke.sh; docs/gpu.md, "First run").

A random-weight Qwen3-architecture model with a Qwen3-style chat template is built locally (no
hub: tests/qwen3_chat.py's tokenizer), on the ci world. Each of rlvr, rlme (live and frozen
evaluators), dro and rlcer (a judge model read from the same folder) trains two GRPO steps
through the real train stage (`flows.train.train`: setup_run, the held-out callback, MLflow), and
the rlvr policy goes through the real evaluate stage (`flows.evaluate.evaluate`), all under a
scratch data folder. One line per check: `PASS|FAIL|SKIP <what>: <detail>`; the exit code is the
number of FAILs (capped at 100).

On a GPU: bf16 (float32 master weights, bf16 autocast), vLLM colocate rollouts (rlcer samples with
transformers), every model checked on the GPU, peak GPU memory. With `--cpu`: the same stages on
the CPU without vLLM, float32 (the slow test tests/test_gpu_path.py runs it).
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

METHODS = ("rlvr", "rlme", "dro", "rlcer")
FAILS: list[str] = []


def report(ok: bool | None, what: str, detail: str = "") -> None:
    """One check's line; None is SKIP."""
    word = "SKIP" if ok is None else "PASS" if ok else "FAIL"
    if ok is False:
        FAILS.append(what)
    print(f"{word} {what}: {detail}".rstrip(": "), flush=True)


# Qwen3-0.6B's config.json (model card): `--shape qwen3-0.6b` measures at the real size. Its
# vocabulary is the real one too (the logits are a large share of memory); the tokenizer is the
# small local one, so sampled ids past it decode to nothing.
QWEN3_0P6B = dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                  num_attention_heads=16, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                  rope_theta=1_000_000.0)


def build_model(folder: Path, texts: list[str], gpu: bool, shape: str = "smoke") -> Path:
    """A random-weight Qwen3ForCausalLM over the Qwen3-style tokenizer. On a GPU: heads of 64
    dimensions (vLLM's attention kernels need a supported head size); on a CPU: tiny;
    `shape="qwen3-0.6b"`: Qwen3-0.6B's dimensions."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from tests.qwen3_chat import qwen3_tokenizer

    tok = qwen3_tokenizer(texts)
    size: dict = (dict(QWEN3_0P6B) if shape == "qwen3-0.6b" else
                  dict(hidden_size=512, intermediate_size=1024, num_hidden_layers=4,
                       num_attention_heads=8, num_key_value_heads=4, head_dim=64) if gpu else
                  dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=16))
    size.setdefault("vocab_size", len(tok))
    torch.manual_seed(0)
    config = Qwen3Config(max_position_embeddings=4096, tie_word_embeddings=True,
                         pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                         bos_token_id=None, **size)
    model = Qwen3ForCausalLM(config)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def modules_in(obj, depth: int = 5) -> list:
    """Every torch module a method's plan holds (attributes, dict values, tuples), a few levels
    down; not through a `trainer` attribute (the trainer's own model is checked apart)."""
    import torch

    if isinstance(obj, torch.nn.Module):
        return [obj]
    if depth == 0 or isinstance(obj, str | bytes | int | float):
        return []
    if isinstance(obj, dict):
        children = list(obj.values())
    elif isinstance(obj, list | tuple):
        children = list(obj)
    else:
        children = [v for k, v in getattr(obj, "__dict__", {}).items() if k != "trainer"]
    return [m for c in children if c is not obj for m in modules_in(c, depth - 1)]


def devices_of(modules) -> set[str]:
    return {str(p.device.type) for m in modules for p in m.parameters()}


def smoke_params(folder: Path, use_vllm: bool):
    from core.params import load, validate

    raw = load(preset="ci").model_dump()
    raw["methods"] = list(METHODS)
    raw["base_model"]["path"] = str(folder)
    raw["grpo"].update(max_steps=2, save_steps=2, heldout_every=2, logging_steps=1,
                       learning_rate=1e-5, weight_decay=0.1, use_vllm=use_vllm,
                       vllm_mode="colocate", vllm_gpu_memory_utilization=0.3)
    raw["reward"]["rlme"]["evaluators"] = [{"name": "live", "source": "live", "weight": 0.5},
                                           {"name": "frozen", "source": "frozen", "weight": 0.5}]
    raw["reward"]["rlcer"]["verifier"] = str(folder)  # a judge model, not the rule verifier
    raw["reward"]["rlcer"]["grpo"] = {"use_vllm": False}  # RLCER samples with transformers
    raw["eval"].update(benchmarks=["arith"], n_test=8, k=2)
    # The held-out callback samples every val and test prompt at each of its points (step 0 and
    # the last step): 8 of each, as many as the evaluate stage reads (eval.n_test), instead of the
    # ci world's 20 (the same code paths, fewer batches).
    raw["world"]["arith"].update(n_val=8, n_test=8)
    # `preset=""`: the ci preset is already applied (`load` above). Applied again, it overwrote
    # the settings above that it also sets (save_steps and heldout_every back to 1: a held-out
    # evaluation and a checkpoint at every step; the world's sizes).
    return validate(raw, preset="")


def measure_params(folder: Path, use_vllm: bool, steps: int, recipe: str,
                   steps_per_generation: int | None = None):
    """`--measure`: the smoke's settings with the GRPO block of preset `recipe` (params.yaml:
    batch, group size, completion cap, loss, accumulation, gradient checkpointing) for `steps`
    steps (the measure is the training step: `Watch(measure=True)` leaves the held-out evaluation
    out, whose samples get the recipe's completion budget at step 0 and at the end).
    `steps_per_generation` (grpo.steps_per_generation) splits a step's rollouts into smaller
    generate calls, as a run without vLLM needs on one GPU."""
    from core.params import read_raw, validate

    params = smoke_params(folder, use_vllm)
    raw = params.model_dump()
    preset = (read_raw(ROOT / "params.yaml").get("presets") or {}).get(recipe)
    if not isinstance(preset, dict):
        raise SystemExit(f"gpu_smoke: no preset {recipe!r} in params.yaml")
    raw["grpo"].update(preset.get("grpo") or {})
    raw["grpo"].update(max_steps=steps, save_steps=steps, heldout_every=steps, use_vllm=use_vllm)
    if steps_per_generation is not None:
        raw["grpo"]["steps_per_generation"] = steps_per_generation
    raw["eval"].update(max_new_tokens=16)
    return validate(raw, preset="")


def redirect_paths(work: Path) -> None:
    """Every stage reads and writes under `work` (core.paths), never the repository's data/."""
    from core import paths

    paths.ROOT, paths.DATA = work, work / "data"
    paths.PREPARED, paths.BASE_MODEL = work / "data" / "prepared", work / "data" / "base_model"
    paths.COMPONENTS, paths.REPORTS = work / "data" / "components", work / "reports"
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{work / 'mlflow.db'}"
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


class Watch:
    """What one training did: its trainer's device, the plan's models, vLLM generate calls.
    `measure`: the training runs without the held-out callback (`without_heldout`)."""

    def __init__(self, measure: bool = False) -> None:
        self.plan = None
        self.trainer = None
        self.vllm_calls = 0
        self.measure = measure

    def hook(self, grpo_module):
        original = grpo_module.train

        def train(policy_path, rows, plan, g, **kwargs):
            from transformers import TrainerCallback

            watch = self
            watch.plan = plan

            class Seen(TrainerCallback):
                trainer = None

                def on_train_begin(self, args, state, control, **kw):
                    watch.trainer = self.trainer
                    vg = getattr(self.trainer, "vllm_generation", None)
                    if vg is not None:
                        generate = vg.generate

                        def counted(*a, **k):
                            watch.vllm_calls += 1
                            return generate(*a, **k)

                        vg.generate = counted

            callbacks = list(kwargs.get("callbacks", []))
            if watch.measure:
                callbacks = without_heldout(callbacks)
            kwargs["callbacks"] = [*callbacks, Seen()]
            return original(policy_path, rows, plan, g, **kwargs)

        grpo_module.train = train
        return original


def without_heldout(callbacks: list) -> list:
    """The train stage's callbacks but the held-out one. Its samples at step 0 and at the end get
    the recipe's completion budget (flows/train.py), and a random model writes every one to that
    cap. At Qwen3-0.6B's size on an H200 a stage with it had not reached its first step 270 s in
    (this evaluation part of that setup, how much not timed), and the MEASURE line, printed when
    the stage ends, never came (docs/gpu.md, section 9)."""
    from models.callbacks import HeldoutCallback

    return [c for c in callbacks if not isinstance(c, HeldoutCallback)]


def where(e: BaseException, frames: int = 16) -> str:
    """The innermost `frames` frames of `e`'s traceback, innermost first: the first as
    `file:line function`, the callers by function name (which step failed, e.g. the rollouts'
    `generate` or the loss's `compute_loss`, in one FAIL line)."""
    import traceback

    stack = list(reversed(traceback.extract_tb(e.__traceback__)[-frames:]))
    if not stack:
        return "?"
    first = f"{Path(stack[0].filename).name}:{stack[0].lineno} {stack[0].name}"
    return " < ".join([first, *(f.name for f in stack[1:])])


def weights_moved(base: Path, final: Path) -> float:
    from safetensors.torch import load_file

    a, b = load_file(str(base / "model.safetensors")), load_file(str(final / "model.safetensors"))
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a if k in b)


def peak_memory(gpu: bool) -> tuple[bool, str]:
    if gpu:
        import torch

        peak, total = torch.cuda.max_memory_allocated(), torch.cuda.get_device_properties(0).total_memory
        return peak < 0.9 * total, f"{peak / 2**30:.2f} GiB allocated at peak of {total / 2**30:.0f} GiB"
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
    return rss < 8, f"{rss:.2f} GiB resident at peak (CPU)"


def measure_line(method: str, history: list[dict], summary: dict, wall: float, gpu: bool) -> None:
    """`--measure`'s result: TRL's `step_time` of each step (the first includes warm-up), the
    completions' mean length, the stage's wall time and the peak memory."""
    steps = [h["step_time"] for h in history if "step_time" in h]
    lengths = [h["completions/mean_length"] for h in history if "completions/mean_length" in h]
    _, memory = peak_memory(gpu)
    print(f"MEASURE {method}: step_time {[round(x, 1) for x in steps]} s, completion mean length "
          f"{[round(x) for x in lengths]} tokens, {summary['steps']} steps in {wall:.0f} s "
          f"(stage wall, with loading, without held-out evaluation), {memory}", flush=True)


def finish() -> int:
    """The closing line; the exit status is the number of FAILs (capped at 100)."""
    print(f"smoke: {len(FAILS)} FAIL(s)" + (f": {', '.join(FAILS)}" if FAILS else ""), flush=True)
    return min(len(FAILS), 100)


def time_check(elapsed: float, gpu: bool) -> tuple[bool | None, str, str]:
    """The `total time` line: on a GPU a check (under 600 s); with `--cpu` the time is shown but
    decides nothing (SKIP), since a CPU's wall time depends on what else the machine runs, and the
    slow test that runs `--cpu` must not pass or fail by the clock.

    >>> time_check(700, gpu=True)[0], time_check(700, gpu=False)[0], time_check(70, gpu=True)[0]
    (False, None, True)
    """
    if gpu:
        return elapsed < 600, "total time", f"{elapsed:.0f} s (limit 600 s)"
    return None, "total time", f"{elapsed:.0f} s (the 600 s limit is checked on a GPU only)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu", action="store_true", help="run on the CPU without vLLM")
    ap.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temporary one)")
    ap.add_argument("--shape", choices=["smoke", "qwen3-0.6b"], default="smoke",
                    help="the random model's size (default: small; qwen3-0.6b: Qwen3-0.6B's config)")
    ap.add_argument("--measure", metavar="STEPS", type=int, default=0,
                    help="instead of the smoke: train STEPS steps with a preset's GRPO recipe "
                         "(--recipe) and print seconds per step and peak memory per method")
    ap.add_argument("--recipe", default="qwen3_0p6b_1gpu", help="the preset whose grpo block --measure uses")
    ap.add_argument("--steps-per-generation", type=int, default=None, metavar="N",
                    help="with --measure: micro-batches per rollout call (grpo.steps_per_generation; "
                         "default: the recipe's, all of a step's)")
    ap.add_argument("--methods", nargs="+", default=None, choices=METHODS,
                    help=f"methods to train (default: {' '.join(METHODS)}; with --measure: rlvr)")
    args = ap.parse_args()
    work = (args.work or Path(tempfile.mkdtemp(prefix="gpu-smoke-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    redirect_paths(work)

    import torch

    start = time.time()
    gpu = not args.cpu
    if gpu and not torch.cuda.is_available():
        report(False, "cuda", "no GPU visible (run with --cpu on a CPU machine)")
        return 1
    from trl.import_utils import is_vllm_available

    use_vllm = gpu and is_vllm_available()
    if gpu:
        report(use_vllm, "vllm installed", "vLLM importable" if use_vllm else
               "not importable: docs/gpu.md, Install; rollouts fall back to transformers")
        report(torch.cuda.is_bf16_supported(), "bf16", torch.cuda.get_device_name(0))

    from core import paths
    from flows.evaluate import evaluate
    from flows.train import train
    from models import grpo
    from models.tiny import corpus
    from world import generate_world

    methods = args.methods or (["rlvr"] if args.measure else list(METHODS))
    params = (measure_params(work / "qwen3", use_vllm, args.measure, args.recipe,
                             args.steps_per_generation) if args.measure
              else smoke_params(work / "qwen3", use_vllm))
    generate_world(params.world, paths.PREPARED)
    folder = build_model(work / "qwen3", corpus(paths.PREPARED), gpu, args.shape)
    want = "cuda" if gpu else "cpu"
    print(f"smoke: {work} ({'GPU' if gpu else 'CPU'}, vLLM {'on' if use_vllm else 'off'})", flush=True)

    watch = Watch(measure=bool(args.measure))
    watch.hook(grpo)
    for method in methods:
        if gpu:
            torch.cuda.reset_peak_memory_stats()
        t0 = time.time()
        try:
            summary = train(params, method, 0)
        except Exception as e:  # a failed method is a FAIL line, the others still run
            report(False, f"{method}: trains", f"{type(e).__name__}: {e} [at {where(e)}]")
            continue
        history = watch.trainer.state.log_history if watch.trainer else []
        losses = [h["loss"] for h in history if "loss" in h]
        if args.measure:
            measure_line(method, history, summary, time.time() - t0, gpu)
        report(bool(losses) and all(math.isfinite(x) for x in losses), f"{method}: finite loss",
               f"{losses} after {summary['steps']} steps in {time.time() - t0:.0f} s")
        moved = weights_moved(folder, paths.checkpoint_dir(method, 0) / "final")
        spread = max((h.get("reward_std", 0.0) for h in history), default=0.0)
        masters = {p.dtype for p in watch.trainer.model.parameters()} if watch.trainer else set()
        report(moved > 0 and masters == {torch.float32}, f"{method}: weights changed",
               f"max |dw| {moved:.2e}, trained weights {sorted(map(str, masters))}, reward std "
               f"{spread:.3f}" + ("" if spread > 1e-6 else " (a random model: the change is weight decay)"))
        if method == "rlcer" or not gpu:
            report(None, f"{method}: vLLM rollouts", "RLCER samples with transformers" if gpu else "--cpu")
        else:
            report(watch.vllm_calls > 0, f"{method}: vLLM rollouts",
                   f"{watch.vllm_calls} vLLM generate calls" if use_vllm else "vLLM not installed")
        watch.vllm_calls = 0
        built = modules_in(watch.plan) if watch.plan else []
        on = devices_of([watch.trainer.model, *built]) if watch.trainer else set()
        report(on == {want}, f"{method}: every model on the {want.upper()}",
               f"policy + {len(built)} built model(s) on {sorted(on)}")
        ok, detail = peak_memory(gpu)
        report(ok, f"{method}: peak memory", detail)
        if gpu:
            del watch.trainer
            watch.trainer, watch.plan = None, None
            torch.cuda.empty_cache()

    if args.measure:  # the measure is the training steps; the evaluate stage is the smoke's
        return finish()
    import evals.suite as suite

    seen: list[tuple[set[str], set[str]]] = []
    original = suite.evaluate_policy

    def recording(model, *a, **k):
        seen.append(({p.device.type for p in model.parameters()},
                     {str(p.dtype) for p in model.parameters()}))
        return original(model, *a, **k)

    suite.evaluate_policy = recording
    t0 = time.time()
    try:
        metrics = evaluate(params, "rlvr", 0)
    except Exception as e:
        report(False, "evaluate: runs", f"{type(e).__name__}: {e}")
    else:
        finite = all(math.isfinite(v) for v in metrics.values() if isinstance(v, float))
        report(finite and "arith/pass@1" in metrics, "evaluate: metrics",
               f"arith/pass@1 {metrics.get('arith/pass@1')}, {len(metrics)} metrics in {time.time() - t0:.0f} s")
        devices = set().union(*(d for d, _ in seen)) if seen else set()
        dtypes = set().union(*(t for _, t in seen)) if seen else set()
        report(devices == {want}, f"evaluate: policy on the {want.upper()}",
               f"{sorted(devices)} in {sorted(dtypes)}")
    finally:
        suite.evaluate_policy = original
    report(*time_check(time.time() - start, gpu))
    return finish()


if __name__ == "__main__":
    sys.exit(main())
