"""RLCER's two-role step (models/rlcer_trainer.py, rewards/rlcer.py; paper 004): batch assembly,
scoring path, modes."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace
from typing import ClassVar

import numpy as np
import pytest
import torch

from models.rlcer_trainer import (
    JudgeVerifier,
    RlcerGRPOTrainer,
    RlcerReward,
    assemble_two_role_batch,
    make_verifier,
    yes_no_judgements,
)
from rewards.evolving_rubrics import ProposedRubric
from rewards.rlcer import (
    hint_prompt,
    pick_cots,
    question_groups,
    rubricator_advantages,
    score_question,
)

PAD = 0
PROMPT = "Problem: Ann has 7 apples and buys 5, then eats 3. Then she doubles them. How many?\nSolution:"
GOOD = r" 7 + 5 = 12. 12 - 3 = 9. 9 * 2 = 18. The answer is \boxed{18}."
SLIP = r" 7 + 5 = 12. 12 - 3 = 8. 8 * 2 = 16. The answer is \boxed{16}."


def cfg(**over):
    base = {"mode": "rlcer", "alpha": 0.2, "verifier": "rule", "rubricator_rollouts": 2,
            "rubricator_template": "{problem}{solution}\nRubrics:", "max_rubric_tokens": 96, "seed": 0}
    return SimpleNamespace(**{**base, **over})


def rubric_json(*pairs) -> str:
    return " " + json.dumps([{"criterion": c, "points": p} for c, p in pairs])


# --- batch assembly ------------------------------------------------------------------------------

def role_batch(rows: int, p: int, c: int, p_lens, c_lens, adv, fill: int, logps: bool = False) -> dict:
    """A TRL-layout batch: prompts left-padded to p, completions right-padded to c."""
    prompt_ids = torch.full((rows, p), PAD)
    prompt_mask = torch.zeros((rows, p), dtype=torch.long)
    completion_ids = torch.full((rows, c), PAD)
    completion_mask = torch.zeros((rows, c), dtype=torch.long)
    for i, (pl, cl) in enumerate(zip(p_lens, c_lens)):
        prompt_ids[i, p - pl:] = fill
        prompt_mask[i, p - pl:] = 1
        completion_ids[i, :cl] = fill + 1
        completion_mask[i, :cl] = 1
    out = {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
           "completion_mask": completion_mask, "advantages": torch.tensor(adv, dtype=torch.float32),
           "num_items_in_batch": completion_mask.sum()}
    if logps:
        out["old_per_token_logps"] = torch.where(completion_mask.bool(), -1.0, 0.0)
    return out


def test_two_role_batch_shapes_rows_and_padding() -> None:
    reasoner = role_batch(4, 3, 5, [3, 2, 3, 1], [5, 2, 4, 5], [1.0, -1.0, 0.5, -0.5], fill=10)
    rubricator = role_batch(2, 6, 2, [6, 4], [2, 1], [0.7, -0.7], fill=20)
    out = assemble_two_role_batch(reasoner, rubricator, PAD)

    assert out["prompt_ids"].shape == (6, 6) and out["prompt_mask"].shape == (6, 6)
    assert out["completion_ids"].shape == (6, 5) and out["completion_mask"].shape == (6, 5)
    # Reasoner rows first, rubricator rows last (told apart here by their token ids).
    assert (out["prompt_ids"][:4][out["prompt_mask"][:4].bool()] == 10).all()
    assert (out["prompt_ids"][4:][out["prompt_mask"][4:].bool()] == 20).all()
    assert out["advantages"].tolist() == pytest.approx([1.0, -1.0, 0.5, -0.5, 0.7, -0.7])
    # Prompts stay left-padded (real tokens end at the last column), completions right-padded.
    assert out["prompt_mask"][:, -1].all()
    assert out["prompt_mask"].sum(1).tolist() == [3, 2, 3, 1, 6, 4]
    assert out["prompt_mask"][0].tolist() == [0, 0, 0, 1, 1, 1]
    assert out["completion_mask"].sum(1).tolist() == [5, 2, 4, 5, 2, 1]
    assert out["completion_mask"][4].tolist() == [1, 1, 0, 0, 0]
    assert (out["prompt_ids"][~out["prompt_mask"].bool()] == PAD).all()
    assert (out["completion_ids"][~out["completion_mask"].bool()] == PAD).all()
    # The dapo/cispo normaliser counts both roles' completion tokens.
    assert int(out["num_items_in_batch"]) == 16 + 3
    assert out["num_items_in_batch"].ndim == 0


def test_two_role_batch_per_token_logps_and_errors() -> None:
    reasoner = role_batch(2, 3, 4, [3, 2], [4, 1], [1.0, -1.0], fill=10, logps=True)
    rubricator = role_batch(1, 2, 6, [2], [6], [0.0], fill=20, logps=True)
    out = assemble_two_role_batch(reasoner, rubricator, PAD, pad_to_multiple_of=4)
    assert out["prompt_ids"].shape == (3, 4) and out["completion_ids"].shape == (3, 8)
    logps = out["old_per_token_logps"]
    assert logps.shape == (3, 8)
    assert (logps[out["completion_mask"].bool()] == -1.0).all()
    assert (logps[~out["completion_mask"].bool()] == 0.0).all()

    del rubricator["old_per_token_logps"]
    with pytest.raises(ValueError, match="one role"):
        assemble_two_role_batch(reasoner, rubricator, PAD)
    with pytest.raises(ValueError, match="tool_mask"):
        assemble_two_role_batch({**reasoner, "tool_mask": torch.ones(2, 4)}, rubricator, PAD)


def test_rubricator_advantages_baseline_per_question() -> None:
    # Question 0: rewards 2.0 and 1.0 -> +-0.5 around its mean; question 1: equal -> 0.
    adv = rubricator_advantages([2.0, 1.0, 1.0, 1.0], [0, 0, 1, 1], "none")
    assert adv.tolist() == pytest.approx([0.5, -0.5, 0.0, 0.0])
    # Group scaling divides by the question's (unbiased) std, as TRL does for the reasoner.
    adv = rubricator_advantages([2.0, 1.0, 1.0, 1.0], [0, 0, 1, 1], "group")
    assert adv.tolist() == pytest.approx([0.5 / (math.sqrt(0.5) + 1e-4), -0.5 / (math.sqrt(0.5) + 1e-4), 0, 0])
    # Batch scaling: per-question mean, std of all rubricator rewards.
    adv = rubricator_advantages([2.0, 1.0, 1.0, 1.0], [0, 0, 1, 1], "batch")
    std = float(torch.tensor([2.0, 1.0, 1.0, 1.0]).std())
    assert adv.tolist() == pytest.approx([0.5 / (std + 1e-4), -0.5 / (std + 1e-4), 0, 0])
    # One rubricator per question: the batch mean is the baseline.
    assert rubricator_advantages([0.0, 2.0, 1.0], [0, 1, 2], "none").tolist() == pytest.approx([-1, 1, 0])
    with pytest.raises(ValueError, match="scale_rewards"):
        rubricator_advantages([1.0, 2.0], [0, 0], "weird")


def test_pick_cots_and_question_groups() -> None:
    picks = pick_cots(8, 3, np.random.default_rng(1))
    assert len(set(picks)) == 3 and all(0 <= i < 8 for i in picks)
    assert picks == pick_cots(8, 3, np.random.default_rng(1))  # seeded
    many = pick_cots(2, 5, np.random.default_rng(0))  # R > G: every CoT before a repeat
    assert sorted(many[:2]) == [0, 1] and sorted(many[2:4]) == [0, 1]
    assert question_groups(["a", "a", "b", "b"], 2) == [[0, 1], [2, 3]]
    with pytest.raises(ValueError, match="one prompt"):
        question_groups(["a", "b", "a", "b"], 2)
    with pytest.raises(ValueError, match="multiple of num_generations"):
        question_groups(["a", "a", "a"], 2)


# --- scoring: modes ------------------------------------------------------------------------------

# z = [1, 1, 0, 0]; rubric A (+3) holds on rollouts 0 and 1 (corr 1, valid), rubric B (-2) holds on
# rollout 2 only (corr -0.58, not valid), rubric C (+1) holds everywhere (std 0, not valid).
Z = [1, 1, 0, 0]
OUTPUTS = [[ProposedRubric("A", 3), ProposedRubric("B", -2)], [ProposedRubric("C", 1)], None]
V = [[1, 1, 0, 0], [0, 0, 1, 0], [1, 1, 1, 1]]


def test_modes_change_the_rewards_as_spec_says() -> None:
    s = score_question(OUTPUTS, V, Z, alpha=0.2, mode="rlcer")
    assert s.r_cot.tolist() == [1.0, 1.0, 0.0, 0.0]
    assert s.reasoner.tolist() == [2.0, 2.0, -1.0, -1.0]  # outcome +-1 plus r_cot
    assert s.rubricator.tolist() == [1.5, 1.0, 0.0]  # valid fraction + format; malformed -> 0
    assert s.format_ok.tolist() == [True, True, False]
    assert s.valid.tolist() == [True, False, False]

    s = score_question(OUTPUTS, V, Z, alpha=0.2, mode="rubric_only")
    assert s.reasoner.tolist() == [1.0, 1.0, 0.0, 0.0]  # r_cot alone
    assert s.rubricator.tolist() == [1.5, 1.0, 0.0]

    s = score_question(OUTPUTS, V, Z, alpha=0.2, mode="no_evolve")
    assert s.reasoner.tolist() == [2.0, 2.0, -1.0, -1.0]
    assert s.rubricator.tolist() == [1.0, 1.0, 0.0]  # format only

    a = score_question(OUTPUTS, V, Z, alpha=0.2, mode="random", rng=np.random.default_rng(3))
    b = score_question(OUTPUTS, V, Z, alpha=0.2, mode="random", rng=np.random.default_rng(3))
    assert a.reasoner.tolist() == b.reasoner.tolist()
    assert all(0.0 <= r <= 1.0 for r in a.reasoner) and len(set(a.reasoner.tolist())) == 4
    assert a.rubricator.tolist() == [1.5, 1.0, 0.0]

    # All rollouts equally right: nothing is valid, the CoT reward is 0, rubricators get format only.
    s = score_question(OUTPUTS, V, [1, 1, 1, 1], alpha=0.2, mode="rlcer")
    assert s.reasoner.tolist() == [1.0] * 4 and s.rubricator.tolist() == [1.0, 1.0, 0.0]
    # Nothing parsed at all: no crash, no pool.
    s = score_question([None, None], np.zeros((0, 4)), Z, alpha=0.2, mode="rlcer")
    assert s.reasoner.tolist() == [1.0, 1.0, -1.0, -1.0] and s.rubricator.tolist() == [0.0, 0.0]


# --- the reward function's path through the trainer's hooks -------------------------------------

class FakeTrainer:
    """The two hooks RlcerReward uses: group size and rubricator sampling (canned outputs)."""

    def __init__(self, outputs: list[str], group_size: int):
        self.outputs, self.group_size, self.prompts = outputs, group_size, []

    def sample_rubricator(self, prompts):
        self.prompts.extend(prompts)
        texts = [self.outputs[i % len(self.outputs)] for i in range(len(prompts))]
        return [[1] * 3 for _ in prompts], [[2] * (1 + i) for i in range(len(prompts))], texts


class CountingVerifier:
    def __init__(self):
        self.calls, self.items = 0, 0

    def __call__(self, items):
        from rewards.evolving_rubrics import rule_verifier
        self.calls += 1
        self.items += len(items)
        return [rule_verifier(r.criterion, cot) for _, cot, r in items]


def run_reward(outputs: list[str], mode: str = "rlcer", rollouts: int = 2):
    verifier = CountingVerifier()
    reward = RlcerReward(cfg(mode=mode, rubricator_rollouts=rollouts), seed=0, verifier=verifier)
    reward.trainer = FakeTrainer(outputs, group_size=4)
    logged: dict[str, float] = {}
    completions = [GOOD, GOOD, SLIP, SLIP]
    rewards = reward(prompts=[PROMPT] * 4, completions=completions, answer=["18"] * 4,
                     log_metric=logged.__setitem__, trainer_state=None)
    return reward, rewards, logged, verifier


def test_malformed_rubricator_outputs_score_zero_without_a_crash() -> None:
    good = rubric_json(("each step's arithmetic is correct", 3), ("contains an arithmetic slip", -4))
    bad = ['[{"criterion": "x", "points": 3}', rubric_json(("contains an arithmetic slip", 9)), " []",
           "no rubrics at all", ""]
    reward, rewards, logged, _ = run_reward([good, *bad], rollouts=6)
    rollouts = reward.pop_rubricator()
    # Arithmetic correct is valid; the slip rubric correlates negatively with z, so it is not
    # (paper 004 Eq. 7).
    assert rollouts.rewards[0] == pytest.approx(1.5)
    assert rollouts.rewards[1:] == [0.0] * 5
    assert rollouts.question == [0] * 6
    assert logged["rlcer/format_rate"] == pytest.approx(1 / 6)
    assert rewards == pytest.approx([2.0, 2.0, -1.0, -1.0])
    # Every output malformed: format 0 for all, reasoner falls back to the outcome reward.
    reward, rewards, logged, verifier = run_reward(bad, rollouts=5)
    assert reward.pop_rubricator().rewards == [0.0] * 5
    assert rewards == pytest.approx([1.0, 1.0, -1.0, -1.0])
    assert logged["rlcer/format_rate"] == 0.0 and logged["rlcer/valid_fraction"] == 0.0
    assert "rlcer/valid_corr_mean" not in logged and verifier.items == 0


def test_reward_pools_rubrics_judges_once_and_logs_metrics() -> None:
    first = rubric_json(("each step's arithmetic is correct", 3), ("states the final answer in a box", 2))
    second = rubric_json(("each step's arithmetic is correct", 3), ("contains an arithmetic slip", -4))
    reward, rewards, logged, verifier = run_reward([first, second])
    # Pool: arithmetic correct (+3, twice: valid), box (+2, constant: invalid), slip (-4: corr -1).
    # Valid points [+3, +3]: good CoTs r_cot = 1, slips 0.
    assert rewards == pytest.approx([2.0, 2.0, -1.0, -1.0])
    rollouts = reward.pop_rubricator()
    assert rollouts.rewards == pytest.approx([1.5, 1.5])
    assert rollouts.completion_ids == [[2], [2, 2]] and rollouts.question == [0, 0]
    # One verifier call for the step; each distinct (question, CoT, rubric) once: 3 rubrics x 2 CoTs.
    assert verifier.calls == 1 and verifier.items == 3 * 2
    # Rubricator prompts: the template with the question and one distinct CoT each.
    prompts = reward.trainer.prompts
    assert len(prompts) == 2 and all(p.startswith(PROMPT) and p.endswith("\nRubrics:") for p in prompts)
    assert logged["rlcer/reasoner_accuracy"] == 0.5
    assert logged["rlcer/valid_fraction"] == pytest.approx(2 / 4)
    assert logged["rlcer/valid_corr_mean"] == pytest.approx(1.0)
    assert logged["rlcer/corr_mean"] == pytest.approx(1 / 3)  # (1 + 1 - 1) / 3, the box is undefined
    assert logged["rlcer/r_cot"] == pytest.approx(0.5)
    assert logged["rlcer/format_rate"] == 1.0 and logged["rlcer/rubricator_reward"] == pytest.approx(1.5)
    with pytest.raises(RuntimeError, match="not called"):
        reward.pop_rubricator()


def test_reward_modes_through_the_reward_function() -> None:
    first = rubric_json(("each step's arithmetic is correct", 3), ("states the final answer in a box", 2))
    reward, rewards, _, _ = run_reward([first], mode="rubric_only")
    assert rewards == pytest.approx([1.0, 1.0, 0.0, 0.0])
    assert reward.pop_rubricator().rewards == pytest.approx([1.5, 1.5])
    reward, rewards, _, _ = run_reward([first], mode="no_evolve")
    assert rewards == pytest.approx([2.0, 2.0, -1.0, -1.0])
    assert reward.pop_rubricator().rewards == pytest.approx([1.0, 1.0])
    _, a, _, _ = run_reward([first], mode="random")
    _, b, _, _ = run_reward([first], mode="random")
    assert a == b and all(0 <= r <= 1 for r in a)


def test_reward_needs_gold_answers_and_a_trainer() -> None:
    reward = RlcerReward(cfg(), verifier=CountingVerifier())
    with pytest.raises(RuntimeError, match="trainer"):
        reward(prompts=[PROMPT], completions=[GOOD], answer=["18"])
    reward.trainer = FakeTrainer(["[]"], group_size=1)
    with pytest.raises(ValueError, match="answer"):
        reward(prompts=[PROMPT], completions=[GOOD], answer=[None])


# --- hints and verifiers -------------------------------------------------------------------------

def test_hint_prompt() -> None:
    rubrics = [ProposedRubric("contains an arithmetic slip", -4),
               ProposedRubric("shows every intermediate step", 3),
               ProposedRubric("states the final answer in a box", 5),
               ProposedRubric("shows every intermediate step", 1)]
    out = hint_prompt("Problem: 2 + 3 * 4?\nSolution:", rubrics)
    assert out == ("Problem: 2 + 3 * 4?\nHints: aim for: states the final answer in a box (+5); aim for: "
                   "shows every intermediate step (+3); avoid: contains an arithmetic slip (-4).\nSolution:")
    assert hint_prompt("What is 2 + 2?", rubrics[:1]) == (
        "What is 2 + 2?\nHints: avoid: contains an arithmetic slip (-4).\n")
    assert hint_prompt(PROMPT, []) == PROMPT


@pytest.fixture(scope="module")
def tiny_judge(tmp_path_factory):
    """A tiny random Llama and tokenizer saved to a folder (shapes and contract only)."""
    from models.tiny import build_model, build_tokenizer

    tok = build_tokenizer([PROMPT, GOOD, SLIP, "Answer: YES NO"] * 5, vocab_size=300)
    arch = SimpleNamespace(hidden_size=16, intermediate_size=32, num_layers=1, num_heads=2, max_positions=512)
    model = build_model(arch, tok, seed=0)
    path = tmp_path_factory.mktemp("judge")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_judge_verifier_contract(tiny_judge) -> None:
    judge = make_verifier(str(tiny_judge))
    assert isinstance(judge, JudgeVerifier)
    items = [("Q1", GOOD, ProposedRubric("each step's arithmetic is correct", 3)),
             ("Q1", SLIP, ProposedRubric("contains an arithmetic slip", -4)),
             ("Q2 is a longer question than the first one", GOOD,
              ProposedRubric("repeats the question", -1))]
    verdicts = judge(items)
    assert len(verdicts) == 3 and all(isinstance(v, bool) for v in verdicts)
    # One padded batch gives the same verdicts as one prompt at a time (left padding is invisible).
    prompts = [judge.template.format(question=q, response=c, criterion=r.criterion, points=r.points)
               for q, c, r in items]
    batched = yes_no_judgements(judge.model, judge.tokenizer, prompts, judge.yes_id, judge.no_id)
    single = yes_no_judgements(judge.model, judge.tokenizer, prompts, judge.yes_id, judge.no_id, batch_size=1)
    assert batched.tolist() == single.tolist() == verdicts
    assert judge([]) == []
    with pytest.raises(FileNotFoundError, match="reward.rlcer.verifier"):
        make_verifier(str(tiny_judge / "missing"))


# --- the trainer on a micro model ----------------------------------------------------------------

def recording(trainer_cls):
    """The trainer class, keeping every two-role batch it builds."""
    class Recording(trainer_cls):
        batches: ClassVar[list[dict]] = []

        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            Recording.batches.append(out)
            return out
    return Recording


@pytest.mark.slow
def test_rubricator_rows_drive_the_update_with_trl_extras(tiny_judge, tmp_path) -> None:
    """A tiny random model whose rubricator outputs are scripted (one well-formed, one malformed
    per question): the rubricator rows alone move the weights at step 1 (every reasoner rollout is
    wrong, so the reasoner advantages are 0). Also covers TRL's other paths: old log-probs
    (num_iterations 2), reference log-probs (beta > 0), 2 micro-batches per generation."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig

    tok = AutoTokenizer.from_pretrained(tiny_judge)
    rows = [{"prompt": f"Problem: {a} + {b}?\nSolution:", "answer": str(a + b)} for a in range(4) for b in range(2)]
    args = GRPOConfig(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=4, num_generations=2,
                      steps_per_generation=2, gradient_accumulation_steps=2, num_iterations=2, beta=0.04,
                      max_completion_length=8, learning_rate=1e-4, logging_steps=1, save_strategy="no",
                      report_to=[], use_cpu=True, bf16=False, activation_checkpointing=False,
                      remove_unused_columns=False, disable_tqdm=True, seed=0)
    reward = RlcerReward(cfg(max_rubric_tokens=12), verifier=CountingVerifier())
    trainer = recording(RlcerGRPOTrainer)(model=str(tiny_judge), reward_funcs=[reward], args=args,
                                          train_dataset=Dataset.from_list(rows), processing_class=tok)
    good = rubric_json(("each step's arithmetic is correct", 3))

    def scripted(prompts):
        texts = [good if i % 2 == 0 else "[oops" for i in range(len(prompts))]
        ids = [tok(t)["input_ids"] + [tok.eos_token_id] for t in texts]
        return tok(prompts)["input_ids"], ids, texts

    trainer.sample_rubricator = scripted
    trainer.train()
    batch = trainer.batches[0]
    # 8 reasoner rows (4 questions x 2) + 8 rubricator rows (4 questions x 2), before TRL shuffles.
    assert batch["advantages"].shape == (16,)
    assert batch["advantages"][:8].abs().max() == 0
    expected = 0.5 / (math.sqrt(0.5) + 1e-4)  # rewards 1 and 0 in every question
    assert batch["advantages"][8:].tolist() == pytest.approx([expected, -expected] * 4, rel=1e-5)
    for key in ("old_per_token_logps", "ref_per_token_logps"):
        assert batch[key].shape == batch["completion_ids"].shape
        assert torch.isfinite(batch[key]).all()
        assert (batch[key][batch["completion_mask"] == 0] == 0).all()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert logs and all(math.isfinite(h["loss"]) for h in logs)
    assert logs[0]["grad_norm"] > 0
    assert logs[0]["rlcer/format_rate"] == 0.5 and logs[0]["rlcer/reasoner_accuracy"] == 0.0


