"""The SFT losses: the role phase's per-example loss (`models.tiny.example_mean_nll`) and the
loss computed by length groups (`models.tiny.grouped_loss`), which must equal one padded pass."""

import math

import pytest
import torch

from models.tiny import _trainer_class, example_mean_nll, grouped_loss, length_groups


def _logits(rows):
    """[B, T, V] logits from per-position probability rows (log taken, so softmax gives them back)."""
    return torch.tensor(rows, dtype=torch.float32).log()


def test_worked_example_weighs_each_example_once():
    # Vocabulary of 2. Example 0 has one label token (prob 0.5), example 1 three (probs 0.9 each),
    # example 2 none. Labels are shifted by one: position t predicts labels[t + 1].
    p = [[0.5, 0.5], [0.5, 0.5], [0.5, 0.5], [0.5, 0.5]]
    q = [[0.9, 0.1], [0.9, 0.1], [0.9, 0.1], [0.5, 0.5]]
    logits = _logits([p, q, p])
    labels = torch.tensor([[-100, -100, -100, 0],
                           [-100, 0, 0, 0],
                           [-100, -100, -100, -100]])
    per_example = [-math.log(0.5), -math.log(0.9)]
    assert example_mean_nll(logits, labels).item() == pytest.approx(sum(per_example) / 2, rel=1e-6)
    # TRL's token mean would give the long example 3/4 of the weight instead of 1/2.
    token_mean = (-math.log(0.5) - 3 * math.log(0.9)) / 4
    assert example_mean_nll(logits, labels).item() != pytest.approx(token_mean, rel=1e-3)


def test_matches_cross_entropy_when_every_example_has_one_token():
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 7)
    labels = torch.full((3, 5), -100)
    labels[:, 4] = torch.tensor([1, 6, 3])
    expected = torch.nn.functional.cross_entropy(logits[:, 3], labels[:, 4])
    assert example_mean_nll(logits, labels).item() == pytest.approx(expected.item(), rel=1e-6)


def test_gradient_flows_and_token_norm_keeps_trl():
    from trl import SFTTrainer

    logits = torch.randn(2, 4, 5, requires_grad=True)
    labels = torch.tensor([[-100, 1, 2, 3], [-100, -100, -100, 4]])
    example_mean_nll(logits, labels).backward()
    assert logits.grad is not None and logits.grad[:, :3].abs().sum() > 0
    assert _trainer_class("token", grouped=False) is SFTTrainer
    assert issubclass(_trainer_class("example", grouped=False), SFTTrainer)
    assert issubclass(_trainer_class("token"), SFTTrainer)


def _tiny_llama(seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(vocab_size=40, hidden_size=32, intermediate_size=64,
                                        num_hidden_layers=2, num_attention_heads=4,
                                        num_key_value_heads=4, max_position_embeddings=128,
                                        pad_token_id=0))


def _batch(lengths, prompt=3, left=False):
    """A padded batch like TRL's collator makes: ids, mask, labels (-100 on prompt and padding)."""
    torch.manual_seed(1)
    width = max(lengths)
    ids = torch.zeros(len(lengths), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    labels = torch.full_like(ids, -100)
    for i, n in enumerate(lengths):
        cols = slice(width - n, width) if left else slice(0, n)
        ids[i, cols] = torch.randint(1, 40, (n,))
        mask[i, cols] = 1
        labels[i, cols] = ids[i, cols]
        labels[i, cols.start:cols.start + prompt] = -100
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def _one_pass(model, batch, norm):
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    if norm == "example":
        return example_mean_nll(out.logits, batch["labels"])
    return model(**batch).loss  # transformers' own token mean = TRL's SFT token loss


@pytest.mark.parametrize("norm", ["token", "example"])
def test_grouped_loss_and_gradient_equal_one_padded_pass(norm):
    lengths = [5, 60, 7, 58, 6, 30, 4]  # the last row: one label token
    batch = _batch(lengths)
    assert len(length_groups(lengths)) > 1  # the batch is really split
    grads = []
    losses = []
    for fn in (lambda m: _one_pass(m, batch, norm), lambda m: grouped_loss(m, batch, norm)):
        model = _tiny_llama()
        loss = fn(model)
        loss.backward()
        losses.append(loss.item())
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert losses[1] == pytest.approx(losses[0], rel=1e-5)
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-4, atol=1e-6)


def test_grouped_loss_of_a_left_padded_batch_is_one_pass():
    batch = _batch([5, 60, 7], left=True)
    model = _tiny_llama()
    expected = _one_pass(model, batch, "token").item()
    assert grouped_loss(model, batch, "token").item() == pytest.approx(expected, rel=1e-6)


def test_length_groups_cover_every_row_once_and_cut_padding():
    lengths = [3, 200, 4, 190, 5, 6, 180, 3]
    groups = length_groups(lengths, overhead=10)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    padded = sum(len(g) * max(lengths[i] for i in g) for g in groups)
    assert padded < len(lengths) * max(lengths) / 2
    assert length_groups(lengths, overhead=10_000) == [sorted(range(8), key=lambda i: lengths[i])]
    assert length_groups([]) == []
