"""The GPU path in a few minutes (`make gpu-smoke`, scripts/gpu_smoke.sh; docs/gpu.md, "First run").

Checks, in order of importance (`CHECKS`; `--list` prints them with what each asserts):

1. `preset_rlvr`: rlvr with `qwen3_0p6b_1gpu`'s batch shape at Qwen3-0.6B's size, rollouts with
   transformers (what `check_vllm` advises where vLLM is missing, and what ran out of memory on
   an H100 before the preset set `grpo.steps_per_generation`). Its peak GPU memory is compared
   with `core.memory.estimate` of the same configuration (`memory_verdict`), and every rollout
   call is checked against the preset's bound (`core.memory.rollout_rows`);
2. `preset_rlvr_vllm`: the same with vLLM colocate rollouts (vLLM's own engine defaults);
3. `confidence`: self_certainty and entropy with the preset's `rows_per_pass`, 2 steps;
4. `rlcer_bounded`: rlcer with the preset's `rows_per_generate` and lengths (its judge: the same
   random 0.6B model), 2 steps;
5. `vllm_sync`: colocate rollouts, and after two steps and TRL's weight sync, vLLM's
   log-probabilities of a fixed completion equal the policy's within `SYNC_TOL_NATS` (bf16);
6. `smoke`: the first smoke, kept: two GRPO steps of rlvr, rlme (live and frozen evaluators), dro
   and rlcer (a judge read from the same folder) through the real train stage, and the rlvr
   policy through the real evaluate stage, on a small random Qwen3;
7. `ddp_timeout` (2 GPUs): two processes (accelerate launch, `grpo.num_processes: 2`) whose step-0
   held-out evaluation on rank 0 outlasts torch's default collective timeout, shortened here; the
   run survives on `grpo.ddp_timeout_s`, which `core.ranks.timeout_s()` reports;
8. `vllm_server` (2 GPUs): a vLLM server on the second GPU (the command scripts/vllm_server.sh
   runs) serves two successive 1-step trainings on the first.

The models are random-weight Qwen3s built locally over a Qwen3-style chat template (no hub:
tests/qwen3_chat.py's tokenizer), on the ci world, under a scratch data folder. Each check runs
in a process of its own: its peak memory is its own, an engine it leaves behind is freed with it,
and a check that outlasts its time is stopped there (`run_child`). The run is budget-aware
(`--budget-s`, default 480 s on a GPU): a check starts only when the time left covers its expected
time (`time_limit`), and each check's time is printed. One line per check: `PASS|FAIL|SKIP <what>:
<detail>`; the exit code is the number of FAILs (capped at 100).

The preset checks train the smallest optimiser step whose rollout call and micro-batch have the
preset's shapes (`one_call_step`): those two set the peak (core/memory.py counts exactly them),
and the preset's other calls and micro-batches of a step repeat them; `--full-step` trains the
whole step. A random model writes every completion to the cap, the worst case for memory.

With `--cpu`: the smoke check on the CPU without vLLM, float32 (the slow test
tests/test_gpu_path.py runs it); the GPU-only checks print SKIP with the reason. This file passes
the house's 600 lines: its plan, budget and verdicts (the first sections, pure) are the part to
move to a module of their own.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

METHODS = ("rlvr", "rlme", "dro", "rlcer")
FAILS: list[str] = []
GIB = 2**30

# The preset the preset checks take their GRPO recipe and reward bounds from, and their steps.
RECIPE = "qwen3_0p6b_1gpu"
PRESET_STEPS = 2
# A measured peak may exceed core.memory.estimate by this fraction before the check fails: the
# estimate is a planning figure (core/memory.py), and its prompt budget (256 tokens) is above the
# ci world's prompts, so a peak above it by more than this is a term it misses.
MEMORY_TOLERANCE = 0.10
# vLLM (bf16 weights and activations) against the policy (float32 master weights under bf16
# autocast): the largest difference, in nats, of one token's log-probability that still counts as
# the same weights. bf16 keeps 8 bits of mantissa (0.4% relative); the small model's logits are
# within a few units, so rounding moves a log-probability by hundredths, not tenths.
SYNC_TOL_NATS = 0.1
# The sync check's learning rate and weight decay: large enough that two steps move the policy's
# log-probabilities well past SYNC_TOL_NATS, so an engine that kept old weights cannot pass.
SYNC_LR = 3e-3
FIXED_COMPLETION = " 10 * 3 = 30. The answer is \\boxed{30}."
# ddp_timeout: rank 0's step-0 held-out evaluation is made to last HELDOUT_WAIT_S; torch's default
# collective timeout is shortened to SHORT_DEFAULT_S in both ranks (a group created without the
# configured timeout would kill the waiting rank), and the run sets grpo.ddp_timeout_s.
SHORT_DEFAULT_S, HELDOUT_WAIT_S, DDP_TIMEOUT_S = 20, 45, 300
# vllm_server: how long the server may take to answer /health (engine build, compile, graphs).
SERVER_START_S = 300
# Seconds the parent keeps for itself after the last check (its closing lines).
MARGIN_S = 5.0
DEFAULT_BUDGET_S = 480.0


def report(ok: bool | None, what: str, detail: str = "") -> None:
    """One check's line; None is SKIP."""
    word = "SKIP" if ok is None else "PASS" if ok else "FAIL"
    if ok is False:
        FAILS.append(what)
    print(f"{word} {what}: {detail}".rstrip(": "), flush=True)


# --- The plan: which checks, in which order, and the time each may take ------------------------

class Check(NamedTuple):
    """One check of the smoke: what its PASS asserts, what it needs, its time on one H100. (A
    NamedTuple, not a dataclass: tests load this script without registering it as a module.)"""

    name: str
    asserts: str
    lines: tuple[str, ...]   # the names of its result lines (its SKIP lines carry them)
    gpu: bool = True         # needs a GPU: SKIP with --cpu
    vllm: bool = False       # needs vLLM importable on the GPU machine
    gpus: int = 1
    # Seconds on one H100: guesses from the GPU records (a 72-row, 512-token transformers rollout
    # call at 0.6B about 15 s; a vLLM engine's build with compile and CUDA graphs about a minute),
    # to be replaced by the TIME lines of the first run; and the most it may take (a hang stops).
    expected_s: float = 60.0
    cap_s: float = 300.0
    cpu_note: str = "GPU-only"


def _preset_line(method: str, vllm: bool = False) -> str:
    return f"{method}@{RECIPE}" + (" vLLM" if vllm else "")


