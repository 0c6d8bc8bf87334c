"""A micro model trained for real: SFT from scratch, two GRPO steps, resume from a checkpoint."""

import json

import pytest

from core.params import load
from flows.train import curves, make_plan, task_rows
from world import generate_world

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def micro(tmp_path_factory):
    from models.tiny import train_base

    p = load(preset="ci")
    d = tmp_path_factory.mktemp("micro")
    generate_world(p.world, d / "prepared")
    info = train_base(d / "prepared", d / "base", p.base_model, p.seed, work_dir=d / "sft")
    return p, d, info


def test_base_model_saved_and_loadable(micro):
    from models.policy import load_policy

    p, d, info = micro
    model, tok = load_policy(d / "base")
    assert info["parameters"] == sum(x.numel() for x in model.parameters())
    assert tok.eos_token == "<|endoftext|>" and tok.pad_token != tok.eos_token
    ids = tok("Ann has 12 apples.")["input_ids"]
    assert tok.decode(ids) == "Ann has 12 apples."
    digits = [tok.convert_ids_to_tokens(i) for i in tok("1234")["input_ids"]]
    assert digits == ["1", "2", "3", "4"]


def test_two_builds_on_one_machine_are_identical(micro, tmp_path):
    """The base of record is shipped in git because another CPU builds another base; on one
    machine the build must be exactly repeatable, or the shipped base could not be checked."""
    from models.tiny import train_base

    p, d, _ = micro
    train_base(d / "prepared", tmp_path / "base", p.base_model, p.seed, work_dir=tmp_path / "sft")
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert (tmp_path / "base" / name).read_bytes() == (d / "base" / name).read_bytes(), name


@pytest.mark.parametrize("method", ["rlvr", "random"])
def test_two_grpo_steps_then_resume(micro, method):
    from models import grpo

    p, d, _ = micro
    rows = task_rows(d / "prepared", "arith")
    out = d / f"ckpt-{method}"
    history = grpo.train(d / "base", rows, make_plan(p, method, p.seed, None, None), p.grpo,
                         seed=p.seed, output_dir=out)
    curve = curves(history)
    assert [c["step"] for c in curve] == [1, 2]
    assert all(0.0 <= c["reward"] <= 1.0 for c in curve)
    assert (out / "final" / "config.json").exists()
    assert grpo.last_checkpoint(out).name == "checkpoint-2"
    state = json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["global_step"] == 2
    assert (out / "checkpoint-2" / "optimizer.pt").exists() and list((out / "checkpoint-2").glob("rng_state*"))
    # Two more steps resume from checkpoint-2 instead of starting over.
    more = p.grpo.model_copy(update={"max_steps": 4})
    history = grpo.train(d / "base", rows, make_plan(p, method, p.seed, None, None), more,
                         seed=p.seed, output_dir=out)
    assert [c["step"] for c in curves(history)][-2:] == [3, 4]


@pytest.mark.parametrize("method", ["rlme_ensemble", "rlvr_rlme", "rlme_gt10"])
def test_rlme_variants_train_two_steps(micro, method):
    """Live + frozen evaluators, the hybrid and anchoring run inside TRL's loop."""
    from models import grpo
    from models.policy import load_policy

    p, d, _ = micro
    model, tok = load_policy(d / "base", for_training=True)
    plan = make_plan(p, method, p.seed, model, tok)
    g = p.method_grpo(method)
    assert g.loss_type == "cispo" and g.scale_rewards == "none"
    history = grpo.train(d / "base", task_rows(d / "prepared", "arith"), plan, g, seed=p.seed,
                         output_dir=d / f"ckpt-{method}", model=model, tokenizer=tok)
    curve = curves(history)
    assert [c["step"] for c in curve] == [1, 2]
    reward = plan.loggers[-1]  # the MetaEvalReward
    lp = reward.last_logprobs
    assert lp.shape[0] == len(reward.evaluators) and (lp <= 0).all()
    assert any(k.endswith("_prob") for k in reward.metrics())
    if method == "rlvr_rlme":  # the collapse monitor reads the raw meta-evaluation reward
        assert plan.monitor_reward == "hybrid/rlme"
        assert all("hybrid/rlme" in c for c in curve)


