"""RLME meta-evaluation reward (paper 000 §3.1, §4.6, App. B) on a tiny random Llama."""

from __future__ import annotations

import timeit
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from rewards.meta_eval import (
    Evaluator,
    MetaEvalReward,
    MetaQuestion,
    aggregate_meta_rewards,
    anchored,
    hybrid_rewards,
    render_evaluator_prompt,
    standardize,
    target_logprobs,
)
from rewards.verifiable import extract_boxed

WORDS = (
    "Problem Solution Answer Is the answer correct length short ? : YES NO correct is The . "
    "0 1 2 3 4 5 6 7 8 9 + - = boxed { } \\ so apples Tom has"
).split()
TEMPLATE = "Problem : {problem} Solution : {solution} Answer : {answer} {anchor} {question} ({length}) Verdict :"
QUESTIONS = [MetaQuestion("Is the answer correct ?", "YES", 1.0), MetaQuestion("Is length short ?", "NO", 0.5)]


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerFast:
    specials = ["<pad>", "<unk>", "<s>", "</s>"]
    vocab = {w: i for i, w in enumerate(specials + list(dict.fromkeys(WORDS)))}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", vocab["<s>"])])
    return PreTrainedTokenizerFast(
        tokenizer_object=tk, pad_token="<pad>", unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )


