"""`make gpu-smoke`'s plan, budget and verdicts (scripts/gpu_smoke.py; issue 66, "What to build" 3).

No GPU here: these are the pure parts that decide what a GPU run checks and how it reads the
result. The checks' order of importance, the reason each one SKIPs on a CPU, on one GPU or without
vLLM, the time each may take within the budget, the PASS/FAIL of a measured peak against
`core.memory.estimate`, of the weight sync, of the rollout calls' bound and of the two ranks. The
--cpu run itself is tests/test_gpu_path.py's slow test.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RECIPE = "qwen3_0p6b_1gpu"
# Qwen3-0.6B's config.json: what the smoke's random model has at `--shape qwen3-0.6b`, so the
# estimate reads the same shape from the folder as from the preset's /models/Qwen3-0.6B.
QWEN3_0P6B_CONFIG = {"model_type": "qwen3", "num_hidden_layers": 28, "hidden_size": 1024,
                     "intermediate_size": 3072, "num_attention_heads": 16, "num_key_value_heads": 8,
                     "head_dim": 128, "vocab_size": 151936, "tie_word_embeddings": True}


@pytest.fixture(scope="module")
def smoke():
    """scripts/gpu_smoke.py as a module (scripts/ is not a package), loaded as the slow test does."""
    spec = importlib.util.spec_from_file_location("gpu_smoke_checks_under_test", ROOT / "scripts/gpu_smoke.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def qwen3_0p6b(tmp_path):
    folder = tmp_path / "qwen3-0.6b"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(QWEN3_0P6B_CONFIG))
    return folder


# --- the plan --------------------------------------------------------------------------------------

def test_the_checks_run_in_order_of_importance_the_rlvr_preset_first(smoke):
    assert smoke.CHECK_NAMES == ("preset_rlvr", "preset_rlvr_vllm", "confidence", "rlcer_bounded",
                                 "vllm_sync", "smoke", "ddp_timeout", "vllm_server")
    # Asked in another order, they still run in this one.
    chosen = smoke.plan(["smoke", "preset_rlvr"], gpu=True, gpus=1, vllm_reason=None)
    assert [c.name for c, _ in chosen] == ["preset_rlvr", "smoke"]


def test_with_cpu_only_the_first_smoke_runs_and_every_gpu_check_says_why_not(smoke):
    chosen = smoke.plan(None, gpu=False, gpus=0, vllm_reason="--cpu")
    reasons = {c.name: r for c, r in chosen}
    assert reasons.pop("smoke") is None
    assert all(r.startswith("--cpu: GPU-only") for r in reasons.values()), reasons
    assert "Qwen3-0.6B" in reasons["preset_rlvr"]
    assert "tests/test_gpu_infra_ranks.py" in reasons["ddp_timeout"]  # where the CPU's version is
    assert "tests/test_vllm.py" in reasons["vllm_sync"]


def test_on_one_gpu_the_two_gpu_checks_skip_and_without_vllm_the_vllm_checks_skip(smoke):
    one = dict(smoke.plan(None, gpu=True, gpus=1, vllm_reason=None))
    assert {c.name for c, r in one.items() if r} == {"ddp_timeout", "vllm_server"}
    assert {r for r in one.values() if r} == {"needs 2 GPUs, 1 visible"}
    without = {c.name: r for c, r in smoke.plan(None, gpu=True, gpus=1, vllm_reason="vLLM is not installed")}
    for name in ("preset_rlvr_vllm", "vllm_sync"):
        assert without[name] == "vLLM unavailable: vLLM is not installed"
    # The rlvr preset without vLLM (the configuration that ran out of memory) runs regardless.
    assert without["preset_rlvr"] is None and without["confidence"] is None
    two = smoke.plan(None, gpu=True, gpus=2, vllm_reason=None)
    assert all(r is None for _, r in two)


def test_every_check_has_result_lines_and_a_time_within_its_cap(smoke):
    for c in smoke.CHECKS:
        assert c.lines and c.asserts and 0 < c.expected_s <= c.cap_s, c.name


# --- the budget ------------------------------------------------------------------------------------

def test_the_budget_is_eight_minutes_on_a_gpu_and_none_on_a_cpu_unless_asked(smoke):
    assert smoke.resolve_budget(None, gpu=True) == 480.0
    assert smoke.resolve_budget(None, gpu=False) is None  # the slow test's --cpu run: no clock
    assert smoke.resolve_budget(300, gpu=False) == 300.0
    assert smoke.resolve_budget(0, gpu=True) is None


def test_a_check_starts_only_if_its_expected_time_fits_and_stops_at_what_is_left(smoke):
    preset = smoke.CHECKS[0]  # expected 90 s, cap 240 s
    assert smoke.time_limit(preset, 480.0, gpu=True) == (240.0, None)   # its cap
    assert smoke.time_limit(preset, 100.0, gpu=True) == (95.0, None)    # what is left, less 5 s
    limit, reason = smoke.time_limit(preset, 90.0, gpu=True)
    assert limit is None and reason.startswith("budget: about 90 s needed, 85 s left")
    assert "--checks preset_rlvr" in reason                             # how to run it alone
    assert smoke.time_limit(preset, None, gpu=True) == (240.0, None)    # no budget: the cap holds
    assert smoke.time_limit(preset, None, gpu=False) == (None, None)    # a CPU: nothing is capped


def walk(smoke, budget: float, gpus: int, vllm_reason: str | None, took: dict[str, float] | None = None):
    """The parent's loop with each check taking its expected time (or `took`): (ran, skipped, s)."""
    left, ran, skipped = budget, [], []
    for check, reason in smoke.plan(None, gpu=True, gpus=gpus, vllm_reason=vllm_reason):
        limit = None
        if reason is None:
            limit, reason = smoke.time_limit(check, left, gpu=True)
        if reason:
            skipped.append(check.name)
            continue
        spent = min((took or {}).get(check.name, check.expected_s), limit)
        left -= spent
        ran.append(check.name)
    return ran, skipped, budget - left


