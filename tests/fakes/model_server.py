"""A local OpenAI-compatible model server for tests: real HTTP on 127.0.0.1, canned answers.

    with FakeModelServer() as server:
        server.answer({"action": "e2=email"})       # a valid structured answer
        server.answer({"action": "e3"}, p=0.3)      # ... whose logprobs give "e3" p = 0.3
        server.answer_raw_arguments("{not json")    # malformed
        server.fail(500)                            # HTTP 500
        server.stall(2.0)                           # answer after 2 s (timeouts)
        client = OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
        ...
        server.bodies      # every request body, parsed, in order

`answer(args)` shapes itself to the request: a forced tool call when the request carries
`tools`, otherwise the JSON as message content (JSON mode). When the request asks for
`logprobs` and the answer has a `p`, the reply carries OpenAI-style `logprobs.content` for the
answer's JSON (as llama.cpp sends them for tool-call arguments too): the `action` value is one
token of probability `p`, listed beside the other two first branches of an answer ("e" of a
ref, "done", "blocked"; those that differ from the value's first letter) sharing `1 - p`, so a
decider that renormalises over the alternatives gets exactly `p`; every other token has
probability 1. With nothing queued the server answers 500 and says so, so a test
that asks more than it queued fails loudly.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

Body = dict[str, Any]
DEFAULT_P = 0.9
"""The probability the logprobs of a structured answer give its `action` unless told."""


@dataclass(frozen=True)
class Reply:
    """One canned answer: an HTTP status and a body built from the request, after a delay."""

    status: int
    build: Callable[[Body], Body | str]
    delay_s: float = 0.0


def _logprobs(arguments: str, p: float, key: str = "action") -> Body | None:
    """`logprobs.content` spelling `arguments` with `key`'s value as one token of probability
    `p` (one alternative listed, of probability 1 - p); None if there is no such value."""
    try:
        value = json.loads(arguments).get(key)
    except (json.JSONDecodeError, AttributeError):
        return None
    if not isinstance(value, str):
        return None
    marker = f'"{value}"'
    start = arguments.find(marker, arguments.find(f'"{key}"') + len(key) + 2) + 1
    # the other first branches of an answer (a ref, done, blocked), sharing 1 - p
    others = [o for o in ("e", "done", "blocked") if o[0] != value[:1]][:2]
    rest = math.log((1 - p) / len(others)) if p < 1 else -100.0
    pieces = [
        (arguments[:start], 0.0, []),
        (value, math.log(p), [(o, rest) for o in others]),
        (arguments[start + len(value) :], 0.0, []),
    ]
    return {
        "content": [
            {
                "token": token,
                "logprob": lp,
                "bytes": None,
                "top_logprobs": [
                    {"token": t, "logprob": alt, "bytes": None} for t, alt in [(token, lp), *alts]
                ],
            }
            for token, lp, alts in pieces
        ],
        "refusal": None,
    }


def _completion(
    request: Body,
    message: Body,
    usage: tuple[int, int],
    *,
    logprobs: Body | None = None,
    finish_reason: str | None = None,
) -> Body:
    prompt, completion = usage
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": request.get("model", "fake-model"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": logprobs if request.get("logprobs") else None,
                "finish_reason": finish_reason
                or ("tool_calls" if "tool_calls" in message else "stop"),
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def _structured(
    request: Body,
    arguments: str,
    usage: tuple[int, int],
    *,
    p: float | None = DEFAULT_P,
    finish_reason: str | None = None,
) -> Body:
    tools = request.get("tools") or []
    if tools:
        name = tools[0]["function"]["name"]
        message: Body = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_fake",
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            ],
        }
    else:
        message = {"role": "assistant", "content": arguments}
    logprobs = None if p is None else _logprobs(arguments, p)
    return _completion(request, message, usage, logprobs=logprobs, finish_reason=finish_reason)


class FakeModelServer:
    """An OpenAI-compatible `/v1/chat/completions` on a random loopback port."""

    def __init__(self) -> None:
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self.bodies: list[Body] = []
        """Every request body, parsed, in arrival order."""
        self.raw: list[bytes] = []
        """Every request body exactly as it came over the wire."""
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    # -- lifecycle ----------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- queueing answers ---------------------------------------------------------------

    def queue(self, reply: Reply) -> None:
        with self._lock:
            self._replies.append(reply)

    def answer(
        self,
        arguments: Body,
        *,
        usage: tuple[int, int] = (120, 20),
        delay_s: float = 0.0,
        p: float | None = DEFAULT_P,
    ) -> None:
        """A structured answer (tool call or JSON content, whichever the request asked for),
        with logprobs that give its `action` probability `p` if the request asks for them
        (`p=None`: no logprobs, as OpenAI for tool calls)."""
        text = json.dumps(arguments)
        self.queue(Reply(200, lambda req: _structured(req, text, usage, p=p), delay_s))

    def answer_raw_arguments(
        self,
        text: str,
        *,
        usage: tuple[int, int] = (120, 20),
        finish_reason: str | None = None,
    ) -> None:
        """A structured answer whose arguments are `text` verbatim (e.g. malformed JSON; with
        `finish_reason="length"`, cut off at the output cap)."""
        self.queue(
            Reply(200, lambda req: _structured(req, text, usage, finish_reason=finish_reason))
        )

    def answer_text(self, text: str, *, usage: tuple[int, int] = (120, 20)) -> None:
        """Plain assistant text, no tool call: what a model that ignores the schema says."""
        self.queue(
            Reply(200, lambda req: _completion(req, {"role": "assistant", "content": text}, usage))
        )

    def fail(self, status: int = 500, message: str = "fake upstream failure") -> None:
        """An HTTP error with an OpenAI-shaped error body."""
        body = {"error": {"message": message, "type": "server_error", "code": None}}
        self.queue(Reply(status, lambda _req: body))

    def stall(self, seconds: float) -> None:
        """Answer only after `seconds` (a client with a shorter timeout gives up first)."""
        self.queue(Reply(200, lambda req: _structured(req, "{}", (0, 0)), delay_s=seconds))

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._replies)

    # -- serving ------------------------------------------------------------------------

    def _next(self, raw: bytes) -> tuple[Reply | None, Body]:
        body: Body = json.loads(raw) if raw else {}
        with self._lock:
            self.raw.append(raw)
            self.bodies.append(body)
            reply = self._replies.popleft() if self._replies else None
        return reply, body


def _handler_for(server: FakeModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if not self.path.endswith("/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            reply, body = server._next(raw)
            if reply is None:
                self._send(500, {"error": {"message": "FakeModelServer: no reply queued"}})
                return
            if reply.delay_s:
                time.sleep(reply.delay_s)
            self._send(reply.status, reply.build(body))

        def _send(self, status: int, payload: Body | str) -> None:
            data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client timed out and hung up; that is the point of a stall

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
            del format, args  # quiet: tests read `server.bodies`, not stderr

    return Handler