CHECKS: tuple[Check, ...] = (
    Check("preset_rlvr",
          f"rlvr, {RECIPE}'s rollout call and micro-batch at Qwen3-0.6B's size, transformers rollouts, "
          f"{PRESET_STEPS} steps: finite loss, no rollout call over the preset's bound, peak GPU memory "
          f"within core.memory.estimate + {MEMORY_TOLERANCE:.0%} and no out-of-memory",
          (_preset_line("rlvr"),), expected_s=90, cap_s=240,
          cpu_note="GPU-only: GPU memory at Qwen3-0.6B's size"),
    Check("preset_rlvr_vllm", "the same with vLLM colocate rollouts (vLLM's engine defaults)",
          (_preset_line("rlvr", True),), vllm=True, expected_s=110, cap_s=300,
          cpu_note="GPU-only: GPU memory at Qwen3-0.6B's size"),
    Check("confidence",
          f"self_certainty and entropy with {RECIPE}'s rows_per_pass, its rollout call, 0.6B: "
          f"{PRESET_STEPS} steps, finite loss, no out-of-memory",
          (_preset_line("self_certainty"), _preset_line("entropy")), expected_s=120, cap_s=300,
          cpu_note="GPU-only: teacher-forced logits at Qwen3-0.6B's vocabulary"),
    Check("rlcer_bounded",
          f"rlcer with {RECIPE}'s rows_per_generate and lengths, a 0.6B policy and judge: "
          f"{PRESET_STEPS} steps, no generate call over rows_per_generate, no out-of-memory",
          (_preset_line("rlcer"),), expected_s=170, cap_s=330,
          cpu_note="GPU-only: 1,024-token rollouts at Qwen3-0.6B's size"),
    Check("vllm_sync",
          "colocate rollouts through vLLM; after 2 steps and TRL's sync, vLLM's log-probabilities of "
          f"a fixed completion within {SYNC_TOL_NATS} nats of the policy's, which moved further "
          "from the base",
          ("vllm colocate rollouts", "vllm weight sync"), vllm=True, expected_s=70, cap_s=200,
          cpu_note="GPU-only: TRL's own sync (the CPU's is tests/test_vllm.py's slow test)"),
    Check("smoke",
          "rlvr, rlme, dro, rlcer: 2 steps each through the train stage (finite loss, weights moved, "
          "float32 masters, vLLM rollouts on a GPU, every model on the device, peak memory), then "
          "the evaluate stage",
          ("smoke",), gpu=False, expected_s=100, cap_s=300),
    Check("ddp_timeout",
          f"2 processes, rank 0's step-0 held-out evaluation {HELDOUT_WAIT_S} s against torch's "
          f"default timeout cut to {SHORT_DEFAULT_S} s: both ranks finish one step, "
          f"core.ranks.timeout_s() = grpo.ddp_timeout_s ({DDP_TIMEOUT_S} s)",
          ("ddp_timeout",), gpus=2, expected_s=100, cap_s=240,
          cpu_note="GPU-only: NCCL (gloo's is tests/test_gpu_infra_ranks.py)"),
    Check("vllm_server",
          "a vLLM server on the second GPU serves a 1-step training on the first, then a second "
          "training (the server reused): finite loss, rollouts through the server",
          ("vllm server: starts", "vllm server: a training through it",
           "vllm server: reused by a second training"),
          vllm=True, gpus=2, expected_s=200, cap_s=420,
          cpu_note="GPU-only: the weight transfer is NCCL (tests/test_vllm.py serves on the CPU)"),
)
CHECK_NAMES = tuple(c.name for c in CHECKS)


def skip_reason(check: Check, *, gpu: bool, gpus: int, vllm_reason: str | None) -> str | None:
    """Why `check` cannot run on this machine (None: it can).

    >>> two = next(c for c in CHECKS if c.name == "vllm_server")
    >>> skip_reason(two, gpu=True, gpus=1, vllm_reason=None)
    'needs 2 GPUs, 1 visible'
    >>> skip_reason(two, gpu=True, gpus=2, vllm_reason="vLLM is not installed")
    'vLLM unavailable: vLLM is not installed'
    >>> skip_reason(two, gpu=True, gpus=2, vllm_reason=None) is None
    True
    """
    if check.gpu and not gpu:
        return f"--cpu: {check.cpu_note}"
    if gpu and check.gpus > gpus:
        return f"needs {check.gpus} GPUs, {gpus} visible"
    if check.vllm and gpu and vllm_reason:
        return f"vLLM unavailable: {vllm_reason}"
    return None


def plan(names: Sequence[str] | None, *, gpu: bool, gpus: int,
         vllm_reason: str | None) -> list[tuple[Check, str | None]]:
    """The checks chosen (`--checks`; default all), in `CHECKS`' order of importance whatever the
    order asked, each with its SKIP reason (None: it runs)."""
    chosen = [c for c in CHECKS if names is None or c.name in names]
    return [(c, skip_reason(c, gpu=gpu, gpus=gpus, vllm_reason=vllm_reason)) for c in chosen]


def resolve_budget(budget_s: float | None, gpu: bool) -> float | None:
    """The seconds the whole run may take; None: no limit. `--budget-s` (0: none); by default
    `DEFAULT_BUDGET_S` on a GPU and none with `--cpu`, whose wall time is the machine's load.

    >>> resolve_budget(None, gpu=True), resolve_budget(None, gpu=False), resolve_budget(0, gpu=True)
    (480.0, None, None)
    """
    if budget_s is None:
        return DEFAULT_BUDGET_S if gpu else None
    return float(budget_s) if budget_s > 0 else None


def time_limit(check: Check, left_s: float | None, gpu: bool) -> tuple[float | None, str | None]:
    """(seconds `check` may run, None) or (None, SKIP reason) with `left_s` of the budget left
    (None: no budget). It starts only when what is left, less `MARGIN_S`, covers its expected time,
    and stops at that or at its cap, whichever comes first; on the CPU nothing is capped.

    >>> smoke = next(c for c in CHECKS if c.name == "smoke")
    >>> time_limit(smoke, 400.0, gpu=True), time_limit(smoke, None, gpu=True)
    ((300.0, None), (300.0, None))
    >>> time_limit(smoke, 150.0, gpu=True), time_limit(smoke, None, gpu=False)
    ((145.0, None), (None, None))
    >>> time_limit(smoke, 90.0, gpu=True)[1]
    'budget: about 100 s needed, 85 s left (alone: --checks smoke)'
    """
    cap = float(check.cap_s) if gpu else None
    if left_s is None:
        return cap, None
    usable = left_s - MARGIN_S
    if usable < check.expected_s:
        return None, (f"budget: about {check.expected_s:.0f} s needed, {max(usable, 0):.0f} s left "
                      f"(alone: --checks {check.name})")
    return (usable if cap is None else min(cap, usable)), None


def time_check(elapsed: float, gpu: bool, limit_s: float = 600.0) -> tuple[bool | None, str, str]:
    """The `total time` line: on a GPU a check (under `limit_s`: the budget); with `--cpu` the
    time is shown but decides nothing (SKIP), since a CPU's wall time depends on what else the
    machine runs, and the slow test that runs `--cpu` must not pass or fail by the clock.

    >>> time_check(700, gpu=True)[0], time_check(700, gpu=False)[0], time_check(70, gpu=True)[0]
    (False, None, True)
    >>> time_check(481, gpu=True, limit_s=480)[2]
    '481 s (limit 480 s)'
    """
    if gpu:
        return elapsed < limit_s, "total time", f"{elapsed:.0f} s (limit {limit_s:.0f} s)"
    return None, "total time", f"{elapsed:.0f} s (the limit is checked on a GPU only)"


# --- Verdicts --------------------------------------------------------------------------------------

