"""A base's premises (evals/premises.py): each measure on hand-computed examples, hostile input,
the premises table, a run on a micro random model, and the `calibrated` base's knob (SFT label
smoothing, models/tiny.py) on a micro base built with and without it."""

from __future__ import annotations

import math
import random

import pytest
import torch

from core.params import Arch, load
from evals.premises import (
    PREMISES,
    K,
    auroc,
    distinct_share,
    holds,
    measure_premises,
    summarise,
    verdicts,
)

B = r"\boxed{%s}"
MICRO = Arch(hidden_size=32, intermediate_size=64, num_layers=2, num_heads=2, max_positions=384)


def rows(*answers: str, leaked: list[bool] | None = None) -> list[dict]:
    out = [{"prompt": f"q{i}", "answer": a} for i, a in enumerate(answers)]
    for r, flag in zip(out, leaked or []):
        r["leaked"] = flag
    return out


# ------------------------------------------------------------------ measures, worked by hand

def test_worked_example_of_every_measure():
    """Three rows, k = 4.
    row 0 (gold 7): samples 7, 7, 8, none -> 2/4 right, any right, vote 7 (right), 3 distinct;
    row 1 (gold 3): samples 5, 5, 3, 5    -> 1/4 right, any right, vote 5 (wrong), 2 distinct;
    row 2 (gold 1): samples 2, 2, 2, 2    -> 0/4 right, none right, vote 2 (wrong), 1 distinct.
    pass@1 = (0.5 + 0.25 + 0) / 3 = 0.25; pass@4 = 2/3; maj@4 = 1/3; greedy right on rows 0, 2.
    Self-certainty: the 3 right samples score 4, 3 | 2; the 9 wrong ones 3.5, 1 | 2.5, 2.5, 2.5 |
    1, 1, 1, 0.5. Pairs (right above wrong) out of 27: 4 beats 9; 3 beats 8 (not 3.5); 2 beats
    5 (the 1s and 0.5). AUROC = (9 + 8 + 5) / 27 = 22/27.
    Token entropy: mean of the greedy completions' 0.3, 0.6, 0.9 = 0.6 nats."""
    samples = [[B % 7, B % 7, B % 8, "no answer"], [B % 5, B % 5, B % 3, B % 5], [B % 2] * 4]
    certainty = [[4.0, 3.0, 3.5, 1.0], [2.5, 2.5, 2.0, 2.5], [1.0, 1.0, 1.0, 0.5]]
    out = summarise(rows("7", "3", "1"), [B % 7, B % 4, B % 1], samples, [0.3, 0.6, 0.9], certainty)
    assert out["premise/n"] == 3 and out["premise/k"] == 4
    assert out["premise/token_entropy"] == pytest.approx(0.6)
    assert out["premise/pass@1"] == pytest.approx(0.25)
    assert out["premise/pass@4"] == pytest.approx(2 / 3)
    assert out["premise/maj@4"] == pytest.approx(1 / 3)
    assert out["premise/greedy_accuracy"] == pytest.approx(2 / 3)
    assert out["premise/boxed_rate"] == pytest.approx(11 / 12)
    assert out["premise/distinct_share"] == pytest.approx((3 / 4 + 2 / 4 + 1 / 4) / 3)
    assert out["premise/self_certainty_auroc"] == pytest.approx(22 / 27)
    assert out["premise/self_certainty_correct"] == pytest.approx(3.0)
    assert out["premise/self_certainty_wrong"] == pytest.approx(15.5 / 9)
    assert out["premise/empty_completions"] == 0
    assert "premise/self_certainty_auroc_note" not in out
    assert not any(key.startswith("premise/pass@1_") for key in out)  # no leak declared


