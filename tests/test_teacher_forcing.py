"""The one batched teacher-forced pass (rewards/teacher_forcing.py) shared by RLME, DRO and RLCER."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from rewards.teacher_forcing import next_token_logits, pad_rows, teacher_forced_logprobs

PAD = 0
PREFIXES = [[5, 6, 7, 8, 9], [3], [4, 4, 2]]
TARGETS = [[10, 11], [12, 13, 14], [15]]


@pytest.fixture(scope="module")
def model() -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                         pad_token_id=PAD)
    return LlamaForCausalLM(config).eval()


class PlainForward(torch.nn.Module):
    """A model whose forward neither names logits_to_keep nor takes **kwargs: it gets all logits."""

    def __init__(self, inner: LlamaForCausalLM) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
                use_cache: bool) -> Any:
        return self.inner(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                          use_cache=use_cache)


class Wrapper(torch.nn.Module):
    """A DDP/PEFT-style wrapper: forward(*args, **kwargs) passes everything on; records the kwargs."""

    def __init__(self, inner: LlamaForCausalLM) -> None:
        super().__init__()
        self.inner, self.seen = inner, []

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        self.seen.append(sorted(kwargs))
        return self.inner(*args, **kwargs)


def unpadded_logprobs(model: LlamaForCausalLM, prefix: list[int], target: list[int]) -> torch.Tensor:
    with torch.no_grad():
        logp = model(input_ids=torch.tensor([prefix + target])).logits[0].float().log_softmax(-1)
    return torch.stack([logp[len(prefix) - 1 + i, t] for i, t in enumerate(target)])


def test_pad_rows_left_and_right() -> None:
    ids, mask = pad_rows([[1, 2, 3], [4]], PAD)
    assert ids.tolist() == [[1, 2, 3], [0, 0, 4]] and mask.tolist() == [[1, 1, 1], [0, 0, 1]]
    ids, mask = pad_rows([[1, 2, 3], [4]], PAD, side="right")
    assert ids.tolist() == [[1, 2, 3], [4, 0, 0]] and mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    ids, mask = pad_rows([], PAD)
    assert ids.shape == mask.shape == (0, 0)


def test_one_padded_pass_equals_each_row_alone(model: LlamaForCausalLM) -> None:
    logp, mask = teacher_forced_logprobs(model, PREFIXES, TARGETS, PAD)
    assert logp.shape == mask.shape == (3, 3)
    assert mask.sum(1).tolist() == [2, 3, 1]
    for b, (prefix, target) in enumerate(zip(PREFIXES, TARGETS)):
        torch.testing.assert_close(logp[b, :len(target)], unpadded_logprobs(model, prefix, target),
                                   atol=1e-5, rtol=0)
        assert (logp[b, len(target):] == 0).all()


def test_models_without_logits_to_keep_give_the_same_numbers(model: LlamaForCausalLM) -> None:
    expected, _ = teacher_forced_logprobs(model, PREFIXES, TARGETS, PAD)
    plain, _ = teacher_forced_logprobs(PlainForward(model), PREFIXES, TARGETS, PAD)
    torch.testing.assert_close(plain, expected, atol=1e-5, rtol=0)
    wrapper = Wrapper(model)
    wrapped, _ = teacher_forced_logprobs(wrapper, PREFIXES, TARGETS, PAD)
    torch.testing.assert_close(wrapped, expected, atol=1e-5, rtol=0)
    assert "logits_to_keep" in wrapper.seen[0]  # a wrapper passes the projection cut on


def test_next_token_logits_read_the_last_real_position(model: LlamaForCausalLM) -> None:
    logits = next_token_logits(model, PREFIXES, PAD)
    assert logits.shape == (3, 32)
    for b, prefix in enumerate(PREFIXES):
        with torch.no_grad():
            alone = model(input_ids=torch.tensor([prefix])).logits[0, -1].float()
        torch.testing.assert_close(logits[b], alone, atol=1e-5, rtol=0)


def test_empty_rows_are_refused(model: LlamaForCausalLM) -> None:
    with pytest.raises(ValueError, match="non-empty prefix"):
        teacher_forced_logprobs(model, [[]], [[1]], PAD)
    with pytest.raises(ValueError, match="non-empty target"):
        teacher_forced_logprobs(model, [[1]], [[]], PAD)
    with pytest.raises(ValueError, match="at least one token"):
        next_token_logits(model, [[1], []], PAD)
