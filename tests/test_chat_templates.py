"""Chat and reasoning checkpoints (rewards/chat.py): with a tokenizer that has a chat template,
every method's and role's prompt goes through it, thinking on or off; the tiny model's plain
prompts stay as they were. The checkpoint is a random-weight Qwen3-architecture model with a
Qwen3-style template, built in the test (tests/qwen3_chat.py)."""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

import numpy as np
import pytest

from core.params import load
from rewards.chat import ChatFormat, prompt_text, strip_thinking
from tests.qwen3_chat import END_THINK, IM_END, IM_START, save_qwen3_chat
from tests.test_dro_trainer import arith_rows, facts_rows

USER = f"{IM_START}user\n"
ASSISTANT = f"{IM_START}assistant\n"
EMPTY_THINK = "<think>\n\n</think>\n\n"
THINK_ON, THINK_OFF = ChatFormat(enable_thinking=True), ChatFormat(enable_thinking=False)


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory):
    """(folder, model, tokenizer) of a random-weight Qwen3 with a Qwen3-style chat template."""
    from models.policy import load_policy

    texts = [t for r in arith_rows(40) for t in (r["prompt"], r["reference"])]
    texts += [t for r in facts_rows(10) for t in (r["prompt"], *r["references"])]
    texts += ["Is the answer correct? YES NO Rubrics: criterion points Answer:"]
    folder = save_qwen3_chat(tmp_path_factory.mktemp("qwen3") / "model", texts)
    model, tok = load_policy(folder)
    return folder, model, tok


@pytest.fixture(scope="module")
def tiny():
    """The tiny project tokenizer (no chat template) and a tiny Llama."""
    from core.params import Arch
    from models.tiny import build_model, build_tokenizer

    tok = build_tokenizer([t for r in arith_rows(40) for t in (r["prompt"], r["reference"])], 400)
    arch = Arch(hidden_size=32, intermediate_size=64, num_layers=2, num_heads=2, max_positions=384)
    return build_model(arch, tok, seed=0).eval(), tok


# --- the setting --------------------------------------------------------------------------------

def test_params_default_is_auto_and_validated():
    p = load()
    assert p.base_model.chat.use_template == "auto" and p.base_model.chat.enable_thinking is None
    assert ChatFormat.from_params(p) == ChatFormat()
    raw = p.model_dump()
    raw["base_model"]["chat"] = {"use_template": "always"}
    from core.params import ParamsError, validate

    with pytest.raises(ParamsError, match="base_model.chat.use_template"):
        validate(raw)


def test_auto_follows_the_tokenizer(qwen3, tiny):
    _, _, tok = qwen3
    plain = tiny[1]
    assert ChatFormat().applies(tok) and not ChatFormat().applies(plain)
    assert not ChatFormat(use_template="off").applies(tok)
    with pytest.raises(ValueError, match="no chat_template"):
        ChatFormat(use_template="on").applies(plain)
    # The tiny model keeps its plain prompts, byte for byte.
    assert ChatFormat().prompt(plain, "Q: 1 + 1?") == "Q: 1 + 1?"
    assert ChatFormat().render(plain, "Q: 1 + 1?") == "Q: 1 + 1?"
    assert ChatFormat().user_turn(plain, "Q: 1 + 1?") == "Q: 1 + 1?"


def test_policy_prompt_goes_through_the_template_and_thinking_changes_it(qwen3):
    _, _, tok = qwen3
    q = arith_rows(1)[0]["prompt"]
    assert THINK_ON.prompt(tok, q) == [{"role": "user", "content": q}]
    on, off = THINK_ON.render(tok, q), THINK_OFF.render(tok, q)
    assert on == f"{USER}{q}{IM_END}\n{ASSISTANT}"
    assert off == on + EMPTY_THINK
    assert on != off
    system = ChatFormat(system="Be brief.").render(tok, q)
    assert system.startswith(f"{IM_START}system\nBe brief.{IM_END}\n{USER}")
    assert prompt_text(ChatFormat(system="Be brief.").messages(q)) == q


