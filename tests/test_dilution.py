"""Paper 003 Fig. 3 on real rollouts (evals/dilution.py): the correlations of R3 and of the plain
average probability with correctness, per group, from DRO's own batched teacher-forced pass, and
their place in the evaluate stage's items (evals/suite.py `scorers`)."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest

import evals.suite as suite
from core.params import Arch
from evals.dilution import correlation, dilution_metrics, group_correlations, score_samples
from models.tiny import build_model, build_tokenizer
from rewards.dro import reference_answer
from rewards.teacher_forcing import teacher_forced_logprobs
from world import arith_ref

DRO = SimpleNamespace(emphasis=10.0, clip_low=0.1, clip_high=0.9)
ARCH = Arch(hidden_size=32, intermediate_size=64, num_layers=2, num_heads=2, max_positions=384)


def ref_rows(n: int, seed: int = 0) -> list[dict]:
    return arith_ref.generate(random.Random(seed), n, "test", min_ops=1, max_ops=3, max_value=99,
                              separator="</think>", slip_frac=0.0)


@pytest.fixture(scope="module")
def micro():
    """A tiny Llama given 60 steps of next-token training on arith_ref solutions, so that its
    probabilities of a reference depend on the reasoning before it (a random one's are uniform),
    and a tokenizer trained on those texts."""
    import torch

    rows = ref_rows(40, seed=1)
    tokenizer = build_tokenizer([t for r in rows for t in (r["prompt"], r["reference"])], 300)
    model = build_model(ARCH, tokenizer, seed=0)
    torch.manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    texts = [r["prompt"] + r["reference"] for r in rows]
    for step in range(60):
        batch = tokenizer(texts[step % 5 * 8:step % 5 * 8 + 8], return_tensors="pt", padding=True)
        labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        loss = model(**batch, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval(), tokenizer


def test_a_long_reference_dilutes_the_average_but_not_r3():
    """Fig. 3's mechanism on a hand-made group: one token carries the result (P 0.8 after a right
    chain, 0.2 after a wrong one); 40 tokens follow from the question with small noise that has
    nothing to do with correctness, one of them (a style mismatch) swinging between 0.0 and 0.6.
    The average probability is dominated by the noise; R3's emphasis finds the result token."""
    rng = np.random.default_rng(0)
    correct = [1, 0, 1, 0, 1, 0, 1, 0]
    noise = np.clip(0.9 + rng.normal(0, 0.03, (8, 39)), 0, 1)
    mismatch = np.array([0.001, 0.6, 0.05, 0.55, 0.002, 0.6, 0.1, 0.5])[:, None]
    result = np.array([[0.8 if c else 0.2] for c in correct])
    P = np.hstack([noise, mismatch, result])
    out = group_correlations(list(np.log(P)), correct, **vars(DRO))
    assert out["r3_corr"] > 0.9
    assert out["avg_prob_corr"] < 0.5
    assert out["r3_corr"] - out["avg_prob_corr"] > 0.4


def test_undefined_correlations_are_none_not_zero():
    assert correlation([0.3, 0.7, 0.5], [1, 1, 1]) is None   # every sample right
    assert correlation([0.4, 0.4], [0, 1]) is None           # a constant reward
    assert correlation([float("nan"), 0.4], [0, 1]) is None  # a rollout with no valid token
    assert correlation([0.4], [1]) is None
    assert correlation([0.1, 0.9], [0, 1]) == 1.0
    assert correlation([0.9, 0.1], [0, 1]) == -1.0


def test_a_group_must_score_one_reference():
    with pytest.raises(ValueError, match="same reference tokens"):
        group_correlations([np.log([0.5, 0.5]), np.log([0.5])], [1, 0], **vars(DRO))


def test_the_gap_and_its_halves_split_at_the_median_length():
    rows = [{"ref_tokens": n, "r3_corr": 0.5, "avg_prob_corr": 0.1 * i} for i, n in enumerate([5, 9, 12, 20])]
    out = dilution_metrics(rows)
    assert [r["dilution_gap"] for r in out] == [0.5, 0.4, 0.3, 0.2]
    assert [r["dilution_gap_long"] for r in out] == [None, None, 0.3, 0.2]
    assert [r["dilution_gap_short"] for r in out] == [0.5, 0.4, None, None]
    assert dilution_metrics([]) == []


