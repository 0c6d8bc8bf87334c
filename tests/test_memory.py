"""GPU memory (core/memory.py, docs/gpu.md section 7): every shipped GPU preset fits the GPU it
declares, with vLLM and without it (`check_vllm`'s advice), its rollout calls and the confidence
rewards' passes are bounded, the estimate agrees with the committed GPU records
(benchmarks/results/gpu/), and RLCER's two roles generate in bounded calls."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from core.memory import (
    BF16,
    FP32,
    RESERVE_GIB,
    ModelShape,
    estimate,
    gpu_presets,
    model_shape,
    over_budget,
    preset_params,
    rollout_rows,
)
from core.params import load, read_raw, validate

ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT / "benchmarks" / "results" / "gpu"
RAW = read_raw()
GPU_PRESETS = gpu_presets(RAW)
# The most completions one rollout generate call may hold on one process (the H100 record ran
# out of memory at 576).
MAX_ROLLOUT_ROWS = 128


def test_the_gpu_presets_declare_their_gpu():
    qwen3 = {"qwen3_0p6b_1gpu", "qwen3_1p7b_1gpu", "qwen3_0p6b_8gpu", "qwen3_1p7b_8gpu"}
    assert qwen3 <= set(GPU_PRESETS)
    for name in GPU_PRESETS:
        assert load(preset=name).pipeline.gpu_memory_gib > 0
    assert load().pipeline.gpu_memory_gib is None  # the CPU default declares none


@pytest.mark.parametrize("use_vllm", [None, False], ids=["as-set", "without-vllm"])
@pytest.mark.parametrize("preset", GPU_PRESETS)
def test_every_arm_of_a_gpu_preset_fits_its_declared_gpu(preset, use_vllm):
    """Every arm of the preset's study, as set and with `grpo.use_vllm: false` (what
    flows/train.py `check_vllm` advises where vLLM is missing: transformers rollouts)."""
    p = load(preset=preset) if use_vllm is None else preset_params(RAW, preset, use_vllm=False)
    assert over_budget(p) == []


@pytest.mark.parametrize("preset", GPU_PRESETS)
def test_a_gpu_presets_rollout_calls_are_bounded(preset):
    p = load(preset=preset)
    for name in p.methods:
        g = p.resolve(name).grpo
        rows = rollout_rows(p, name)
        assert rows <= MAX_ROLLOUT_ROWS, (name, rows)
        per_generation = g.steps_per_generation or g.gradient_accumulation_steps
        assert g.gradient_accumulation_steps % per_generation == 0, name  # models/grpo.py refuses it


@pytest.mark.parametrize("preset", GPU_PRESETS)
def test_a_gpu_preset_bounds_the_confidence_rewards_passes(preset):
    p = load(preset=preset)
    for name in ("self_certainty", "entropy"):
        assert p.resolve(name).cfg.rows_per_pass is not None, name


def test_an_unbounded_confidence_pass_in_a_gpu_preset_is_flagged():
    """`rows_per_pass: null` is one teacher-forced pass over the whole generation batch: rows x
    completion x 151,936 float32 logits, several copies."""
    raw = copy.deepcopy(RAW)
    raw["presets"]["qwen3_0p6b_1gpu"]["reward"]["self_certainty"] = {"rows_per_pass": None}
    p = validate(raw, preset="qwen3_0p6b_1gpu")
    flagged = over_budget(p, ["self_certainty", "entropy"])
    assert len(flagged) == 1 and flagged[0].startswith("self_certainty:") and "reward pass" in flagged[0]
    e = estimate(p, "self_certainty")
    assert e.peak_phase == "reward_pass" and e.total > p.pipeline.gpu_memory_gib


def test_the_kv_cache_of_a_trained_qwen3_is_float32():
    """K leaves RoPE and Qwen3's k_norm in float32 under autocast over float32 weights, and
    transformers' DynamicLayer allocates V with K's dtype: twice bf16's bytes per token."""
    qwen = model_shape("/models/Qwen3-0.6B")
    assert qwen.kv_bytes(FP32) == 2 * qwen.kv_bytes(BF16) == 2 * qwen.layers * 2 * 8 * 128 * 2