def test_trl_renders_the_dataset_prompts_with_the_thinking_setting(qwen3, tmp_path):
    """What the policy is conditioned on in training: TRL's own tokenisation of the rows
    `models.grpo.train` makes conversational, with `chat_template_kwargs` from the setting."""
    from datasets import Dataset
    from trl import GRPOTrainer

    from models.grpo import grpo_config

    _, model, tok = qwen3
    g = load(preset="ci").grpo
    q = arith_rows(1)[0]["prompt"]
    seen = {}
    for name, chat in (("on", THINK_ON), ("off", THINK_OFF)):
        args = grpo_config(g, seed=0, output_dir=tmp_path / name,
                           chat_template_kwargs=chat.template_kwargs)
        assert args.chat_template_kwargs == chat.template_kwargs
        trainer = GRPOTrainer(model=model, reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
                              args=args, processing_class=tok,
                              train_dataset=Dataset.from_list([{"prompt": chat.prompt(tok, q)}]))
        ids = trainer._tokenize_prompts([chat.prompt(tok, q)])[0][0]
        seen[name] = tok.decode(ids, skip_special_tokens=False)
    assert seen["on"] == THINK_ON.render(tok, q) and seen["off"] == THINK_OFF.render(tok, q)
    assert seen["off"].endswith(EMPTY_THINK) and not seen["on"].endswith(EMPTY_THINK)


def test_strip_thinking():
    assert strip_thinking("<think>\nx\n</think>\n\nThe answer is 4.") == "The answer is 4."
    assert strip_thinking("<think>\nunfinished") == ""
    assert strip_thinking(" 2 + 2 = 4. The answer is \\boxed{4}.") == " 2 + 2 = 4. The answer is \\boxed{4}."


# --- RLME's evaluator ---------------------------------------------------------------------------

def test_evaluator_prompt_is_a_user_turn_and_yes_starts_the_reply(qwen3):
    from rewards.evaluator_prompt import target_logprobs
    from rewards.teacher_forcing import teacher_forced_logprobs

    _, model, tok = qwen3
    prompt = "Problem 1 + 1? Solution \\boxed{2}\nQuestion: Is the answer correct?\nAnswer:"
    turn = THINK_ON.user_turn(tok, prompt)
    # Thinking is off for a verdict whatever the policy's setting: YES is the reply's first token.
    assert turn == f"{USER}{prompt}{IM_END}\n{ASSISTANT}{EMPTY_THINK}"
    target = "YES" + tok.eos_token
    got = target_logprobs(model, tok, [prompt], target, chat=THINK_ON)
    prefix = tok(turn, add_special_tokens=False)["input_ids"]
    expected, _ = teacher_forced_logprobs(model, [prefix], [tok(target, add_special_tokens=False)["input_ids"]],
                                          tok.pad_token_id)
    assert got.item() == pytest.approx(expected.sum().item(), abs=1e-5)
    assert got.item() != pytest.approx(target_logprobs(model, tok, [prompt], target).item(), abs=1e-6)


def test_meta_eval_reward_wraps_every_evaluator_prompt(qwen3, monkeypatch):
    from rewards import meta_eval

    _, model, tok = qwen3
    calls = []
    real = meta_eval.target_logprobs

    def spy(model, tokenizer, prompts, target, *, chat=None):
        calls.append([chat.user_turn(tokenizer, p) for p in prompts])
        return real(model, tokenizer, prompts, target, chat=chat)

    monkeypatch.setattr(meta_eval, "target_logprobs", spy)
    reward = meta_eval.MetaEvalReward(
        [meta_eval.Evaluator("live", "live")], [meta_eval.MetaQuestion("Is the answer correct?")],
        load().reward.rlme.template, policy=model, tokenizer=tok, chat=THINK_ON)
    q = arith_rows(1)[0]["prompt"]
    out = reward(prompts=[THINK_ON.messages(q)] * 2,
                 completions=[[{"role": "assistant", "content": "<think>\n1 + 1 = 2\n</think>\n\n\\boxed{2}"}],
                              [{"role": "assistant", "content": "\\boxed{3}"}]])
    assert len(out) == 2 and all(np.isfinite(out)) and all(r < 0 for r in out)
    (rendered,) = calls
    for text in rendered:
        assert text.startswith(USER + q) and text.endswith(ASSISTANT + EMPTY_THINK)
        assert "Question: Is the answer correct?" in text


