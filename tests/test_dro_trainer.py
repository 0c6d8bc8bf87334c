"""DRO in training: the CoT/answer split, rubrics and group verdicts (rewards/dro.py), P from one
batched pass (rewards/teacher_forcing.py, models/dro_trainer.py), the plan, and (slow) GRPO steps
where a rejected group adds no gradient."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest
import torch

from core.params import Arch, load
from models import dro_trainer as dro
from models.tiny import build_model, build_tokenizer
from rewards import MethodContext, MethodPlan
from rewards import dro as dro_scoring
from rewards.reflection import AdaptiveThreshold, avg_prob_rewards
from rewards.teacher_forcing import teacher_forced_logprobs
from world import arith, facts

MARKER = "The answer is"
ARCH = Arch(hidden_size=32, intermediate_size=64, num_layers=2, num_heads=2, max_positions=384)


def arith_rows(n: int, seed: int = 0) -> list[dict]:
    raw = arith.generate(random.Random(seed), n, "train", min_ops=1, max_ops=3, max_value=99,
                         sloppy_frac=0.0, hint_frac=0.0)
    return [{"prompt_id": r["id"], "prompt": r["prompt"], "answer": r["answer"],
             "reference": r["reference"]} for r in raw]


def facts_rows(n: int, seed: int = 0) -> list[dict]:
    raw = facts.generate(random.Random(seed), n, "train", drop_frac=0.0, wrong_style_frac=0.0)
    return [{"prompt_id": r["id"], "prompt": r["prompt"], "references": r["references"],
             "gold_facts": r["gold_facts"], "style": r["style"]} for r in raw]


@pytest.fixture(scope="module")
def micro():
    """A randomly initialised tiny Llama and a tokenizer trained on a few world texts."""
    texts = [t for r in arith_rows(40) for t in (r["prompt"], r["reference"])]
    texts += [t for r in facts_rows(20) for t in (r["prompt"], *r["references"])]
    tokenizer = build_tokenizer(texts, 400)
    model = build_model(ARCH, tokenizer, seed=0).eval()
    return model, tokenizer


def dro_cfg(**update):
    return load(preset="ci").method_config("dro")[1].model_copy(update=update)


# --- split and reference ---------------------------------------------------------------------

def test_split_at_the_last_marker_with_the_space_before_it():
    text = " The answer is probably 5. 2 + 3 = 5. The answer is \\boxed{5}."
    assert dro_scoring.split_answer(text, MARKER) == (" The answer is probably 5. 2 + 3 = 5.",
                                              " The answer is \\boxed{5}.")
    assert dro_scoring.split_answer(" 2 + 3 = 5.", MARKER) == (" 2 + 3 = 5.", "")
    assert dro_scoring.split_answer("The answer is \\boxed{5}.", MARKER) == (
        "", "The answer is \\boxed{5}.")


def test_reference_answer_and_cot():
    row = {"prompt_id": "a-1", "reference": " 13 - 9 = 4. 4 / 2 = 2. The answer is \\boxed{2}."}
    assert dro_scoring.reference_answer(row, "arith", MARKER) == " The answer is \\boxed{2}."
    completion = " 13 - 9 = 4. 4 / 2 = 3. The answer is \\boxed{3}."
    # The rollout's own answer is dropped: the reference answer is scored right after its CoT.
    assert dro_scoring.cot_and_answer(completion, "arith", MARKER)[0] == " 13 - 9 = 4. 4 / 2 = 3."
    frow = facts_rows(1)[0]
    assert dro_scoring.reference_answer(frow, "facts", MARKER) == frow["references"][0]
    assert dro_scoring.cot_and_answer(" Zorb is a fox.", "facts", MARKER) == (" Zorb is a fox.",) * 2


def test_cot_ids_keep_the_generated_tokens(micro):
    _, tok = micro
    text = " 13 - 9 = 4. The answer is \\boxed{4}."
    eos = [tok.eos_token_id]
    # A sampled segmentation need not be canonical: one token per character here.
    chars = [i for ch in text for i in tok(ch, add_special_tokens=False)["input_ids"]]
    assert chars != tok(text)["input_ids"]
    cot = dro_scoring.cot_and_answer(text, "arith", MARKER)[0]
    assert dro.cot_ids(tok, chars + eos, cot) == chars[:len(cot)]
    canonical = tok(text)["input_ids"]
    assert dro.cot_ids(tok, canonical + eos, cot) == tok(cot)["input_ids"]
    assert dro.cot_ids(tok, canonical + eos, text) == canonical  # no marker: all of it, EOS dropped
    assert dro.cot_ids(tok, canonical, "") == []


def test_bad_rows_name_the_row_and_the_column():
    with pytest.raises(ValueError, match=r"row a-7: the reference has no answer marker"):
        dro_scoring.reference_answer({"prompt_id": "a-7", "reference": " 2 + 3 = 5."}, "arith", MARKER)
    with pytest.raises(ValueError, match=r"row f-1: DRO on 'facts' needs the column 'references'"):
        dro_scoring.reference_answer({"prompt_id": "f-1"}, "facts", MARKER)


# --- rubrics ----------------------------------------------------------------------------------

def test_arith_rubrics_judge_the_final_answer_and_the_last_step():
    row = {"reference": " 13 - 9 = 4. 4 / 2 = 2. The answer is \\boxed{2}."}
    assert [r.name for r in dro_scoring.query_rubrics(row, "arith", MARKER)] == [
        "boxed_integer", "boxed_once", "ends_after_box", "cot_matches_box"]
    cases = {
        " 13 - 9 = 4. 4 / 2 = 2. The answer is \\boxed{2}.": [True, True, True, True],
        " 13 - 9 = 4. 4 / 2 = 2. The answer is \\boxed{4}.": [True, True, True, False],
        " 4 / 2 = 2. The answer is \\boxed{2}. Problem: Ann": [True, True, False, True],
        " 4 / 2 = 2. The answer is \\boxed{2} or \\boxed{3}.": [True, False, True, False],
        " 4 / 2 = 2. The answer is two.": [False, False, False, False],
        " 4 / 2 = 2.": [False, False, False, False],
    }
    for completion, expected in cases.items():
        assert dro_scoring.rubric_row(row, completion, "arith", MARKER) == expected, completion


def test_facts_rubrics_one_per_fact_plus_style():
    row = {"references": [" Zorb is a fox. It is red. It eats fish."], "gold_facts": ["fox", "red", "fish"],
           "style": "sentences"}
    assert [r.name for r in dro_scoring.query_rubrics(row, "facts", MARKER)] == [
        "mentions fox", "mentions red", "mentions fish", "style"]
    assert dro_scoring.rubric_row(row, " Zorb is a fox. It eats fish.", "facts", MARKER) == [
        True, False, True, True]
    assert dro_scoring.rubric_row(row, "- Zorb is a red fox.\n- It eats fishes.", "facts", MARKER) == [
        True, True, False, False]
    # A rubric the reference fails is dropped: this reference is not in bullet style.
    bullets = {**row, "style": "bullets"}
    assert [r.name for r in dro_scoring.query_rubrics(bullets, "facts", MARKER)][-1] == "mentions fish"


# --- P from one batched teacher-forced pass ---------------------------------------------------

def _per_row_logprobs(model, prefix: list[int], target: list[int]) -> np.ndarray:
    ids = torch.tensor([prefix + target])
    with torch.no_grad():
        logp = model(input_ids=ids).logits[0].float().log_softmax(-1)
    positions = range(len(prefix) - 1, len(prefix) + len(target) - 1)
    return np.array([logp[p, t].item() for p, t in zip(positions, target)])


def test_batched_pass_equals_independent_teacher_forcing(micro):
    model, tok = micro
    prefixes = [tok(t)["input_ids"] for t in ("Problem: Ann has 3 apples.\nSolution: 3 + 1 = 4.",
                                              "Problem: Bob",
                                              "Facts: name=Zorb; kind=fox.\nTask: Describe Zorb.\nAnswer:")]
    targets = [tok(t)["input_ids"] for t in (" The answer is \\boxed{4}.", " The answer is \\boxed{12}.",
                                             " Zorb is a fox.")]
    assert len({len(p) + len(t) for p, t in zip(prefixes, targets)}) == 3  # real padding
    logp, mask = teacher_forced_logprobs(model, prefixes, targets, tok.pad_token_id)
    assert logp.shape == mask.shape == (3, max(map(len, targets)))
    for b, (p, t) in enumerate(zip(prefixes, targets)):
        assert mask[b].sum().item() == len(t)
        np.testing.assert_allclose(logp[b, :len(t)].numpy(), _per_row_logprobs(model, p, t), atol=1e-5)
        assert (logp[b, len(t):] == 0).all()


def test_score_rollouts_scores_the_same_reference_tokens_for_every_rollout(micro):
    model, tok = micro
    row = arith_rows(1)[0]
    completions = [" 1 + 1 = 2. The answer is \\boxed{2}.", " garbage", ""]
    ids = [tok(c)["input_ids"] + [tok.eos_token_id] for c in completions]
    logps = dro.score_rollouts(model, tok, [row["prompt"]] * 3, [row] * 3, ids, "arith", MARKER)
    reference = tok(dro_scoring.reference_answer(row, "arith", MARKER))["input_ids"]
    assert [len(x) for x in logps] == [len(reference)] * 3
    assert all((x <= 0).all() for x in logps)
    # The first rollout conditions on its CoT only, so its own boxed 2 cannot leak into the score.
    prompt = tok(row["prompt"])["input_ids"]
    cot = tok(" 1 + 1 = 2.")["input_ids"]
    np.testing.assert_allclose(logps[0], _per_row_logprobs(model, prompt + cot, reference), atol=1e-5)
    np.testing.assert_allclose(logps[2], _per_row_logprobs(model, prompt, reference), atol=1e-5)


def test_facts_reference_follows_the_description_and_the_separator(micro):
    model, tok = micro
    row = facts_rows(1)[0]
    description = " Zorb is a fox."
    [logp] = dro.score_rollouts(model, tok, [row["prompt"]], [row], [tok(description)["input_ids"]], "facts",
                                MARKER)
    prefix = tok(row["prompt"] + description + dro.FACTS_SEPARATOR)["input_ids"]
    np.testing.assert_allclose(logp, _per_row_logprobs(model, prefix, tok(row["references"][0])["input_ids"]),
                               atol=1e-5)


# --- group verdicts ---------------------------------------------------------------------------

P_GROUP = np.array([[0.95, 0.6, 0.5], [0.99, 0.2, 0.4], [0.9, 0.7, 0.3], [0.97, 0.1, 0.6]])
ALL_MET = np.ones((4, 2), dtype=bool)


def test_emphasis_zero_without_clipping_is_the_mean_probability():
    cfg = dro_cfg(score="r3", emphasis=0.0, clip_low=0.0, clip_high=1.0, gate=False, variance_filter=False)
    v = dro_scoring.judge_group(np.log(P_GROUP), ALL_MET, cfg, AdaptiveThreshold())
    np.testing.assert_allclose(v.rewards, P_GROUP.mean(axis=1))
    np.testing.assert_allclose(v.rewards, avg_prob_rewards(P_GROUP))
    assert v.accepted


def test_scores_pick_the_configured_aggregation():
    for score, expected in {"avg_prob": P_GROUP.mean(1), "avg_logprob": np.log(P_GROUP).mean(1)}.items():
        v = dro_scoring.judge_group(np.log(P_GROUP), ALL_MET, dro_cfg(score=score), AdaptiveThreshold())
        np.testing.assert_allclose(v.rewards, expected)


def test_gates():
    cfg = dro_cfg(gate=True, min_rollouts=1, top_frac=0.25, min_rubric_frac=0.5, variance_filter=True)
    open_th = AdaptiveThreshold()
    assert dro_scoring.judge_group(np.log(P_GROUP), ALL_MET, cfg, open_th).accepted
    # Coverage: rubric 1 is met by no rollout.
    S = np.array([[1, 0], [1, 0], [1, 0], [1, 0]], dtype=bool)
    v = dro_scoring.judge_group(np.log(P_GROUP), S, cfg, open_th)
    assert (v.coverage_ok, v.consistency_ok, v.accepted) == (False, True, False)
    # Consistency: the top rollout by R3 (rollout 2) meets no rubric, the others meet both.
    S = np.array([[1, 1], [1, 1], [0, 0], [1, 1]], dtype=bool)
    v = dro_scoring.judge_group(np.log(P_GROUP), S, cfg, open_th)
    assert int(np.argmax(v.rewards)) == 2
    assert (v.coverage_ok, v.consistency_ok, v.accepted) == (True, False, False)
    # Variance filter: h below theta.
    strict = AdaptiveThreshold()
    strict.theta = 1.0
    v = dro_scoring.judge_group(np.log(P_GROUP), ALL_MET, cfg, strict)
    assert (v.variance_ok, v.accepted) == (False, False)
    # Gates that are off always pass; no rubric at all passes both rubric gates.
    off = dro_scoring.judge_group(np.log(P_GROUP), np.zeros((4, 2), bool),
                                  dro_cfg(gate=False, variance_filter=False), strict)
    assert off.accepted
    assert dro_scoring.judge_group(np.log(P_GROUP), np.zeros((4, 0), bool), cfg, open_th).accepted


# --- the plan ---------------------------------------------------------------------------------

def _ctx(name: str, **grpo_update) -> MethodContext:
    p = load(preset="ci")
    family, cfg = p.method_config(name)
    return MethodContext(name=name, family=family, cfg=cfg,
                         grpo=p.method_grpo(name).model_copy(update=grpo_update), seed=0)


def test_build_returns_the_trainer_and_a_named_placeholder():
    plan = dro.build(_ctx("dro"))
    assert isinstance(plan, MethodPlan) and plan.trainer_cls is dro.DroGRPOTrainer
    assert plan.trainer_kwargs["task"] == "arith" and plan.trainer_kwargs["dro"].score == "r3"
    [reward] = plan.reward_funcs
    assert reward.__name__ == "dro_r3"
    with pytest.raises(RuntimeError, match="DroGRPOTrainer"):
        reward(prompts=["x"], completions=["y"])
    assert dro.build(_ctx("dro_facts")).trainer_kwargs["task"] == "facts"
    assert dro.build(_ctx("avg_prob")).reward_funcs[0].__name__ == "dro_avg_prob"


def test_build_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match="task 'pairs' has no reference answer"):
        dro.build(_ctx("dro", task="pairs"))
    with pytest.raises(ValueError, match="'dr_grpo' would still count rejected groups"):
        dro.build(_ctx("dro", loss_type="dr_grpo"))
    assert dro.build(_ctx("r3", loss_type="dr_grpo")).trainer_cls is dro.DroGRPOTrainer  # no gate


def test_static_prefilter_rows_keeps_the_top_groups_by_h(micro):
    model, tok = micro
    rows = arith_rows(5)
    kept, h = dro.static_prefilter_rows(model, tok, rows, dro_cfg(), task="arith", num_generations=3,
                                        top_k=2, rest_frac=0.0, max_new_tokens=6, groups_per_pass=2)
    assert h.shape == (5,) and (h >= 0).all()
    assert [r["prompt_id"] for r in kept] == [rows[i]["prompt_id"] for i in sorted(np.argsort(-h)[:2])]


def test_static_mode_selects_rows_through_the_plan(micro):
    model, tok = micro
    ctx = _ctx("dro_static", num_generations=2, max_completion_length=6)
    ctx.policy, ctx.tokenizer = model, tok
    ctx.cfg = ctx.cfg.model_copy(update={"static_top_k": 2, "static_rest_frac": 0.0})
    plan = dro.build(ctx)
    rows = arith_rows(4)
    kept = plan.select_rows(rows)
    assert len(kept) == 2 and all(r in rows for r in kept)
    assert dro.build(_ctx("dro")).select_rows is None  # the dynamic filter trains on every row


# --- GRPO steps (slow) ------------------------------------------------------------------------

def _train(micro, tmp_path, plan, **cfg_update):
    from models import grpo

    model, tok = micro
    g = load(preset="ci").method_grpo("dro")
    model.train()
    try:
        return grpo.train(tmp_path / "unused", arith_rows(8), plan, g, seed=0,
                          output_dir=tmp_path / "out", model=model, tokenizer=tok)
    finally:
        model.eval()


@pytest.mark.slow
def test_two_steps_with_every_group_rejected_leave_the_weights_alone(micro, tmp_path):
    model, _ = micro
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ctx = _ctx("dro")
    # More rollouts than the group has: the coverage gate rejects every group.
    ctx.cfg = ctx.cfg.model_copy(update={"min_rollouts": ctx.grpo.num_generations + 1})
    history = _train(micro, tmp_path, dro.build(ctx))
    steps = [h for h in history if "dro/rejected" in h]
    assert [h["step"] for h in steps] == [1, 2]
    for h in steps:
        assert h["dro/rejected"] == h["dro/reject_coverage"] == 1.0
        assert {"dro/reject_consistency", "dro/reject_variance", "dro/theta", "dro/h_mean",
                "dro/r3_mean", "rewards/dro_r3/mean"} <= set(h)
        assert 0.0 <= h["dro/r3_mean"] <= 1.0 and h["dro/h_mean"] >= 0.0
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


class RejectFirstGroup(dro.DroGRPOTrainer):
    """Rejects the first group of every batch and keeps the batch TRL's loss will read."""

    last = None

    def _judge_groups(self, logps, S, G):
        first, *rest = super()._judge_groups(logps, S, G)
        return [dataclasses.replace(first, coverage_ok=False), *rest]

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        RejectFirstGroup.last = (self, out)
        return out