def _tiny_llama(tokenizer: PreTrainedTokenizerFast, seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        attention_dropout=0.5,  # so a forgotten eval() would change the scores
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    return LlamaForCausalLM(config)


@pytest.fixture()
def policy(tokenizer: PreTrainedTokenizerFast) -> LlamaForCausalLM:
    return _tiny_llama(tokenizer)


@pytest.fixture()
def forward_calls() -> Iterator[list[int]]:
    """Counts top-level causal-LM forward calls, whichever instance makes them."""
    calls: list[int] = []

    def hook(module: torch.nn.Module, args: object, output: object) -> None:
        if isinstance(module, LlamaForCausalLM):
            calls.append(id(module))

    handle = torch.nn.modules.module.register_module_forward_hook(hook)
    try:
        yield calls
    finally:
        handle.remove()


def _loop_logprob(model: LlamaForCausalLM, tok: PreTrainedTokenizerFast, prompt: str, target: str) -> float:
    """Reference: one unpadded sample at a time, per-token log-probs summed in a Python loop."""
    p = tok(prompt)["input_ids"]
    t = tok(target, add_special_tokens=False)["input_ids"]
    model.eval()
    with torch.no_grad():
        logits = model(torch.tensor([p + t])).logits[0]
    logp = torch.log_softmax(logits.float(), dim=-1)
    return sum(float(logp[len(p) - 1 + i, tid]) for i, tid in enumerate(t))


# ---------------------------------------------------------------- pure parts


def test_aggregate_single_evaluator_single_question() -> None:
    lp = np.array([[[-0.5, -1.5, -3.0]]])
    assert aggregate_meta_rewards(lp, [2.0], [1.0]).tolist() == [-1.0, -3.0, -6.0]


def test_aggregate_two_evaluators_three_questions() -> None:
    # Evaluator 0 (v=1): -1*1 + -2*0.5 + -4*0 = -2 ;  -0.5*1 + -1*0.5 + -8*0 = -1
    # Evaluator 1 (v=0.5): -3*1 + -2*0.5 + -1*0 = -4 ; -1*1 + -1*0.5 + 0 = -1.5
    # r = -2 + 0.5*-4 = -4 ;  -1 + 0.5*-1.5 = -1.75
    lp = np.array(
        [
            [[-1.0, -0.5], [-2.0, -1.0], [-4.0, -8.0]],
            [[-3.0, -1.0], [-2.0, -1.0], [-1.0, 0.0]],
        ]
    )
    np.testing.assert_allclose(aggregate_meta_rewards(lp, [1.0, 0.5, 0.0], [1.0, 0.5]), [-4.0, -1.75])


def test_aggregate_shape_errors() -> None:
    with pytest.raises(ValueError, match=r"\[J evaluators, K questions, B completions\]"):
        aggregate_meta_rewards(np.zeros((2, 3)), [1.0, 1.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="question_weights must have K=3"):
        aggregate_meta_rewards(np.zeros((2, 3, 4)), [1.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="evaluator_weights must have J=2"):
        aggregate_meta_rewards(np.zeros((2, 3, 4)), [1.0, 1.0, 1.0], [1.0])


def test_anchoring_fraction_determinism_and_nesting() -> None:
    ids = [f"prompt-{i}" for i in range(10_000)]
    sets = {}
    for p in (0.01, 0.1, 0.5):
        chosen = {i for i in ids if anchored(i, p)}
        assert abs(len(chosen) / len(ids) - p) <= 0.015, (p, len(chosen))
        assert chosen == {i for i in ids if anchored(i, p)}
        sets[p] = chosen
    assert sets[0.01] <= sets[0.1] <= sets[0.5]
    assert not any(anchored(i, 0.0) for i in ids[:100]) and all(anchored(i, 1.0) for i in ids[:100])
    assert {i for i in ids if anchored(i, 0.5, seed=1)} != sets[0.5]
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        anchored("x", 1.5)


def test_render_missing_placeholder_names_it() -> None:
    with pytest.raises(ValueError, match=r"\{length\}"):
        render_evaluator_prompt(TEMPLATE, problem="p", solution="s", answer="a", question="q")


def test_render_anchor_only_with_gold() -> None:
    kw = dict(problem="1 + 1", solution="so 2", answer="2", question="Is the answer correct ?", length=4)
    plain = render_evaluator_prompt(TEMPLATE, **kw)
    assert "correct answer is" not in plain
    assert plain == "Problem : 1 + 1 Solution : so 2 Answer : 2  Is the answer correct ? (4) Verdict :"
    gold = render_evaluator_prompt(TEMPLATE, gold="2", **kw)
    assert "The correct answer is 2. Is the answer correct ?" in gold
    # Without an {anchor} placeholder the sentence goes just before the question.
    no_slot = render_evaluator_prompt("{answer} | {question}", gold="7", **kw)
    assert no_slot == "2 | The correct answer is 7.\nIs the answer correct ?"


def test_standardize_and_hybrid() -> None:
    z = standardize([2.0, 4.0, 6.0, 8.0])
    assert abs(z.mean()) < 1e-12 and abs(z.std() - 1.0) < 1e-12
    assert standardize([3.0, 3.0, 3.0]).tolist() == [0.0, 0.0, 0.0]
    # rlvr [1,0,0,0] -> mean .25, std sqrt(3)/4: [3, -1, -1, -1]/sqrt(3); rlme constant -> 0.
    np.testing.assert_allclose(
        hybrid_rewards({"rlvr": [1, 0, 0, 0], "rlme": [-1.0, -1.0, -1.0, -1.0]}),
        np.array([3.0, -1.0, -1.0, -1.0]) / np.sqrt(3.0),
    )
    with pytest.raises(ValueError, match="same shape"):
        hybrid_rewards({"rlvr": [1.0, 0.0], "rlme": [1.0]})


def test_hybrid_logs_raw_component_means() -> None:
    from rewards.meta_eval import HybridReward

    logged: dict[str, float] = {}
    rlme = [-1.0, -2.0, -4.0, -3.0]
    hybrid = HybridReward({"rlvr": lambda prompts, completions, **kw: [1.0, 0.0, 0.0, 0.0],
                           "rlme": lambda prompts, completions, **kw: rlme})
    log = {"log_metric": lambda name, value: logged.__setitem__(name, value)}
    out = hybrid(["p"] * 4, ["c"] * 4, **log)
    assert logged == {"hybrid/rlvr": 0.25, "hybrid/rlme": -2.5}
    assert abs(sum(out)) < 1e-9  # the summed, standardised reward itself is flat on average
    rlme[2] = None  # a completion the component could not score is left out of its mean
    hybrid(["p"] * 4, ["c"] * 4, **log)
    assert logged["hybrid/rlme"] == -2.0
    assert hybrid(["p"] * 4, ["c"] * 4)  # without TRL's log_metric it still scores


# ---------------------------------------------------------------- model-dependent parts


def test_target_logprobs_matches_per_sample_loop(
    policy: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast, forward_calls: list[int]
) -> None:
    prompts = [
        "1 + 2 =",
        "Problem : Tom has 3 apples + 4 = 7 Is the answer correct ?",
        "2",
        "The answer is boxed { 5 } so 5 . Is the answer correct ? Verdict :",
    ]
    target = "YES" + tokenizer.eos_token
    policy.train()  # the live evaluator is the policy mid-training
    got = target_logprobs(policy, tokenizer, prompts, target)
    assert policy.training, "target_logprobs must restore the model's mode"
    assert len(forward_calls) == 1
    assert got.shape == (4,)
    expected = torch.tensor([_loop_logprob(policy, tokenizer, p, target) for p in prompts])
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)
    assert torch.all(got < 0)


def _reward(policy: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast, **kw: object) -> MetaEvalReward:
    evaluators = kw.pop("evaluators", [Evaluator("self", "live", 1.0), Evaluator("step0", "frozen", 0.5)])
    return MetaEvalReward(evaluators, QUESTIONS, TEMPLATE, policy=policy, tokenizer=tokenizer, **kw)


PROMPTS = ["Tom has 3 apples + 4", "1 + 1", "2 + 5", "9 - 3", "4 + 4"]
COMPLETIONS = ["3 + 4 = 7 so \\boxed{7}", "so 2", "\\boxed{7}", "9 - 3 = 6 so \\boxed{ 6 }", ""]


def test_meta_eval_reward_one_float_per_completion_one_forward_per_pair(
    policy: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast, forward_calls: list[int]
) -> None:
    reward = _reward(policy, tokenizer)
    assert reward.__name__ == "rlme_meta"
    out = reward(PROMPTS, COMPLETIONS)
    assert len(out) == len(COMPLETIONS) and all(isinstance(r, float) for r in out)
    assert len(forward_calls) == 2 * 2  # J evaluators x K questions, whole batch each time

    # Same numbers as the pure pieces assembled by hand.
    rendered = reward.render(PROMPTS, COMPLETIONS)
    assert "Answer : 7 " in rendered[0][0] and "(22)" in rendered[0][0]  # extracted answer, {length} = 22 chars
    lp = np.array(
        [
            [
                target_logprobs(policy, tokenizer, rendered[k], q.target + "</s>").numpy()
                for k, q in enumerate(QUESTIONS)
            ]
            for _ in range(2)  # frozen == live before any update
        ]
    )
    np.testing.assert_allclose(out, aggregate_meta_rewards(lp, [1.0, 0.5], [1.0, 0.5]), atol=1e-5)


def test_frozen_is_a_step0_snapshot_and_live_follows_the_trainer(
    policy: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast
) -> None:
    reward = _reward(policy, tokenizer)
    reward(PROMPTS, COMPLETIONS)
    before = reward.last_logprobs.copy()
    with torch.no_grad():
        policy.lm_head.weight.add_(0.5 * torch.randn_like(policy.lm_head.weight))
    reward(PROMPTS, COMPLETIONS)
    after = reward.last_logprobs
    np.testing.assert_allclose(after[1], before[1], atol=1e-6)  # frozen unchanged
    assert np.abs(after[0] - before[0]).max() > 1e-3  # live moved with the policy

    # A trainer set after construction is what "live" reads.
    other = _tiny_llama(tokenizer, seed=1)
    reward.trainer = SimpleNamespace(model=other)
    reward(PROMPTS, COMPLETIONS)
    assert np.abs(reward.last_logprobs[0] - after[0]).max() > 1e-3


def test_live_without_trainer_or_policy_fails_clearly(tokenizer: PreTrainedTokenizerFast) -> None:
    reward = MetaEvalReward([Evaluator("self", "live")], QUESTIONS, TEMPLATE, tokenizer=tokenizer)
    with pytest.raises(RuntimeError, match="reward.trainer"):
        reward(PROMPTS, COMPLETIONS)
    reward.trainer = SimpleNamespace(model=_tiny_llama(tokenizer))
    assert len(reward(PROMPTS, COMPLETIONS)) == len(PROMPTS)


def test_model_path_evaluator(
    policy: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast, tmp_path: Path, forward_calls: list[int]
) -> None:
    path = tmp_path / "evaluator"
    policy.save_pretrained(path)
    tokenizer.save_pretrained(path)
    reward = _reward(policy, tokenizer, evaluators=[Evaluator("self", "live"), Evaluator("ext", str(path))])
    reward(PROMPTS, COMPLETIONS)
    assert len(forward_calls) == 4
    np.testing.assert_allclose(reward.last_logprobs[1], reward.last_logprobs[0], atol=1e-4)


def test_nonexistent_evaluator_path_fails_at_construction(
    policy: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    missing = str(tmp_path / "no-such-model")
    with pytest.raises(FileNotFoundError, match=r"evaluator 'judge'.*no-such-model.*does not exist"):
        _reward(policy, tokenizer, evaluators=[Evaluator("judge", missing)])


def test_evaluator_folder_without_a_model_fails_at_construction(
    policy: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    empty = tmp_path / "judge_model"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match=r"evaluator 'judge'.*judge_model.*no config.json"):
        _reward(policy, tokenizer, evaluators=[Evaluator("judge", str(empty))])


def test_unknown_template_placeholder_fails_at_construction(
    policy: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast
) -> None:
    with pytest.raises(ValueError, match=r"\{word_count\}"):
        MetaEvalReward([Evaluator("self")], QUESTIONS, "{question} {word_count}", policy=policy, tokenizer=tokenizer)


def test_anchoring_states_gold_only_for_anchored_prompts(
    policy: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast
) -> None:
    ids = ["a", "b", "c", "d", "e"]
    golds = ["7", "2", "7", "6", "8"]
    everyone = _reward(policy, tokenizer, anchor_fraction=1.0).render(PROMPTS, COMPLETIONS, prompt_id=ids, answer=golds)
    assert all(f"The correct answer is {g}." in r for r, g in zip(everyone[0], golds))
    nobody = _reward(policy, tokenizer).render(PROMPTS, COMPLETIONS, prompt_id=ids, answer=golds)
    assert not any("correct answer is" in r for row in nobody for r in row)
    half = _reward(policy, tokenizer, anchor_fraction=0.5).render(PROMPTS, COMPLETIONS, prompt_id=ids, answer=golds)
    assert [("correct answer is" in r) for r in half[1]] == [anchored(i, 0.5) for i in ids]
    with pytest.raises(KeyError, match="prompt_id"):
        _reward(policy, tokenizer, anchor_fraction=0.1)(PROMPTS, COMPLETIONS, answer=golds)


def test_the_anchored_share_of_each_batch_is_logged(
    policy: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast
) -> None:
    """`rlme/anchor_rate` through TRL's `log_metric` (what train.json's curves keep): the share of
    the batch whose evaluator prompt stated the gold; 0.0 with anchoring off, and a row without a
    gold answer is never anchored."""
    ids = ["a", "b", "c", "d", "e"]
    for p, golds in ((0.0, ["7", "2", "7", "6", "8"]), (0.5, ["7", "2", "7", "6", "8"]),
                     (1.0, ["7", None, "7", "6", "8"])):
        logged: dict[str, list[float]] = {}
        _reward(policy, tokenizer, anchor_fraction=p)(
            PROMPTS, COMPLETIONS, prompt_id=ids, answer=golds,
            log_metric=lambda name, value, out=logged: out.setdefault(name, []).append(value))
        expected = sum(g is not None and anchored(i, p) for i, g in zip(ids, golds)) / len(ids)
        assert logged == {"rlme/anchor_rate": [expected]}
    assert 0.0 < sum(anchored(i, 0.5) for i in ids) < len(ids)  # the 0.5 case is not all or nothing


def test_conversational_inputs(policy: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast) -> None:
    reward = _reward(policy, tokenizer)
    prompts = [[{"role": "system", "content": "be brief"}, {"role": "user", "content": p}] for p in PROMPTS]
    completions = [[{"role": "assistant", "content": c}] for c in COMPLETIONS]
    np.testing.assert_allclose(reward(prompts, completions), reward(PROMPTS, COMPLETIONS), atol=1e-6)


def test_message_contents_that_are_none_or_parts_render_as_text(
    policy: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast
) -> None:
    """A tool-call-only turn (content None) or OpenAI-style parts: read as text, not a crash."""
    reward = _reward(policy, tokenizer)
    prompts = [[{"role": "user", "content": None}],
               [{"role": "user", "content": [{"type": "text", "text": "1 + 1"}, {"type": "image_url"}]}]]
    completions = [[{"role": "assistant", "content": None}, {"role": "assistant", "content": "\\boxed{2}"}],
                   [{"role": "assistant", "content": [{"type": "text", "text": "so \\boxed{2}"}]}]]
    rendered = reward.render(prompts, completions)
    assert rendered == reward.render(["", "1 + 1"], ["\\boxed{2}", "so \\boxed{2}"])
    assert "Answer : 2 " in rendered[0][0] and "Answer : 2 " in rendered[0][1]
    assert len(reward(prompts, completions)) == 2


def test_answer_extraction_on_the_reward_path_is_linear_in_unclosed_boxes(
    policy: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast
) -> None:
    """Rendering the evaluator prompts (which extracts each completion's boxed answer) grows
    linearly with the number of unclosed ``\\boxed{`` (~10x the time for 10x the boxes); a rescan
    from every unclosed box, as a copy of the extractor once did, is quadratic (~100x)."""
    reward = _reward(policy, tokenizer, evaluators=[Evaluator("self", "live")])
    assert reward.answer_extractor is extract_boxed

    def seconds_per_render(n_boxes: int) -> float:
        completion = "3 + 4 = 7 so \\boxed{7} " + "\\boxed{" * n_boxes
        assert "Answer : 7 " in reward.render(["p"], [completion])[0][0]
        number = max(1, 40_000 // n_boxes)  # ~the same characters per measurement
        return min(timeit.repeat(lambda: reward.render(["p"], [completion]), number=number, repeat=5)) / number

    small, large = seconds_per_render(400), seconds_per_render(4_000)
    assert large / small < 30, f"10x the unclosed boxes took {large / small:.0f}x the time"