# --- RLCER's rubricator and judge ---------------------------------------------------------------

class FakeTrainer:
    def __init__(self, outputs, group_size):
        self.outputs, self.group_size, self.prompts = outputs, group_size, []

    def sample_rubricator(self, prompts):
        self.prompts.extend(prompts)
        return [[1] * 3 for _ in prompts], [[2] for _ in prompts], \
            [self.outputs[i % len(self.outputs)] for i in range(len(prompts))]


def test_rubricator_prompts_are_conversations_rendered_with_the_template(qwen3):
    from models.rlcer_trainer import RlcerReward

    _, _, tok = qwen3
    cfg = SimpleNamespace(mode="rlcer", alpha=0.2, verifier="rule", rubricator_rollouts=2,
                          rubricator_template="{problem}{solution}\nRubrics:", max_rubric_tokens=96, seed=0)
    rubrics = json.dumps([{"criterion": "each step's arithmetic is correct", "points": 3}])
    # A reasoning rubricator's JSON is read from its reply, after the think block.
    reward = RlcerReward(cfg, seed=0, chat=THINK_ON)
    reward.trainer = FakeTrainer([f"<think>\n[1, 2]\n</think>\n\n{rubrics}"], group_size=2)
    q = "Problem: 7 + 5?\nSolution:"
    prompt = ChatFormat(system="Be brief.").messages(q)
    good, bad = " 7 + 5 = 12. The answer is \\boxed{12}.", " 7 + 5 = 13. The answer is \\boxed{13}."
    rewards = reward(prompts=[prompt] * 2, completions=[[{"role": "assistant", "content": c}] for c in (good, bad)],
                     answer=["12", "12"], trainer_state=None)
    assert len(rewards) == 2
    sent = reward.trainer.prompts
    assert len(sent) == 2 and sent == reward.last_rubricator_prompts
    for p in sent:
        assert p[0] == {"role": "system", "content": "Be brief."} and p[1]["role"] == "user"
        text = THINK_OFF.render(tok, p)
        assert f"{USER}{q}" in text and text.endswith(f"Rubrics:{IM_END}\n{ASSISTANT}{EMPTY_THINK}")
    assert reward.pop_rubricator().rewards[0] >= 0.0  # parsed: format reward, not the -1 of None


def test_judge_verifier_asks_in_a_user_turn(qwen3, monkeypatch):
    from models import rlcer_trainer
    from rewards.evolving_rubrics import ProposedRubric

    folder, _, _ = qwen3
    seen = {}

    def spy(model, tokenizer, prompts, yes_id, no_id, batch_size=None, add_special_tokens=True):
        seen.update(prompts=list(prompts), add_special_tokens=add_special_tokens)
        return np.zeros(len(prompts), dtype=bool)

    monkeypatch.setattr(rlcer_trainer, "yes_no_judgements", spy)
    judge = rlcer_trainer.make_verifier(str(folder), THINK_ON)
    assert judge([("Problem: 7 + 5?", " 7 + 5 = 12.", ProposedRubric("adds correctly", 2))]) == [False]
    (prompt,) = seen["prompts"]
    assert prompt.startswith(USER) and prompt.endswith(ASSISTANT + EMPTY_THINK)
    assert "Criterion: adds correctly (points: 2)" in prompt and seen["add_special_tokens"] is False


# --- the GenRM ----------------------------------------------------------------------------------

def test_genrm_prompts_carry_the_template_and_its_reply_is_scored(qwen3):
    from rewards.genrm import GenrmReward
    from world import pairs

    _, _, tok = qwen3
    row = pairs.generate(random.Random(0), 1, "train", min_ops=2, max_ops=3, max_value=20)[0]
    rendered = THINK_ON.render(tok, row["prompt"])
    assert rendered.startswith(USER + row["prompt"]) and rendered.endswith(ASSISTANT)
    reward = GenrmReward("hybrid")
    demo = row["demonstration"]
    # Reasoning before the reply does not count as reasons; the reply scores as it would alone.
    thought = "<think>\n1. Response A: guessed.\n\\boxed{B>A}\n</think>\n\n" + demo
    args = dict(checklist=[row["checklist"]] * 2, label=[row["label"]] * 2)
    plain, think = reward([""] * 2, [demo, thought], **args)
    assert think == pytest.approx(plain) and plain == pytest.approx(1.0)
    assert reward([""], ["<think>\n1. unfinished"], checklist=[row["checklist"]], label=[row["label"]]) == [0.0]


