"""What a model decider's settings may say, without the decider or the step models: the modes
that force the answer's schema, the answer's token cap, and `ModelSettings` (built from
`Settings` at the composition root, passed to `workers.decide.factory.make_decider`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

DEFAULT_MAX_OUTPUT_TOKENS = 64
"""An answer is ~10 tokens (`{"action": "e2=password"}`); 64 leaves room for whitespace and a
self-reported confidence, and stops a runaway generation early."""
MODES = ("tools", "json")
"""How the answer's schema is forced, as real OpenAI-compatible servers accept it (llama.cpp,
vLLM, OpenAI): `tools`, a named tool call (the schema constrains decoding where the server
supports it); `json`, instructor's JSON mode (`response_format` `json_object`, the schema as
text in a system message; costs more tokens, and a template that drops system messages
hides the schema). `response_format` `json_schema` is not one: llama.cpp's server answers it
with HTTP 500."""


def check_mode(value: object) -> object:
    """`value` if it is one of `MODES`; else a one-line error naming the ones there are."""
    if value in MODES:
        return value
    raise ValueError(
        f"model mode {value!r} is not supported; use one of {', '.join(MODES)} "
        "(json_schema is refused by llama.cpp's server)"
    )


class ModelSettings(BaseModel):
    """How to reach a model. Built from `Settings` at the composition root and passed here."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    api_key: SecretStr | None = None
    base_url: str | None = None
    """An OpenAI-compatible server (vLLM, Ollama, llama.cpp, a proxy); any provider name."""
    timeout_s: float = Field(default=20.0, gt=0)
    """Per-request timeout; a timeout is `ModelUnavailableError` (the run ends `errored`)."""
    transport_retries: int = Field(default=1, ge=0, le=5)
    """The SDK's own retries of connection errors, 429 and 5xx, before we give up."""
    mode: str = "tools"
    """One of `MODES`: a named tool call (default) or instructor's JSON mode."""
    max_output_tokens: int = Field(default=DEFAULT_MAX_OUTPUT_TOKENS, gt=0, le=4096)
    """Cap on each answer's tokens (an answer needs ~10)."""
    logprobs: bool = True
    """Ask for token logprobs and take confidence from them; the decider falls back to the
    model's self-report by itself where a server returns none. False skips the first try
    (e.g. OpenAI in tools mode, which returns no logprobs for tool-call arguments)."""

    @field_validator("mode")
    @classmethod
    def _known_mode(cls, v: str) -> object:
        return check_mode(v)
