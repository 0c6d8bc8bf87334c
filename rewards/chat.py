"""Chat templates for instruct and reasoning checkpoints (`base_model.chat`).

A tokenizer with a ``chat_template`` (a Qwen3 or Qwen2.5 instruct folder given as
``base_model.path``) gets every prompt through it; the tiny model's tokenizer has none and keeps its
plain prompts, unchanged. :class:`ChatFormat` holds the setting and is the one place that decides:

- **Policy prompts** (every method's training rows, held-out and test sampling) become TRL's
  conversational format, a list of ``{role, content}`` messages (an optional system message, then
  the prompt as the user turn): TRL applies the template with ``GRPOConfig.chat_template_kwargs``
  (``enable_thinking`` for Qwen3), so generation, the loss and vLLM all see the same text.
  :meth:`ChatFormat.render` gives that text where TRL is not involved (evaluation's sampling).
- **Scoring prompts** (RLME's evaluator, RLCER's judge verifier, the self-evaluation probe): the
  filled template is wrapped as ONE user turn of the scoring model's own template, with the
  generation prompt and thinking OFF (:meth:`ChatFormat.user_turn`): the scored target ("YES") is
  then the first token of the assistant's visible reply, not of a think block.
- **Generation roles of the policy** (RLCER's rubricator): a user turn through the same template
  and thinking setting as the reasoner (TRL renders it).
- **Reasoning blocks**: :func:`strip_thinking` is a completion's visible answer (what follows the
  last ``</think>``), read by parsers of rubric JSON and GenRM verdicts; DRO teacher-forces its
  reference right after the rollout's ``</think>`` (:mod:`models.dro_trainer`).

``use_template``: ``auto`` (on iff the tokenizer has a chat template), ``on`` (an error if it has
none), ``off`` (plain prompts even for an instruct model). ``enable_thinking``: passed to the
template as a keyword (Qwen3's templates read it; templates that do not, ignore it); null passes
nothing, leaving the template's own default (Qwen3: thinking on). Nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from rewards.verifiable import content_text

__all__ = ["THINK_END", "THINK_START", "ChatFormat", "is_conversational", "prompt_text",
           "strip_thinking"]

THINK_START, THINK_END = "<think>", "</think>"


def is_conversational(prompt: Any) -> bool:
    """A TRL conversational prompt: a list of messages (dicts with a role)."""
    return isinstance(prompt, list) and all(isinstance(m, dict) for m in prompt)


def prompt_text(prompt: Any) -> str:
    """The problem a prompt asks: a plain prompt as is; for a conversational one the last user
    message's text (the last message if no turn is the user's).

    >>> prompt_text([{"role": "system", "content": "be brief"}, {"role": "user", "content": "1 + 1?"}])
    '1 + 1?'
    >>> prompt_text("1 + 1?")
    '1 + 1?'
    >>> prompt_text([{"role": "user", "content": None}])
    ''
    """
    if isinstance(prompt, str):
        return prompt
    messages = [m for m in prompt if isinstance(m, dict)]
    users = [m for m in messages if m.get("role") == "user"]
    chosen = users[-1] if users else (messages[-1] if messages else {})
    return content_text(chosen.get("content"))


def strip_thinking(text: str) -> str:
    """The visible answer of a completion: the text after the last ``</think>`` (leading newlines
    dropped); "" for a think block that never closed (a truncated reasoning has no answer yet);
    any other text as it is.

    >>> strip_thinking("<think>\\n2 + 2 = 4\\n</think>\\n\\nThe answer is 4.")
    'The answer is 4.'
    >>> strip_thinking("<think>\\n2 + 2 ="), strip_thinking("The answer is 4.")
    ('', 'The answer is 4.')
    """
    at = text.rfind(THINK_END)
    if at >= 0:
        return text[at + len(THINK_END):].lstrip("\n")
    if text.lstrip().startswith(THINK_START):
        return ""
    return text


@dataclass(frozen=True)
class ChatFormat:
    """``base_model.chat``: whether and how prompts go through the tokenizer's chat template."""

    use_template: Literal["auto", "on", "off"] = "auto"
    enable_thinking: bool | None = None
    system: str | None = None

    @classmethod
    def from_params(cls, params: Any) -> ChatFormat:
        """From a `core.params.Params` (its ``base_model.chat``), a ``ChatParams``, or None (auto)."""
        chat = getattr(getattr(params, "base_model", None), "chat", params)
        if chat is None or not hasattr(chat, "use_template"):
            return cls()
        return cls(chat.use_template, chat.enable_thinking, getattr(chat, "system", None))

    def with_thinking(self, enable_thinking: bool | None) -> ChatFormat:
        """This setting with a method's own thinking (``grpo.enable_thinking``); None keeps it."""
        if enable_thinking is None:
            return self
        return ChatFormat(self.use_template, enable_thinking, self.system)

    def applies(self, tokenizer: Any) -> bool:
        """Whether prompts for ``tokenizer`` go through its template (``use_template``)."""
        has = bool(getattr(tokenizer, "chat_template", None))
        if self.use_template == "off":
            return False
        if self.use_template == "on" and not has:
            raise ValueError("base_model.chat.use_template is 'on' but the tokenizer has no "
                             "chat_template (use 'auto' or 'off' for a base model)")
        return has

    @property
    def template_kwargs(self) -> dict[str, Any]:
        """Keywords for ``apply_chat_template`` (TRL's ``chat_template_kwargs``)."""
        return {} if self.enable_thinking is None else {"enable_thinking": self.enable_thinking}

    def messages(self, text: str) -> list[dict[str, str]]:
        """A plain prompt as TRL's conversational prompt: the system message (if set), the user turn."""
        system = [{"role": "system", "content": self.system}] if self.system else []
        return [*system, {"role": "user", "content": text}]

    def prompt(self, tokenizer: Any, prompt: Any) -> Any:
        """A row's prompt as the policy gets it: messages when the template applies (a prompt that
        already is a message list is left alone), else the plain text."""
        if isinstance(prompt, str) and self.applies(tokenizer):
            return self.messages(prompt)
        return prompt

    def render(self, tokenizer: Any, prompt: Any) -> str:
        """The text the policy is conditioned on (template, generation prompt, thinking setting),
        as TRL renders it; a plain prompt without a template as it is."""
        prompt = self.prompt(tokenizer, prompt)
        if isinstance(prompt, str):
            return prompt
        return tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True,
                                             **self.template_kwargs)

    def wraps_scoring(self, tokenizer: Any) -> bool:
        """Whether scoring prompts for ``tokenizer`` (a policy's or another evaluator's) become a
        user turn: it has a template and ``use_template`` is not ``off`` (``on`` does not require
        a template here: an external judge may be a base model)."""
        return self.use_template != "off" and bool(getattr(tokenizer, "chat_template", None))

    def user_turn(self, tokenizer: Any, text: str) -> str:
        """A scoring prompt (evaluator, judge) as one user turn of ``tokenizer``'s template with
        the generation prompt and thinking off, so the reply's first token is the verdict; the
        text as it is when :meth:`wraps_scoring` is false."""
        if not self.wraps_scoring(tokenizer):
            return text
        return tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                             add_generation_prompt=True, enable_thinking=False)