def test_the_kv_cache_dtype_on_this_torch():
    """The claim above, run: a tiny Qwen3 with float32 weights under bf16 autocast caches K and V
    in float32."""
    import torch
    from transformers import DynamicCache, Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=8, vocab_size=50)
    model = Qwen3ForCausalLM(config).float()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        cache = model(input_ids=torch.tensor([[1, 2, 3]]), past_key_values=DynamicCache(config=config),
                      use_cache=True).past_key_values
    assert (cache.layers[0].keys.dtype, cache.layers[0].values.dtype) == (torch.float32, torch.float32)


# --- the committed GPU records --------------------------------------------------------------------

def record_runs() -> list[dict]:
    return json.loads((RECORDS / "runs.json").read_text())


def test_the_h100_record_does_not_fit_its_card_and_the_terms_reproduce_its_allocation():
    """benchmarks/results/gpu/: rlvr with `qwen3_0p6b_1gpu`'s recipe at Qwen3-0.6B's size, vLLM
    off, the step's 576 rollouts in one call (no steps_per_generation then), out of memory. The
    tolerance: at the length the failed request gives, the estimate's terms are what PyTorch had
    allocated to within 1 GiB (`benchmarks.tables.oom_reconstruction` says how); the estimate of
    that configuration exceeds the card; the reserve covers the rest the process had in use."""
    from benchmarks.tables import gpu_oom_record, oom_reconstruction

    record = gpu_oom_record()
    assert record is not None and "--shape qwen3-0.6b" in record["command"]
    assert "--methods rlvr" in record["command"] and "--steps-per-generation" not in record["command"]
    r = oom_reconstruction(record)
    assert r["rows"] == 576
    assert abs(r["at_failure"] - record["allocated"]) < 1.0, (r["at_failure"], record["allocated"])
    assert r["estimate"].peak_phase == "generation" and r["estimate"].total > record["capacity"]
    assert record["in_use"] - record["allocated"] <= RESERVE_GIB
    # The recipe as shipped now fits that card, without vLLM too.
    assert over_budget(preset_params(RAW, "qwen3_0p6b_1gpu", use_vllm=False), ["rlvr"],
                       gpu_memory_gib=record["capacity"]) == []


def smoke_setting(folder: Path):
    """The smoke's params (scripts/gpu_smoke.py `smoke_params`), its model's shape (`build_model`'s
    GPU size over the smoke's tokenizer, built here as the smoke builds it from the ci world) and
    its longest prompt in that tokenizer with its chat template."""
    from models.tiny import corpus
    from tests.qwen3_chat import qwen3_tokenizer
    from tests.test_gpu_path import smoke_script
    from world import generate_world

    params = smoke_script().smoke_params(folder / "qwen3", use_vllm=False)
    generate_world(params.world, folder / "prepared")
    tok = qwen3_tokenizer(corpus(folder / "prepared"))
    prompts = [json.loads(line)["prompt"] for split in ("train", "val", "test")
               for line in (folder / "prepared" / f"arith_{split}.jsonl").read_text().splitlines()]
    longest = max(len(tok(tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False,
                                                  add_generation_prompt=True),
                          add_special_tokens=False)["input_ids"]) for q in prompts)
    shape = ModelShape(layers=4, hidden=512, intermediate=1024, heads=8, kv_heads=4, head_dim=64,
                       vocab=len(tok), qk_norm=True)
    return params, shape, longest