# --- DRO: the reference after </think> ----------------------------------------------------------

def dro_cfg(**update):
    return load(preset="ci").method_config("dro")[1].model_copy(update=update)


def captured_prefixes(monkeypatch):
    from models import dro_trainer

    seen = {}
    real = dro_trainer.teacher_forced_logprobs

    def spy(model, prefixes, targets, pad_id):
        seen.update(prefixes=[list(p) for p in prefixes], targets=[list(t) for t in targets])
        return real(model, prefixes, targets, pad_id)

    monkeypatch.setattr(dro_trainer, "teacher_forced_logprobs", spy)
    return seen


@pytest.mark.parametrize("task", ["arith", "facts"])
def test_dro_scores_the_reference_after_the_rollouts_think_block(qwen3, monkeypatch, task):
    from models.dro_trainer import score_rollouts

    _, model, tok = qwen3
    row = (arith_rows if task == "arith" else facts_rows)(1)[0]
    reference = row["reference"].lstrip() if task == "arith" else row["references"][0]
    seen = captured_prefixes(monkeypatch)
    closed = "<think>\n4 + 5 = 9\n</think>\n\nThe answer is \\boxed{9}."
    unclosed = "<think>\n4 + 5 ="
    ids = tok([closed, unclosed], add_special_tokens=False)["input_ids"]
    ids[0] = ids[0] + [tok.eos_token_id]
    prompt = THINK_ON.messages(row["prompt"])
    logps = score_rollouts(model, tok, [prompt, prompt], [row, row], ids, task, END_THINK,
                           THINK_ON.template_kwargs)
    assert len(logps) == 2 and all(np.isfinite(lp).all() and (lp <= 0).all() for lp in logps)
    head = THINK_ON.render(tok, row["prompt"])
    texts = [tok.decode(p, skip_special_tokens=False) for p in seen["prefixes"]]
    assert texts[0] == head + "<think>\n4 + 5 = 9\n</think>\n\n"  # its own reasoning, then a blank line
    assert texts[1] == head + unclosed + "\n</think>\n\n"     # a reasoning cut short is closed
    assert all(tok.decode(t) == reference for t in seen["targets"])
    # Thinking off renders a different prompt (the empty think block is in it).
    score_rollouts(model, tok, [prompt], [row], ids[:1], task, END_THINK, THINK_OFF.template_kwargs)
    assert tok.decode(seen["prefixes"][0], skip_special_tokens=False).startswith(THINK_OFF.render(tok, row["prompt"]))


def test_dro_rubrics_and_reference_with_the_think_marker():
    from rewards import dro

    row = arith_rows(1)[0]
    assert dro.reference_answer(row, "arith", END_THINK) == row["reference"].lstrip()
    names = [r.name for r in dro.query_rubrics(row, "arith", END_THINK)]
    assert names == ["boxed_integer", "boxed_once", "ends_after_box", "cot_matches_box"]
    gold = row["answer"]
    good = f"<think>\nso it is {gold} = {gold}\n</think>\n\nThe answer is \\boxed{{{gold}}}."
    assert all(dro.rubric_row(row, good, "arith", END_THINK))
    assert not any(dro.rubric_row(row, "<think>\nno end", "arith", END_THINK))