def test_the_default_budget_runs_the_most_important_checks_and_stays_under_it(smoke):
    """With the expected times (guesses until a GPU run measures them), one GPU with vLLM: the
    rlvr preset with and without vLLM and the confidence rewards first; RLCER (170 s) does not fit
    what is left, the shorter sync check does; the run ends within 480 s whatever the checks take,
    since each is stopped at what is left."""
    ran, skipped, spent = walk(smoke, 480.0, gpus=1, vllm_reason=None)
    assert ran[:3] == ["preset_rlvr", "preset_rlvr_vllm", "confidence"]
    assert "rlcer_bounded" in skipped and spent <= 480
    # Faster checks than guessed leave room for the rest, in order.
    quick = {name: 40.0 for name in smoke.CHECK_NAMES}
    ran, skipped, _ = walk(smoke, 480.0, gpus=1, vllm_reason=None, took=quick)
    assert ran == ["preset_rlvr", "preset_rlvr_vllm", "confidence", "rlcer_bounded", "vllm_sync", "smoke"]
    assert skipped == ["ddp_timeout", "vllm_server"]  # one GPU
    # Slower ones are stopped at what is left: the total never passes the budget.
    slow = {name: 10_000.0 for name in smoke.CHECK_NAMES}
    assert walk(smoke, 480.0, gpus=2, vllm_reason=None, took=slow)[2] <= 480
    # Without vLLM on one GPU, (1) and (2) of the issue fit the default budget at the guesses.
    ran, _, spent = walk(smoke, 480.0, gpus=1, vllm_reason="vLLM is not installed")
    assert ran[:3] == ["preset_rlvr", "confidence", "rlcer_bounded"] and spent <= 480


def test_the_total_time_line_is_checked_against_the_budget_on_a_gpu_only(smoke):
    assert smoke.time_check(470.0, gpu=True, limit_s=480.0)[0] is True
    assert smoke.time_check(490.0, gpu=True, limit_s=480.0)[0] is False
    assert smoke.time_check(5000.0, gpu=False, limit_s=480.0)[0] is None


# --- the verdicts ----------------------------------------------------------------------------------

