"""Rank-correct training (docs/multiprocess.md): on 2 gloo ranks every method gives the rewards,
advantages, rejected groups and logged metrics that 1 rank gives on the same generation batch.

Each case builds the method's real plan and TRL trainer (the `ci` preset's settings) on a tiny
random Llama, replaces generation by a fixed table of completions (TRL's `rollout_func` hook; RLCER's
rubricator by fixed rubric texts), and runs TRL's `_generate_and_score_completions` once: on one
process with the whole batch of P prompts x G completions, and on two processes
(`torch.multiprocessing`, gloo, as `accelerate launch` gives on a CPU) with P/2 prompts each. The
two-rank outputs, concatenated in rank order, must equal the one-rank ones.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import random
import socket
import zlib
from pathlib import Path

import pytest

P, G = 4, 4  # prompts per step (global), completions per prompt
CASES = ("rlvr", "random", "rlme", "rlme_frozen", "rlvr_rlme", "rlvrr", "dro", "rlcer", "rationale")
# TRL and method metrics compared between layouts (timings and token counters left out).
_METRIC_PREFIXES = ("reward", "rewards/", "frac_reward_zero_std", "completions/", "hybrid/", "rlme/",
                    "rlvrr/", "dro/", "rlcer/", "genrm/", "ttrl/")
RUBRICS = (
    ' [{"criterion": "each step\'s arithmetic is correct", "points": 3}, '
    '{"criterion": "contains an arithmetic slip", "points": -4}]',
    ' [{"criterion": "the boxed answer matches the last step", "points": 2}]',
    ' [{"criterion": "ends with the boxed answer", "points": 1}, {"criterion": "repeats the question", "points": -1}]',
    " not a rubric list",
)


# --- the fixed batch --------------------------------------------------------------------------

def _rows(task: str) -> list[dict]:
    from world import arith, facts, pairs

    rng = random.Random(7)
    if task == "arith":
        raw = arith.generate(rng, P, "train", min_ops=1, max_ops=3, max_value=99, sloppy_frac=0.0,
                             hint_frac=0.0)
        keep = ("prompt", "answer", "reference")
    elif task == "facts":
        raw = facts.generate(rng, P, "train", drop_frac=0.0, wrong_style_frac=0.0)
        keep = ("prompt", "references", "gold_facts", "style")
    else:
        raw = pairs.generate(rng, P, "train", min_ops=1, max_ops=3, max_value=30)
        keep = ("prompt", "checklist", "label", "demonstration")
    rows = [{"prompt_id": r["id"], **{k: r[k] for k in keep}} for r in raw]
    assert len({r["prompt"] for r in rows}) == P
    return rows


def _completion(task: str, row: dict, j: int) -> str:
    """The j-th of a prompt's G completions: right, wrong, unfinished, off-topic (per task)."""
    if task == "arith":
        ref = row["reference"]
        wrong = ref.replace(f"\\boxed{{{row['answer']}}}", f"\\boxed{{{int(row['answer']) + 1}}}")
        return (ref, wrong, ref.split(" The answer is")[0] + ".", " I do not know.")[j % 4]
    if task == "facts":
        refs = row["references"]
        return (refs[0], refs[1], "\n".join(refs[2].split("\n")[:2]), " It is nice.")[j % 4]
    demo = row["demonstration"]
    flipped = demo.replace("B>A", "X").replace("A>B", "B>A").replace("X", "A>B")
    return (demo, flipped, "\n1. Both are fine.\nVerdict: \\boxed{A>B}", " no verdict")[j % 4]


def _rollout_func(task: str, rows: list[dict], tokenizer):
    """TRL's `rollout_func`: the fixed completions of the prompts it is given (a prompt's j-th
    occurrence in the batch gets completion j), tokenised, EOS-terminated."""
    by_prompt = {r["prompt"]: r for r in rows}

    def rollout(prompts, trainer):
        seen: dict[str, int] = {}
        prompt_ids, completion_ids = [], []
        for p in prompts:
            j = seen[p] = seen.get(p, -1) + 1
            prompt_ids.append(tokenizer(p, add_special_tokens=False)["input_ids"])
            text = _completion(task, by_prompt[p], j)
            completion_ids.append(tokenizer(text, add_special_tokens=False)["input_ids"]
                                  + [tokenizer.eos_token_id])
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": None}

    return rollout


