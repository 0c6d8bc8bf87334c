"""`ref_logprob` (arXiv 2602.03979; docs/methods/ref_logprob.md): the mean log-probability of the
reference answer after the rollout's reasoning. Worked examples by hand, hostile inputs, its place
beside R3 and the plain average probability in DRO's trainer (the same teacher-forced pass, only
the aggregation changed), and its arms in params.yaml."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from core.params import load
from rewards import dro as dro_scoring
from rewards.ref_logprob import reference_logprob_rewards, reference_logprob_scores
from rewards.reflection import AdaptiveThreshold, avg_logprob_rewards, avg_prob_rewards, r3_rewards

NEG_INF = float("-inf")


# --- the formula, by hand ---------------------------------------------------------------------

@pytest.mark.parametrize("logp, mask, expected", [
    # (-1 - 3) / 2; (-0.5) / 1 (its padding holds -9); no valid token (padding -inf): None
    ([[-1.0, -3.0], [-0.5, -9.0], [NEG_INF, 0.0]], [[1, 1], [1, 0], [0, 0]], [-2.0, -0.5, None]),
    # booleans as the mask; a row of one token
    ([[-0.25, -0.75, -2.0]], [[True, True, False]], [-0.5]),
    # every row all masked: every reward None
    ([[-1.0], [-2.0]], [[0], [0]], [None, None]),
    # a reference of no token at all ([G, 0]): nothing to score
    (np.zeros((2, 0)), np.zeros((2, 0), dtype=bool), [None, None]),
    # probability 1 everywhere: log 1 = 0
    ([[0.0, 0.0]], [[1, 1]], [0.0]),
])
def test_reference_logprob_worked_examples(logp, mask, expected) -> None:
    assert reference_logprob_rewards(logp, mask) == expected


def test_the_log_of_probabilities_by_hand() -> None:
    """P = (0.5, 0.25): (ln 0.5 + ln 0.25) / 2 = -(0.693147 + 1.386294) / 2 = -1.039721."""
    [r] = reference_logprob_rewards(np.log([[0.5, 0.25]]), [[1, 1]])
    assert r == pytest.approx(-1.039721, abs=1e-6)


def test_it_is_paper_003s_avg_logprob_with_none_for_no_token() -> None:
    """The same number as DRO's "Avg Logprob" row where a row has tokens; None where that is NaN."""
    rng = np.random.default_rng(0)
    logp = np.log(rng.uniform(0.01, 1.0, size=(6, 5)))
    mask = rng.uniform(size=(6, 5)) > 0.4
    mask[2] = False
    ours = reference_logprob_rewards(logp, mask)
    theirs = avg_logprob_rewards(logp, mask)
    assert ours[2] is None and math.isnan(theirs[2])
    np.testing.assert_allclose([x for x in ours if x is not None], theirs[~np.isnan(theirs)])
    np.testing.assert_allclose(reference_logprob_scores(logp, mask), theirs)  # NaN where None


def test_the_log_scale_is_what_separates_it_from_r3_and_avg_prob() -> None:
    """Rollout 0 is sure of one reference token and gives the other 0.01; rollout 1 gives both 0.5.
    The plain average probability ties them (0.5 each), and so does R3: Q = clip(P, 0.1, 0.9) =
    [[0.9, 0.1], [0.5, 0.5]], both tokens spread by sigma = 0.2, equal weights, R3 = [0.5, 0.5].
    The mean log probability punishes the near-impossible token by whole nats:
    (ln 0.99 + ln 0.01) / 2 = (-0.010050 - 4.605170) / 2 = -2.307610 against ln 0.5 = -0.693147."""
    P = np.array([[0.99, 0.01], [0.5, 0.5]])
    np.testing.assert_allclose(avg_prob_rewards(P), [0.5, 0.5])
    np.testing.assert_allclose(r3_rewards(P), [0.5, 0.5])
    np.testing.assert_allclose(reference_logprob_rewards(np.log(P), np.ones_like(P)),
                               [-2.307610, -0.693147], atol=1e-6)


def test_the_mean_and_the_papers_sum_give_the_same_group_advantages() -> None:
    """Every rollout of a group is scored on the same reference tokens, so the mean is the paper's
    sum log P(a* | p, z) over a constant T: the group-standardised advantages (TRL's
    scale_rewards: group, the default) are the same."""
    logp = np.log(np.array([[0.9, 0.2, 0.5], [0.6, 0.6, 0.6], [0.3, 0.9, 0.1], [0.8, 0.7, 0.9]]))
    mean = np.array(reference_logprob_rewards(logp, np.ones_like(logp)))
    total = logp.sum(axis=1)
    np.testing.assert_allclose(mean, total / 3)

    def z(x):
        return (x - x.mean()) / x.std()

    np.testing.assert_allclose(z(mean), z(total))