def test_dro_plan_refuses_the_think_marker_without_thinking(qwen3, tiny):
    from models import dro_trainer
    from rewards import MethodContext

    _, model, tok = qwen3
    p = load(preset="ci")
    cfg = dro_cfg(answer_marker=END_THINK)
    ctx = MethodContext(name="dro", family="dro", cfg=cfg, grpo=p.method_grpo("dro"), seed=0,
                        policy=model, tokenizer=tok, chat=THINK_ON)
    assert dro_trainer.build(ctx).trainer_cls is dro_trainer.DroGRPOTrainer
    for chat, tokenizer in ((THINK_OFF, tok), (THINK_ON, tiny[1])):
        ctx.chat, ctx.tokenizer = chat, tokenizer
        with pytest.raises(ValueError, match="reasoning model"):
            dro_trainer.build(ctx)


def test_plain_prompts_score_exactly_as_before(tiny):
    """The tiny model's DRO pass: prompt ids as TRL's plain tokenisation, CoT tokens, no separator."""
    from models.dro_trainer import prompt_ids

    _, tok = tiny
    prompts = [r["prompt"] for r in arith_rows(3)]
    assert prompt_ids(tok, prompts) == tok(text=prompts)["input_ids"]
    with pytest.raises(ValueError, match="all plain text or all conversational"):
        prompt_ids(tok, [prompts[0], [{"role": "user", "content": prompts[1]}]])


def test_dro_scoring_in_micro_batches_matches_one_pass(qwen3):
    from models.dro_trainer import score_rollouts

    _, model, tok = qwen3
    rows = arith_rows(5)
    prompts = [THINK_ON.messages(r["prompt"]) for r in rows]
    ids = tok([f"<think>\n{i} + 1 =\n</think>\n\nok" for i in range(5)], add_special_tokens=False)["input_ids"]
    args = (model, tok, prompts, rows, ids, "arith", END_THINK, THINK_ON.template_kwargs)
    whole, chunked = score_rollouts(*args), score_rollouts(*args, batch_size=2)
    assert all(np.allclose(a, b, atol=1e-5) for a, b in zip(whole, chunked, strict=True))


# --- a method's own thinking ----------------------------------------------------------------------

def test_a_method_overrides_the_thinking_setting():
    from core.params import validate
    from flows.configure import chat_config

    raw = load().model_dump()
    assert chat_config(validate(raw), "dro") == {}  # the tiny model: the setting cannot matter
    raw["base_model"]["path"] = "/models/Qwen3-0.6B"
    raw["base_model"]["chat"]["enable_thinking"] = False
    raw["reward"]["dro"]["grpo"] = {"enable_thinking": True}
    p = validate(raw)
    assert p.method_grpo("dro").enable_thinking is True and p.method_grpo("rlvr").enable_thinking is None
    assert chat_config(p, "dro")["chat"]["enable_thinking"] is True
    assert chat_config(p, "rlvr")["chat"]["enable_thinking"] is False
    base = ChatFormat.from_params(p)
    assert base.with_thinking(None) == base and base.with_thinking(True).enable_thinking is True


# --- the GPU presets (docs/gpu.md) ------------------------------------------------------------------

@pytest.mark.parametrize("preset, ranks", [("qwen3_0p6b_1gpu", 1), ("qwen3_1p7b_1gpu", 1),
                                           ("qwen3_0p6b_8gpu", 4), ("qwen3_1p7b_8gpu", 4)])