@pytest.mark.slow
def test_two_grpo_steps_train_both_roles(tmp_path_factory) -> None:
    """Two real GRPO steps of the micro model: rlcer/* metrics logged, finite loss."""
    from core.params import load
    from flows.train import task_rows
    from models import grpo
    from models.policy import load_policy
    from models.rlcer_trainer import build
    from models.tiny import train_base
    from rewards import MethodContext
    from world import generate_world

    p = load(preset="ci")
    d = tmp_path_factory.mktemp("rlcer")
    generate_world(p.world, d / "prepared")
    train_base(d / "prepared", d / "base", p.base_model, p.seed, work_dir=d / "sft")
    family, rcfg = p.method_config("rlcer")
    g = p.method_grpo("rlcer")
    model, tok = load_policy(d / "base", for_training=True)
    ctx = MethodContext(name="rlcer", family=family, cfg=rcfg, grpo=g, seed=p.seed,
                        policy=model, tokenizer=tok)
    plan = build(ctx)
    plan.trainer_cls = recording(plan.trainer_cls)
    rows = task_rows(d / "prepared", g.task)
    history = grpo.train(d / "base", rows, plan, g, seed=p.seed, output_dir=d / "out",
                         model=model, tokenizer=tok)
    # Each step's batch: prompts x (G reasoner + R rubricator) rows, rubricator rows last.
    B, R = g.prompts_per_step * g.num_generations, rcfg.rubricator_rollouts
    for batch in plan.trainer_cls.batches:
        assert batch["advantages"].shape == (B + g.prompts_per_step * R,)
        assert torch.isfinite(batch["advantages"]).all()
        assert (batch["completion_mask"][B:].sum(1) > 0).all()
        assert int(batch["num_items_in_batch"]) == int(batch["completion_mask"].sum())
    steps = [h for h in history if "loss" in h and "step" in h]
    assert [h["step"] for h in steps] == [1, 2]
    for h in steps:
        assert math.isfinite(h["loss"])
        for key in ("valid_fraction", "r_cot", "format_rate", "rubricator_reward", "reasoner_accuracy",
                    "rubricator_length"):
            assert f"rlcer/{key}" in h, key
        assert "rewards/rlcer_reasoner/mean" in h
