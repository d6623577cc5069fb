"""The API's HTTP connections, bounded before anything reaches the app: `goalfleet api` serves
with `bounded_protocol(...)`, uvicorn's httptools protocol with four limits on top.

- **Head size**: the request line and headers of one request may take `max_head_bytes`. The
  C parser (httptools) keeps a header value it has not seen the end of in memory, growing
  with every chunk, and uvicorn has no limit of its own for it (h11's
  `h11_max_incomplete_event_size` is the other parser's), so a 50 MB `Authorization` header
  was held whole before the edge (`scheduler.api.edge`) could refuse it. Here each chunk is
  counted as it is fed: once a head passes the cap the client gets a 431 and the connection
  is closed, so no connection holds more than the cap and one read (256 KiB) of a head.
- **Header count**: more than `max_headers` headers is a 431 too, before the app runs.
- **Read time**: a request must arrive whole (head and body) within `read_timeout_s` of its
  first byte, or of the connection's opening: a client that trickles or sends nothing is
  answered 408 and cut off. (Idle keep-alive connections are uvicorn's: `timeout_keep_alive`.)
- **Connections**: past `max_connections` open connections in this process, a new one is
  answered 503 and closed at once, before any of it is read.

Every refusal is the API's error shape (`scheduler.api.edge.ErrorBody`) with `connection:
close`, naming the limit and the setting that raises it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from scheduler.api.edge import ErrorBody
from scheduler.api.errors import RETRY_AFTER_S
from workers.settings import Settings

LINGER_S = 1.0
"""How long a connection refused for the connection cap is read (and discarded) after its
503, before it is closed."""
_REASONS = {408: b"Request Timeout", 431: b"Request Header Fields Too Large", 503: b"Unavailable"}


@dataclass(frozen=True)
class ConnectionLimits:
    max_head_bytes: int
    """The request line and headers of one request, in bytes."""
    max_headers: int
    """Headers of one request."""
    read_timeout_s: float
    """From a request's first byte (or the connection's opening) until it is read whole."""
    max_connections: int
    """Open connections of one API process."""

    @classmethod
    def of(cls, settings: Settings) -> ConnectionLimits:
        """The limits `GOALFLEET_API_MAX_HEADER_BYTES`, `_MAX_HEADERS`, `_READ_TIMEOUT_S` and
        `_MAX_CONNECTIONS` set."""
        return cls(
            max_head_bytes=settings.api_max_header_bytes,
            max_headers=settings.api_max_headers,
            read_timeout_s=settings.api_read_timeout_s,
            max_connections=settings.api_max_connections,
        )


def refusal(status: int, body: ErrorBody) -> bytes:
    """A whole HTTP/1.1 answer that closes the connection (a 503 says when to retry, as the
    app's own 503s do)."""
    raw = body.model_dump_json().encode()
    retry = b"retry-after: %d\r\n" % RETRY_AFTER_S if status == 503 else b""  # noqa: PLR2004
    head = (
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
        b"%sconnection: close\r\n\r\n" % (status, _REASONS[status], len(raw), retry)
    )
    return head + raw


def _head_too_large(limits: ConnectionLimits) -> ErrorBody:
    return ErrorBody(
        error="HEADERS_TOO_LARGE",
        message=f"the request line and headers are over the API's limit of "
        f"{limits.max_head_bytes} bytes; the connection was closed",
        fix="send shorter headers (a bearer token is tens of bytes), or raise "
        "GOALFLEET_API_MAX_HEADER_BYTES on the API",
    )


def _too_many_headers(limits: ConnectionLimits) -> ErrorBody:
    return ErrorBody(
        error="TOO_MANY_HEADERS",
        message=f"the request has more than the API's limit of {limits.max_headers} headers",
        fix="send fewer headers, or raise GOALFLEET_API_MAX_HEADERS on the API",
    )


def _too_slow(limits: ConnectionLimits) -> ErrorBody:
    return ErrorBody(
        error="REQUEST_TIMEOUT",
        message=f"the request did not arrive whole within {limits.read_timeout_s:g} s",
        fix="send the whole request at once, or raise GOALFLEET_API_READ_TIMEOUT_S on the API",
    )


def _too_many_connections(limits: ConnectionLimits) -> ErrorBody:
    return ErrorBody(
        error="TOO_MANY_CONNECTIONS",
        message=f"the API process has {limits.max_connections} connections open, its limit",
        fix="retry shortly; reuse connections (keep-alive), or raise "
        "GOALFLEET_API_MAX_CONNECTIONS or --processes on the API",
    )


class BoundedProtocol(HttpToolsProtocol):
    """uvicorn's httptools connection with the limits of `limits` (see the module)."""

    limits: ConnectionLimits

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # noqa: ANN401 - uvicorn's own
        super().__init__(*args, **kwargs)
        self._in_head = True
        """Between a message's end (or the connection's start) and its headers' end."""
        self._head_bytes = 0
        self._header_count = 0
        self._refused = False
        self._read_timer: asyncio.TimerHandle | None = None

    # -- the connection -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            self._refuse(503, _too_many_connections(self.limits), linger=True)
            return
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        started_in_head = self._in_head
        super().data_received(data)
        if self._refused or self.transport.is_closing() or not self._in_head:
            return
        if self._header_count > self.limits.max_headers:  # too many before the head's end
            self._refuse(431, _too_many_headers(self.limits))
            return
        # a chunk that began inside a head is all head (the parser kept what it did not
        # finish); one that began in a body and ended in a new head is not counted, so a
        # head is cut at most one read past the cap
        self._head_bytes = self._head_bytes + len(data) if started_in_head else 0
        if self._head_bytes > self.limits.max_head_bytes:
            self._refuse(431, _head_too_large(self.limits))

    # -- the parser's callbacks ---------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_bytes = 0
        self._header_count = 0
        if self._read_timer is None:
            self._arm()

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count <= self.limits.max_headers:
            super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        if self._header_count > self.limits.max_headers:
            self._refuse(431, _too_many_headers(self.limits))  # the app never runs
            return
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self._refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        self._disarm()
        self._in_head = True
        self._head_bytes = 0
        if not self._refused:
            super().on_message_complete()

    # -- refusing -----------------------------------------------------------------------------

    def _arm(self) -> None:
        self._read_timer = self.loop.call_later(self.limits.read_timeout_s, self._read_timeout)

    def _disarm(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _read_timeout(self) -> None:
        self._read_timer = None
        if self.cycle is not None and self.cycle.response_started:
            self.transport.close()  # an answer is on its way: only cut the connection
        elif not self.transport.is_closing():
            self._refuse(408, _too_slow(self.limits))

    def _refuse(self, status: int, body: ErrorBody, *, linger: bool = False) -> None:
        """Answer `status` and close; with `linger`, half-close and read (discarding) for up
        to `LINGER_S` first, so a request the client sent meanwhile does not reset the
        connection before the client reads the answer."""
        self._refused = True
        self._disarm()
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = True  # the app (if it runs) sees a disconnect
            self.cycle.message_event.set()
        self.transport.write(refusal(status, body))
        if linger and self.transport.can_write_eof():
            self.transport.write_eof()
            self.loop.call_later(LINGER_S, self.transport.close)
        else:
            self.transport.close()


def bounded_protocol(limits: ConnectionLimits) -> type[BoundedProtocol]:
    """The protocol class uvicorn serves with (`uvicorn.Config(http=...)`), bound to
    `limits`."""
    return type("BoundedProtocol", (BoundedProtocol,), {"limits": limits})
