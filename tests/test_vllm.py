"""vLLM as the lab's sampler (models/vllm_engine.py): installed where it can run and importable in
CI, greedy output identical to the lab's sampler on the tiny base's test split, GRPO rollouts
through TRL's colocate mode on the CPU sampling from the updated weights after each step, the
evaluate stage and the held-out evaluations through it, and the defaults the committed benchmark
picks. The engine tests are `slow` (each builds an engine: seconds, plus vLLM's import)."""

from __future__ import annotations

import json
import os
import platform
import tempfile
from pathlib import Path

import pytest

from core.params import ROOT, load
from models import vllm_engine

BASE = ROOT / "data" / "base_model"


def _vllm_should_run_here() -> bool:
    """x86-64 Linux with AVX2: where scripts/install_vllm.sh installs vLLM's CPU build."""
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return False
    return "avx2" in Path("/proc/cpuinfo").read_text().split()


needs_vllm = pytest.mark.skipif(vllm_engine.unavailable() is not None,
                                reason=f"{vllm_engine.unavailable()}")


def test_ci_imports_vllm_where_its_cpu_build_runs():
    """`make setup` installs vLLM's CPU build on x86-64 Linux with AVX2 (scripts/install_vllm.sh),
    so there it must import: a broken install (torchvision beside the CPU torch, fastapi out of
    prefect's range) fails here, not as a skipped test. Elsewhere the reason is one line."""
    reason = vllm_engine.unavailable()
    if _vllm_should_run_here() and os.environ.get("LAB_VLLM", "1") != "0":
        assert reason is None, reason
    else:
        assert reason is None or "\n" not in reason


def test_a_missing_vllm_says_why_in_one_line(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "vllm" else real(name, *a))
    reason = vllm_engine.unavailable()
    assert reason is not None and "not installed" in reason and "\n" not in reason


def test_the_evaluate_stage_falls_back_to_the_lab_sampler_saying_why(monkeypatch):
    import flows.evaluate as evaluate

    params = load()
    params = params.model_copy(update={"eval": params.eval.model_copy(update={"sampler": "vllm"})})
    monkeypatch.setattr(vllm_engine, "unavailable", lambda: "vLLM is not installed (test)")
    said = []
    monkeypatch.setattr(evaluate.log, "warning", lambda msg, *args: said.append(msg % args))
    assert evaluate.attach_sampler(params, BASE, object()) == "lab"
    assert len(said) == 1 and "vLLM is not installed (test)" in said[0]
    assert evaluate.attach_sampler(load(), BASE, object()) == "lab"  # the default: no engine


def test_the_defaults_are_the_fastest_sampler_with_greedy_output_identical():
    """params.yaml's `eval.sampler` and `grpo.use_vllm` are what the committed benchmark
    (benchmarks/results/sampling.json) measures fastest, with greedy output identical, for the
    evaluate stage and a training's rollouts."""
    record = json.loads((ROOT / "benchmarks" / "results" / "sampling.json").read_text())
    stages = record["stages"]
    params = load()
    assert params.eval.sampler == ("vllm" if stages["evaluate"]["fastest"] == "vllm" else "lab")
    assert params.grpo.use_vllm == (stages["training"]["fastest"] == "vllm")
    for shape in record["shapes"]:
        assert "vllm_seconds" in shape, "the record has no vLLM column: python -m benchmarks.sampling"
    assert record["shapes"][2]["vllm_greedy_identical"] is True


def _test_prompts(n: int) -> list[str]:
    from core.io import read_jsonl
    from world import generate_world

    with tempfile.TemporaryDirectory() as tmp:
        generate_world(load().world, tmp)
        return [r["prompt"] for r in read_jsonl(Path(tmp) / "arith_test.jsonl")[:n]]


@pytest.mark.slow
@needs_vllm
def test_greedy_through_vllm_is_the_lab_samplers_on_the_test_split_and_sampling_is_seeded():
    """On the tiny base and its test split: vLLM's greedy completions are the lab sampler's,
    prompt for prompt; sampled ones are the same for the same seed and differ for another; a
    model with an engine attached samples through it (`models.generation.generate`)."""
    from models.generation import generate
    from models.policy import load_policy

    prompts = _test_prompts(200)
    model, tokenizer = load_policy(BASE)
    lab = generate(model, tokenizer, prompts, greedy=True, max_new_tokens=64)
    llm = vllm_engine.engine(BASE, max_model_len=model.config.max_position_embeddings)
    vllm = vllm_engine.generate(llm, tokenizer, prompts, greedy=True, max_new_tokens=64)
    assert vllm == lab
    kwargs = dict(num_samples=4, temperature=1.0, max_new_tokens=64)
    first = vllm_engine.generate(llm, tokenizer, prompts[:20], seed=3, **kwargs)
    assert vllm_engine.generate(llm, tokenizer, prompts[:20], seed=3, **kwargs) == first
    assert vllm_engine.generate(llm, tokenizer, prompts[:20], seed=4, **kwargs) != first
    assert all(len(s) == 4 for s in first)
    calls = []
    vllm_engine.attach(model, llm, sync=lambda: calls.append(1))
    assert generate(model, tokenizer, prompts[:20], seed=3, **kwargs) == first
    assert calls == [1]  # the weights are pushed before each use


