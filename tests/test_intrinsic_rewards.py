"""The label-free rewards beyond the five papers and the spurious controls (docs/methods/ttrl.md,
self_certainty.md, entropy.md, spurious.md): worked examples of every formula, the golden fixtures,
the one batched teacher-forced pass, the registry and params entries, and maj@k in evaluation."""

from __future__ import annotations

import inspect
import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from rewards.baselines import format_boxed, format_rewards, incorrect_answer, incorrect_rewards
from rewards.confidence import confidence_scores, self_certainty, sequence_logprob, token_entropy
from rewards.majority import MajorityVoteReward, majority_label, majority_vote_rewards

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(name: str) -> tuple[dict, list[dict]]:
    lines = (FIXTURES / f"{name}.jsonl").read_text().splitlines()
    return json.loads(lines[0]), [json.loads(x) for x in lines[1:]]


# --- ttrl: majority vote -------------------------------------------------------------------------

@pytest.mark.parametrize("answers, voters, expected", [
    (["3", "4", None, "4"], None, [0, 1, 0, 1]),             # the majority, a missing answer
    (["4", "3", "3", "4"], None, [1, 0, 0, 1]),              # 2-2 tie: the class seen first wins
    (["1,000", "1000", "7", "7", "$1000$"], None, [1, 1, 0, 0, 1]),  # equivalent answers: one class
    ([None, "", " "], None, [0, 0, 0]),                      # every answer missing (blank = none)
    ([None, None, None, "5"], None, [0, 0, 0, 1]),           # no answer does not vote
    (["3", "4", "4", "4"], 2, [1, 0, 0, 0]),                 # only the first 2 vote (a tie)
    (["3", "4", "4", "4"], 4, [0, 1, 1, 1]),
    ([], None, []),                                          # an empty group
])
def test_majority_vote_worked_examples(answers, voters, expected) -> None:
    assert majority_vote_rewards(answers, voters).tolist() == [float(x) for x in expected]


def test_majority_label_counts_votes_and_refuses_no_voter() -> None:
    assert majority_label(["7", "7.0", "8"]) == ("7", 2)
    assert majority_label([]) == (None, 0)
    with pytest.raises(ValueError, match="voters"):
        majority_vote_rewards(["1"], 0)


def test_ttrl_golden_fixture_matches_version() -> None:
    from rewards import majority

    header, rows = fixture("ttrl")
    assert header["version"] == majority.VERSION
    for r in rows:
        assert majority_vote_rewards(r["answers"], r["voters"]).tolist() == r["rewards"]


def test_ttrl_reward_votes_per_group_and_logs_without_reading_the_label() -> None:
    reward = MajorityVoteReward(num_generations=3)
    completions = ["\\boxed{5}", "x \\boxed{6}", "\\boxed{5.0}",      # group 1: label 5 (2 votes)
                   "no answer", "\\boxed{}", "\\boxed{9}"]          # group 2: label 9 (1 vote)
    logged: dict[str, float] = {}
    out = reward([""] * 6, completions, answer=["5", "5", "5", "2", "2", "2"],
                 log_metric=logged.__setitem__)
    assert out == [1.0, 0.0, 1.0, 0.0, 0.0, 1.0]
    assert logged == pytest.approx({"ttrl/majority_ratio": (2 / 3 + 1 / 3) / 2, "ttrl/no_answer": 2 / 6,
                                    "ttrl/label_accuracy": 0.5})
    # The gold column only feeds the diagnostic: other golds, the same rewards.
    assert reward([""] * 6, completions, answer=["1"] * 6) == out
    assert reward([""] * 6, completions) == out


def test_ttrl_reward_needs_whole_groups_and_a_valid_vote_size() -> None:
    with pytest.raises(ValueError, match="not whole groups of 4"):
        MajorityVoteReward(4)([""] * 6, ["\\boxed{1}"] * 6)
    with pytest.raises(ValueError, match="vote_samples=5 must be between 1 and the group size 4"):
        MajorityVoteReward(4, vote_samples=5)


# --- self_certainty / entropy ----------------------------------------------------------------------