def _rubricator(tokenizer):
    """RLCER's rubricator sampling, replaced: a rubric text chosen by the rubricator prompt."""

    def sample(prompts):
        texts = [RUBRICS[zlib.crc32(p.encode()) % len(RUBRICS)] for p in prompts]
        prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        completion_ids = [tokenizer(t, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
                          for t in texts]
        return prompt_ids, completion_ids, texts

    return sample


# --- one rank's scoring -------------------------------------------------------------------------

def _score(case: str, rank: int, world: int, assets: Path) -> dict:
    from datasets import Dataset
    from trl import GRPOTrainer

    from core.params import load
    from models.grpo import grpo_config
    from models.policy import load_policy
    from rewards import MethodContext, build_plan

    params = load(preset="ci")
    family, cfg = params.method_config(case)
    if family == "dro":  # no clipping: a random model's tiny P would all clip to one reward
        cfg = cfg.model_copy(update={"clip_low": 0.0, "clip_high": 1.0})
    g = params.method_grpo(case).model_copy(
        update={"prompts_per_step": P, "num_generations": G, "max_completion_length": 96})
    model, tokenizer = load_policy(assets / "base", for_training=True)
    given = {"name": case, "family": family, "cfg": cfg, "grpo": g, "params": params, "seed": 0,
             "policy": model, "tokenizer": tokenizer, "prepared": assets, "components": assets / "components"}
    known = {f.name for f in dataclasses.fields(MethodContext)}
    plan = build_plan(MethodContext(**{k: v for k, v in given.items() if k in known}))
    rows = _rows(g.task)
    args = grpo_config(g, seed=0, output_dir=assets / f"out-{case}-{world}-{rank}")
    trainer = (plan.trainer_cls or GRPOTrainer)(
        model=model, reward_funcs=list(plan.reward_funcs), args=args,
        train_dataset=Dataset.from_list(rows), processing_class=tokenizer, **plan.trainer_kwargs)
    for f in [*plan.reward_funcs, *plan.loggers]:
        if hasattr(f, "trainer"):
            f.trainer = trainer
    trainer.rollout_func = _rollout_func(g.task, rows, tokenizer)
    if family == "rlcer":
        trainer.sample_rubricator = _rubricator(tokenizer)
    per = P // world
    local = [r for r in rows[rank * per:(rank + 1) * per] for _ in range(G)]
    model.train()
    out = trainer._generate_and_score_completions(local)
    metrics = {k: v[-1] for k, v in trainer._metrics["train"].items() if k.startswith(_METRIC_PREFIXES)}
    for obj in plan.loggers:
        metrics.update(obj.metrics())
    # RLME keeps the step's lp[J, K, B] for its metrics: B must be the global batch.
    kept = [(obj.last_logprobs.shape, obj.last_logprobs.ravel().tolist())
            for obj in plan.loggers if hasattr(obj, "last_logprobs")]
    for f in plan.reward_funcs:
        if hasattr(f, "close"):  # RLVRR's sandbox worker
            f.close()
    return {"n": len(local), "advantages": out["advantages"].tolist(),
            "tokens": out["completion_mask"].sum(dim=1).tolist(),
            "num_items": float(out["num_items_in_batch"]), "metrics": metrics, "kept": kept,
            "rewards": {k: list(v) for k, v in trainer._logs["rewards"].items()}}


def _worker(rank: int, world: int, port: int, assets: str, cases: tuple[str, ...]) -> None:
    import torch

    os.environ.update({"TRL_EXPERIMENTAL_SILENCE": "1", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
                       "TOKENIZERS_PARALLELISM": "false"})
    torch.set_num_threads(1)
    if world > 1:
        os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
                           "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
                           "LOCAL_WORLD_SIZE": str(world)})
        torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    else:
        for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
            os.environ.pop(key, None)
    results = {case: _score(case, rank, world, Path(assets)) for case in cases}
    (Path(assets) / f"result-{world}-{rank}.pkl").write_bytes(pickle.dumps(results))
    if world > 1:
        torch.distributed.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(world: int, assets: Path, cases: tuple[str, ...]) -> list[dict]:
    import torch.multiprocessing as mp

    mp.start_processes(_worker, args=(world, _free_port(), str(assets), cases), nprocs=world,
                       start_method="spawn", join=True)
    return [pickle.loads((assets / f"result-{world}-{r}.pkl").read_bytes()) for r in range(world)]


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    """(1-rank results, [rank 0, rank 1] results) for every case."""
    from core.params import Arch
    from models.tiny import build_model, build_tokenizer

    assets = tmp_path_factory.mktemp("ranks")
    rows = {task: _rows(task) for task in ("arith", "facts", "pairs")}
    texts = [r["prompt"] for rs in rows.values() for r in rs]
    texts += [_completion(t, r, j) for t, rs in rows.items() for r in rs for j in range(G)]
    texts += list(RUBRICS)
    tokenizer = build_tokenizer(texts, 400)
    arch = Arch(hidden_size=32, intermediate_size=64, num_layers=2, num_heads=2, max_positions=512)
    model = build_model(arch, tokenizer, seed=0)
    model.save_pretrained(assets / "base")
    tokenizer.save_pretrained(assets / "base")
    components = assets / "components"  # RLVRR's synthesised components for the facts rows
    components.mkdir()
    check = {"name": "bullets", "weight": 1.0,
             "source": "def check(response):\n    return response.lstrip().startswith('-')"}
    lines = [{"id": r["prompt_id"], "key_points": r["gold_facts"], "keywords": [[f] for f in r["gold_facts"]],
              "style_checks": [check], "references": r["references"]} for r in rows["facts"]]
    (components / "facts_train.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (components / "facts_val.jsonl").write_text("")
    return _run(1, assets, CASES)[0], _run(2, assets, CASES)


def _close(a, b, what: str) -> None:
    # Float noise only: a batch padded to another width sums log-probs in another order (~1e-5),
    # which standardisation can scale up; a rank-local statistic is off by tenths.
    assert a == pytest.approx(b, rel=1e-3, abs=1e-4), what


@pytest.mark.parametrize("case", CASES)
def test_two_ranks_score_the_batch_as_one_rank_does(layouts, case) -> None:
    one, two = layouts
    ref, parts = one[case], [r[case] for r in two]
    n = ref["n"]
    assert sum(p["n"] for p in parts) == n
    # Rewards (TRL gathers them: every rank holds the global batch's) and advantages.
    for name, values in ref["rewards"].items():
        for p in parts:
            _close(p["rewards"][name], values, f"{case}: rewards of {name}")
    _close([a for p in parts for a in p["advantages"][:p["n"]]], ref["advantages"][:n], f"{case}: advantages")
    # Rejected groups (DRO) are the rows whose completion tokens are masked out.
    assert [t for p in parts for t in p["tokens"][:p["n"]]] == ref["tokens"][:n], f"{case}: masked rows"
    # RLCER's rubricator rows follow the reasoner rows on each rank.
    _close([a for p in parts for a in p["advantages"][p["n"]:]], ref["advantages"][n:],
           f"{case}: rubricator advantages")
    assert [t for p in parts for t in p["tokens"][p["n"]:]] == ref["tokens"][n:]
    for p in parts:
        assert p["num_items"] == ref["num_items"], f"{case}: the loss normaliser's token count"
    # Logged metrics: global on the main process (and the loggers' on every rank).
    assert set(parts[0]["metrics"]) == set(ref["metrics"]), case
    for key, value in ref["metrics"].items():
        _close(parts[0]["metrics"][key], value, f"{case}: metric {key}")
        if key.split("/")[0] in ("rlme", "rlvrr", "genrm"):
            _close(parts[1]["metrics"][key], value, f"{case}: metric {key} on rank 1")
    for p in parts:
        assert len(p["kept"]) == len(ref["kept"])
        for (shape, mine), (ref_shape, theirs) in zip(p["kept"], ref["kept"]):
            assert shape == ref_shape, f"{case}: RLME's kept log-probs cover the global batch"
            _close(mine, theirs, f"{case}: RLME's kept log-probs")


def test_the_fixed_batch_has_signal(layouts) -> None:
    """The comparison is not vacuous: rewards vary within groups, and DRO rejects some group."""
    one, _ = layouts
    for case in ("rlvr", "rlme", "rlvr_rlme", "rlvrr", "rlcer", "rationale", "dro"):
        assert any(abs(a) > 1e-3 for a in one[case]["advantages"]), case
    dro = one["dro"]
    assert 0 < dro["metrics"]["dro/rejected"] < 1 and 0 in dro["tokens"]


# --- the label-free rewards beyond the five papers (docs/methods/README.md) --------------------------

INTRINSIC_CASES = ("ttrl", "empo", "self_certainty", "entropy", "format", "incorrect")


@pytest.fixture(scope="module")
def intrinsic_layouts(tmp_path_factory):
    """(1-rank results, [rank 0, rank 1] results) for the intrinsic and spurious rewards: all train
    on arith, so the assets are the arith rows' tokenizer and a tiny random Llama."""
    import torch

    from core.params import Arch
    from models.tiny import build_model, build_tokenizer

    assets = tmp_path_factory.mktemp("ranks_intrinsic")
    rows = _rows("arith")
    tokenizer = build_tokenizer([r["prompt"] for r in rows]
                                + [_completion("arith", r, j) for r in rows for j in range(G)], 400)
    arch = Arch(hidden_size=32, intermediate_size=64, num_layers=2, num_heads=2, max_positions=512)
    model = build_model(arch, tokenizer, seed=0)
    # A random model's next-token distributions are all near uniform: its completions' entropies
    # differ by ~1e-3, and standardising them within a group would blow float noise (another
    # padding width) up past any tolerance. Sharper heads spread them as a trained model's do.
    with torch.no_grad():
        model.lm_head.weight.mul_(20.0)
    model.save_pretrained(assets / "base")
    tokenizer.save_pretrained(assets / "base")
    return _run(1, assets, INTRINSIC_CASES)[0], _run(2, assets, INTRINSIC_CASES)


@pytest.mark.parametrize("case", INTRINSIC_CASES)
def test_two_ranks_score_the_intrinsic_rewards_as_one_rank_does(intrinsic_layouts, case) -> None:
    """ttrl votes over whole groups of the global batch; the confidence rewards score each
    completion from one pass over the rank's rows; the controls are per completion."""
    test_two_ranks_score_the_batch_as_one_rank_does(intrinsic_layouts, case)
    one, _ = intrinsic_layouts
    # Not vacuous: each reward varies within a group (the fixed completions: right, wrong, cut, off-topic).
    assert any(abs(a) > 1e-3 for a in one[case]["advantages"]), case
    if case == "ttrl":
        assert set(one[case]["metrics"]) >= {"ttrl/majority_ratio", "ttrl/no_answer", "ttrl/label_accuracy"}


# --- the held-out callback on two ranks ---------------------------------------------------------

class _Weights:
    """Stands in for the policy: `save_pretrained` writes one file."""

    training = True

    def eval(self):
        self.training = False

    def train(self):
        self.training = True

    def save_pretrained(self, path):
        Path(path).mkdir(parents=True, exist_ok=True)
        (Path(path) / "model.safetensors").write_text("weights")


# Held-out score at each step: best at step 1, then 0.3 below it twice while the reward rises:
# reward hacking confirmed at step 3 (patience 2), and early_stop stops the run there.
_SCORES = [0.5, 0.8, 0.5, 0.5, 0.5, 0.5]


def _callback_worker(rank: int, world: int, port: int, out: str) -> None:
    from types import SimpleNamespace

    import torch

    from models.callbacks import HeldoutCallback
    from models.collapse import CollapseConfig, CollapseMonitor

    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                         world_size=world)
    calls = []

    def score(model):
        calls.append(state.global_step)
        return {"arith/pass@1": _SCORES[state.global_step]}

    cb = HeldoutCallback(score, every=1, headline="arith/pass@1",
                         monitor=CollapseMonitor(CollapseConfig(patience=2, early_stop=True)),
                         best_dir=Path(out) / "best")
    args = SimpleNamespace(output_dir=out)
    state = SimpleNamespace(global_step=0, log_history=[])
    stopped = None
    for step in range(len(_SCORES)):
        state.global_step = step
        state.log_history.append({"step": step, "reward": 0.1 * step})
        control = SimpleNamespace(should_save=True, should_training_stop=False)
        if step == 0:
            cb.on_train_begin(args, state, control, model=_Weights())
        else:
            cb.on_step_end(args, state, control, model=_Weights())
        if control.should_training_stop:
            stopped = step
            break
    cb.publish_best()
    (Path(out) / f"callback-{rank}.json").write_text(
        json.dumps({"stopped": stopped, "calls": calls, "history": len(cb.history)}))
    torch.distributed.destroy_process_group()