def test_auroc_counts_ties_half_and_matches_the_pair_count():
    assert auroc([0.5, 0.5, 0.2], [True, False, False]) == pytest.approx(0.75)
    assert auroc([0.1, 0.9], [True, False]) == 0.0
    rng = random.Random(0)
    scores = [rng.random() for _ in range(30)]
    labels = [rng.random() < 0.4 for _ in range(30)]
    pairs = [(a, b) for a, la in zip(scores, labels) if la for b, lb in zip(scores, labels) if not lb]
    assert auroc(scores, labels) == pytest.approx(sum(a > b for a, b in pairs) / len(pairs))


def test_distinct_share():
    assert distinct_share(["x"] * 4) == 0.25 and distinct_share(["a", "b"]) == 1.0


def test_leaked_and_clean_accuracy_only_where_rows_declare_a_leak():
    samples = [[B % 1, B % 1], [B % 9, B % 2], [B % 9, B % 9]]
    out = summarise(rows("1", "2", "3", leaked=[True, True, False]), ["", "", ""], samples,
                    [0.1] * 3, [[1.0, 1.0]] * 3)
    assert out["premise/pass@1_leaked"] == pytest.approx(0.75)  # (1 + 0.5) / 2
    assert out["premise/pass@1_clean"] == 0.0
    assert out["premise/n_leaked"] == 2
    assert holds(out, "leak_memorised") == (True, pytest.approx(0.75))


# ------------------------------------------------------------------------------ hostile input

def test_all_correct_leaves_the_auroc_undefined_and_says_so():
    out = summarise(rows("4"), [B % 4], [[B % 4, B % 4]], [0.2], [[1.0, 2.0]])
    assert out["premise/self_certainty_auroc"] is None
    assert "2 scored completions 2 are correct" in out["premise/self_certainty_auroc_note"]
    assert holds(out, "confidence_tracks_correctness") == (None, None)
    assert verdicts(out)["holds/confidence_tracks_correctness"] is None


def test_completions_without_a_token_are_left_out_and_counted():
    out = summarise(rows("4", "5"), ["", ""], [["", ""], ["", ""]], [None, None],
                    [[None, None], [None, None]])
    assert out["premise/token_entropy"] is None
    assert out["premise/self_certainty_auroc"] is None
    assert "of 0 scored completions" in out["premise/self_certainty_auroc_note"]
    assert out["premise/empty_completions"] == 6
    assert out["premise/pass@1"] == 0.0 and out["premise/boxed_rate"] == 0.0


@pytest.mark.parametrize("args, match", [
    (([], [], [], [], []), "no rows"),
    ((rows("1"), [], [["x"]], [0.1], [[1.0]]), "one each per row"),
    ((rows("1", "2"), ["", ""], [["a"], ["a", "b"]], [0.1, 0.1], [[1.0], [1.0, 1.0]]), "same k"),
    ((rows("1"), [""], [[]], [0.1], [[]]), "same k >= 1"),
    ((rows("1"), [""], [["a"]], [0.1], [[1.0, 2.0]]), "certainty score"),
    ((rows("1", "2", leaked=[True]), ["", ""], [["a"], ["b"]], [0.1, 0.1], [[1.0], [1.0]]),
     "boolean `leaked` field on every row"),
])
def test_bad_input_is_one_clear_error(args, match):
    with pytest.raises(ValueError, match=match):
        summarise(*args)


def test_auroc_refuses_mismatched_lengths():
    with pytest.raises(ValueError, match="2 scores for 1 labels"):
        auroc([0.1, 0.2], [True])


# ---------------------------------------------------------------------------- the premises table

def test_each_premise_holds_from_its_threshold_up():
    for name, p in PREMISES.items():
        base = {p.minus: 0.0} if p.minus else {}
        at = {**base, p.measure: p.threshold}
        below = {**base, p.measure: p.threshold - 0.01}
        assert holds(at, name)[0] is True, name
        assert holds(below, name) == (False, pytest.approx(p.threshold - 0.01)), name
        assert holds({}, name) == (None, None), name
        assert p.why and 0 < p.threshold < 1


