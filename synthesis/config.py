"""`SynthesizeConfig`: the pydantic mirror of the `synthesize:` section of params.yaml.

Kept free of project imports on purpose: `core/params.py` mounts this model, so importing it must
not pull in `core.params` (a cycle) or scikit-learn (slow). Strict like every params model: an
unknown key fails at start with its name.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LlmSettings(_Strict):
    """How the `llm` backend reaches a model: a local checkpoint in process, or an HTTP endpoint."""

    # A local transformers causal-LM folder run in process; null = use the HTTP endpoint.
    model_path: str | None = None
    # Environment variable holding the OpenAI-compatible base URL (e.g. http://127.0.0.1:8000/v1).
    endpoint_env: str = "SYNTHESIS_LLM_URL"
    # Environment variable holding an API key sent as a bearer token (unset = no header).
    api_key_env: str = "SYNTHESIS_LLM_API_KEY"
    # Model name sent in each request (vLLM: the served model name).
    model: str = "default"
    # `completions` (/v1/completions) or `chat` (/v1/chat/completions).
    api: Literal["completions", "chat"] = "chat"
    # Seconds one HTTP request may take.
    timeout_s: float = Field(60.0, gt=0)
    # Extra attempts after a transient failure (connection refused, 5xx, 429, timeout).
    max_retries: int = Field(4, ge=0)
    # First back-off in seconds; doubles after every failed attempt.
    backoff_s: float = Field(1.0, ge=0)
    # Sampling temperature (0 = greedy).
    temperature: float = Field(0.0, ge=0)
    # Most tokens generated per request.
    max_tokens: int = Field(1024, ge=1)
    # Requests in flight at once against the endpoint (the in-process model always runs one).
    concurrency: int = Field(4, ge=1)


class SynthesizeConfig(_Strict):
    """The `synthesize` stage (SPEC section 7): RLVRR components per prompt, validated."""

    # rule (offline, deterministic: TF-IDF keywords + style templates) | llm (paper 002's recipe).
    backend: Literal["rule", "llm"] = "rule"
    # Paper 002 filter: drop an example whose own references score below this on BOTH content
    # and style (content of each reference against the others; style of the references).
    threshold: float = Field(0.7, ge=0, le=1)
    # Most keywords kept per key point (each a phrase of at most 3 words found in the references).
    max_keywords: int = Field(3, ge=1)
    # Most key points kept per prompt.
    max_key_points: int = Field(12, ge=1)
    # CPU seconds per style-check call in the validation trial run (the sandbox's limit).
    check_cpu_seconds: float = Field(0.2, gt=0)
    # Settings of the llm backend (ignored by rule).
    llm: LlmSettings = LlmSettings()

    @model_validator(mode="after")
    def _llm_needs_a_model(self) -> SynthesizeConfig:
        if self.backend == "llm" and not self.llm.model_path and not self.llm.endpoint_env:
            raise ValueError("backend 'llm' needs llm.model_path or llm.endpoint_env")
        return self