@pytest.mark.parametrize("method", ["r3", "rlme"])
def test_a_run_repeats_exactly_on_one_machine(micro, tmp_path, method):
    """A reward that is a continuous function of the policy's probabilities (R3, RLME) passes a
    float-order difference on to the update, so two machines' runs of one seed may part
    (docs/report.md, "Does the code drift change a run?"); on one machine the same seed must give
    the same run, bit for bit, or a rerun could never check a record."""
    from models import grpo
    from models.policy import load_policy

    p, d, _ = micro
    logs = []
    for attempt in ("a", "b"):
        model, tok = load_policy(d / "base", for_training=True)
        g = p.method_grpo(method)
        history = grpo.train(d / "base", task_rows(d / "prepared", "arith"),
                             make_plan(p, method, p.seed, model, tok), g, seed=p.seed,
                             output_dir=tmp_path / attempt, model=model, tokenizer=tok)
        logs.append([{k: v for k, v in row.items() if "time" not in k and "per_second" not in k}
                     for row in history])
    assert len(logs[0]) >= 2 and logs[0] == logs[1]


def test_judge_built_and_used_as_an_external_evaluator(micro):
    """The tiny world's judge trains on its own rows, then rlme_judge runs two GRPO steps with it."""
    from models import grpo
    from models.policy import load_policy
    from models.tiny import train_judge

    p, d, _ = micro
    info = train_judge(d / "prepared", d / "base", d / "judge", p.base_model, p.seed,
                       work_dir=d / "judge-work")
    assert info["steps"] == p.base_model.judge.steps and info["rows"] >= 2 * p.world.arith.n_train
    raw = p.model_dump()
    raw["variants"]["rlme_judge"]["reward"]["evaluators"][0]["source"] = str(d / "judge")
    from core.params import validate

    q = validate(raw)
    model, tok = load_policy(d / "base", for_training=True)
    plan = make_plan(q, "rlme_judge", q.seed, model, tok)
    history = grpo.train(d / "base", task_rows(d / "prepared", "arith"), plan, q.method_grpo("rlme_judge"),
                         seed=q.seed, output_dir=d / "ckpt-judge", model=model, tokenizer=tok)
    assert [c["step"] for c in curves(history)] == [1, 2]
    assert "rlme/judge_q0_prob" in plan.loggers[-1].metrics()


def test_missing_evaluator_path_fails_before_training(micro, tmp_path):
    p, d, _ = micro
    raw = p.model_dump()
    raw["variants"]["rlme_frozen"]["reward"]["evaluators"] = [
        {"name": "judge", "source": str(tmp_path / "no-such-model"), "weight": 1.0}]
    from core.params import validate

    bad = validate(raw)
    with pytest.raises(FileNotFoundError, match="no-such-model.*does not exist"):
        make_plan(bad, "rlme_frozen", 0, None, None)


def test_local_checkpoint_replaces_the_tiny_model(micro, monkeypatch, tmp_path):
    """`base_model.path` names a local transformers folder: build_base checks it, trains nothing."""
    from flows import build_base as stage

    p, d, info = micro
    monkeypatch.setattr(stage.paths, "DATA", tmp_path)
    p = p.model_copy(update={"base_model": p.base_model.model_copy(update={"path": str(d / "base")})})
    out = stage.build_base(p)
    assert out["source"] == str(d / "base") and out["parameters"] == info["parameters"]
    missing = p.model_copy(update={"base_model": p.base_model.model_copy(update={"path": str(tmp_path / "nope")})})
    with pytest.raises(FileNotFoundError, match="not a model folder"):
        stage.build_base(missing)