def test_every_premise_reads_measures_the_module_produces():
    k16 = [[B % 1] * 8 + [B % 2] * 8]
    out = summarise(rows("1", leaked=[True]), [B % 1], k16, [0.4], [[1.0] * 8 + [0.5] * 8])
    for name, p in PREMISES.items():
        assert p.measure in out and (p.minus is None or p.minus in out), name
    assert set(verdicts(out)) == {f"holds/{name}" for name in PREMISES}
    assert verdicts(out)["holds/confidence_tracks_correctness"] is True
    assert verdicts(out)["holds/latent_skill"] is True and K == 16


def test_an_unknown_premise_lists_the_known_ones():
    with pytest.raises(KeyError, match="known: confidence_tracks_correctness, room_to_sharpen"):
        holds({}, "calibrated")


# ------------------------------------------------------------------------- on a micro model

@pytest.fixture(scope="module")
def micro():
    """A randomly initialised micro Llama and a tokenizer trained on arith texts."""
    from models.tiny import build_model, build_tokenizer
    from world import arith

    kw = dict(min_ops=1, max_ops=2, max_value=20, sloppy_frac=0.0, hint_frac=0.0)
    test = arith.generate(random.Random(0), 6, "test", **kw)
    texts = [t for r in arith.generate(random.Random(1), 40, "train", **kw)
             for t in (r["prompt"], r["demonstration"])]
    tokenizer = build_tokenizer(texts, 300)
    return build_model(MICRO, tokenizer, seed=0).eval(), tokenizer, test


def test_measure_premises_on_a_random_model(micro):
    """A random model is near uniform: its token entropy is near log|V|, its self-certainty
    near 0, it answers nothing, so the AUROC is undefined; the same seed measures the same."""
    model, tokenizer, test = micro
    kw = dict(k=3, temperature=1.0, max_new_tokens=12, batch_size=8, seed=0)
    out = measure_premises(model, tokenizer, test, **kw)
    assert out["premise/n"] == 6 and out["premise/k"] == 3
    assert 0.9 * math.log(len(tokenizer)) < out["premise/token_entropy"] <= math.log(len(tokenizer))
    assert 0 <= out["premise/self_certainty_wrong"] < 0.2
    assert out["premise/pass@1"] == 0.0 and out["premise/self_certainty_auroc"] is None
    assert out["premise/self_certainty_auroc_note"].startswith("undefined")
    assert out == measure_premises(model, tokenizer, test, **kw)


def test_sharper_logits_measure_lower_entropy_and_higher_self_certainty(micro):
    """Scaling the final norm (tied embeddings: every logit x 8) sharpens every distribution."""
    import copy

    model, tokenizer, test = micro
    sharp = copy.deepcopy(model)
    with torch.no_grad():
        sharp.model.norm.weight.mul_(8.0)
    kw = dict(k=2, temperature=1.0, max_new_tokens=12, batch_size=8, seed=0)
    flat, peaked = measure_premises(model, tokenizer, test, **kw), measure_premises(sharp, tokenizer, test, **kw)
    assert peaked["premise/token_entropy"] < flat["premise/token_entropy"] - 0.5
    assert peaked["premise/self_certainty_wrong"] > flat["premise/self_certainty_wrong"] + 0.5


def test_measure_premises_refuses_rows_without_an_answer(micro):
    model, tokenizer, _ = micro
    with pytest.raises(ValueError, match="row 0 has no `prompt` or no `answer`"):
        measure_premises(model, tokenizer, [{"prompt": "1+1="}])
    with pytest.raises(ValueError, match="no rows"):
        measure_premises(model, tokenizer, [])


# ------------------------------------------------------- the knob: SFT label smoothing

def test_label_smoothing_at_zero_is_the_plain_cross_entropy_bit_for_bit():
    import torch.nn.functional as F

    from models.tiny import _nll

    torch.manual_seed(0)
    logits = torch.randn(2, 5, 11)
    labels = torch.tensor([[-100, 3, 4, 5, 6], [-100, -100, 1, 2, -100]])
    plain = F.cross_entropy(logits[:, :-1].transpose(1, 2), labels[:, 1:], ignore_index=-100,
                            reduction="none")
    assert torch.equal(_nll(logits, labels)[0], plain)
    assert torch.equal(_nll(logits, labels, 0.0)[0], plain)