def memory_verdict(peak_gib: float, estimate_gib: float, tolerance: float = MEMORY_TOLERANCE,
                   error: str | None = None) -> tuple[bool, str]:
    """(PASS?, detail) of a measured peak against `core.memory.estimate`'s total: FAIL when the run
    went out of memory (`error`) or its peak exceeds the estimate by more than `tolerance`.

    >>> memory_verdict(21.0, 25.0)
    (True, 'peak 21.0 GiB, estimate 25.0 GiB (84%; FAIL above 27.5 GiB)')
    >>> memory_verdict(28.0, 25.0)[0], memory_verdict(27.4, 25.0)[0]
    (False, True)
    >>> memory_verdict(3.0, 25.0, error="CUDA out of memory")
    (False, 'out of memory: CUDA out of memory (peak 3.0 GiB, estimate 25.0 GiB)')
    """
    if error:
        return False, f"out of memory: {error} (peak {peak_gib:.1f} GiB, estimate {estimate_gib:.1f} GiB)"
    limit = estimate_gib * (1 + tolerance)
    return peak_gib <= limit, (f"peak {peak_gib:.1f} GiB, estimate {estimate_gib:.1f} GiB "
                               f"({peak_gib / estimate_gib:.0%}; FAIL above {limit:.1f} GiB)")


def sync_verdict(engine_vs_policy: float, policy_vs_base: float,
                 tol: float = SYNC_TOL_NATS) -> tuple[bool, str]:
    """(PASS?, detail) of the weight sync from the largest log-probability differences (nats) over
    a fixed completion: vLLM's after the sync against the policy's, and the policy's against the
    base's. PASS when vLLM is within `tol` of the policy and the policy is more than `tol` from
    the base (so an engine that kept the base's weights could not pass).

    >>> sync_verdict(0.02, 0.8)
    (True, 'vLLM within 0.020 nats of the policy (tolerance 0.1); the policy 0.800 from the base')
    >>> sync_verdict(0.3, 0.8)[0], sync_verdict(0.02, 0.05)[0]
    (False, False)
    >>> sync_verdict(0.02, 0.05)[1]
    'the steps moved the policy 0.050 nats from the base, within the tolerance 0.1: nothing to tell'
    """
    if policy_vs_base <= tol:
        return False, (f"the steps moved the policy {policy_vs_base:.3f} nats from the base, within "
                       f"the tolerance {tol:g}: nothing to tell")
    return engine_vs_policy <= tol, (f"vLLM within {engine_vs_policy:.3f} nats of the policy "
                                     f"(tolerance {tol:g}); the policy {policy_vs_base:.3f} from the base")


def calls_verdict(sizes: Sequence[int], bound: int) -> tuple[bool | None, str]:
    """(PASS?, detail) of the rows of each rollout generate call against the preset's bound
    (`core.memory.rollout_rows`); SKIP (None) when no call ran.

    >>> calls_verdict([72, 72], 72)
    (True, '2 generate calls of [72] rows, bound 72')
    >>> calls_verdict([576], 72)[0], calls_verdict([], 72)[0]
    (False, None)
    """
    if not sizes:
        return None, "no generate call ran"
    return max(sizes) <= bound, f"{len(sizes)} generate calls of {sorted(set(sizes))} rows, bound {bound}"


def ddp_verdict(results: Sequence[Mapping], configured_s: float = DDP_TIMEOUT_S) -> tuple[bool, str]:
    """(PASS?, detail) of the two ranks' results (`ddp_worker`): both finished, both groups had
    the configured timeout, rank 0 trained its step.

    >>> ok = [{"rank": 0, "ok": True, "timeout_s": 300.0, "steps": 1}, {"rank": 1, "ok": True, "timeout_s": 300.0}]
    >>> ddp_verdict(ok)[0], ddp_verdict(ok[:1])[0]
    (True, False)
    >>> ddp_verdict([ok[0], {"rank": 1, "ok": False, "error": "DistBackendError: watchdog"}])
    (False, 'rank 1: DistBackendError: watchdog')
    """
    if len(results) != 2:
        return False, f"{len(results)} of 2 ranks wrote a result (killed: see the output above)"
    failed = [f"rank {r.get('rank')}: {str(r.get('error', '?'))[:200]}" for r in results if not r.get("ok")]
    if failed:
        return False, "; ".join(failed)
    timeouts = [r.get("timeout_s") for r in results]
    steps = next((r.get("steps") for r in results if r.get("rank") == 0), None)
    ok = all(t == configured_s for t in timeouts) and bool(steps)
    return ok, (f"both ranks finished ({steps} step) through a {HELDOUT_WAIT_S} s step-0 held-out "
                f"evaluation; group timeouts {timeouts} s (configured {configured_s} s, torch's "
                f"default cut to {SHORT_DEFAULT_S} s)")


# --- Settings ---------------------------------------------------------------------------------------

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


def _preset_block(recipe: str) -> dict:
    from core.params import read_raw

    preset = (read_raw(ROOT / "params.yaml").get("presets") or {}).get(recipe)
    if not isinstance(preset, dict):
        raise SystemExit(f"gpu_smoke: no preset {recipe!r} in params.yaml")
    return preset


def measure_params(folder: Path, use_vllm: bool, steps: int, recipe: str,
                   steps_per_generation: int | None = None):
    """`--measure`: the smoke's settings with the GRPO block of preset `recipe` (params.yaml:
    batch, group size, completion cap, loss, accumulation, gradient checkpointing) for `steps`
    steps (the measure is the training step: `Watch(measure=True)` leaves the held-out evaluation
    out, whose samples get the recipe's completion budget at step 0 and at the end).
    `steps_per_generation` (grpo.steps_per_generation) splits a step's rollouts into smaller
    generate calls, as a run without vLLM needs on one GPU."""
    from core.params import validate

    params = smoke_params(folder, use_vllm)
    raw = params.model_dump()
    raw["grpo"].update(_preset_block(recipe).get("grpo") or {})
    raw["grpo"].update(max_steps=steps, save_steps=steps, heldout_every=steps, use_vllm=use_vllm)
    if steps_per_generation is not None:
        raw["grpo"]["steps_per_generation"] = steps_per_generation
    raw["eval"].update(max_new_tokens=16)
    return validate(raw, preset="")