def test_the_smoke_records_peaks_lie_between_the_resident_part_and_the_total(tmp_path):
    """The smoke's `peak memory` lines (torch's max_memory_allocated per method, on a 10M-parameter
    model) against the estimate of the smoke's own settings and prompts. The tolerance: each
    lies between the estimate's resident part (what a run holds from start to end: weights,
    gradients, moments, the models it loads) and its total (a phase's worst case and the
    reserve: at this size the reserve's cuBLAS workspaces and allocator rounding are most of a
    peak, and RLCER's judge, sized for score_batch_size prompts, reads none when a random
    model's rubrics do not parse)."""
    params, shape, prompt_tokens = smoke_setting(tmp_path)
    seen = 0
    for run in record_runs():
        if "--measure" in run["command"]:
            continue
        for line in (RECORDS / run["log"]).read_text(encoding="utf-8", errors="replace").splitlines():
            m = re.match(r"PASS (\w+): peak memory: ([\d.]+) GiB allocated", line)
            if not m:
                continue
            e = estimate(params, m.group(1), prompt_tokens=prompt_tokens, shape_of=lambda _: shape)
            measured = float(m.group(2))  # printed to 0.01 GiB
            assert e.resident <= measured + 0.005 <= e.total, (run["log"], line, e.parts())
            seen += 1
    assert seen >= 4


# --- RLCER's bounded generation -------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_policy(tmp_path_factory):
    from models.tiny import build_model, build_tokenizer

    texts = [f"Problem: {a} + {b}?\nSolution: {a + b}. Rubrics: criterion points" for a in range(9)
             for b in range(9)]
    tok = build_tokenizer(texts, vocab_size=300)
    arch = type("Arch", (), dict(hidden_size=16, intermediate_size=32, num_layers=1, num_heads=2,
                                 max_positions=256))
    path = tmp_path_factory.mktemp("rlcer-policy")
    build_model(arch, tok, seed=0).save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.mark.parametrize("bound", [None, 4])
def test_rlcer_generates_both_roles_in_calls_of_at_most_rows_per_generate(tiny_policy, tmp_path, bound):
    """The reasoner's rollouts (TRL's `_generate_single_turn`) and the rubricator's
    (`sample_rubricator`) reach the model's `generate` in calls of at most
    `reward.rlcer.rows_per_generate` rows; null keeps one call, as before."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig

    from models.rlcer_trainer import RlcerGRPOTrainer, RlcerReward, RuleVerifier

    tok = AutoTokenizer.from_pretrained(tiny_policy)
    _, rlcer = load(preset="ci").method_config("rlcer")
    cfg = rlcer.model_copy(update={"rows_per_generate": bound, "max_rubric_tokens": 8})
    args = GRPOConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4,
                      num_generations=2, max_completion_length=6, report_to=[], use_cpu=True,
                      bf16=False, remove_unused_columns=False, disable_tqdm=True, seed=0)
    rows = [{"prompt": f"Problem: {a} + 1?\nSolution:", "answer": str(a + 1)} for a in range(8)]
    trainer = RlcerGRPOTrainer(model=str(tiny_policy), reward_funcs=[RlcerReward(cfg, verifier=RuleVerifier())],
                               args=args, train_dataset=Dataset.from_list(rows), processing_class=tok)
    sizes: list[int] = []
    generate = trainer.model.generate

    def counted(*a, **k):
        sizes.append(int(k["input_ids"].shape[0]))
        return generate(*a, **k)

    trainer.model.generate = counted
    prompt_ids = [tok(r["prompt"])["input_ids"] for r in rows] + [tok("Problem: 9 + 9?")["input_ids"]] * 2
    completions, _ = trainer._generate_single_turn(prompt_ids, None, {}, 2)
    assert len(completions) == 10 and all(len(c) <= 6 for c in completions)
    assert sizes == ([10] if bound is None else [4, 4, 2])
    sizes.clear()
    _, rubric_ids, texts = trainer.sample_rubricator([r["prompt"] for r in rows[:5]])
    assert len(rubric_ids) == len(texts) == 5 and all(len(c) <= 8 for c in rubric_ids)
    assert sizes == ([5] if bound is None else [4, 1])