def test_label_smoothing_is_the_cross_entropy_against_the_smoothed_target():
    """ε = 0.1 over V = 4: loss = 0.9 (−log p_y) + 0.1 mean_j (−log p_j); 0 where ignored."""
    from models.tiny import _nll

    p = torch.tensor([0.7, 0.1, 0.1, 0.1])
    logits = torch.stack([p.log(), p.log()]).unsqueeze(0)  # [1, 2, 4]: position 0 predicts label 1
    nll, mask = _nll(logits, torch.tensor([[-100, 0]]), 0.1)
    expected = 0.9 * -math.log(0.7) + 0.1 * -(math.log(0.7) + 3 * math.log(0.1)) / 4
    assert nll[0, 0].item() == pytest.approx(expected, rel=1e-6) and mask.tolist() == [[True]]
    assert _nll(logits, torch.tensor([[-100, -100]]), 0.1)[0].tolist() == [[0.0]]


def test_the_knob_at_its_default_leaves_the_build_settings_as_they_were():
    """Absent from the dumps at 0 (build.json, phase 1's stamp); present once set."""
    sft = load().base_model.sft
    assert "label_smoothing" not in sft.model_dump() and "label_smoothing" not in sft.roles.model_dump()
    assert sft.roles.label_smoothing == 0.0
    on = sft.model_copy(update={"roles": sft.roles.model_copy(update={"label_smoothing": 0.05})})
    assert on.model_dump()["roles"]["label_smoothing"] == 0.05


def test_an_ungrouped_token_loss_with_smoothing_is_not_trls_own():
    from trl import SFTTrainer

    from models.tiny import _trainer_class

    assert _trainer_class("token", grouped=False) is SFTTrainer
    assert _trainer_class("token", grouped=False, label_smoothing=0.1) is not SFTTrainer


@pytest.mark.slow
def test_the_knob_raises_a_micro_base_s_token_entropy(tmp_path):
    """The `ci` world and micro model, phase 1 trained long enough to sharpen (shared by both
    builds, as the `calibrated` preset shares it with the default base), then the role phase
    with and without label smoothing: the smoothed base's greedy completions carry more entropy."""
    from evals.registry import load_rows
    from models.policy import load_policy
    from models.tiny import train_base
    from world import generate_world

    p = load(preset="ci")
    generate_world(p.world, tmp_path / "prepared")
    sft = p.base_model.sft
    assert sft.roles is not None
    roles = sft.roles.model_copy(update={"steps": 60, "learning_rate": 3e-3})
    cfg = p.base_model.model_copy(update={"sft": sft.model_copy(update={
        "steps": 120, "learning_rate": 3e-3, "roles": roles})})
    smoothed = cfg.model_copy(update={"sft": cfg.sft.model_copy(update={
        "roles": roles.model_copy(update={"label_smoothing": 0.2})})})
    test = load_rows(tmp_path / "prepared", "arith", "test", 8)
    entropy = {}
    for name, c in (("plain", cfg), ("smoothed", smoothed)):
        info = train_base(tmp_path / "prepared", tmp_path / name, c, p.seed, tmp_path / "sft")
        assert ("phase1" in info["phases"]) == (name == "plain")  # phase 1 reused, not rebuilt
        model, tokenizer = load_policy(tmp_path / name, device="cpu")
        entropy[name] = measure_premises(model, tokenizer, test, k=1, max_new_tokens=32,
                                         batch_size=8)["premise/token_entropy"]
    assert entropy["plain"] < 0.8 * math.log(len(tokenizer))  # phase 1 taught it something
    assert entropy["smoothed"] > entropy["plain"] + 0.1, entropy