@pytest.mark.parametrize("V", [2, 7, 400])
def test_uniform_logits_give_zero_self_certainty_and_log_v_entropy(V: int) -> None:
    for constant in (0.0, 3.5):
        logits, mask = np.full((2, 3, V), constant), np.ones((2, 3), bool)
        assert self_certainty(logits, mask) == pytest.approx([0.0, 0.0], abs=1e-12)
        assert token_entropy(logits, mask) == pytest.approx([math.log(V)] * 2)


def test_worked_example_by_hand() -> None:
    p = np.array([0.7, 0.1, 0.1, 0.1])
    logits = np.log(p)[None, None]
    mask = np.ones((1, 1), bool)
    assert self_certainty(logits, mask)[0] == pytest.approx(-math.log(4) - np.log(p).mean())
    assert token_entropy(logits, mask)[0] == pytest.approx(-(p * np.log(p)).sum())
    assert sequence_logprob(logits, [[0]], mask)[0] == pytest.approx(math.log(0.7))
    # self-certainty is KL(U || p) >= 0; the entropy sits below log |V|
    assert self_certainty(logits, mask)[0] > 0 and token_entropy(logits, mask)[0] < math.log(4)


def test_masked_rows_and_positions() -> None:
    """A row with no valid token scores 0.0; a masked position cannot leak in, even inf or nan."""
    logits = np.zeros((3, 2, 4))
    logits[0, 1] = [np.inf, np.nan, -np.inf, 1.0]       # masked position of row 0
    logits[1] = np.log([0.7, 0.1, 0.1, 0.1])
    mask = np.array([[True, False], [True, True], [False, False]])
    kl = -math.log(4) - np.log([0.7, 0.1, 0.1, 0.1]).mean()
    assert self_certainty(logits, mask).tolist() == pytest.approx([0.0, kl, 0.0])
    assert token_entropy(logits, mask).tolist() == pytest.approx([math.log(4), 0.940448, 0.0], abs=1e-6)
    assert sequence_logprob(logits, [[0, 3], [0, 1], [2, 2]], mask).tolist() == pytest.approx(
        [-math.log(4), (math.log(0.7) + math.log(0.1)) / 2, 0.0])


def test_tensors_on_their_device_and_low_precision() -> None:
    logits = torch.zeros(1, 2, 8, dtype=torch.bfloat16)
    out = token_entropy(logits, torch.ones(1, 2, dtype=torch.bool))
    assert isinstance(out, np.ndarray) and out.dtype == np.float64 and out[0] == pytest.approx(math.log(8))


def test_shapes_are_checked() -> None:
    with pytest.raises(ValueError, match=r"logits must be \[G, T, V\]"):
        self_certainty(np.zeros((2, 3)), np.ones((2, 3), bool))
    with pytest.raises(ValueError, match=r"mask must be \[G, T\]"):
        token_entropy(np.zeros((2, 3, 4)), np.ones((2, 2), bool))
    with pytest.raises(ValueError, match=r"ids must be \[G, T\]"):
        sequence_logprob(np.zeros((2, 3, 4)), [[0]], np.ones((2, 3), bool))
    with pytest.raises(ValueError, match="unknown confidence score"):
        confidence_scores(np.zeros((1, 1, 2)), [[0]], [[True]], "nope")


@pytest.mark.parametrize("method", ["self_certainty", "entropy"])
def test_confidence_golden_fixtures_match_version(method: str) -> None:
    from rewards import confidence

    header, rows = fixture(method)
    assert header["version"] == confidence.VERSION
    for r in rows:
        score = {"token": "neg_entropy", "trajectory": "logprob"}.get(r.get("level"), "self_certainty")
        got = confidence_scores(r["logits"], r.get("ids", [[0] * len(m) for m in r["mask"]]), r["mask"], score)
        assert got.tolist() == pytest.approx(r["reward"], abs=1e-9)


# --- format / incorrect ----------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["format", "incorrect"])
def test_spurious_golden_fixtures_match_version(method: str) -> None:
    from rewards import baselines

    header, rows = fixture(method)
    assert header["version"] == baselines.VERSION
    completions = [r["completion"] for r in rows]
    if method == "format":
        got = format_boxed([""] * len(rows), completions)
    else:
        got = incorrect_answer([""] * len(rows), completions, answer=[r["answer"] for r in rows])
    assert got == [r["reward"] for r in rows]