@pytest.mark.slow
def test_a_rejected_group_adds_no_gradient_and_no_tokens(micro, tmp_path):
    # Gates off (only the forced rejection) and no clipping: a random model gives every token P < 0.1.
    ctx = _ctx("r3_noclip")
    plan = dro.build(ctx)
    plan.trainer_cls = RejectFirstGroup
    history = _train(micro, tmp_path, plan)
    assert [h["dro/rejected"] for h in history if "dro/rejected" in h] == [0.5, 0.5]
    trainer, batch = RejectFirstGroup.last
    G = ctx.grpo.num_generations
    assert (batch["advantages"][:G] == 0).all() and batch["advantages"][G:].abs().sum() > 0
    assert batch["completion_mask"][:G].sum() == 0
    assert batch["num_items_in_batch"] == batch["completion_mask"].sum() > 0

    # The loss gradient equals the gradient of the batch without the rejected group.
    model = trainer.model
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]

    def grads(b):
        model.zero_grad()
        trainer._compute_loss(model, b).backward()
        return [p.grad.clone() for p in params]

    n = batch["advantages"].size(0)
    kept = {k: v[G:] if torch.is_tensor(v) and v.dim() > 0 and v.size(0) == n else v
            for k, v in batch.items()}
    kept["num_items_in_batch"] = kept["completion_mask"].sum()
    full, sub = grads(batch), grads(kept)
    model.eval()
    assert any(g.abs().sum() > 0 for g in full)
    for a, b in zip(full, sub):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)