# --- hostile inputs -------------------------------------------------------------------------

@pytest.mark.parametrize("logp, mask, message", [
    ([[-1.0, float("nan")]], [[1, 1]], r"logp\[0, 1\] = nan at a valid token is NaN"),
    ([[-1.0], [NEG_INF]], [[1], [1]], r"logp\[1, 0\] = -inf at a valid token is infinite"),
    ([[0.3, 0.6]], [[1, 1]], r"logp\[0, 0\] = 0.3 .*above 0.*probabilities passed in"),
    ([-1.0, -2.0], [1, 1], r"\[G, T\] array .*shape \(2,\)"),
    ([[-1.0, -2.0]], [[1, 1, 1]], r"mask shape \(1, 3\) does not match logp shape \(1, 2\)"),
    (np.zeros((0, 3)), np.zeros((0, 3)), r"empty group \(G = 0\)"),
    ([[-1.0, -2.0]], [[1, 2]], r"mask must hold 0/1 or booleans"),
    ([[-1.0, -2.0], [-1.0]], [[1, 1], [1]], r"\[G, T\] array of log-probabilities"),
    ([["a", "b"]], [[1, 1]], r"\[G, T\] array of log-probabilities"),
])
def test_hostile_inputs_are_named(logp, mask, message) -> None:
    with pytest.raises(ValueError, match=message):
        reference_logprob_rewards(logp, mask)


def test_masked_entries_may_hold_anything() -> None:
    nan = float("nan")
    assert reference_logprob_rewards([[-2.0, nan, NEG_INF, 5.0]], [[1, 0, 0, 0]]) == [-2.0]


# --- in DRO's trainer: only the aggregation changes ------------------------------------------

P_GROUP = np.array([[0.95, 0.6, 0.5], [0.99, 0.2, 0.4], [0.9, 0.7, 0.3], [0.97, 0.1, 0.6]])
ALL_MET = np.ones((4, 2), dtype=bool)


def dro_cfg(**update):
    return load(preset="ci").method_config("dro")[1].model_copy(update=update)


def test_judge_group_scores_ref_logprob_and_still_logs_r3() -> None:
    cfg = dro_cfg(score="ref_logprob", gate=False, variance_filter=False)
    v = dro_scoring.judge_group(np.log(P_GROUP), ALL_MET, cfg, AdaptiveThreshold())
    np.testing.assert_allclose(v.rewards, np.log(P_GROUP).mean(axis=1))
    np.testing.assert_allclose(v.r3, r3_rewards(P_GROUP))
    assert v.accepted
    # The gates rank by the configured score: the same verdicts as under avg_logprob.
    gated = dro_cfg(score="ref_logprob", gate=True)
    S = np.array([[1, 1], [1, 1], [0, 0], [1, 1]], dtype=bool)
    ours = dro_scoring.judge_group(np.log(P_GROUP), S, gated, AdaptiveThreshold())
    theirs = dro_scoring.judge_group(np.log(P_GROUP), S, gated.model_copy(update={"score": "avg_logprob"}),
                                     AdaptiveThreshold())
    assert (ours.coverage_ok, ours.consistency_ok) == (theirs.coverage_ok, theirs.consistency_ok)


def test_a_nan_log_probability_fails_ref_logprob_and_leaves_the_other_scores_as_they_were() -> None:
    logp = np.log(P_GROUP)
    logp[1, 2] = np.nan
    with pytest.raises(ValueError, match=r"logp\[1, 2\] = nan"):
        dro_scoring.judge_group(logp, ALL_MET, dro_cfg(score="ref_logprob"), AdaptiveThreshold())
    v = dro_scoring.judge_group(logp, ALL_MET, dro_cfg(score="r3"), AdaptiveThreshold())
    assert v.rewards.shape == (4,)  # R3 keeps its own NaN handling