def test_the_main_rank_evaluates_and_every_rank_stops_at_its_verdict(tmp_path) -> None:
    import torch.multiprocessing as mp

    mp.start_processes(_callback_worker, args=(2, _free_port(), str(tmp_path)), nprocs=2,
                       start_method="spawn", join=True)
    main, other = (json.loads((tmp_path / f"callback-{r}.json").read_text()) for r in (0, 1))
    assert main["stopped"] == other["stopped"] == 3  # the verdict reached both ranks at once
    assert main["calls"] == [0, 1, 2, 3] and main["history"] == 4
    assert other["calls"] == [] and other["history"] == 0  # rank 1 only waited
    # One writer: the best weights once, one state file per step, no temporary names left.
    assert (tmp_path / "best" / "model.safetensors").exists()
    assert sorted(p.name for p in (tmp_path / "heldout_state").iterdir()) == [
        f"checkpoint-{s}.json" for s in range(1, 4)]
    assert not [p for p in tmp_path.rglob("*") if ".tmp" in p.name]


# --- a real two-process launch ------------------------------------------------------------------

@pytest.fixture(scope="module")
def launch_clone(tmp_path_factory):
    """A micro-preset clone with its base model and RLVRR components built (3 GRPO steps)."""
    from tests.test_orchestration import BIN, make_clone, sh

    d = tmp_path_factory.mktemp("launch") / "repo"
    env = make_clone(d, grpo={"max_steps": 3, "save_steps": 1, "heldout_every": 1})
    env["OMP_NUM_THREADS"] = "1"
    sh([str(BIN / "dvc"), "repro", "build_base", "synthesize"], d, env)
    return d, env


