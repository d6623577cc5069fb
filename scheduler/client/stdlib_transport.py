"""The `Transport` that goes over the network: the standard library's `http.client`, HTTP/1.1.

Connections are kept between requests in a small pool: a request takes an idle one (the
last one put back) or opens a new one, and puts it back once its answer has been read whole,
so threads sharing a transport each hold their own connection while they call at the same
moment, and one thread calling again and again uses one connection. A kept connection the
server closed while it sat idle is readable (its EOF): it is closed and skipped before a
request goes out on it. A connection that failed, or that the answer said to close, is not
kept. At most `MAX_IDLE` idle connections are kept.

https verifies the server against the system's CA store (`ssl.create_default_context()`);
http makes no TLS context at all. Nothing is read from the environment (no proxy, no netrc).
The connect and each read and write are bounded by `timeout_s` (the socket's timeout).

Errors are translated here, where they are caught: the standard library's (`OSError`s,
`http.client.HTTPException`s) become the seam's `TransportError`s (`transport.py`): a host
name that does not resolve is `NoSuchHost`, a failed TLS handshake `TlsError`, and a server
that drops a new plain-http connection without an answer is probed once with a TLS handshake
(`WrongScheme` when it speaks TLS: the URL should be https://).

Why not `httpx.HTTPTransport`: its imports cost every client command ~25 ms of its start
(`goalfleet status` ~153 ms against its 150 ms bar; docs/benchmarks.md §15). Named for what
it is on, so that no other class shares its name (the agent-device wire's `HttpTransport` is
on httpx).
"""

from __future__ import annotations

import http.client
import select
import socket
import sys
import threading
from typing import TYPE_CHECKING

from scheduler.client.transport import (
    ConnectError,
    ConnectTimeout,
    DroppedError,
    NoSuchHost,
    ReadError,
    ReadTimeout,
    RemoteProtocolError,
    Request,
    Response,
    TlsError,
    TransportError,
    WriteError,
    WriteTimeout,
    WrongScheme,
)

if TYPE_CHECKING:
    import ssl

MAX_IDLE = 20
"""Idle connections kept (httpx's default keep-alive pool, which this replaced)."""


class StdlibTransport:
    def __init__(self, scheme: str, host: str, port: int | None, *, timeout_s: float) -> None:
        """`scheme` is `http` or `https`; `port` None: the scheme's own."""
        if scheme not in {"http", "https"}:
            raise ValueError(f"{scheme!r}: http or https")
        self.host, self.port, self.timeout_s = host, port, timeout_s
        self.tls: ssl.SSLContext | None = None
        if scheme == "https":
            import ssl  # noqa: PLC0415 - an https API's alone

            self.tls = ssl.create_default_context()  # loads the system's CA store (~35 ms)
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closed = False

    def handle(self, request: Request) -> Response:
        conn, fresh = self._checkout()
        try:
            answer = _exchange(conn, request)
        except DroppedError as exc:
            conn.close()
            if fresh and self.tls is None and _speaks_tls(self.host, self.port, self.timeout_s):
                raise WrongScheme(f"{_said(exc)}; a TLS handshake succeeds") from exc
            raise
        except BaseException:
            conn.close()
            raise
        self._checkin(conn)
        return answer

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _checkout(self) -> tuple[http.client.HTTPConnection, bool]:
        """An idle connection still open, else a new one, connected; and whether it is new."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the client is closed: make another")
            while self._idle:
                conn = self._idle.pop()
                if _usable(conn):
                    return conn, False
                conn.close()
        conn = self._new()
        try:
            conn.connect()
        except OSError as exc:  # refused, unknown host, unreachable, a TLS handshake failed
            conn.close()
            raise _not_connected(exc) from exc
        return conn, True

    def _new(self) -> http.client.HTTPConnection:
        if self.tls is None:
            return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
        return http.client.HTTPSConnection(
            self.host, self.port, timeout=self.timeout_s, context=self.tls
        )

    def _checkin(self, conn: http.client.HTTPConnection) -> None:
        """Keep `conn` for the next request, unless it is closed (the answer said so, or the
        transport was closed meanwhile) or enough are kept."""
        with self._lock:
            if not self._closed and conn.sock is not None and len(self._idle) < MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()


def _exchange(conn: http.client.HTTPConnection, request: Request) -> Response:
    """Send `request` on `conn` and read its whole answer."""
    try:
        conn.request(request.method, request.target, request.body, dict(request.headers))
    except TimeoutError as exc:
        raise WriteTimeout(_said(exc)) from exc
    except OSError as exc:  # reset, broken pipe
        raise WriteError(_said(exc)) from exc
    try:
        answer = conn.getresponse()
        body = answer.read()
    except TimeoutError as exc:
        raise ReadTimeout(_said(exc)) from exc
    except http.client.HTTPException as exc:  # closed without an answer (RemoteDisconnected),
        raise RemoteProtocolError(_said(exc)) from exc  # a cut-off body, no HTTP at all
    except OSError as exc:  # reset
        raise ReadError(_said(exc)) from exc
    headers: dict[str, str] = {}
    for name, value in answer.getheaders():
        key = name.lower()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return Response(answer.status, body, headers)


def _not_connected(exc: OSError) -> TransportError:
    """Why a connection was not made, as the seam's error."""
    if isinstance(exc, TimeoutError):
        return ConnectTimeout(_said(exc))
    if isinstance(exc, socket.gaierror):
        return NoSuchHost(_said(exc))
    ssl = sys.modules.get("ssl")  # loaded when the URL is https (or by anything else)
    if ssl is not None and isinstance(exc, ssl.SSLError):
        return TlsError(_said(exc))
    return ConnectError(_said(exc))


def _speaks_tls(host: str, port: int | None, timeout_s: float) -> bool:
    """Whether `host:port` completes a TLS handshake (its certificate unchecked: this only
    asks what the server speaks, and nothing is sent over it)."""
    import ssl  # noqa: PLC0415 - on this failure's path alone

    probe = ssl.create_default_context()
    probe.check_hostname = False
    probe.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection((host, port or 80), timeout=timeout_s) as raw,
            probe.wrap_socket(raw, server_hostname=host),
        ):
            return True
    except (OSError, ValueError):
        return False


def _usable(conn: http.client.HTTPConnection) -> bool:
    """Whether a kept connection can carry a request: open, with nothing to read. Before a
    request is sent, anything readable is no answer: the EOF of a server that closed it while
    it sat idle, or bytes that belong to no request."""
    sock = conn.sock
    if sock is None:
        return False
    try:
        return not _readable(sock)
    except (OSError, ValueError):  # closed under us
        return False


def _readable(sock: socket.socket) -> bool:
    if hasattr(select, "poll"):  # any descriptor; select() stops at FD_SETSIZE (1024)
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable)


def _said(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