def one_call_step(prompts_per_step: int, accumulation: int, per_generation: int | None,
                  num_generations: int, num_processes: int = 1,
                  rows_bound: int | None = None) -> dict[str, int]:
    """GRPO overrides for the smallest optimiser step whose one rollout call and micro-batches have
    the shapes of the given recipe's: micro-batches of the same prompts, and as many of them per
    call as the recipe's call holds (`rows_bound`: RLCER's rows_per_generate, which cuts a call).

    >>> one_call_step(96, 16, 2, 6)            # qwen3_0p6b_1gpu's rlvr: calls of 72 rows
    {'prompts_per_step': 12, 'gradient_accumulation_steps': 2, 'steps_per_generation': 2}
    >>> one_call_step(32, 16, 4, 8, rows_bound=32)   # its rlcer: 64 rows cut to calls of 32
    {'prompts_per_step': 4, 'gradient_accumulation_steps': 2, 'steps_per_generation': 2}
    """
    micro_prompts = prompts_per_step // accumulation // num_processes
    rows = micro_prompts * num_generations
    call = rows * (per_generation or accumulation)
    if rows_bound:
        call = min(call, rows_bound)
    k = -(-call // rows)
    return {"prompts_per_step": micro_prompts * k * num_processes,
            "gradient_accumulation_steps": k, "steps_per_generation": k}


def preset_check_params(folder: Path, method: str, recipe: str = RECIPE, *, use_vllm: bool,
                        steps: int = PRESET_STEPS, full_step: bool = False):
    """A preset check's settings: the smoke's, with preset `recipe`'s `grpo` block and its
    `reward.<method>` block (the method's bounds, lengths and GRPO overrides; RLCER's judge is the
    model at `folder`), for `steps` steps, vLLM as asked, its step cut to one rollout call
    (`one_call_step`) unless `full_step`. No checkpoint before the end (a 0.6B one with its
    optimiser state is 7 GB to write) and no held-out point before it."""
    from core.params import validate

    preset = _preset_block(recipe)
    raw = smoke_params(folder, use_vllm).model_dump()
    raw["methods"] = [method]
    raw["grpo"].update(preset.get("grpo") or {})
    own = raw["reward"][method]
    for key, value in ((preset.get("reward") or {}).get(method) or {}).items():
        own[key] = {**own.get(key, {}), **value} if key == "grpo" else value
    if method == "rlcer":
        own["verifier"] = str(folder)
    raw["pipeline"]["gpu_memory_gib"] = (preset.get("pipeline") or {}).get("gpu_memory_gib")
    raw["eval"]["max_new_tokens"] = 16
    over: dict = {"max_steps": steps, "save_steps": steps + 1, "heldout_every": steps,
                  "use_vllm": use_vllm}
    if not full_step:
        run = validate(raw, preset="").resolve(method)
        g = run.grpo
        over.update(one_call_step(g.prompts_per_step, g.gradient_accumulation_steps,
                                  g.steps_per_generation, g.num_generations, g.num_processes,
                                  getattr(run.cfg, "rows_per_generate", None)))
    own["grpo"] = {**own.get("grpo", {}), **over}
    return validate(raw, preset="")


def ddp_params(folder: Path):
    """`ddp_timeout`'s settings: the smoke's rlvr on 2 processes for 1 step, a held-out point at
    step 0 (and at the end), the collective timeout `DDP_TIMEOUT_S`."""
    from core.params import validate

    raw = smoke_params(folder, use_vllm=False).model_dump()
    raw["methods"] = ["rlvr"]
    raw["grpo"].update(num_processes=2, ddp_timeout_s=DDP_TIMEOUT_S, max_steps=1, save_steps=1,
                       heldout_every=1)
    return validate(raw, preset="")


def server_params(folder: Path, port: int, group_port: int):
    """`vllm_server`'s trainings: the smoke's rlvr for 1 step, rollouts from the server at `port`."""
    from core.params import validate

    raw = smoke_params(folder, use_vllm=True).model_dump()
    raw["methods"] = ["rlvr"]
    raw["grpo"].update(vllm_mode="server", vllm_server_host="127.0.0.1", vllm_server_port=port,
                       vllm_group_port=group_port, max_steps=1, save_steps=1, heldout_every=1)
    return validate(raw, preset="")


def visible_gpus(env: Mapping[str, str], count: int) -> list[str]:
    """The GPU ids a child may be given: CUDA_VISIBLE_DEVICES' (indices, UUIDs or MIG ids) where
    it is set, else 0..count-1.

    >>> visible_gpus({"CUDA_VISIBLE_DEVICES": "GPU-aa, GPU-bb"}, 2), visible_gpus({}, 2)
    (['GPU-aa', 'GPU-bb'], ['0', '1'])
    """
    given = env.get("CUDA_VISIBLE_DEVICES", "").strip()
    if given:
        return [x.strip() for x in given.split(",") if x.strip()]
    return [str(i) for i in range(count)]


def vllm_python(env: Mapping[str, str], root: Path = ROOT) -> str:
    """The interpreter the server runs under, as scripts/vllm_server.sh picks it (VLLM_ENV, else
    .venv-vllm) where that environment exists; else this one (the GPU machine has no network to
    make one, and vLLM imports here or the check is SKIPped)."""
    for folder in (env.get("VLLM_ENV"), str(root / ".venv-vllm")):
        if folder and os.access(Path(folder) / "bin" / "python", os.X_OK):
            return str(Path(folder) / "bin" / "python")
    return sys.executable


def server_launch(folder: Path, port: int, python: str) -> list[str]:
    """The server's command: scripts/vllm_server.sh's last line (`models.vllm_engine serve`, which
    execs `vllm.entrypoints.openai.api_server` under `python`), without its environment build."""
    return [sys.executable, "-m", "models.vllm_engine", "serve", str(folder), "--port", str(port),
            "--python", python]


def redirect_paths(work: Path) -> None:
    """Every stage reads and writes under `work` (core.paths), never the repository's data/."""
    from core import paths

    paths.ROOT, paths.DATA = work, work / "data"
    paths.PREPARED, paths.BASE_MODEL = work / "data" / "prepared", work / "data" / "base_model"
    paths.COMPONENTS, paths.REPORTS = work / "data" / "components", work / "reports"
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{work / 'mlflow.db'}"
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


def model_folder(work: Path, shape: str) -> Path:
    return work / ("qwen3" if shape == "smoke" else shape)


def ensure_inputs(work: Path, gpu: bool, shape: str = "smoke") -> Path:
    """The ci world and the random model of `shape` under `work`, made by the first check that
    needs them (checks run one after another)."""
    from core import paths
    from models.tiny import corpus
    from world import generate_world

    marker = paths.PREPARED / ".smoke-world"
    if not marker.exists():
        generate_world(smoke_params(model_folder(work, "smoke"), False).world, paths.PREPARED)
        marker.write_text("done\n")
    folder = model_folder(work, shape)
    if not (folder / "config.json").exists():
        build_model(folder, corpus(paths.PREPARED), gpu, shape)
    return folder


# --- What a training did -----------------------------------------------------------------------

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

    def release(self) -> None:
        self.trainer, self.plan, self.vllm_calls = None, None, 0


def without_heldout(callbacks: list) -> list:
    """The train stage's callbacks but the held-out one. Its samples at step 0 and at the end get
    the recipe's completion budget (flows/train.py), and a random model writes every one to that
    cap. At Qwen3-0.6B's size on an H200 a stage with it had not reached its first step 270 s in
    (this evaluation part of that setup, how much not timed), and the MEASURE line, printed when
    the stage ends, never came (docs/gpu.md, section 9)."""
    from models.callbacks import HeldoutCallback

    return [c for c in callbacks if not isinstance(c, HeldoutCallback)]


@contextlib.contextmanager
def generate_calls(sizes: list[int]):
    """Record the rows of every rollout generate call (TRL's `_generate_single_turn`, which
    RLCER's bounded calls reach too, one per chunk) into `sizes`."""
    from trl import GRPOTrainer

    original = GRPOTrainer._generate_single_turn

    def counted(self, prompt_ids, *a, **k):
        sizes.append(len(prompt_ids))
        return original(self, prompt_ids, *a, **k)

    GRPOTrainer._generate_single_turn = counted
    try:
        yield sizes
    finally:
        GRPOTrainer._generate_single_turn = original


@contextlib.contextmanager
def eager_engines(gpu: bool):
    """TRL's colocate engines built eager on a GPU (`enforce_eager`): the small model's engines
    skip torch.compile and CUDA-graph capture, a minute or so each; the preset check keeps vLLM's
    defaults, so the compiled engine is checked once."""
    if not gpu:
        yield
        return
    import functools

    import trl.generation.vllm_generation as trl_vllm

    original = trl_vllm.LLM
    trl_vllm.LLM = functools.partial(original, enforce_eager=True)
    try:
        yield
    finally:
        trl_vllm.LLM = original


class PeakMemory:
    """GiB this process held at peak over a block. On a GPU the larger of torch's peak reserved
    memory (its caching allocator: an in-process vLLM engine's weights and cache included) and the
    device's used memory (cudaMemGetInfo, sampled every 0.2 s: what the allocator does not see)
    less what was in use when the block began (this process's CUDA context, which
    `core.memory.RESERVE_GIB` counts); on the CPU the peak resident set."""

    def __init__(self, gpu: bool) -> None:
        self.gpu, self.base, self.device_peak = gpu, 0, 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        import torch

        while not self._stop.wait(0.2):
            free, total = torch.cuda.mem_get_info()
            self.device_peak = max(self.device_peak, total - free)

    def __enter__(self) -> PeakMemory:
        if self.gpu:
            import torch

            torch.cuda.reset_peak_memory_stats()
            free, total = torch.cuda.mem_get_info()
            self.base = self.device_peak = total - free
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    @property
    def gib(self) -> float:
        if not self.gpu:
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
        import torch

        return max(torch.cuda.max_memory_reserved(), self.device_peak - self.base) / GIB

    def detail(self) -> str:
        if not self.gpu:
            return f"{self.gib:.2f} GiB resident at peak (CPU)"
        import torch

        return (f"allocated {torch.cuda.max_memory_allocated() / GIB:.1f}, reserved "
                f"{torch.cuda.max_memory_reserved() / GIB:.1f}, device {(self.device_peak - self.base) / GIB:.1f} GiB")


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


def is_oom(e: BaseException) -> bool:
    return type(e).__name__ == "OutOfMemoryError" or "out of memory" in str(e).lower()


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


# --- The checks, each in its own process (`--run-check NAME`) -------------------------------------

def check_env(work: Path) -> None:
    """The GPU, bf16 and vLLM lines; `env.json` tells the parent what the machine has."""
    import torch

    info: dict = {"gpus": 0, "vllm": "no GPU", "card_gib": None}
    if not torch.cuda.is_available():
        report(False, "cuda", "no GPU visible (run with --cpu on a CPU machine)")
    else:
        from models.vllm_engine import unavailable

        reason = unavailable()
        report(reason is None, "vllm installed", "vLLM importable" if reason is None else
               f"{reason}; docs/gpu.md, Install; rollouts fall back to transformers")
        report(torch.cuda.is_bf16_supported(), "bf16", torch.cuda.get_device_name(0))
        info = {"gpus": torch.cuda.device_count(), "vllm": reason,
                "card_gib": torch.cuda.get_device_properties(0).total_memory / GIB}
    (work / "env.json").write_text(json.dumps(info))


def train_methods(params, methods: Sequence[str], folder: Path, gpu: bool, use_vllm: bool,
                  watch: Watch, measure: bool) -> None:
    """The smoke's (and `--measure`'s) trainings, one after another, with their lines."""
    import torch

    from core import paths
    from flows.train import train

    want = "cuda" if gpu else "cpu"
    for method in methods:
        if gpu:
            torch.cuda.reset_peak_memory_stats()
        t0 = time.time()
        try:
            summary = train(params, method, 0)
        except Exception as e:  # a failed method is a FAIL line, the others still run
            report(False, f"{method}: trains", f"{type(e).__name__}: {e} [at {where(e)}]")
            watch.release()
            continue
        history = watch.trainer.state.log_history if watch.trainer else []
        losses = [h["loss"] for h in history if "loss" in h]
        if measure:
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
        built = modules_in(watch.plan) if watch.plan else []
        on = devices_of([watch.trainer.model, *built]) if watch.trainer else set()
        report(on == {want}, f"{method}: every model on the {want.upper()}",
               f"policy + {len(built)} built model(s) on {sorted(on)}")
        ok, detail = peak_memory(gpu)
        report(ok, f"{method}: peak memory", detail)
        watch.release()
        if gpu:
            torch.cuda.empty_cache()


def check_smoke(work: Path, gpu: bool, shape: str, methods: Sequence[str] | None) -> None:
    """The first smoke: the four methods' trainings, then the evaluate stage."""
    from flows.evaluate import evaluate
    from models import grpo
    from models.vllm_engine import unavailable

    use_vllm = gpu and unavailable() is None
    folder = ensure_inputs(work, gpu, shape)
    params = smoke_params(folder, use_vllm)
    watch = Watch()
    watch.hook(grpo)
    with eager_engines(gpu):
        train_methods(params, methods or METHODS, folder, gpu, use_vllm, watch, measure=False)
    import evals.suite as suite

    want = "cuda" if gpu else "cpu"
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


def check_preset(work: Path, method: str, *, use_vllm: bool, gpu: bool = True, recipe: str = RECIPE,
                 steps: int = PRESET_STEPS, full_step: bool = False, decide_memory: bool = False,
                 shape: str = "qwen3-0.6b", watch: Watch | None = None) -> None:
    """One preset-shaped training (`preset_check_params`) and its lines: trains (finite loss,
    `steps` steps, no exception), rollout calls bounded, and with `decide_memory` its peak against
    `core.memory.estimate` of the configuration that ran (`memory_verdict`)."""
    from core.memory import estimate, over_budget, preset_params, rollout_rows
    from core.params import read_raw
    from flows.train import train
    from models import grpo

    folder = ensure_inputs(work, gpu, shape)
    params = preset_check_params(folder, method, recipe, use_vllm=use_vllm, steps=steps,
                                 full_step=full_step)
    card = None
    if gpu:
        import torch

        card = torch.cuda.get_device_properties(0).total_memory / GIB
    est = estimate(params, method, gpu_memory_gib=card)
    try:  # the preset as shipped, for the record (its held-out evaluation has its own settings)
        as_shipped = preset_params(read_raw(ROOT / "params.yaml"), recipe, use_vllm=use_vllm)
        shipped = f"{estimate(as_shipped, method, gpu_memory_gib=card).total:.1f} GiB"
    except Exception as e:  # noqa: BLE001 - a line of the record, not the check
        shipped = f"? ({type(e).__name__})"
    bound, g = rollout_rows(params, method), params.method_grpo(method)
    label = _preset_line(method, use_vllm)
    if watch is None:
        watch = Watch(measure=True)
        watch.hook(grpo)
    sizes: list[int] = []
    error: BaseException | None = None
    t0 = time.time()
    with generate_calls(sizes), PeakMemory(gpu) as peak:
        try:
            summary = train(params, method, 0)
        except Exception as e:  # the lines below say what happened
            error, summary = e, {"steps": 0}
    history = watch.trainer.state.log_history if watch.trainer else []
    watch.release()
    losses = [h["loss"] for h in history if "loss" in h]
    shape_note = (f"{g.prompts_per_step} prompts x {g.num_generations}, {g.max_completion_length} tokens, "
                  f"{g.gradient_accumulation_steps} micro-batches, {g.steps_per_generation} per rollout call")
    memory = (f"peak {peak.gib:.1f} GiB ({peak.detail()}); estimate {est.total:.1f} GiB, its peak "
              f"phase {est.peak_phase}; {recipe} as shipped {shipped}")
    if error is not None:
        report(False, f"{label}: trains", f"{type(error).__name__}: {str(error)[:400]} [at {where(error)}]; "
               f"{shape_note}; {memory}")
    else:
        ok = summary["steps"] == steps and bool(losses) and all(math.isfinite(x) for x in losses)
        bounds = "".join(f", {k} {getattr(params.resolve(method).cfg, k)}"
                         for k in ("rows_per_pass", "rows_per_generate")
                         if getattr(params.resolve(method).cfg, k, None) is not None)
        report(ok, f"{label}: trains", f"loss {losses} after {summary['steps']} steps in "
               f"{time.time() - t0:.0f} s; {shape_note}{bounds}"
               + ("" if decide_memory else f"; {memory} (not decided)"))
    ok, detail = calls_verdict(sizes, bound)
    report(ok, f"{label}: rollout calls bounded", detail)
    if decide_memory:
        oom = f"{type(error).__name__} [at {where(error)}]" if error is not None and is_oom(error) else None
        ok, detail = memory_verdict(peak.gib, est.total, error=oom)
        over = over_budget(params, [method], gpu_memory_gib=card) if card else []
        report(ok, f"{label}: peak memory vs estimate", f"{detail}; {peak.detail()}; estimate's peak "
               f"phase {est.peak_phase}; {recipe} as shipped {shipped}"
               + (f"; over this card: {over[0]}" if over else ""))
    error = None  # its traceback holds the failed step's tensors
    if gpu:
        import gc

        import torch

        gc.collect()
        torch.cuda.empty_cache()


def engine_logprobs(llm, prompt: list[int], completion: list[int]) -> list[float]:
    """vLLM's log-probability of each completion token after `prompt` (its prompt log-probs)."""
    from vllm import SamplingParams

    out = llm.generate([{"prompt_token_ids": prompt + completion}],
                       SamplingParams(max_tokens=1, prompt_logprobs=0), use_tqdm=False)[0]
    return [next(iter(d.values())).logprob for d in out.prompt_logprobs[len(prompt):]]


def policy_logprobs(model, prompt: list[int], completion: list[int]) -> list[float]:
    """The model's log-probability of each completion token after `prompt` (bf16 autocast on a
    GPU, as the trainer computes)."""
    import torch

    from core.devices import autocast

    device = next(model.parameters()).device
    with torch.no_grad(), autocast(device):
        logits = model(torch.tensor([prompt + completion], device=device)).logits[0, :-1].float()
    lp = torch.log_softmax(logits, -1)[len(prompt) - 1:]
    return lp[torch.arange(len(completion), device=device), torch.tensor(completion, device=device)].tolist()


def check_vllm_sync(work: Path, gpu: bool = True) -> None:
    """Colocate rollouts for two steps of a reward with a spread in every group, at a learning rate
    that moves the policy; then TRL's sync, and vLLM's log-probabilities of a fixed completion
    against the policy's (tests/test_vllm.py's check, on the GPU with TRL's own sync)."""
    import models.grpo as grpo
    from core import paths
    from flows.train import task_rows
    from models.policy import load_policy

    folder = ensure_inputs(work, gpu)
    g = smoke_params(folder, use_vllm=True).method_grpo("rlvr").model_copy(update={
        "use_vllm": True, "vllm_mode": "colocate", "max_steps": 2, "save_steps": 100,
        "prompts_per_step": 4, "num_generations": 4, "gradient_accumulation_steps": 1,
        "steps_per_generation": None, "learning_rate": SYNC_LR, "weight_decay": 0.0,
        "logging_steps": 1})
    rows = [{"prompt": r["prompt"]} for r in task_rows(paths.PREPARED, "arith")[:16]]

    def alternating(completions, **_):  # a spread in every group: the advantages move the policy
        return [float(i % 2) for i in range(len(completions))]

    seen: dict = {}
    real = grpo._vllm_everywhere
    grpo._vllm_everywhere = lambda trainer: seen.update(t=trainer) or real(trainer)
    sizes: list[int] = []
    try:
        with eager_engines(gpu), generate_calls(sizes):
            grpo.train(folder, rows, [alternating], g, seed=0, output_dir=work / "sync")
    except Exception as e:
        report(False, "vllm colocate rollouts", f"{type(e).__name__}: {str(e)[:400]} [at {where(e)}]")
        report(None, "vllm weight sync", "the training failed")
        return
    finally:
        grpo._vllm_everywhere = real
    trainer = seen.get("t")
    gen = getattr(trainer, "vllm_generation", None)
    report(gen is not None and gen.mode == "colocate" and len(sizes) == 2, "vllm colocate rollouts",
           f"{len(sizes)} rollout calls of {sizes} rows through vLLM "
           f"({'colocate' if gen is not None else 'no engine'})")
    if gen is None:
        report(None, "vllm weight sync", "no colocated engine")
        return
    tok = trainer.processing_class
    prompt = tok(rows[0]["prompt"], add_special_tokens=False)["input_ids"]
    completion = tok(FIXED_COMPLETION, add_special_tokens=False)["input_ids"]
    before = engine_logprobs(gen.llm, prompt, completion)  # the weights of the last rollout
    gen.sync_weights()
    after = engine_logprobs(gen.llm, prompt, completion)
    policy = trainer.accelerator.unwrap_model(trainer.model)
    mine = policy_logprobs(policy, prompt, completion)
    base, _ = load_policy(folder, device=next(policy.parameters()).device)
    theirs = policy_logprobs(base, prompt, completion)

    def gap(a: list[float], b: list[float]) -> float:
        return max(abs(x - y) for x, y in zip(a, b))

    ok, detail = sync_verdict(gap(after, mine), gap(mine, theirs))
    report(ok, "vllm weight sync", f"{detail}; the sync moved vLLM {gap(after, before):.3f} nats "
           f"({len(completion)} tokens)")


def check_ddp(work: Path, gpu: bool = True) -> None:
    """`accelerate launch` of `ddp_worker` on 2 processes (NCCL; gloo on the CPU, a dry run of
    the same code); their result files decide."""
    import shutil

    ensure_inputs(work, gpu)
    out = work / "ddp"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    config = "multi_gpu.yaml" if gpu else "cpu_2proc.yaml"
    cmd = [sys.executable, "-m", "accelerate.commands.accelerate_cli", "launch", "--config_file",
           str(ROOT / "configs/accelerate" / config), "--num_processes", "2",
           str(Path(__file__).resolve()), "--run-check", "ddp_worker", "--work", str(work)]
    rc = subprocess.call(cmd, cwd=ROOT)
    results = [json.loads(p.read_text()) for p in sorted(out.glob("rank*.json"))]
    ok, detail = ddp_verdict(results)
    report(ok, "ddp_timeout", f"{detail}; launch exit code {rc}")


def ddp_worker(work: Path) -> None:
    """One rank of `ddp_timeout`: torch's default timeout cut short, rank 0's first held-out
    evaluation made to last `HELDOUT_WAIT_S`, one step of the train stage on 2 processes."""
    from datetime import timedelta

    import torch.distributed.distributed_c10d as c10d

    short = timedelta(seconds=SHORT_DEFAULT_S)
    c10d.default_pg_timeout, c10d.default_pg_nccl_timeout = short, short
    import evals.suite as suite
    from core import ranks
    from flows.train import train

    original, calls = suite.evaluate_policy, []

    def slow(*a, **k):
        if not calls:
            time.sleep(HELDOUT_WAIT_S)
        calls.append(1)
        return original(*a, **k)

    suite.evaluate_policy = slow
    rank = int(os.environ.get("RANK", "0"))
    result: dict = {"rank": rank}
    try:
        summary = train(ddp_params(model_folder(work, "smoke")), "rlvr", 0, num_processes=2)
        result.update(ok=True, timeout_s=ranks.timeout_s(), steps=summary.get("steps"),
                      heldout_calls=len(calls))
    except Exception as e:  # noqa: BLE001 - the result file says what happened
        result.update(ok=False, timeout_s=ranks.timeout_s(), error=f"{type(e).__name__}: {e}"[:300])
    (work / "ddp" / f"rank{rank}.json").write_text(json.dumps(result))
    sys.stdout.flush()
    os._exit(0)  # no teardown: a rank whose peer failed must not hang in destroy_process_group


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(port: int, server: subprocess.Popen, timeout_s: float) -> bool:
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                if r.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(2)
    return False


def check_server(work: Path) -> None:
    """A server on the second visible GPU, then two trainings on the first, one after the other,
    each in a process of its own (`server_train`), as two pipeline stages would use it."""
    import shlex

    import torch

    folder = ensure_inputs(work, gpu=True)
    trainer_gpu, server_gpu = visible_gpus(os.environ, torch.cuda.device_count())[:2]
    port, group_port = _free_port(), _free_port()
    cmd = server_launch(folder, port, vllm_python(os.environ))
    log = (work / "vllm_server.log").open("w")
    # In this check's process group: the parent, stopping the check, stops the server with it.
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                              env={**os.environ, "CUDA_VISIBLE_DEVICES": server_gpu})
    try:
        t0 = time.time()
        up = _healthy(port, server, SERVER_START_S)
        tail = "" if up else " | ".join((work / "vllm_server.log").read_text().splitlines()[-3:])
        report(up, "vllm server: starts", f"{'up' if up else 'not up'} in {time.time() - t0:.0f} s on "
               f"GPU {server_gpu}: {shlex.join(cmd)}" + (f"; log: {tail}" if tail else ""))
        names = ("vllm server: a training through it", "vllm server: reused by a second training")
        for seed, name in enumerate(names):
            if not up:
                report(None, name, "the server did not start")
                continue
            result = work / f"server_train{seed}.json"
            rc = subprocess.call([sys.executable, str(Path(__file__).resolve()), "--run-check",
                                  "server_train", "--work", str(work), "--seed", str(seed),
                                  "--port", str(port), "--group-port", str(group_port)],
                                 cwd=ROOT, env={**os.environ, "CUDA_VISIBLE_DEVICES": trainer_gpu})
            r = json.loads(result.read_text()) if result.exists() else {"error": f"exit code {rc}"}
            losses = r.get("losses") or []
            report(bool(r.get("ok")) and bool(losses) and all(math.isfinite(x) for x in losses)
                   and r.get("vllm_calls", 0) > 0, name,
                   r.get("error") or f"loss {losses}, {r.get('vllm_calls')} generate calls to the server")
    finally:
        server.terminate()  # the API server shuts its engine down on SIGTERM
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def server_train(work: Path, seed: int, port: int, group_port: int) -> None:
    """One training of `vllm_server`: 1 step of rlvr, rollouts from the server; a result file."""
    from flows.train import train
    from models import grpo

    watch = Watch()
    watch.hook(grpo)
    result: dict = {"seed": seed}
    try:
        train(server_params(model_folder(work, "smoke"), port, group_port), "rlvr", seed)
        history = watch.trainer.state.log_history if watch.trainer else []
        result.update(ok=True, losses=[h["loss"] for h in history if "loss" in h],
                      vllm_calls=watch.vllm_calls)
    except Exception as e:  # noqa: BLE001 - the result file says what happened
        result.update(ok=False, error=f"{type(e).__name__}: {str(e)[:300]} [at {where(e)}]")
    (work / f"server_train{seed}.json").write_text(json.dumps(result))