@pytest.mark.slow
@needs_vllm
def test_grpo_with_vllm_rollouts_samples_from_the_updated_weights(tmp_path, monkeypatch):
    """Two GRPO steps of rlvr (its reward) with `grpo.use_vllm` on the CPU (TRL's colocate mode): the
    rollouts come from vLLM, and after the optimiser's steps the engine's log-probabilities of a
    fixed completion equal the policy's to float tolerance (they are not the base's), so vLLM
    samples the updated weights. The held-out evaluations go through the same engine."""
    import torch
    from vllm import SamplingParams

    import models.grpo as grpo
    from flows.train import make_plan, task_rows
    from models.policy import load_policy
    from world import generate_world

    generate_world(load().world, tmp_path / "prepared")
    rows = task_rows(tmp_path / "prepared", "arith")[:16]
    g = load().method_grpo("rlvr").model_copy(update={
        "use_vllm": True, "max_steps": 2, "save_steps": 100, "prompts_per_step": 4,
        "num_generations": 4, "gradient_accumulation_steps": 1, "learning_rate": 1e-3,
        "logging_steps": 1})
    seen = {}
    real = grpo._vllm_everywhere
    monkeypatch.setattr(grpo, "_vllm_everywhere", lambda trainer: seen.update(t=trainer) or real(trainer))
    model, tokenizer = load_policy(BASE, for_training=True)
    plan = make_plan(load(), "rlvr", 0, model, tokenizer)
    rollouts = []
    correct = plan.reward_funcs[0]

    def counted(*args, **kw):  # rlvr's own reward, counting the completions it scores
        rollouts.append(len(kw["completions"]))
        return correct(*args, **kw)

    counted.__name__ = correct.__name__
    plan.reward_funcs[0] = counted
    history = grpo.train(BASE, rows, plan, g, seed=0, output_dir=tmp_path / "out", model=model,
                         tokenizer=tokenizer)
    trainer = seen["t"]
    assert trainer.use_vllm and trainer.vllm_generation.mode == "colocate"
    assert rollouts == [16, 16] and [h["step"] for h in history if "reward" in h] == [1, 2]
    llm = trainer.vllm_generation.llm
    prompt = tokenizer(rows[0]["prompt"], add_special_tokens=False)["input_ids"]
    completion = tokenizer(" 10 * 3 = 30. The answer is \\boxed{30}.", add_special_tokens=False)["input_ids"]

    def engine_logprobs() -> torch.Tensor:
        out = llm.generate([{"prompt_token_ids": prompt + completion}],
                           SamplingParams(max_tokens=1, prompt_logprobs=0), use_tqdm=False)[0]
        return torch.tensor([next(iter(d.values())).logprob
                             for d in out.prompt_logprobs[len(prompt):]])

    def policy_logprobs(m) -> torch.Tensor:
        with torch.no_grad():
            logits = m(torch.tensor([prompt + completion])).logits[0, :-1].float()
        lp = torch.log_softmax(logits, -1)[len(prompt) - 1:]
        return lp[torch.arange(len(completion)), torch.tensor(completion)]

    policy = trainer.accelerator.unwrap_model(trainer.model)
    before = engine_logprobs()  # the weights of the last rollout: one optimiser step behind
    trainer.vllm_generation.sync_weights()
    after = engine_logprobs()
    mine = policy_logprobs(policy)
    base, _ = load_policy(BASE)
    assert (after - before).abs().max() > 1e-2  # the sync moved the engine
    assert torch.allclose(after, mine, atol=1e-4), (after - mine).abs().max()
    assert (policy_logprobs(base) - mine).abs().max() > 1e-2  # and the policy is not the base
    assert vllm_engine.attached(policy)[0] is llm  # held-out evaluations sample here


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@needs_vllm
def test_a_cpu_server_serves_the_tiny_base_to_trls_client_and_says_weight_sync_needs_cuda(tmp_path):
    """Server mode on the CPU: scripts/vllm_server.sh serves the tiny base from the project's
    environment (VLLM_ENV=.venv: fastapi in prefect's range, the instrumentator pinned so that
    the server does not answer 500), TRL's own client generates through it, greedy, the lab
    sampler's tokens, twice (a second client: a server reused), and the weight sync a training
    would start refuses in one line, since vLLM's weight-transfer engine is NCCL."""
    import subprocess
    import time

    import requests
    from trl.generation.vllm_client import VLLMClient

    from models.generation import generate
    from models.policy import load_policy

    port = _free_port()
    log = (tmp_path / "server.log").open("w")
    env = {**os.environ, "VLLM_ENV": str(ROOT / ".venv"), "PYTHON": str(ROOT / ".venv/bin/python")}
    server = subprocess.Popen([str(ROOT / "scripts/vllm_server.sh"), str(BASE), "--cpu",
                               "--port", str(port)], stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 240
        while True:
            assert server.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            try:
                if requests.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert time.monotonic() < deadline, "the server did not come up in 240 s"
            time.sleep(1)
        prompts = _test_prompts(20)
        model, tokenizer = load_policy(BASE)
        lab = [g[0] for g in generate(model, tokenizer, prompts, greedy=True, max_new_tokens=64)]
        ids = tokenizer(prompts, add_special_tokens=False)["input_ids"]
        for _ in range(2):
            client = VLLMClient(base_url=f"http://127.0.0.1:{port}", connection_timeout=30)
            client.reset_prefix_cache()
            out = client.generate(ids, n=1, temperature=0.0, max_tokens=64)
            texts = tokenizer.batch_decode(out["completion_ids"], skip_special_tokens=True)
            assert texts == lab
        with pytest.raises(RuntimeError, match="weight-transfer"):
            client.init_communicator(device="cpu")
    finally:
        server.terminate()
        server.wait(timeout=60)
