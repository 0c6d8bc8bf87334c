"""The lab's sampler (models/sampler.py) against transformers' `generate`: the same tokens for the
same seed, greedy and sampled, with left padding, EOS, and the warpers; the fallback for what it
does not implement; GRPO's rollouts through it (models/grpo.py `_lab_rollouts`)."""

from __future__ import annotations

import pytest
import torch
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

from models.sampler import _settings, lab_generate, sample, supports

PAD, EOS = 0, 1


def tiny_llama(seed: int = 0, heads: int = 4, kv_heads: int = 4) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=heads, num_key_value_heads=kv_heads,
                         max_position_embeddings=128, tie_word_embeddings=True,
                         pad_token_id=PAD, eos_token_id=EOS, bos_token_id=None)
    return LlamaForCausalLM(config).eval()


def left_padded(rows: int = 6, length: int = 9, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, 97, (rows, length), generator=g)
    mask = torch.ones_like(ids)
    for i in range(rows):  # row i has i pads on the left
        ids[i, :i % length] = PAD
        mask[i, :i % length] = 0
    return ids, mask


def hf(model, ids, mask, seed=0, **kw):
    torch.manual_seed(seed)
    with torch.no_grad():
        return model.generate(input_ids=ids, attention_mask=mask, pad_token_id=PAD, **kw)


def lab(model, ids, mask, seed=0, **kw):
    torch.manual_seed(seed)
    return sample(model, ids, mask, pad_token_id=PAD, **kw)


@pytest.mark.parametrize("kv_heads", [4, 2])
def test_greedy_matches_generate_token_for_token_with_left_padding(kv_heads):
    model = tiny_llama(heads=4, kv_heads=kv_heads)
    ids, mask = left_padded()
    want = hf(model, ids, mask, do_sample=False, max_new_tokens=20, eos_token_id=None,
              temperature=None, top_p=None, top_k=None)
    got = lab(model, ids, mask, do_sample=False, max_new_tokens=20, eos_token_id=None)
    assert got.shape == want.shape == (6, 29)
    assert torch.equal(got, want)


@pytest.mark.parametrize("warpers", [
    {"temperature": 1.0},
    {"temperature": 0.7, "top_p": 0.9},
    {"temperature": 1.3, "top_k": 5},
    {"temperature": 1.0, "min_p": 0.05},
])
def test_sampling_draws_the_same_tokens_as_generate_for_the_same_seed(warpers):
    model = tiny_llama()
    ids, mask = left_padded(rows=8)
    settings = {"top_p": None, "top_k": None, **warpers}
    want = hf(model, ids, mask, seed=3, do_sample=True, max_new_tokens=16, eos_token_id=None,
              **settings)
    got = lab(model, ids, mask, seed=3, do_sample=True, max_new_tokens=16, eos_token_id=None,
              **settings)
    assert torch.equal(got, want)
    # ... and the seed matters: another seed draws other tokens.
    other = lab(model, ids, mask, seed=4, do_sample=True, max_new_tokens=16, eos_token_id=None,
                **settings)
    assert not torch.equal(other, got)


def test_rows_end_at_eos_pad_after_it_and_the_loop_stops_when_all_ended():
    model = tiny_llama()
    ids, mask = left_padded(rows=5)
    free = hf(model, ids, mask, do_sample=False, max_new_tokens=12, eos_token_id=None,
              temperature=None, top_p=None, top_k=None)
    # The token row 0 greedily writes third becomes "EOS": rows that write it stop there.
    stop = int(free[0, ids.shape[1] + 2])
    want = hf(model, ids, mask, do_sample=False, max_new_tokens=12, eos_token_id=stop,
              temperature=None, top_p=None, top_k=None)
    got = lab(model, ids, mask, do_sample=False, max_new_tokens=12, eos_token_id=stop)
    assert torch.equal(got, want)
    first = free[0, ids.shape[1]:].tolist().index(stop)  # where row 0 first writes it (<= 2)
    completion = got[0, ids.shape[1]:]
    assert int(completion[first]) == stop and bool((completion[first + 1:] == PAD).all())


def test_sampled_rows_that_end_early_leave_the_batch_and_the_others_draw_as_generate_does():
    """Ten EOS tokens: rows end at scattered steps, so the sampler drops them from its cache
    several times; the rows still writing draw exactly `generate`'s tokens."""
    model = tiny_llama()
    ids, mask = left_padded(rows=16)
    stops = list(range(2, 12))
    kw = dict(do_sample=True, temperature=1.0, max_new_tokens=24, eos_token_id=stops)
    want = hf(model, ids, mask, seed=5, top_p=None, top_k=None, **kw)
    got = lab(model, ids, mask, seed=5, **kw)
    assert torch.equal(got, want)
    lengths = [(r[ids.shape[1]:] != PAD).sum().item() for r in got]
    assert min(lengths) < max(lengths) / 2  # some rows ended well before others