def test_gpu_presets_validate_and_split_into_whole_groups(preset, ranks):
    from models.grpo import per_device_prompts

    p = load(preset=preset)
    assert p.base_model.path.startswith("/models/Qwen3-") and p.data.source == "external"
    assert p.method_config("dro")[1].answer_marker == END_THINK
    for method in p.methods:  # the study's arms: the seven methods and variants of them
        g, family = p.method_grpo(method), p.method_config(method)[0]
        world = 8 if family == "rlcer" and ranks == 4 else ranks  # RLCER trains on all 8 GPUs
        assert g.use_vllm == (family != "rlcer")
        assert g.prompts_per_step % g.gradient_accumulation_steps == 0, method
        assert per_device_prompts(g.prompts_per_step // g.gradient_accumulation_steps, world) >= 1
        assert (g.enable_thinking is True) == (family in ("dro", "rlcer", "rationale")), method


# --- evaluation ---------------------------------------------------------------------------------

def test_evaluation_samples_through_the_template(qwen3, monkeypatch):
    from evals import suite

    _, model, tok = qwen3
    seen = []

    def fake_generate(model, tokenizer, prompts, *, num_samples=1, greedy=False, **_):
        seen.extend(prompts)
        return [["<think>\nhm\n</think>\n\nThe answer is \\boxed{1}."] * (1 if greedy else num_samples)
                for _ in prompts]

    monkeypatch.setattr(suite, "generate", fake_generate)
    rows = arith_rows(2)
    monkeypatch.setattr(suite, "benchmark_rows", lambda spec, prepared, split, n: rows)
    ev = load(preset="ci").eval
    out = suite.evaluate_policy(model, tok, None, ["arith"], ev, 0, chat=THINK_OFF)
    assert seen and all(p.startswith(USER) and p.endswith(EMPTY_THINK) for p in seen)
    assert out["arith/mean_length"] == len("The answer is \\boxed{1}.")  # the reply, not the thinking


# --- training (slow) ----------------------------------------------------------------------------

METHODS = ["rlvr", "random", "rlme", "rlvrr", "dro", "rlcer", "rationale"]


@pytest.fixture(scope="module")
def qwen3_world(tmp_path_factory):
    """The ci world, RLVRR's components, and a Qwen3 checkpoint as base_model.path."""
    from flows.synthesize import synthesize_stage
    from models.tiny import corpus
    from world import generate_world

    p = load(preset="ci")
    d = tmp_path_factory.mktemp("qwen3-world")
    generate_world(p.world, d / "prepared")
    synthesize_stage(p, d / "prepared", d / "components")
    folder = save_qwen3_chat(d / "qwen3", corpus(d / "prepared"))
    return p, d, folder


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
def test_qwen3_trains_two_grpo_steps_on_templated_prompts(qwen3_world, method):
    """Two real GRPO steps of the Qwen3-architecture model per method (thinking on; DRO scores its
    reference after `</think>`); the first prompt the policy was given carries the template."""
    from flows.train import curves, make_plan, task_rows
    from models import grpo
    from models.policy import load_policy

    p, d, folder = qwen3_world
    raw = p.model_dump()
    raw["base_model"]["path"] = str(folder)
    raw["base_model"]["chat"]["enable_thinking"] = True
    raw["reward"]["dro"]["answer_marker"] = END_THINK
    from core.params import validate

    q = validate(raw)
    chat = ChatFormat.from_params(q)
    model, tok = load_policy(folder, for_training=True)
    plan = make_plan(q, method, q.seed, model, tok, components=d / "components")
    g = q.method_grpo(method)
    out = d / f"ckpt-{method}"
    history = grpo.train(folder, task_rows(d / "prepared", g.task), plan, g, seed=q.seed,
                         output_dir=out, model=model, tokenizer=tok, chat=chat)
    assert [c["step"] for c in curves(history)] == [1, 2]
    assert all(np.isfinite(h["loss"]) for h in history if "loss" in h)
    first = (out / "first_prompt.txt").read_text()
    assert first.startswith(USER) and first.endswith(f"{IM_END}\n{ASSISTANT}")
    assert (out / "final" / "config.json").exists()
    if method == "rlcer":
        reward = plan.reward_funcs[0]
        assert all(THINK_ON.render(tok, m).startswith(USER) for m in reward.last_rubricator_prompts)
    if method == "rlme":
        assert np.isfinite(plan.loggers[-1].last_logprobs).all()


@pytest.mark.slow
def test_qwen3_thinking_off_changes_the_prompt_the_policy_gets(qwen3_world):
    from flows.train import make_plan, task_rows
    from models import grpo
    from models.policy import load_policy

    p, d, folder = qwen3_world
    model, tok = load_policy(folder, for_training=True)
    plan = make_plan(p, "rlvr", p.seed, model, tok)
    out = d / "ckpt-rlvr-nothink"
    grpo.train(folder, task_rows(d / "prepared", "arith"), plan,
               p.grpo.model_copy(update={"max_steps": 1}), seed=p.seed, output_dir=out,
               model=model, tokenizer=tok, chat=THINK_OFF)
    assert (out / "first_prompt.txt").read_text().endswith(ASSISTANT + EMPTY_THINK)
