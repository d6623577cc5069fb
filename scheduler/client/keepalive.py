"""Kept-alive HTTP/1.1 connections to the queue API, on the standard library's `http.client`.

The client's hot path is a submit; on it httpx cost ~0.5 ms more than `http.client` before the
request left the process (request and URL models, h11's state machine, the cookie jar), which is
an eighth of a bare Celery hop (docs/benchmarks.md §2). The API needs none of that: one origin,
JSON bodies, no cookies, no redirects.

What a caller can rely on:

- `NotConnectedError`: no connection could be made (refused, unknown host, connect timeout);
  nothing was sent, so the call may be retried.
- `LostError`: the connection failed after the request began to go out, or the answer did not
  come within the timeout; the request may or may not have been applied.
- Thread-safe: each request takes an idle connection (or opens one) and gives it back, so
  threads sharing a client never share a connection at once.
- A connection the server closed while it sat idle (its keep-alive timeout) is noticed before
  it is reused, and a new one is made: a request is never sent on a connection known dead.
  When the server closes a kept connection just as a request goes out on it, an idempotent
  request (GET, HEAD, OPTIONS, PUT, DELETE) is sent once more on a new connection; any other
  is `LostError`, never sent twice.
"""

from __future__ import annotations

import http.client
import select
import threading
from urllib.parse import urlencode, urlsplit

from workers.fleet.outages import describe

IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
"""Methods whose repeat has the effect of one request (RFC 9110 §9.2.2)."""


class NotConnectedError(OSError):
    """No connection could be made; nothing was sent."""


class LostError(OSError):
    """The request may have reached the server; its answer did not come back."""


class KeepAlive:
    """Connections to `base_url` (http or https), each opened on first need and kept between
    requests: one per thread making requests at the same moment."""

    def __init__(
        self, base_url: str, *, headers: dict[str, str] | None = None, timeout_s: float = 10.0
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise ValueError(f"{base_url!r}: give an http:// or https:// URL with a host")
        self.base_url = base_url.rstrip("/")
        self._prefix = parts.path.rstrip("/")
        self._headers = {"Accept": "application/json", **(headers or {})}
        self._host, self._port, self._timeout_s = parts.hostname, parts.port, timeout_s
        self._https = parts.scheme == "https"
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        """Send one request; its status and body."""
        target = self._prefix + path + (f"?{urlencode(params)}" if params else "")
        sent = {**self._headers, **(headers or {})}
        if body is not None:
            sent["Content-Type"] = "application/json"
        conn = self._take()
        try:
            return _send(conn, method, target, body, sent)
        finally:
            with self._lock:
                self._idle.append(conn)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _take(self) -> http.client.HTTPConnection:
        """An idle connection, or a new one (connected when first used)."""
        with self._lock:
            if self._idle:
                return self._idle.pop()
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout_s)
        return http.client.HTTPConnection(self._host, self._port, timeout=self._timeout_s)


def _send(
    conn: http.client.HTTPConnection,
    method: str,
    target: str,
    body: bytes | None,
    headers: dict[str, str],
) -> tuple[int, bytes]:
    kept = _connect(conn)
    try:
        conn.request(method, target, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
    except (OSError, http.client.HTTPException) as exc:
        conn.close()
        dropped = isinstance(exc, ConnectionResetError | BrokenPipeError)
        if kept and dropped and method in IDEMPOTENT:
            return _send(conn, method, target, body, headers)  # on a new connection: once
        raise LostError(f"{method} {target}: {describe(exc)}") from exc
    return resp.status, data


def _connect(conn: http.client.HTTPConnection) -> bool:
    """Make the connection unless an open one is still good (True: it was kept): one with
    something to read before a request went out has been closed by the server (or is out of
    step)."""
    if conn.sock is not None:
        readable, _, _ = select.select([conn.sock], [], [], 0)
        if not readable:
            return True
        conn.close()
    try:
        conn.connect()
    except (OSError, http.client.HTTPException) as exc:
        conn.close()
        raise NotConnectedError(describe(exc)) from exc
    return False