def test_score_samples_groups_each_rows_samples_with_its_own_reference(micro):
    """The batched pass over every row's samples gives each group the numbers of an independent,
    unbatched teacher-forced pass over that row's reference alone (no row's tokens leak into
    another's group), and correctness is read from the reply after `</think>`."""
    model, tok = micro
    rows = ref_rows(3)
    right = [r["reference"] for r in rows]
    # A wrong chain: the last result off by one, carried to the reply (what a slip looks like).
    wrong = [r["reference"].replace(f"= {r['answer']}.", f"= {int(r['answer']) + 1}.")
             .replace(r"\boxed{" + r["answer"] + "}", r"\boxed{" + str(int(r["answer"]) + 1) + "}")
             for r in rows]
    assert all(w.split("</think>")[0] != c.split("</think>")[0] for w, c in zip(wrong, right))
    # Rows 0 and 2 are mixed groups, row 1 all right (no correlation).
    samples = [[right[0], wrong[0], " 1 + 1 = 2.</think>\n\nSo \\boxed{5}."],
               [right[1], right[1]],
               [wrong[2], right[2], wrong[2], right[2]]]
    prompts = [r["prompt"] for r in rows]
    out = score_samples(model, tok, rows, prompts, samples, batch_size=3)
    assert len(out) == 3
    assert out[1]["r3_corr"] is None and out[1]["avg_prob_corr"] is None
    for row, ss, got in zip(rows, samples, out):
        target = tok(reference_answer(row, "arith_ref", "</think>"), add_special_tokens=False)["input_ids"]
        assert got["ref_tokens"] == len(target)
        if row is rows[1]:
            continue
        logp = []
        for s in ss:
            cot = s[:s.rfind("</think>") + len("</think>")]
            prefix = tok(row["prompt"])["input_ids"] + tok(cot, add_special_tokens=False)["input_ids"] \
                + tok("\n\n", add_special_tokens=False)["input_ids"]
            lp, mask = teacher_forced_logprobs(model, [prefix], [target], tok.pad_token_id)
            logp.append(lp[0][mask[0]].numpy())
        correct = [float(r"\boxed{" + row["answer"] + "}" in s) for s in ss]
        want = group_correlations(logp, correct, **vars(DRO))
        assert want["r3_corr"] is not None and want["avg_prob_corr"] is not None  # a mixed group
        assert got["r3_corr"] == pytest.approx(want["r3_corr"], abs=1e-4)
        assert got["avg_prob_corr"] == pytest.approx(want["avg_prob_corr"], abs=1e-4)


def test_the_evaluate_suite_merges_model_scores_into_items(tmp_path, monkeypatch):
    """A benchmark with a model scorer gets its per-row numbers in the pooled metrics and in
    items.json; a scorer that loses rows is an error, not a silent misalignment."""
    import json

    prepared = tmp_path / "prepared"
    prepared.mkdir()
    rows = [{"id": f"r{i}", "prompt": f"P{i}", "answer": "4", "separator": "</think>"} for i in range(2)]
    (prepared / "arith_ref_test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setattr(suite, "generate", lambda m, t, prompts, *, num_samples=1, greedy=False, **kw:
                        [["x</think>\n\n\\boxed{4}"] * (1 if greedy else num_samples) for _ in prompts])
    ev = SimpleNamespace(n_test=10, k=2, temperature=1.0, max_new_tokens=8, batch_size=4)
    seen = []

    def scorer(rows, prompts, samples):
        seen.append((prompts, samples))
        return [{"r3_corr": 0.5, "dilution_gap": None}, {"r3_corr": 0.1, "dilution_gap": 0.2}]

    items: dict = {}
    m = suite.evaluate_policy(None, None, prepared, ["arith_ref"], ev, 0, items=items,
                              scorers={"arith_ref": scorer})
    assert seen[0][0] == ["P0", "P1"] and len(seen[0][1][0]) == 2
    assert m["arith_ref/r3_corr"] == pytest.approx(0.3)
    assert m["arith_ref/dilution_gap"] == pytest.approx(0.2)   # None rows are skipped, not zeros
    assert m["arith_ref/pass@1"] == 1.0
    assert items["arith_ref"]["metrics"]["dilution_gap"] == [None, 0.2]
    with pytest.raises(ValueError, match="returned 1 rows for 2"):
        suite.evaluate_policy(None, None, prepared, ["arith_ref"], ev, 0,
                              scorers={"arith_ref": lambda r, p, s: [{}]})


def test_the_fixed_r3_settings_are_params_defaults():
    """The analysis scores every run with one R3 definition, the defaults of `group_correlations`;
    they are params.yaml's `reward.dro` ones, so the claim measures the R3 the DRO arms train on."""
    import inspect

    from core.params import load

    cfg = load().method_config("dro")[1]
    defaults = {k: v.default for k, v in inspect.signature(group_correlations).parameters.items()
                if v.default is not inspect.Parameter.empty}
    assert defaults == {"emphasis": cfg.emphasis, "clip_low": cfg.clip_low, "clip_high": cfg.clip_high}