@pytest.mark.slow
@pytest.mark.parametrize("method", ["random", "rlme", "rlvr_rlme", "rlvrr", "dro", "rlcer", "rationale"])
def test_every_method_on_two_processes_records_once(launch_clone, method) -> None:
    """A 2-process launch of each method: one MLflow run, one run.json, one best/, no temp files."""
    import mlflow

    from tests.test_orchestration import BIN, sh

    d, env = launch_clone
    log = sh([str(BIN / "accelerate"), "launch", "--config_file", "configs/accelerate/cpu_2proc.yaml",
              "-m", "flows.train", "--method", method, "--seed", "0", "--num-processes", "2"], d, env)
    assert len([line for line in log.splitlines() if line.startswith('{"method"')]) == 1
    run_dir = d / "data" / "checkpoints" / method / "seed0"
    assert [p.name for p in run_dir.rglob("run.json")] == ["run.json"]
    assert (run_dir / "best").is_dir() and not [p for p in run_dir.rglob("*") if ".tmp" in p.name]
    client = mlflow.MlflowClient(tracking_uri=env["MLFLOW_TRACKING_URI"])
    runs = [r for e in client.search_experiments() for r in client.search_runs(
        [e.experiment_id], f"tags.reward_method = '{method}'")]
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"


@pytest.mark.slow
def test_a_two_process_launch_trains_once_and_records_once(launch_clone) -> None:
    """`accelerate launch` with configs/accelerate/cpu_2proc.yaml on the micro preset: two gloo
    ranks, one MLflow run, one run.json, one best/ folder; a launch that gives fewer processes
    than `--num-processes` asks for is refused with exit code 2 and one line."""
    import subprocess
    import sys

    import mlflow

    from tests.test_orchestration import BIN, sh

    d, env = launch_clone

    refused = subprocess.run([sys.executable, "-m", "flows.train", "--method", "rlvr", "--num-processes", "2"],
                             cwd=d, env=env, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and refused.stderr.strip().endswith(errors[0])  # one line, last
    assert "--num-processes 2" in errors[0] and "runs 1 process" in errors[0]

    log = sh([str(BIN / "accelerate"), "launch", "--config_file", "configs/accelerate/cpu_2proc.yaml",
              "-m", "flows.train", "--method", "rlvr", "--seed", "0", "--num-processes", "2"], d, env)
    summaries = [line for line in log.splitlines() if line.startswith('{"method"')]
    assert len(summaries) == 1  # printed by the main process only
    data = d / "data"
    rlvr = data / "checkpoints" / "rlvr"  # the other methods' launches share this clone
    assert [p.relative_to(data).as_posix() for p in rlvr.rglob("run.json")] == ["checkpoints/rlvr/seed0/run.json"]
    assert [p.relative_to(data).as_posix() for p in rlvr.rglob("best") if p.is_dir()] == [
        "checkpoints/rlvr/seed0/best"]
    assert not [p for p in data.rglob("*") if ".tmp" in p.name]
    client = mlflow.MlflowClient(tracking_uri=env["MLFLOW_TRACKING_URI"])
    runs = [r for e in client.search_experiments() for r in client.search_runs(
        [e.experiment_id], "tags.reward_method = 'rlvr'")]
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    assert runs[0].info.run_id == json.loads(summaries[0])["run_id"]
    steps = [m.step for m in client.get_metric_history(runs[0].info.run_id, "heldout/arith/pass_at_1")]
    assert steps == [0, 1, 2, 3]  # one held-out evaluation per step, not one per rank

    # The setting: `grpo.num_processes: 2` makes a plain `python -m flows.train` (the DVC/Prefect
    # train stage's command) relaunch itself on two processes.
    import yaml

    raw = yaml.safe_load((d / "params.yaml").read_text())
    raw["presets"]["ci"]["grpo"]["num_processes"] = 2
    (d / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    r = subprocess.run([sys.executable, "-m", "flows.train", "--method", "rlvr", "--seed", "0"],
                       cwd=d, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "relaunching with launch --config_file configs/accelerate/cpu_2proc.yaml" in r.stderr
    assert "training on 2 processes" in r.stderr
    assert len([line for line in r.stdout.splitlines() if line.startswith('{"method"')]) == 1


def test_a_launch_without_the_asked_processes_is_refused(monkeypatch) -> None:
    from flows.train import LaunchError, launch

    for name in ("WORLD_SIZE", "LOCAL_RANK", "RANK"):
        monkeypatch.delenv(name, raising=False)
    assert launch(None) == 1 and launch(1) == 1
    with pytest.raises(LaunchError, match="--num-processes 2 was asked for but this launch runs 1"):
        launch(2)
