"""A random-weight Qwen3-architecture checkpoint with a Qwen3-style chat template, built offline.

`save_qwen3_chat(folder, texts)` trains a small byte-level BPE tokenizer on `texts` (the tiny
project's `build_tokenizer`, digits single tokens), adds Qwen3's turn tokens (`<|im_start|>`,
`<|im_end|>`: special; `<think>`, `</think>`: added but not special, so decoding with
`skip_special_tokens=True` keeps them, as Qwen3's tokenizer does), sets :data:`QWEN3_TEMPLATE`
and writes it with a `Qwen3ForCausalLM` of tiny sizes (hidden 32, 2 layers, 4 heads) to `folder`,
the shape `base_model.path` points at. Nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path

# Qwen3's chat template, cut to what the lab uses: an optional system turn, user and assistant
# turns (an assistant turn's reasoning before `</think>` dropped, as Qwen3 does for history), and
# the generation prompt, which with `enable_thinking=false` closes an empty think block so the
# reply starts with the answer.
QWEN3_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message.role == 'assistant' %}"
    "{%- set content = message.content %}"
    "{%- if '</think>' in content %}{%- set content = content.split('</think>')[-1].lstrip('\\n') %}{%- endif %}"
    "{{- '<|im_start|>assistant\\n' + content + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}"
    "{%- endif %}"
)

IM_START, IM_END, THINK, END_THINK = "<|im_start|>", "<|im_end|>", "<think>", "</think>"


def qwen3_tokenizer(texts: list[str], vocab_size: int = 400):
    """The tiny BPE tokenizer with Qwen3's turn and think tokens and chat template."""
    from tokenizers import AddedToken

    from models.tiny import build_tokenizer

    tok = build_tokenizer(texts, vocab_size)
    tok.add_special_tokens({"additional_special_tokens": [IM_START, IM_END]})
    tok.add_tokens([AddedToken(THINK, special=False, normalized=False),
                    AddedToken(END_THINK, special=False, normalized=False)])
    tok.eos_token = IM_END  # an instruct Qwen3's EOS ends the assistant turn
    tok.chat_template = QWEN3_TEMPLATE
    return tok


def qwen3_model(tokenizer, seed: int = 0):
    """A random-weight `Qwen3ForCausalLM` with tiny sizes over `tokenizer`'s vocabulary."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=8, max_position_embeddings=4096, tie_word_embeddings=True,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         bos_token_id=None)
    model = Qwen3ForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def save_qwen3_chat(folder: Path, texts: list[str], seed: int = 0) -> Path:
    """Write the tokenizer and model to `folder` (a `base_model.path`); returns `folder`."""
    tok = qwen3_tokenizer(texts)
    model = qwen3_model(tok, seed)
    folder = Path(folder)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