def test_a_peak_within_the_estimate_and_its_tolerance_passes_above_it_or_out_of_memory_fails(smoke):
    assert smoke.MEMORY_TOLERANCE == 0.10
    ok, detail = smoke.memory_verdict(21.3, 25.6)
    assert ok and detail == "peak 21.3 GiB, estimate 25.6 GiB (83%; FAIL above 28.2 GiB)"
    assert smoke.memory_verdict(28.16, 25.6)[0] is True    # at 110%: within
    assert smoke.memory_verdict(28.2, 25.6)[0] is False    # above it
    # The H100 record: out of memory with 76.26 GiB allocated; whatever the numbers, a FAIL.
    ok, detail = smoke.memory_verdict(76.26, 90.0, error="OutOfMemoryError [at ...]")
    assert not ok and detail.startswith("out of memory: OutOfMemoryError")


def test_the_weight_sync_passes_when_vllm_matches_the_policy_that_moved_from_the_base(smoke):
    assert smoke.SYNC_TOL_NATS == 0.1
    assert smoke.sync_verdict(0.03, 2.0)[0] is True
    assert smoke.sync_verdict(0.5, 2.0)[0] is False    # vLLM kept other weights
    ok, detail = smoke.sync_verdict(0.01, 0.08)        # the policy barely moved: cannot tell
    assert not ok and "nothing to tell" in detail


def test_the_rollout_calls_pass_at_or_under_the_presets_bound(smoke):
    assert smoke.calls_verdict([72, 72], 72)[0] is True
    assert smoke.calls_verdict([32, 32, 8], 32)[0] is True    # RLCER: reasoner chunks, rubricator
    assert smoke.calls_verdict([576], 72)[0] is False         # a step's rollouts in one call
    assert smoke.calls_verdict([], 72)[0] is None


def test_the_two_ranks_pass_when_both_finish_on_the_configured_timeout(smoke):
    rank0 = {"rank": 0, "ok": True, "timeout_s": 300.0, "steps": 1}
    rank1 = {"rank": 1, "ok": True, "timeout_s": 300.0}
    assert smoke.ddp_verdict([rank0, rank1])[0] is True
    assert smoke.ddp_verdict([rank0, {**rank1, "timeout_s": 20.0}])[0] is False  # torch's default
    assert smoke.ddp_verdict([rank0])[0] is False                                # rank 1 killed
    assert smoke.ddp_verdict([rank0, {"rank": 1, "ok": False, "error": "watchdog"}]) == (False, "rank 1: watchdog")


# --- the settings each check trains with ---------------------------------------------------------

def test_a_preset_check_trains_one_rollout_call_of_the_presets_shape(smoke, qwen3_0p6b):
    """rlvr: the preset's micro-batch (6 prompts x 6) and rollout call (2 micro-batches, 72 rows),
    2 of its 16 micro-batches per step; the estimate, which counts one call and one micro-batch,
    is the whole step's; no checkpoint before the end; vLLM as asked."""
    from core.memory import estimate, rollout_rows

    for use_vllm in (False, True):
        p = smoke.preset_check_params(qwen3_0p6b, "rlvr", use_vllm=use_vllm)
        full = smoke.preset_check_params(qwen3_0p6b, "rlvr", use_vllm=use_vllm, full_step=True)
        g, gf = p.method_grpo("rlvr"), full.method_grpo("rlvr")
        assert (gf.prompts_per_step, gf.gradient_accumulation_steps, gf.steps_per_generation) == (96, 16, 2)
        assert (g.prompts_per_step, g.gradient_accumulation_steps, g.steps_per_generation) == (12, 2, 2)
        assert (g.num_generations, g.max_completion_length, g.gradient_checkpointing) == (6, 512, True)
        assert (g.max_steps, g.use_vllm, g.vllm_mode) == (2, use_vllm, "colocate")
        assert g.save_steps > g.max_steps and p.methods == ["rlvr"]
        assert rollout_rows(p, "rlvr") == rollout_rows(full, "rlvr") == 72
        assert estimate(p, "rlvr", gpu_memory_gib=79.0) == estimate(full, "rlvr", gpu_memory_gib=79.0)
    # Without vLLM the rollouts set the peak; at Qwen3-0.6B's size it fits the 79 GiB card.
    e = estimate(smoke.preset_check_params(qwen3_0p6b, "rlvr", use_vllm=False), "rlvr", gpu_memory_gib=79.0)
    assert e.peak_phase == "generation" and e.total < 79