def test_spurious_controls_worked_examples() -> None:
    chat = [{"role": "assistant", "content": "so \\boxed{3}"}]
    assert format_rewards(["\\boxed{3}", "3", "\\boxed{ }", chat]).tolist() == [1.0, 0.0, 0.0, 1.0]
    assert incorrect_rewards(["\\boxed{3}", "\\boxed{4}", "4", chat], ["3", "3", "3", "4"]).tolist() == [
        0.0, 1.0, 0.0, 1.0]
    assert incorrect_answer([""] * 2, ["\\boxed{4}", "\\boxed{4}"], answer=[None, "3"]) == [None, 1.0]
    with pytest.raises(ValueError, match="2 completions but 1 gold"):
        incorrect_rewards(["a", "b"], ["1"])


# --- the one batched pass over (prompt, completion) -------------------------------------------------

PAD = 0


@pytest.fixture(scope="module")
def llama() -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                         pad_token_id=PAD)
    return LlamaForCausalLM(config).eval()


class CharTokenizer:
    """Enough of a tokenizer for the pass: one id per character, plain prompts."""

    pad_token_id, eos_token_id = PAD, 1

    def __call__(self, text: list[str], **kwargs: Any) -> dict:
        return {"input_ids": [[2 + ord(ch) % 30 for ch in t] for t in text]}


class Counting(torch.nn.Module):
    """Passes every call on to the model and counts the forward passes."""

    def __init__(self, inner: LlamaForCausalLM) -> None:
        super().__init__()
        self.inner, self.calls = inner, 0

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.inner(*args, **kwargs)


PROMPTS = ["2+3=", "a", "9*9 is"]
COMPLETIONS = [[5, 6, 7], [8], [9, 10, 11, 12]]


