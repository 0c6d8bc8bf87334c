"""The GPU path, checked on a CPU (docs/gpu.md): trained weights stay float32 under a bf16 preset,
every model a method builds lands on the trainer's device (the `meta` device stands in for a GPU),
the judges' forward passes are bounded by `grpo.score_batch_size`, the GPU presets schedule one
training per GPU with the process count set, and GSM8K references carry no calculator markup.
Slow: vLLM's pin resolves beside the project's other pins, and `scripts/gpu_smoke.sh --cpu` passes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from core.params import ParamsError, load, validate
from tests.qwen3_chat import save_qwen3_chat
from tests.test_dro_trainer import arith_rows

ROOT = Path(__file__).resolve().parent.parent
QWEN3_PRESETS = ["qwen3_0p6b_1gpu", "qwen3_1p7b_1gpu", "qwen3_0p6b_8gpu", "qwen3_1p7b_8gpu"]


@pytest.fixture(scope="module")
def qwen3_folder(tmp_path_factory):
    """A random-weight Qwen3-architecture checkpoint (tests/qwen3_chat.py): policy, judge and
    evaluator alike."""
    texts = [t for r in arith_rows(30) for t in (r["prompt"], r["reference"])]
    texts += ["Is the answer correct? YES NO Rubrics: criterion points Answer:"]
    return save_qwen3_chat(tmp_path_factory.mktemp("gpu-path") / "qwen3", texts)


def ci_params(folder: Path, **grpo):
    """The ci preset on the Qwen3 checkpoint, with RLME's and RLCER's models read from it too."""
    raw = load(preset="ci").model_dump()
    raw["base_model"]["path"] = str(folder)
    raw["grpo"].update(grpo)
    raw["reward"]["rlcer"]["verifier"] = str(folder)
    raw["variants"]["rlme_models"] = {"method": "rlme", "reward": {"evaluators": [
        {"name": "frozen", "source": "frozen", "weight": 0.5},
        {"name": "path", "source": str(folder), "weight": 0.5}]}}
    raw["variants"]["dro_static"]["reward"]["static_top_k"] = 2
    return validate(raw)


def modules_in(obj, depth: int = 3) -> list[torch.nn.Module]:
    """Every torch module an object holds (attributes, dict values, tuples), a few levels down."""
    if isinstance(obj, torch.nn.Module):
        return [obj]
    if depth == 0 or isinstance(obj, str | bytes | int | float):
        return []
    if isinstance(obj, dict):
        children = list(obj.values())
    elif isinstance(obj, list | tuple):
        children = list(obj)
    else:
        children = list(getattr(obj, "__dict__", {}).values())
    return [m for c in children if c is not obj for m in modules_in(c, depth - 1)]


# --- precision ------------------------------------------------------------------------------------

def test_trained_policy_keeps_float32_master_weights_that_learn_under_a_bf16_preset(qwen3_folder,
                                                                                   monkeypatch):
    """One AdamW step at the preset's learning rate, under bf16 autocast (what TRL's bf16=True
    does on CUDA; CPU autocast here): the weights and both moments are float32 and almost every
    weight moves. With bf16 weights (the old load on CUDA) a 2e-6 step rounds most of them away."""
    from models.policy import load_policy

    g = load(preset="qwen3_0p6b_1gpu").method_grpo("rlvr")
    assert g.learning_rate <= 2e-6
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # as on a GPU machine
    model, tok = load_policy(qwen3_folder, for_training=True)
    monkeypatch.undo()
    assert all(p.dtype == torch.float32 for p in model.parameters())
    before = [p.detach().clone() for p in model.parameters()]
    optimiser = torch.optim.AdamW(model.parameters(), lr=g.learning_rate, weight_decay=g.weight_decay)
    ids = tok(["Problem: 2 + 3 = ? Solution: 2 + 3 = 5."], return_tensors="pt")["input_ids"]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimiser.step()
    states = [optimiser.state[p] for p in model.parameters() if p in optimiser.state]
    assert states and all(s["exp_avg"].dtype == torch.float32 == s["exp_avg_sq"].dtype for s in states)
    moved = sum(int((p.detach() != b).sum()) for p, b in zip(model.parameters(), before))
    total = sum(p.numel() for p in model.parameters())
    assert moved / total > 0.9


def test_a_read_only_model_is_held_on_its_device_in_its_compute_dtype(qwen3_folder):
    from core.devices import compute_dtype
    from models.policy import load_policy

    model, _ = load_policy(qwen3_folder, device="meta")
    assert not model.training
    assert {p.device.type for p in model.parameters()} == {"meta"}
    assert compute_dtype("cpu") == torch.float32  # the tiny CPU runs are unchanged
    cpu, _ = load_policy(qwen3_folder)
    assert {p.dtype for p in cpu.parameters()} == {torch.float32}
    assert {p.device.type for p in cpu.parameters()} == {"cpu"}


# --- devices --------------------------------------------------------------------------------------

def test_the_synthesis_llm_and_the_embedding_matcher_load_on_the_process_device(qwen3_folder,
                                                                                monkeypatch):
    """core/llm.py's in-process LLM and rewards/matchers.py's encoder go to this process's device
    (`training_device`: LOCAL_RANK's GPU), in its compute dtype, not to GPU 0 by name."""
    from core import devices
    from core.llm import TransformersClient
    from core.params import LlmSettings
    from rewards.matchers import EmbeddingMatcher

    monkeypatch.setattr(devices, "training_device", lambda: torch.device("meta"))
    client = TransformersClient(str(qwen3_folder), LlmSettings())
    _, encoder = EmbeddingMatcher(qwen3_folder)._load()
    for model in (client.model, encoder):
        assert {p.device.type for p in model.parameters()} == {"meta"}, type(model).__name__


@pytest.mark.parametrize("method", ["rlme_models", "rlcer"])
def test_every_model_a_method_builds_is_on_the_policys_device(qwen3_folder, method):
    """RLME's frozen and path evaluators and RLCER's judge land where the policy is (the trainer's
    device: flows/train.py places the policy first), not on the CPU."""
    from flows.train import make_plan
    from models.policy import load_policy

    p = ci_params(qwen3_folder)
    policy, tok = load_policy(qwen3_folder, for_training=True)
    policy.to("meta")  # where the trainer will train, here a device without data
    plan = make_plan(p, method, 0, policy, tok)
    built = [m for f in [*plan.reward_funcs, *plan.loggers] for m in modules_in(f)]
    assert len(built) >= (2 if method == "rlme_models" else 1)
    for m in built:
        assert {q.device.type for q in m.parameters()} == {"meta"}, type(m).__name__


def test_setup_run_puts_the_policy_on_the_device_before_the_pre_filter_runs(qwen3_folder,
                                                                          monkeypatch):
    """DRO's static pre-filter samples with the step-0 policy before the trainer exists: the
    policy must already be on the trainer's device then."""
    from flows.train import setup_run
    from models import dro_trainer

    seen = []

    def fake_prefilter(model, tokenizer, rows, cfg, **_):
        seen.append(next(model.parameters()).device.type)
        return rows[:2], None

    monkeypatch.setattr(dro_trainer, "static_prefilter_rows", fake_prefilter)
    p = ci_params(qwen3_folder)
    rows = [{"prompt_id": r["prompt_id"], "prompt": r["prompt"], "answer": r["answer"],
             "reference": r["reference"]} for r in arith_rows(5)]
    model, _, plan, kept = setup_run(p, p.resolve("dro_static"), 0, rows, device="meta")
    assert seen == ["meta"] and len(kept) == 2
    assert next(model.parameters()).dtype == torch.float32  # trained: float32 masters


@pytest.mark.parametrize("method", ["rlme_models", "rlcer"])
def test_setup_run_builds_every_model_on_the_trainers_device(qwen3_folder, method):
    """The train stage's own order (`setup_run`, which `flows.train.train` calls): the policy is
    on the trainer's device before the plan is built, so RLME's frozen snapshot (a copy of the
    policy as it is then) and its path evaluator, and RLCER's judge, are there too. Built while
    the policy was still on the CPU, the frozen copy stayed on the CPU."""
    from flows.train import setup_run

    p = ci_params(qwen3_folder)
    model, _, plan, _ = setup_run(p, p.resolve(method), 0, [], device="meta")
    built = [m for f in [*plan.reward_funcs, *plan.loggers] for m in modules_in(f)]
    assert len(built) >= (2 if method == "rlme_models" else 1)
    for m in [model, *built]:
        assert {q.device.type for q in m.parameters()} == {"meta"}, type(m).__name__


def test_the_evaluate_stage_holds_its_policy_on_the_trainers_device(qwen3_folder, monkeypatch):
    """`flows.evaluate.evaluate` with no device argument (as the pipeline calls it) samples with
    the policy on the process's device (`core.devices.training_device`; `meta` stands in for
    `cuda:0`), in that device's compute dtype, not on the CPU beside a GPU."""
    import evals.suite
    import models.policy
    from core import devices, paths
    from flows.evaluate import evaluate

    class Sampled(Exception):
        pass

    seen = []

    def sample(model, *args, **kwargs):
        seen.append({(q.device.type, q.dtype) for q in model.parameters()})
        raise Sampled

    meta = lambda *args, **kwargs: torch.device("meta")  # noqa: E731
    monkeypatch.setattr(devices, "training_device", meta)
    monkeypatch.setattr(models.policy, "training_device", meta)
    monkeypatch.setattr(paths, "policy_dir", lambda *args, **kwargs: qwen3_folder)
    monkeypatch.setattr(evals.suite, "evaluate_policy", sample)
    with pytest.raises(Sampled):
        evaluate(ci_params(qwen3_folder), "base")
    assert seen == [{("meta", devices.compute_dtype("meta"))}]


# --- batch sizes ----------------------------------------------------------------------------------

def largest_batch(model: torch.nn.Module) -> list[int]:
    sizes: list[int] = []
    model.register_forward_pre_hook(
        lambda m, args, kwargs: sizes.append(int(kwargs["input_ids"].shape[0])), with_kwargs=True)
    return sizes


def test_rlcer_judge_forward_passes_are_bounded_by_score_batch_size(qwen3_folder):
    from flows.train import make_plan
    from models.policy import load_policy
    from rewards.evolving_rubrics import ProposedRubric

    p = ci_params(qwen3_folder, score_batch_size=4)
    policy, tok = load_policy(qwen3_folder, for_training=True)
    verifier = make_plan(p, "rlcer", 0, policy, tok).reward_funcs[0].verifier
    sizes = largest_batch(verifier.model)
    items = [("What is 2 + 3?", f"2 + 3 = {k}.", ProposedRubric("states the answer", 2))
             for k in range(10)]
    assert len(verifier(items)) == 10
    assert sizes and max(sizes) <= 4 and sum(sizes) == 10


def test_rlme_evaluator_forward_passes_are_bounded_by_score_batch_size(qwen3_folder):
    from flows.train import make_plan
    from models.policy import load_policy

    p = ci_params(qwen3_folder, score_batch_size=3)
    policy, tok = load_policy(qwen3_folder, for_training=True)
    reward = make_plan(p, "rlme_models", 0, policy, tok).loggers[0]
    sizes = [largest_batch(model) for model, _ in reward._handles.values()]
    prompts = [r["prompt"] for r in arith_rows(7)]
    out = reward(prompts, [" 1 + 1 = 2. The answer is \\boxed{2}."] * 7)
    assert len(out) == 7 and all(s and max(s) <= 3 and sum(s) == 7 for s in sizes)


# --- presets and orchestration --------------------------------------------------------------------

@pytest.mark.parametrize("preset", QWEN3_PRESETS)
def test_gpu_presets_schedule_one_training_per_gpu_with_the_process_count_set(preset):
    from flows.pipeline import GpuPool, gpus_needed

    p = load(preset=preset)
    eight = preset.endswith("8gpu")
    assert "arith_cf" not in p.eval.benchmarks  # the tiny world's, not GSM8K's
    gpus = p.pipeline.gpus if eight else [0]
    assert p.pipeline.stages_per_gpu == 1 and p.pipeline.stage_timeout_s >= 86400
    for m in p.methods:
        n = gpus_needed(f"train@{m}-0", p)
        assert n == (4 if eight else 1), m
        pool = GpuPool(gpus, p.pipeline.stages_per_gpu)
        assert pool.take(n) is not None and pool.take(n) is None  # one training at a time
    assert gpus_needed("evaluate@rlvr-0", p) == 1


def test_a_vllm_run_without_vllm_fails_in_one_line_before_loading_anything(monkeypatch):
    import torch

    import models.vllm_engine as vllm_engine
    from flows.train import check_vllm

    g = load(preset="qwen3_0p6b_1gpu").method_grpo("rlvr")
    monkeypatch.setattr(vllm_engine, "unavailable", lambda: "vLLM is not installed (test)")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(ParamsError) as e:
        check_vllm(g)
    assert "\n" not in str(e.value) and "vLLM is not installed (test)" in str(e.value)
    assert "steps_per_generation" in str(e.value)  # the advice names what bounds the batch
    assert check_vllm(g.model_copy(update={"use_vllm": False})).use_vllm is False  # nothing to check


def test_the_default_run_without_vllm_on_the_cpu_samples_with_the_lab_sampler(monkeypatch):
    """The default asks for vLLM (what `make setup` installs on x86-64 Linux); on a CPU where it
    cannot run, the run goes on with the lab's samplers, saying why in one line."""
    import flows.train as train
    import models.vllm_engine as vllm_engine

    g = load().method_grpo("rlvr")
    assert g.use_vllm
    monkeypatch.setattr(vllm_engine, "unavailable", lambda: "vLLM is not installed (test)")
    said = []
    monkeypatch.setattr(train.log, "warning", lambda msg, *a: said.append(msg % a))
    assert train.check_vllm(g).use_vllm is False
    assert len(said) == 1 and "vLLM is not installed (test)" in said[0]


def test_server_mode_without_cuda_fails_in_one_line(monkeypatch):
    import torch

    import models.vllm_engine as vllm_engine
    from flows.train import check_vllm

    g = load(preset="qwen3_0p6b_8gpu").method_grpo("rlvr")
    assert g.vllm_mode == "server"
    monkeypatch.setattr(vllm_engine, "unavailable", lambda: None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ParamsError) as e:
        check_vllm(g)
    assert "\n" not in str(e.value) and "needs CUDA" in str(e.value)
    check_vllm(g.model_copy(update={"vllm_mode": "colocate"}))  # colocate runs on the CPU


def test_gsm8k_references_carry_no_calculator_annotations(tmp_path):
    from world.external import gsm8k_rows

    f = tmp_path / "gsm8k.jsonl"
    f.write_text(json.dumps({"question": "Natalia sold 48 clips, then half as many. How many?",
                             "answer": "She sold 48/2 = <<48/2=24>>24 more.\n"
                                       "In all 48+24 = <<48+24=72>>72.\n#### 72"}) + "\n")
    (row,) = gsm8k_rows(f, "train")
    assert "<<" not in row["reference"] and ">>" not in row["reference"]
    assert "48/2 = 24 more." in row["reference"] and row["answer"] == "72"


# --- slow: the install and the smoke script -------------------------------------------------------

def project_pins() -> list[str]:
    """The project's own requirements, prefect and its fastapi bound left out (see below)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = [*project["dependencies"], *project["optional-dependencies"]["lab"]]  # what make setup installs
    return [d for d in deps if not d.startswith(("prefect", "fastapi"))]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_vllm_pin_resolves_beside_the_project_pins(tmp_path):
    """configs/gpu-requirements.txt's vLLM, in TRL 1.16's range, installs into the project's
    environment with every pin of the project but prefect's fastapi floor held (`pip install
    --dry-run`: the registry, nothing installed). As docs/gpu.md's install does, pip keeps what is
    installed where it satisfies the requirements, so it fetches the metadata of vLLM's new
    dependencies only (with --ignore-installed it re-resolved all of them: 16 minutes on a loaded
    2-core machine). prefect 3.8.8 wants fastapi>=0.139 and vLLM 0.30.0 fastapi<0.137, which is
    why docs/gpu.md puts fastapi back after installing vLLM."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed_version

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    pins = [line.strip() for line in (ROOT / "configs/gpu-requirements.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    (vllm,) = [Requirement(x) for x in pins if x.startswith("vllm")]
    (version,) = [Version(s.version) for s in vllm.specifier]
    assert Version("0.22.0") <= version <= Version("0.31.0")  # trl/import_utils.py
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report", str(report),
           *pins, *project_pins()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=850)
    assert done.returncode == 0, done.stderr[-2000:]
    chosen = {canonicalize_name(i["metadata"]["name"]): i["metadata"]["version"]
              for i in json.loads(report.read_text())["install"]}
    assert chosen["vllm"] == str(version)

    def after(name: str) -> str | None:  # the version the environment would hold after the install
        try:
            return chosen.get(canonicalize_name(name)) or installed_version(name)
        except PackageNotFoundError:
            return None

    exact = [Requirement(d) for d in project_pins() if "==" in d]
    assert {r.name for r in exact} >= {"torch", "transformers", "trl", "accelerate"}
    for r in exact:  # every == pin of the project still holds beside vLLM
        held = after(r.name)
        assert held is not None and r.specifier.contains(Version(held).public), (r, held)


def smoke_script():
    """scripts/gpu_smoke.py as a module (scripts/ is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_smoke", ROOT / "scripts/gpu_smoke.py")
    smoke = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(smoke)
    return smoke


def test_the_smoke_runs_with_its_own_settings_not_the_ci_presets(tmp_path):
    """The smoke starts from the ci preset and sets its own schedule and sizes: two steps, one
    checkpoint and one held-out point after step 0, 8 val and test prompts. Validated with the
    ci preset applied a second time, the preset's save_steps and heldout_every (1) won: a
    checkpoint and a held-out evaluation at every step."""
    p = smoke_script().smoke_params(tmp_path, use_vllm=False)
    for m in ("rlvr", "rlme", "dro", "rlcer"):
        g = p.method_grpo(m)
        assert (g.max_steps, g.save_steps, g.heldout_every) == (2, 2, 2), m
        assert g.weight_decay == 0.1 and not g.use_vllm, m
    assert (p.world.arith.n_val, p.world.arith.n_test) == (8, 8) == (p.eval.n_test, 8)
    assert p.eval.benchmarks == ["arith"] and p.reward.rlcer.verifier == str(tmp_path)


def test_the_measure_trains_with_the_presets_grpo_recipe_for_its_steps(tmp_path):
    """`--measure N`: the qwen3_0p6b_1gpu preset's GRPO block (96 prompts x 6, 512 tokens, 16
    micro-batches, gradient checkpointing) for N steps, one held-out point, vLLM as asked."""
    p = smoke_script().measure_params(tmp_path, use_vllm=False, steps=3, recipe="qwen3_0p6b_1gpu")
    g = p.method_grpo("rlvr")
    assert (g.prompts_per_step, g.num_generations, g.max_completion_length) == (96, 6, 512)
    assert (g.gradient_accumulation_steps, g.gradient_checkpointing, g.loss_type) == (16, True, "cispo")
    assert (g.max_steps, g.save_steps, g.heldout_every, g.use_vllm) == (3, 3, 3, False)
    with pytest.raises(SystemExit, match="no preset"):
        smoke_script().measure_params(tmp_path, use_vllm=False, steps=1, recipe="nope")


def test_the_measure_can_split_a_steps_rollouts(tmp_path):
    """`--steps-per-generation 4` with the 1-GPU recipe: 4 rollout calls of 24 prompts' groups
    (144 completions) per optimiser step; the preset's own bound (2 of its 16 micro-batches per
    call: 72 completions, core/memory.py) otherwise, not one call of 576; 3 does not divide 16."""
    from models.grpo import grpo_config

    smoke = smoke_script()
    g = smoke.measure_params(tmp_path, use_vllm=False, steps=1, recipe="qwen3_0p6b_1gpu",
                             steps_per_generation=4).method_grpo("rlvr")
    args = grpo_config(g, seed=0, output_dir=tmp_path / "out")
    assert (args.steps_per_generation, args.generation_batch_size) == (4, 144)
    assert grpo_config(smoke.measure_params(tmp_path, False, 1, "qwen3_0p6b_1gpu").method_grpo("rlvr"),
                       seed=0, output_dir=tmp_path / "out").generation_batch_size == 72
    bad = smoke.measure_params(tmp_path, False, 1, "qwen3_0p6b_1gpu", steps_per_generation=3)
    with pytest.raises(ParamsError, match="does not divide gradient_accumulation_steps=16"):
        grpo_config(bad.method_grpo("rlvr"), seed=0, output_dir=tmp_path / "out")


def test_the_measure_trains_without_the_held_out_callback_and_the_smoke_with_it():
    """`--measure` times training steps: the hook hands the trainer the train stage's callbacks
    but the held-out one (its samples at step 0 and at the end run to the recipe's completion cap
    on a random model: minutes at 0.6B), while the smoke keeps it (a check of the real stage)."""
    import types

    from models.callbacks import HeldoutCallback

    smoke = smoke_script()
    heldout, other = HeldoutCallback.__new__(HeldoutCallback), object()
    for measure, kept in ((True, [other]), (False, [heldout, other])):
        seen: dict = {}
        module = types.SimpleNamespace(train=lambda *a, seen=seen, **k: seen.update(k))
        smoke.Watch(measure=measure).hook(module)
        module.train("policy", [], "plan", "g", callbacks=[heldout, other])
        assert seen["callbacks"][:-1] == kept  # the hook's own watcher comes last
        assert type(seen["callbacks"][-1]).__name__ == "Seen"


def test_steps_per_generation_splits_an_optimiser_steps_rollouts(qwen3_folder, tmp_path):
    """One GRPO step of 4 prompts in 4 micro-batches: by default TRL generates all 4 prompts'
    groups in one call; with grpo.steps_per_generation = 2, two calls of 2 prompts' groups, and
    still one optimiser step (the rollouts come from the step's policy)."""
    from datasets import Dataset
    from trl import GRPOTrainer

    from models.grpo import grpo_config
    from models.policy import load_policy

    rows = [{"prompt": r["prompt"]} for r in arith_rows(8)]
    calls = {}
    for per_generation in (None, 2):
        g = load(preset="ci").grpo.model_copy(update={
            "prompts_per_step": 4, "num_generations": 2, "max_completion_length": 4, "max_steps": 1,
            "gradient_accumulation_steps": 4, "steps_per_generation": per_generation})
        model, tok = load_policy(qwen3_folder, for_training=True)
        trainer = GRPOTrainer(model=model, reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
                              args=grpo_config(g, seed=0, output_dir=tmp_path / str(per_generation)),
                              processing_class=tok, train_dataset=Dataset.from_list(rows))
        original, sizes = trainer._generate_single_turn, []

        def counted(prompt_ids, *a, _original=original, _sizes=sizes, **k):
            _sizes.append(len(prompt_ids))
            return _original(prompt_ids, *a, **k)

        trainer._generate_single_turn = counted
        trainer.train()
        assert trainer.state.global_step == 1
        calls[per_generation] = sizes
    assert calls == {None: [8], 2: [4, 4]}


def test_a_failed_methods_line_says_where_it_failed():
    """A FAIL line carries the failing frame and its callers (rollouts or loss), innermost first."""
    smoke = smoke_script()

    def generate():
        raise RuntimeError("CUDA out of memory")

    def compute_loss():
        generate()

    try:
        compute_loss()
    except RuntimeError as e:
        where = smoke.where(e)
    assert where.startswith("test_gpu_path.py:") and where.split(" < ")[1:] == [
        "compute_loss", "test_a_failed_methods_line_says_where_it_failed"]
    assert " generate <" in where


def test_the_smoke_decides_nothing_by_the_clock_on_a_cpu():
    """`--cpu` runs in the slow suite, on machines of any load: its `total time` line is shown,
    never a FAIL (which would make the slow test fail by wall time); on a GPU it is the
    10-minute check."""
    smoke = smoke_script()
    assert smoke.time_check(3600.0, gpu=False)[0] is None  # SKIP: counted in no exit status
    assert smoke.time_check(601.0, gpu=True)[0] is False
    assert smoke.time_check(599.0, gpu=True)[0] is True


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_gpu_smoke_script_passes_on_the_cpu(tmp_path):
    """`scripts/gpu_smoke.sh --cpu`: two GRPO steps of rlvr, rlme, dro and rlcer and one evaluate
    stage with a random-weight Qwen3 built locally, one PASS line per check, exit 0."""
    if shutil.which("bash") is None:
        pytest.skip("no bash")
    done = subprocess.run(["bash", str(ROOT / "scripts/gpu_smoke.sh"), "--cpu", "--work", str(tmp_path)],
                          capture_output=True, text=True, timeout=880, cwd=ROOT)
    lines = [x for x in done.stdout.splitlines() if x.startswith(("PASS", "FAIL", "SKIP"))]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert lines and not [x for x in lines if x.startswith("FAIL")]
    for method in ("rlvr", "rlme", "dro", "rlcer"):
        assert any(x.startswith(f"PASS {method}: finite loss") for x in lines), lines
        assert any(x.startswith(f"PASS {method}: weights changed") for x in lines), lines
    assert any(x.startswith("PASS evaluate") for x in lines), lines