def test_the_confidence_and_rlcer_checks_carry_the_presets_bounds(smoke, qwen3_0p6b):
    from core.memory import estimate, rollout_rows
    from core.params import load

    preset = load(preset=RECIPE)
    for method in ("self_certainty", "entropy"):
        p = smoke.preset_check_params(qwen3_0p6b, method, use_vllm=False)
        bound = p.resolve(method).cfg.rows_per_pass
        assert bound is not None and bound == preset.resolve(method).cfg.rows_per_pass
        assert p.method_grpo(method).max_steps == 2 and not p.method_grpo(method).use_vllm
        assert rollout_rows(p, method) == 72 > bound  # the passes really are cut
    p = smoke.preset_check_params(qwen3_0p6b, "rlcer", use_vllm=False)
    cfg, g = p.resolve("rlcer").cfg, p.method_grpo("rlcer")
    shipped = preset.resolve("rlcer").cfg
    assert cfg.rows_per_generate == shipped.rows_per_generate == 32
    assert cfg.max_rubric_tokens == shipped.max_rubric_tokens and cfg.verifier == str(qwen3_0p6b)
    assert (g.prompts_per_step, g.num_generations, g.max_completion_length) == (4, 8, 1024)
    assert (g.gradient_accumulation_steps, g.steps_per_generation, g.use_vllm) == (2, 2, False)
    assert rollout_rows(p, "rlcer") == 32  # one call at the bound, as the preset's calls are cut
    full = smoke.preset_check_params(qwen3_0p6b, "rlcer", use_vllm=False, full_step=True)
    assert estimate(p, "rlcer", gpu_memory_gib=79.0).total <= estimate(full, "rlcer", gpu_memory_gib=79.0).total


def test_one_call_step_keeps_the_micro_batch_and_the_call(smoke):
    assert smoke.one_call_step(96, 16, 2, 6) == {
        "prompts_per_step": 12, "gradient_accumulation_steps": 2, "steps_per_generation": 2}
    assert smoke.one_call_step(96, 16, None, 6)["gradient_accumulation_steps"] == 16  # no bound: the step
    assert smoke.one_call_step(32, 16, 4, 8, rows_bound=32)["steps_per_generation"] == 2
    assert smoke.one_call_step(96, 4, 2, 6, num_processes=4) == {  # 4 ranks: each keeps 6 prompts
        "prompts_per_step": 48, "gradient_accumulation_steps": 2, "steps_per_generation": 2}


def test_the_two_process_check_outlasts_a_short_default_on_its_configured_timeout(smoke, tmp_path):
    from models.grpo import per_device_prompts

    p = smoke.ddp_params(tmp_path)
    g = p.method_grpo("rlvr")
    assert (g.num_processes, g.ddp_timeout_s, g.max_steps, g.heldout_every) == (2, smoke.DDP_TIMEOUT_S, 1, 1)
    assert smoke.SHORT_DEFAULT_S < smoke.HELDOUT_WAIT_S < smoke.DDP_TIMEOUT_S
    assert per_device_prompts(g.prompts_per_step, 2) >= 1


def test_the_server_check_trains_through_the_server_and_finds_its_environment(smoke, tmp_path, monkeypatch):
    g = smoke.server_params(tmp_path, 8123, 51300).method_grpo("rlvr")
    assert (g.use_vllm, g.vllm_mode, g.vllm_server_port, g.vllm_group_port, g.max_steps) == (
        True, "server", 8123, 51300, 1)
    assert smoke.visible_gpus({"CUDA_VISIBLE_DEVICES": "3,5"}, 8) == ["3", "5"]
    assert smoke.visible_gpus({}, 2) == ["0", "1"]
    assert smoke.vllm_python({}, tmp_path) == sys.executable  # no vLLM environment: this one
    env = tmp_path / "venv-vllm" / "bin"
    env.mkdir(parents=True)
    (env / "python").write_text("#!/bin/sh\n")
    (env / "python").chmod(0o755)
    assert smoke.vllm_python({"VLLM_ENV": str(tmp_path / "venv-vllm")}, tmp_path) == str(env / "python")
    cmd = smoke.server_launch(tmp_path, 8123, "/x/python")
    assert cmd[1:4] == ["-m", "models.vllm_engine", "serve"]  # scripts/vllm_server.sh's last line
    assert cmd[-2:] == ["--python", "/x/python"] and "--port" in cmd


