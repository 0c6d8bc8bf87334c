"""Left-padded batches and the batched teacher-forced pass every model-scored reward uses.

Three rewards read a model's probabilities of given tokens after given prompts: RLME's evaluator
(``rewards.evaluator_prompt.target_logprobs``: log P("YES" + end marker | evaluator prompt), paper
000 §3.1 and App. B), DRO's R3 (``models.dro_trainer.score_rollouts``: P of each reference-answer
token after a rollout's CoT, paper 003 §3.2) and RLCER's judge verifier
(``models.rlcer_trainer.yes_no_judgements``: "YES" against "NO" after the verifier prompt, paper 004
§4.3). The confidence rewards (``models.confidence_trainer``: self-certainty and entropy,
docs/methods/self_certainty.md) read the full distributions at every completion position instead
(:func:`teacher_forced_logits`). All of them run ONE forward pass for the whole batch:

- Rows are LEFT-padded (:func:`pad_rows`) with an explicit attention mask and position ids counted
  from each row's first real token, so every row sees the positions it would see unpadded (models
  with absolute position embeddings need this; RoPE models are indifferent to a shift) and every
  row's last tokens sit at the right edge.
- Only the positions that predict the scored tokens go through the LM head (``logits_to_keep``,
  when the model takes it), which keeps memory at B x T x V even for a 150k-token vocabulary.
- No gradient, no KV cache. The caller picks the model's mode: RLME's evaluator scores in eval
  mode, DRO scores the policy as the trainer holds it.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any, Literal

import torch

__all__ = ["model_device", "next_token_logits", "pad_rows", "teacher_forced_logits",
           "teacher_forced_logprobs"]


def model_device(model: Any) -> torch.device:
    """The device a model's inputs go to: its ``device`` attribute, else its first parameter's."""
    device = getattr(model, "device", None)
    if isinstance(device, torch.device):
        return device
    return next(model.parameters()).device


def pad_rows(rows: Sequence[Sequence[int]], pad_id: int,
             side: Literal["left", "right"] = "left") -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, mask) of token rows padded with ``pad_id`` to the longest row, on ``side`` (CPU, long).

    >>> ids, mask = pad_rows([[5, 6], [7]], 0)
    >>> ids.tolist(), mask.tolist()
    ([[5, 6], [0, 7]], [[1, 1], [0, 1]])
    >>> pad_rows([[5, 6], [7]], 0, side="right")[0].tolist()
    [[5, 6], [7, 0]]
    """
    width = max((len(r) for r in rows), default=0)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        span = slice(width - len(r), width) if side == "left" else slice(0, len(r))
        ids[i, span] = torch.tensor(list(r), dtype=torch.long)
        mask[i, span] = 1
    return ids, mask


def _takes_logits_to_keep(model: Any) -> bool:
    """Whether the model's forward takes ``logits_to_keep``: by name (every transformers causal LM),
    or through ``**kwargs`` (a DDP or PEFT wrapper passes it on to the model it wraps)."""
    params = inspect.signature(model.forward).parameters.values()
    return any(p.name == "logits_to_keep" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


@torch.no_grad()
def _last_logits(model: Any, ids: torch.Tensor, attention: torch.Tensor, keep: int) -> torch.Tensor:
    """Logits [B, keep, V] (float32) at the last ``keep`` positions of a left-padded batch."""
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    device = model_device(model)
    kwargs: dict[str, Any] = {"input_ids": ids.to(device), "attention_mask": attention.to(device),
                              "position_ids": positions.to(device), "use_cache": False}
    if _takes_logits_to_keep(model):
        kwargs["logits_to_keep"] = keep
    # A model that ignores logits_to_keep returns every position: keep the last ones either way.
    return model(**kwargs).logits[:, -keep:].float()


@torch.no_grad()
def teacher_forced_logprobs(model: Any, prefixes: Sequence[Sequence[int]],
                            targets: Sequence[Sequence[int]],
                            pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """log P of each target token after its prefix and the earlier target tokens, for all rows in
    ONE forward pass.

    Returns ``(logp [B, T], mask [B, T])`` on the model's device, T the longest target, left-aligned:
    row b's log-probs in its first ``len(targets[b])`` columns, zeros (and mask False) after.
    """
    if any(len(p) == 0 for p in prefixes) or any(len(t) == 0 for t in targets):
        raise ValueError("every row needs a non-empty prefix and a non-empty target")
    ids, attention = pad_rows([list(p) + list(t) for p, t in zip(prefixes, targets, strict=True)],
                              pad_id, "left")
    keep = max(map(len, targets))
    # logits[:, j] predicts ids[:, -keep + j]: the targets, right-aligned.
    logits = _last_logits(model, ids, attention, keep + 1)[:, :-1]
    device = logits.device
    tokens = ids[:, -keep:].to(device)
    logp = torch.log_softmax(logits, dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    lengths = torch.tensor([len(t) for t in targets], device=device).unsqueeze(1)
    cols = torch.arange(keep, device=device).unsqueeze(0)
    mask = cols < lengths
    left = logp.gather(1, (cols + keep - lengths).clamp(max=keep - 1))
    return left.masked_fill(~mask, 0.0), mask


@torch.no_grad()
def teacher_forced_logits(model: Any, prefixes: Sequence[Sequence[int]],
                          targets: Sequence[Sequence[int]],
                          pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The full next-token logits at every target position (the distribution each target token
    was drawn from, given its prefix and the earlier target tokens), for all rows in ONE forward
    pass: what the confidence rewards read (``models.confidence_trainer``: the policy's own
    completions as targets after their prompts).

    Returns ``(logits [B, T, V] float32, mask [B, T])`` on the model's device, T the longest
    target, left-aligned as :func:`teacher_forced_logprobs` aligns its log-probs.
    """
    if any(len(p) == 0 for p in prefixes) or any(len(t) == 0 for t in targets):
        raise ValueError("every row needs a non-empty prefix and a non-empty target")
    ids, attention = pad_rows([list(p) + list(t) for p, t in zip(prefixes, targets, strict=True)],
                              pad_id, "left")
    keep = max(map(len, targets))
    logits = _last_logits(model, ids, attention, keep + 1)[:, :-1]  # right-aligned targets
    device = logits.device
    lengths = torch.tensor([len(t) for t in targets], device=device).unsqueeze(1)
    cols = torch.arange(keep, device=device).unsqueeze(0)
    mask = cols < lengths
    index = (cols + keep - lengths).clamp(max=keep - 1)
    left = logits.gather(1, index.unsqueeze(-1).expand(-1, -1, logits.shape[-1]))
    return left.masked_fill(~mask.unsqueeze(-1), 0.0), mask


@torch.no_grad()
def next_token_logits(model: Any, rows: Sequence[Sequence[int]], pad_id: int) -> torch.Tensor:
    """Logits [B, V] (float32) of the token after each row, from ONE forward pass."""
    if any(len(r) == 0 for r in rows):
        raise ValueError("every row needs at least one token")
    ids, attention = pad_rows(rows, pad_id, "left")
    return _last_logits(model, ids, attention, 1)[:, -1]