def test_settings_it_does_not_implement_fall_back_to_generate(monkeypatch):
    model = tiny_llama()
    ids, mask = left_padded(rows=2)
    trl_like = GenerationConfig(max_new_tokens=4, do_sample=True, pad_token_id=PAD, bos_token_id=None,
                                eos_token_id=[EOS], temperature=1.0, top_p=1.0, top_k=0, min_p=None,
                                repetition_penalty=1.0, cache_implementation=None,
                                disable_compile=True)
    assert _settings(trl_like, {}) is not None  # TRL's GRPO config runs on the lab sampler
    calls = []
    monkeypatch.setattr(model, "generate", lambda **kw: calls.append(kw) or ids)
    lab_generate(model, ids, mask, generation_config=trl_like)
    assert calls == []
    penalised = GenerationConfig(**{**trl_like.to_dict(), "repetition_penalty": 1.2})
    assert _settings(penalised, {}) is None
    lab_generate(model, ids, mask, generation_config=penalised)
    assert len(calls) == 1
    assert _settings(None, {"max_new_tokens": 3, "num_return_sequences": 2}) is None


def test_supports_the_lab_llama_on_the_cpu_only():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    assert supports(tiny_llama())
    qwen = Qwen3ForCausalLM(Qwen3Config(vocab_size=97, hidden_size=32, intermediate_size=64,
                                        num_hidden_layers=1, num_attention_heads=2,
                                        num_key_value_heads=2, head_dim=16))
    assert not supports(qwen)
    with torch.device("meta"):
        assert not supports(tiny_llama())


def word_tokenizer():
    """A word-level tokenizer over the tiny model's vocabulary (`w2` ... `w96`), built locally."""
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers import models as tok_models
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": PAD, "<eos>": EOS, **{f"w{i}": i for i in range(2, 97)}}
    raw = Tokenizer(tok_models.WordLevel(vocab, unk_token="w2"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw, pad_token="<pad>", eos_token="<eos>")
    tokenizer.padding_side = "left"
    return tokenizer


def test_evaluation_samples_match_generate_through_models_generation(monkeypatch):
    """models/generation.generate draws the same samples through the lab sampler as through
    `generate` (forced by making `supports` say no) for the same seed, in one batch."""
    import models.generation as generation
    import models.sampler as sampler

    model, tokenizer = tiny_llama(), word_tokenizer()
    prompts = ["w5 w6 w7", "w8", "w9 w10 w11 w12 w13"]
    kwargs = dict(num_samples=3, temperature=1.0, max_new_tokens=6, batch_size=64, seed=7)
    fast = generation.generate(model, tokenizer, prompts, **kwargs)
    monkeypatch.setattr(sampler, "supports", lambda m: False)
    slow = generation.generate(model, tokenizer, prompts, **kwargs)
    assert len(fast) == 3 and all(len(s) == 3 for s in fast)
    assert fast == slow
    greedy = dict(kwargs, greedy=True)
    slow_greedy = generation.generate(model, tokenizer, prompts, **greedy)
    monkeypatch.setattr(sampler, "supports", supports)
    assert generation.generate(model, tokenizer, prompts, **greedy) == slow_greedy


def test_grpo_rollouts_go_through_the_lab_sampler_and_match_trls_own(tmp_path, monkeypatch):
    """The trainer hook: the same completion ids as TRL's regular generation path for the same
    seed, cut after the first EOS as TRL cuts them, with the lab sampler called."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    import models.grpo as grpo
    import models.sampler as sampler

    model, tokenizer = tiny_llama(), word_tokenizer()
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False,
                      per_device_train_batch_size=4, num_generations=4, max_completion_length=10,
                      report_to=[], max_steps=1, disable_tqdm=True)
    trainer = GRPOTrainer(model=model,
                          reward_funcs=[lambda completions, **kw: [0.0] * len(completions)],
                          args=args, train_dataset=Dataset.from_list([{"prompt": "w5 w6"}] * 4),
                          processing_class=tokenizer)
    # The EOS is a token the policy writes early, so that some rows end before the budget.
    prompts = [[5, 6, 7], [5, 6, 7], [8, 9], [8, 9]]
    torch.manual_seed(11)
    free, _ = trainer._generate_single_turn(prompts, None, {}, 4)
    longest = max(free, key=len)
    eos = [EOS, longest[2]]
    trainer.eos_token_ids = eos
    trainer.generation_config.eos_token_id = eos
    torch.manual_seed(11)
    want, _ = trainer._generate_single_turn(prompts, None, {}, 4)
    called = []
    real = sampler.sample
    monkeypatch.setattr(sampler, "sample", lambda *a, **k: called.append(1) or real(*a, **k))
    grpo._lab_rollouts(trainer)
    torch.manual_seed(11)
    got, logprobs = trainer._generate_single_turn(prompts, None, {}, 4)
    assert called and logprobs is None
    assert got == want
    # Each completion is cut after its first EOS (kept), or runs the whole budget.
    assert any(len(c) < 10 for c in got)
    for c in got:
        ends = [i for i, t in enumerate(c) if t in eos]
        assert ends == [len(c) - 1] or (ends == [] and len(c) == 10)