def run_check(args) -> int:
    """The body of one check, in this process (the parent started it)."""
    work, gpu = args.work.resolve(), not args.cpu
    redirect_paths(work)
    name = args.run_check
    if name in CHECK_NAMES:  # every check trains from scratch, even in a --work used before
        import shutil

        from core import paths

        for folder in (paths.DATA / "checkpoints", work / "sync"):
            shutil.rmtree(folder, ignore_errors=True)
    if name == "env":
        check_env(work)
    elif name in ("preset_rlvr", "preset_rlvr_vllm"):
        check_preset(work, "rlvr", use_vllm=name.endswith("vllm"), gpu=gpu, recipe=args.recipe,
                     steps=args.preset_steps, full_step=args.full_step, decide_memory=True)
    elif name in ("confidence", "rlcer_bounded"):
        from models import grpo

        watch = Watch(measure=True)
        watch.hook(grpo)
        for method in ("self_certainty", "entropy") if name == "confidence" else ("rlcer",):
            check_preset(work, method, use_vllm=False, gpu=gpu, recipe=args.recipe,
                         steps=args.preset_steps, full_step=args.full_step, watch=watch)
    elif name == "vllm_sync":
        check_vllm_sync(work, gpu)
    elif name == "smoke":
        check_smoke(work, gpu, args.shape, args.methods)
    elif name == "ddp_timeout":
        check_ddp(work, gpu)
    elif name == "ddp_worker":
        ddp_worker(work)
    elif name == "vllm_server":
        check_server(work)
    elif name == "server_train":
        server_train(work, args.seed, args.port, args.group_port)
    fails_file(work, name).write_text(json.dumps(FAILS))  # the names, for the parent's last line
    return min(len(FAILS), 100)