def test_the_arms_mirror_avg_prob_with_only_the_score_changed() -> None:
    p = load()
    for ours, theirs in (("ref_logprob", "avg_prob"),):
        (fam_a, a), (fam_b, b) = p.method_config(ours), p.method_config(theirs)
        assert fam_a == fam_b == "dro" and (a.score, b.score) == ("ref_logprob", "avg_prob")
        assert a.model_dump(exclude={"score"}) == b.model_dump(exclude={"score"})
        assert p.method_grpo(ours) == p.method_grpo(theirs)
    study = load(preset="cot_reference")
    assert {"r3_cot", "avg_prob_cot", "ref_logprob_cot"} <= set(study.methods)
    a, b = study.resolve("ref_logprob_cot"), study.resolve("avg_prob_cot")
    assert (a.family, a.cfg.score, a.cfg.gate, a.cfg.variance_filter) == ("dro", "ref_logprob", False, False)
    assert a.cfg.model_dump(exclude={"score"}) == b.cfg.model_dump(exclude={"score"})
    assert a.grpo == b.grpo
    # Not in `make run`'s quick look, nor in the default study's arms.
    assert not {"ref_logprob", "ref_logprob_cot"} & set(p.pipeline.quick.methods + p.methods)


def test_build_trains_it_with_dros_trainer() -> None:
    from models import dro_trainer
    from rewards import MethodContext

    p = load(preset="ci")
    family, cfg = p.method_config("ref_logprob")
    plan = dro_trainer.build(MethodContext(name="ref_logprob", family=family, cfg=cfg,
                                           grpo=p.method_grpo("ref_logprob"), seed=0))
    assert plan.trainer_cls is dro_trainer.DroGRPOTrainer
    assert plan.trainer_kwargs["dro"].score == "ref_logprob"
    assert [f.__name__ for f in plan.reward_funcs] == ["dro_ref_logprob"]


def test_one_batched_pass_scores_the_group_as_separate_passes_would() -> None:
    """The rewards of a group from DRO's path (`score_rollouts`: ONE forward pass for the whole
    group) equal the mean of each rollout's reference log-probs from its own unpadded pass."""
    import torch

    from core.params import Arch
    from models.dro_trainer import cot_ids, score_rollouts
    from models.tiny import build_model, build_tokenizer
    from rewards.teacher_forcing import teacher_forced_logprobs
    from world import arith

    raw = arith.generate(random.Random(0), 8, "train", min_ops=1, max_ops=3, max_value=99,
                         sloppy_frac=0.0, hint_frac=0.0)
    row = {"prompt_id": raw[0]["id"], "prompt": raw[0]["prompt"], "reference": raw[0]["reference"]}
    tokenizer = build_tokenizer([t for r in raw for t in (r["prompt"], r["reference"])], 300)
    arch = Arch(hidden_size=32, intermediate_size=64, num_layers=2, num_heads=2, max_positions=384)
    model = build_model(arch, tokenizer, seed=0).eval()
    texts = [" 1 + 1 = 2. The answer is \\boxed{2}.", " 7 - 3 = 4. The answer is \\boxed{4}.",
             " no marker at all", " 9 + 9 = 18. 18 - 1 = 17. The answer is \\boxed{17}."]
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    calls = []
    forward = model.forward

    def counted(*args, **kwargs):
        calls.append(kwargs["input_ids"].shape[0])
        return forward(*args, **kwargs)

    model.forward = counted
    logps = score_rollouts(model, tokenizer, [row["prompt"]] * 4, [row] * 4, ids, "arith", "The answer is")
    assert calls == [4]  # one pass, four rows
    rewards = dro_scoring.judge_group(np.stack(logps), ALL_MET, dro_cfg(score="ref_logprob", gate=False,
                                      variance_filter=False), AdaptiveThreshold()).rewards
    model.forward = forward
    answer = tokenizer(dro_scoring.reference_answer(row, "arith", "The answer is"),
                       add_special_tokens=False)["input_ids"]
    prompt = tokenizer(row["prompt"])["input_ids"]
    alone = []
    for t, i in zip(texts, ids, strict=True):
        cot = dro_scoring.scoring_prefix(t, "arith", "The answer is")[0]
        lp, mask = teacher_forced_logprobs(model, [prompt + cot_ids(tokenizer, i, cot)], [answer],
                                           tokenizer.pad_token_id)
        alone.append(float(lp[mask].mean()))
    np.testing.assert_allclose(rewards, alone, atol=1e-5)
    assert len(set(np.round(rewards, 6))) > 1 and torch.isfinite(torch.tensor(rewards)).all()


def test_public_api_matches_the_spec() -> None:
    import inspect

    params = inspect.signature(reference_logprob_rewards).parameters
    assert [n for n, p in params.items() if p.default is inspect.Parameter.empty] == ["logp", "mask"]