# --- the parent ------------------------------------------------------------------------------------

def test_a_child_past_its_limit_is_stopped(smoke, tmp_path):
    """The env probe imports torch and vLLM: far past 0.5 s, so it is stopped, with what it started."""
    rc, fails, seconds = smoke.run_child(["--run-check", "env", "--work", str(tmp_path)], 0.5)
    assert rc is None and fails == [] and seconds < 30


def test_with_cpu_the_gpu_checks_print_their_skip_lines_and_nothing_runs(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "scripts/gpu_smoke.py"), "--cpu", "--work",
                           str(tmp_path), "--checks", "preset_rlvr", "confidence", "ddp_timeout"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [x for x in done.stdout.splitlines() if x.startswith(("PASS", "FAIL", "SKIP"))]
    assert lines == [
        "SKIP rlvr@qwen3_0p6b_1gpu: --cpu: GPU-only: GPU memory at Qwen3-0.6B's size",
        "SKIP self_certainty@qwen3_0p6b_1gpu: --cpu: GPU-only: teacher-forced logits at Qwen3-0.6B's vocabulary",
        "SKIP entropy@qwen3_0p6b_1gpu: --cpu: GPU-only: teacher-forced logits at Qwen3-0.6B's vocabulary",
        "SKIP ddp_timeout: --cpu: GPU-only: NCCL (gloo's is tests/test_gpu_infra_ranks.py)",
        lines[-1]]
    assert lines[-1].startswith("SKIP total time:")
    assert "checks: preset_rlvr SKIP, confidence SKIP, ddp_timeout SKIP" in done.stdout


def test_on_one_gpu_the_parent_runs_the_plan_in_order_within_the_budget(smoke, tmp_path, monkeypatch, capsys):
    """The parent's loop on a (pretended) GPU machine: the probe says one GPU with vLLM; each check
    takes 100 s; the first three run, then what is left covers only the sync check; a check
    stopped at its limit is a FAIL; the closing lines list each check with its time."""
    import argparse

    clock = [0.0]
    ran: list[tuple[str, float | None]] = []

    def child(argv, limit_s, names=None):
        name = argv[argv.index("--run-check") + 1]
        if name == "env":
            (tmp_path / "env.json").write_text(json.dumps({"gpus": 1, "vllm": None, "card_gib": 79.2}))
            clock[0] += 20
            return 0, [], 20.0
        ran.append((name, limit_s))
        took = min(100.0, limit_s)
        clock[0] += took
        return (None if name == "vllm_sync" else 0), [], took

    monkeypatch.setattr(smoke, "run_child", child)
    monkeypatch.setattr(smoke.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(smoke, "FAILS", [])
    args = argparse.Namespace(cpu=False, budget_s=None, checks=None, shape="smoke", recipe=RECIPE,
                              preset_steps=2, full_step=False, methods=None)
    failures = smoke.orchestrate(args, tmp_path)
    out = capsys.readouterr().out
    # A 20 s probe, 3 x 100 s: 160 s left. rlcer (170 s expected) is skipped; the sync check (70 s)
    # runs with a limit of 155 s, and the pretended child says it was stopped: a FAIL for its time.
    assert [name for name, _ in ran] == ["preset_rlvr", "preset_rlvr_vllm", "confidence", "vllm_sync"]
    assert ran[0][1] == 240.0 and ran[3][1] == 155.0  # the cap; then what is left, less 5 s
    assert "SKIP rlcer@qwen3_0p6b_1gpu: budget: about 170 s needed, 155 s left" in out
    assert "FAIL vllm_sync: within its time" in out and failures == 1
    assert "SKIP ddp_timeout: needs 2 GPUs, 1 visible" in out
    assert "TIME preset_rlvr: 100 s (expected 90 s, limit 240 s; 360 s of the budget left)" in out
    assert "checks: preset_rlvr PASS 100 s, preset_rlvr_vllm PASS 100 s, confidence PASS 100 s, " \
           "rlcer_bounded SKIP, vllm_sync FAIL 100 s, smoke SKIP, ddp_timeout SKIP, vllm_server SKIP" in out
    assert "PASS total time: 420 s (limit 480 s)" in out