def fails_file(work: Path, name: str) -> Path:
    (work / "fails").mkdir(parents=True, exist_ok=True)
    return work / "fails" / f"{name}.json"


# --- The parent: the plan, one process per check, the budget -------------------------------------

class Outcome(NamedTuple):
    name: str
    word: str       # PASS | FAIL | SKIP
    seconds: float
    note: str = ""


def run_child(argv: list[str], limit_s: float | None,
              names: Path | None = None) -> tuple[int | None, list[str], float]:
    """Run this script with `argv` in a session of its own, its lines passed through as they come;
    stopped (with everything it started) after `limit_s`. (exit code, None when stopped; its
    FAILs, named from the file `names` it writes at its end, else one per FAIL line; seconds)."""
    t0 = time.monotonic()
    if names is not None:
        names.unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), *argv], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True, bufsize=1, start_new_session=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    fails: list[str] = []

    def relay() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(line, end="", flush=True)
            if line.startswith("FAIL "):
                fails.append(line[5:].split(":", 1)[0])

    reader = threading.Thread(target=relay, daemon=True)
    reader.start()
    try:
        rc: int | None = proc.wait(timeout=limit_s)
    except subprocess.TimeoutExpired:
        # SIGTERM first: torchrun (ddp_timeout) stops its workers, which it starts in sessions of
        # their own, and a vLLM server its engine; then SIGKILL for whatever is left.
        for sig, grace in ((signal.SIGTERM, 15), (signal.SIGKILL, None)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(grace)
                break
            except subprocess.TimeoutExpired:
                continue
        rc = None
    reader.join(timeout=10)
    if names is not None and names.exists():
        fails = json.loads(names.read_text())
    return rc, fails, time.monotonic() - t0


def child_argv(args, name: str, work: Path) -> list[str]:
    argv = ["--run-check", name, "--work", str(work), "--shape", args.shape, "--recipe", args.recipe,
            "--preset-steps", str(args.preset_steps)]
    argv += ["--cpu"] if args.cpu else []
    argv += ["--full-step"] if args.full_step else []
    argv += ["--methods", *args.methods] if args.methods else []
    return argv


def orchestrate(args, work: Path) -> int:
    start = time.monotonic()
    gpu = not args.cpu
    budget = resolve_budget(args.budget_s, gpu)

    def left() -> float | None:
        return None if budget is None else budget - (time.monotonic() - start)

    env: dict = {"gpus": 0, "vllm": "--cpu", "card_gib": None}
    if gpu:
        rc, fails, seconds = run_child(["--run-check", "env", "--work", str(work)], 120,
                                       fails_file(work, "env"))
        FAILS.extend(fails)
        print(f"TIME env: {seconds:.0f} s", flush=True)
        if (work / "env.json").exists():
            env = json.loads((work / "env.json").read_text())
        if not env.get("gpus"):
            if not fails:
                report(False, "cuda", f"the GPU probe ended with exit code {rc}")
            return finish()
    print(f"smoke: {work} ({'GPU' if gpu else 'CPU'}, {env['gpus']} GPU(s), vLLM "
          f"{'on' if gpu and not env['vllm'] else 'off'}, budget "
          f"{'none' if budget is None else f'{budget:.0f} s'})", flush=True)
    outcomes: list[Outcome] = []
    for check, reason in plan(args.checks, gpu=gpu, gpus=env["gpus"], vllm_reason=env["vllm"]):
        limit = None
        if reason is None:
            limit, reason = time_limit(check, left(), gpu)
        if reason is not None:
            for line in check.lines:
                report(None, line, reason)
            outcomes.append(Outcome(check.name, "SKIP", 0.0, reason))
            continue
        rc, fails, seconds = run_child(child_argv(args, check.name, work), limit,
                                       fails_file(work, check.name))
        FAILS.extend(fails)
        if rc is None:
            report(False, f"{check.name}: within its time", f"stopped after {seconds:.0f} s "
                   f"(its limit {limit:.0f} s: cap {check.cap_s:.0f} s or the budget left)")
        elif rc != 0 and not fails:
            report(False, f"{check.name}: exits", f"exit code {rc} without a FAIL line (a crash: "
                   "its output above)")
        word = "FAIL" if fails or rc != 0 else "PASS"
        outcomes.append(Outcome(check.name, word, seconds))
        rest = left()
        print(f"TIME {check.name}: {seconds:.0f} s (expected {check.expected_s:.0f} s, limit "
              f"{'none' if limit is None else f'{limit:.0f} s'}"
              + ("" if rest is None else f"; {max(rest, 0):.0f} s of the budget left") + ")", flush=True)
    print("checks: " + ", ".join(f"{o.name} {o.word}" + (f" {o.seconds:.0f} s" if o.word != "SKIP" else "")
                                 for o in outcomes), flush=True)
    elapsed = time.monotonic() - start
    if gpu and budget is None:
        report(None, "total time", f"{elapsed:.0f} s (--budget-s 0: no limit)")
    else:
        report(*time_check(elapsed, gpu, limit_s=budget or DEFAULT_BUDGET_S))
    return finish()


def measure_main(args, work: Path) -> int:
    """`--measure`: a preset's GRPO recipe for N steps, in this process (no plan, no budget)."""
    import torch

    gpu = not args.cpu
    if gpu and not torch.cuda.is_available():
        report(False, "cuda", "no GPU visible (run with --cpu on a CPU machine)")
        return 1
    use_vllm = False
    if gpu:
        from models.vllm_engine import unavailable

        reason = unavailable()
        use_vllm = reason is None
        report(use_vllm, "vllm installed", "vLLM importable" if use_vllm else
               f"{reason}; docs/gpu.md, Install; rollouts fall back to transformers")
        report(torch.cuda.is_bf16_supported(), "bf16", torch.cuda.get_device_name(0))
    from models import grpo

    params = measure_params(model_folder(work, args.shape), use_vllm, args.measure, args.recipe,
                            args.steps_per_generation)
    folder = ensure_inputs(work, gpu, args.shape)
    print(f"smoke: {work} ({'GPU' if gpu else 'CPU'}, vLLM {'on' if use_vllm else 'off'})", flush=True)
    watch = Watch(measure=True)
    watch.hook(grpo)
    train_methods(params, args.methods or ["rlvr"], folder, gpu, use_vllm, watch, measure=True)
    return finish()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu", action="store_true", help="run on the CPU without vLLM")
    ap.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temporary one)")
    ap.add_argument("--budget-s", type=float, default=None, metavar="S",
                    help=f"seconds the whole run may take (default {DEFAULT_BUDGET_S:.0f} on a GPU, "
                         "none with --cpu; 0: no limit): a check starts only if its expected time fits")
    ap.add_argument("--checks", nargs="+", default=None, choices=CHECK_NAMES, metavar="NAME",
                    help=f"checks to run, in their order of importance (default: all): {' '.join(CHECK_NAMES)}")
    ap.add_argument("--list", action="store_true", help="print the checks in order, what each asserts")
    ap.add_argument("--shape", choices=["smoke", "qwen3-0.6b"], default="smoke",
                    help="the smoke's random model (default: small; qwen3-0.6b: Qwen3-0.6B's config); "
                         "the preset checks always use qwen3-0.6b")
    ap.add_argument("--recipe", default=RECIPE, help="the preset of the preset checks and of --measure")
    ap.add_argument("--preset-steps", type=int, default=PRESET_STEPS, metavar="N",
                    help="steps of each preset check")
    ap.add_argument("--full-step", action="store_true",
                    help="the preset checks train the preset's whole optimiser step, not one rollout call's")
    ap.add_argument("--measure", metavar="STEPS", type=int, default=0,
                    help="instead of the smoke: train STEPS steps with a preset's GRPO recipe "
                         "(--recipe) and print seconds per step and peak memory per method")
    ap.add_argument("--steps-per-generation", type=int, default=None, metavar="N",
                    help="with --measure: micro-batches per rollout call (grpo.steps_per_generation; "
                         "default: the recipe's)")
    ap.add_argument("--methods", nargs="+", default=None, choices=METHODS,
                    help=f"the smoke's methods (default: {' '.join(METHODS)}; with --measure: rlvr)")
    ap.add_argument("--run-check", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--group-port", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.list:
        for i, c in enumerate(CHECKS, 1):
            needs = ", ".join(x for x in ("GPU" if c.gpu else "", "vLLM" if c.vllm else "",
                                          f"{c.gpus} GPUs" if c.gpus > 1 else "") if x) or "CPU or GPU"
            print(f"{i}. {c.name} ({needs}; about {c.expected_s:.0f} s, cap {c.cap_s:.0f} s): {c.asserts}")
        return 0
    if args.run_check:
        return run_check(args)
    work = (args.work or Path(tempfile.mkdtemp(prefix="gpu-smoke-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    redirect_paths(work)
    if args.measure:
        return measure_main(args, work)
    return orchestrate(args, work)


if __name__ == "__main__":
    sys.exit(main())