def unpadded(model: LlamaForCausalLM, prompt: list[int], completion: list[int]) -> torch.Tensor:
    """Logits [T, V] predicting each completion token, from the unpadded sequence."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + completion])).logits[0].float()
    return logits[len(prompt) - 1:len(prompt) - 1 + len(completion)]


def test_teacher_forced_logits_agree_with_the_logprob_pass(llama) -> None:
    from rewards.teacher_forcing import teacher_forced_logits, teacher_forced_logprobs

    prefixes = CharTokenizer()(PROMPTS)["input_ids"]
    logits, mask = teacher_forced_logits(llama, prefixes, COMPLETIONS, PAD)
    logp, mask2 = teacher_forced_logprobs(llama, prefixes, COMPLETIONS, PAD)
    assert torch.equal(mask, mask2) and logits.shape == (3, 4, 40)
    ids = torch.tensor([c + [0] * (4 - len(c)) for c in COMPLETIONS])
    gathered = logits.log_softmax(-1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)
    assert torch.allclose(gathered.masked_fill(~mask, 0.0), logp, atol=1e-5)
    for b, (p, c) in enumerate(zip(prefixes, COMPLETIONS)):  # padding changes nothing
        assert torch.allclose(logits[b, :len(c)], unpadded(llama, p, c), atol=1e-4)
        assert not logits[b, len(c):].any()


@pytest.mark.parametrize("score", ["self_certainty", "neg_entropy", "logprob"])
def test_score_completions_is_one_pass_and_matches_each_row_alone(llama, score) -> None:
    from models.confidence_trainer import score_completions

    counting = Counting(llama)
    completions = [*COMPLETIONS, []]  # an empty completion scores 0.0 and costs nothing
    prompts = [*PROMPTS, "b"]
    got = score_completions(counting, CharTokenizer(), prompts, completions, score)
    assert counting.calls == 1
    prefixes = CharTokenizer()(prompts)["input_ids"]
    for b, (p, c) in enumerate(zip(prefixes[:3], COMPLETIONS)):
        alone = unpadded(llama, p, c)[None]
        want = confidence_scores(alone, torch.tensor([c]), torch.ones(1, len(c), dtype=torch.bool), score)
        assert got[b] == pytest.approx(want[0], abs=1e-4)
    assert got[3] == 0.0
    chunked = score_completions(counting, CharTokenizer(), prompts, completions, score, rows_per_pass=2)
    assert counting.calls == 3 and chunked == pytest.approx(got, abs=1e-5)


def test_confidence_reward_follows_the_trainer_model(llama) -> None:
    from models.confidence_trainer import ConfidenceReward, score_completions

    reward = ConfidenceReward("neg_entropy", CharTokenizer(), policy=llama)
    assert reward.__name__ == "entropy_neg_token"
    out = reward(PROMPTS, ["x"] * 3, completion_ids=COMPLETIONS)
    assert out == pytest.approx(score_completions(llama, CharTokenizer(), PROMPTS, COMPLETIONS,
                                                  "neg_entropy").tolist())
    assert all(-math.log(40) - 1e-6 <= r <= 0 for r in out)

    class Accelerator:
        def unwrap_model(self, m):
            return m.inner

        def autocast(self):
            return torch.autocast("cpu", enabled=False)

    counting = Counting(llama)
    reward.trainer = SimpleNamespace(model=counting, accelerator=Accelerator(), chat_template_kwargs=None)
    reward.policy = None
    assert reward(PROMPTS, ["x"] * 3, completion_ids=COMPLETIONS) == pytest.approx(out)
    with pytest.raises(ValueError, match="completion_ids"):
        reward(PROMPTS, ["x"] * 3)


# --- registry, params, public API ------------------------------------------------------------------

NEW = ("ttrl", "self_certainty", "entropy", "format", "incorrect")


def test_public_api_matches_the_spec() -> None:
    from rewards import baselines, confidence, majority

    expected = {majority.majority_vote_rewards: ["answers"],
                confidence.self_certainty: ["logits", "mask"],
                confidence.token_entropy: ["logits", "mask"],
                confidence.sequence_logprob: ["logits", "ids", "mask"],
                baselines.format_rewards: ["completions"],
                baselines.incorrect_rewards: ["completions", "gold"]}
    for fn, names in expected.items():
        params = inspect.signature(fn).parameters
        required = [n for n, p in params.items() if p.default is inspect.Parameter.empty]
        assert required == names, fn.__name__


def test_registered_with_params_versions_and_a_plan(llama) -> None:
    from core.params import load
    from rewards import MethodContext, build_plan, reward_version

    params = load(preset="ci")
    assert set(NEW) <= set(params.methods)
    for name in NEW:
        family, cfg = params.method_config(name)
        # rewards/baselines.py is at VERSION 2 (random's per-seed stream), for its three controls
        assert family == name and reward_version(name) == ("2" if name in ("format", "incorrect") else "1")
        ctx = MethodContext(name=name, family=family, cfg=cfg, grpo=params.method_grpo(name), seed=0,
                            policy=llama, tokenizer=CharTokenizer())
        plan = build_plan(ctx)
        assert len(plan.reward_funcs) == 1 and plan.trainer_cls is None, name
    assert params.method_config("entropy")[1].level == "token"
    cfg = params.method_config("entropy")[1].model_copy(update={"level": "trajectory"})
    ctx = MethodContext(name="entropy", family="entropy", cfg=cfg, grpo=params.grpo, seed=0,
                        policy=llama, tokenizer=CharTokenizer())
    assert build_plan(ctx).reward_funcs[0].__name__ == "entropy_logprob"


def test_the_long_preset_trains_each_intrinsic_reward_and_rlvr_450_steps() -> None:
    from core.params import load

    study = load(preset="intrinsic_long")
    assert study.methods == ["ttrl_long", "self_certainty_long", "entropy_long", "rlvr_long", "empo_long"]
    for arm in study.methods:
        assert study.method_grpo(arm).max_steps == 450
        assert study.method_config(arm)[0] == arm.removesuffix("_long")


def test_a_bad_ttrl_vote_size_is_named() -> None:
    from core.params import ParamsError, load, validate

    raw = load().model_dump()
    raw["reward"]["ttrl"]["vote_sampels"] = 4
    with pytest.raises(ParamsError, match="vote_sampels"):
        validate(raw)


# --- maj@k in evaluation -----------------------------------------------------------------------------

def test_maj_at_k_votes_the_k_samples_plus_extra_ones_on_the_test_split(tmp_path, monkeypatch) -> None:
    import evals.suite as suite

    d = tmp_path / "prepared"
    d.mkdir()
    (d / "arith_test.jsonl").write_text(json.dumps({"prompt": "P1", "answer": "4"}) + "\n"
                                        + json.dumps({"prompt": "P2", "answer": "7"}) + "\n")
    (d / "arith_val.jsonl").write_text((d / "arith_test.jsonl").read_text())
    calls = []
    script = {("P1", 0): ["\\boxed{5}", "\\boxed{4}"], ("P1", 1): ["\\boxed{4}", "\\boxed{9}"],
              ("P2", 0): ["\\boxed{7}", "\\boxed{1}"], ("P2", 1): ["\\boxed{1}", "\\boxed{2}"]}

    def fake(model, tokenizer, prompts, *, num_samples=1, greedy=False, seed=0, **kw):
        calls.append((num_samples, greedy, seed))
        if greedy:
            return [["\\boxed{0}"] for _ in prompts]
        return [script[(p, int(seed != 0))][:num_samples] for p in prompts]

    monkeypatch.setattr(suite, "generate", fake)
    ev = SimpleNamespace(n_test=10, k=2, maj_k=4, temperature=1.0, max_new_tokens=8, batch_size=4)
    m = suite.evaluate_policy(None, None, d, ["arith"], ev, seed=0)
    # P1 votes 5, 4, 4, 9: 4 (right); P2 votes 7, 1, 1, 2: 1 (wrong)
    assert m["arith/maj@k"] == 0.5 and m["arith/pass@1"] == 0.5
    assert (2, False, suite.VOTE_SEED_OFFSET) in calls
    # maj_k <= k: the first maj_k samples vote, no extra draw; P1 (5, 4) ties to 5, P2 (7, 1) to 7
    calls.clear()
    m = suite.evaluate_policy(None, None, d, ["arith"], SimpleNamespace(**{**vars(ev), "maj_k": 2}), seed=0)
    assert m["arith/maj@k"] == 0.5 and len(calls) == 2
    # held-out (val) evaluations do not pay for it
    m = suite.evaluate_policy(None, None, d, ["arith"], ev, seed=0, split="val", greedy=False)
    assert "arith/maj@k" not in m


def test_the_collapse_labels_test_split_evaluation_draws_no_vote(tmp_path, monkeypatch) -> None:
    """During training the test split is evaluated at each checkpoint for the collapse label, which
    reads only the headline: its settings (flows/train.py `heldout_settings`) draw no vote samples,
    and the headline is the one the evaluation with the vote gives."""
    import evals.suite as suite
    from core.params import load
    from flows.train import heldout_settings

    d = tmp_path / "prepared"
    d.mkdir()
    (d / "arith_test.jsonl").write_text("".join(json.dumps({"prompt": f"P{i}", "answer": str(i)}) + "\n"
                                                for i in range(3)))
    calls = []

    def fake(model, tokenizer, prompts, *, num_samples=1, greedy=False, seed=0, **kw):
        calls.append((num_samples, seed))
        return [[f"\\boxed{{{p[1:] if j == 0 else 9}}}" for j in range(num_samples)] for p in prompts]

    monkeypatch.setattr(suite, "generate", fake)
    ev = load().eval
    assert ev.maj_k and ev.maj_k > ev.heldout_k  # at the defaults the vote would draw more samples
    with_vote = suite.evaluate_policy(None, None, d, ["arith"], ev, 0, split="test",
                                      k=ev.heldout_k, greedy=False)
    assert len(calls) == 2 and "arith/maj@k" in with_vote
    calls.clear()
    label = suite.evaluate_policy(None, None, d, ["arith"], heldout_settings(ev, 64, "test"), 0,
                                  split="test", k=ev.heldout_k, greedy=False)
    assert calls == [(ev.heldout_k, 0)] and "arith/maj@k" not in label
    assert label["arith/pass@1"] == with_vote["arith/pass@1"] == 0.5
