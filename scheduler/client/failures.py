"""What an exchange that got no answer means, for the client's choice: wait, resend or fail.

httpx raises its own `TransportError`s (`httpx._exceptions`); the client reads them in three
kinds, and tells apart, among the connections never made, those a URL given wrongly causes
(waiting cannot help) from those an API still starting causes:

    httpx.TransportError            no answer came
    ├── not connected               nothing was sent; the API may be starting, so the client
    │   │                           retries within its wait
    │   ├── httpx.ConnectError      refused, unreachable
    │   └── httpx.ConnectTimeout    not made within the timeout
    ├── Misdirected                 the URL, as given, cannot reach an API: fail at once
    │   ├── NoSuchHost              its host name does not resolve: nothing sent
    │   ├── TlsError                the TLS handshake failed (an https:// URL for a plain-http
    │   │                           server, a certificate not trusted): nothing sent
    │   └── WrongScheme             an http:// URL for a server that speaks TLS: it closed without
    │                               an answer, and a TLS handshake with it succeeds
    ├── dropped (DROPPED)           the connection closed under a request that had begun to go
    │                               out (httpx's WriteError, ReadError, RemoteProtocolError): an
    │                               idempotent request is sent once more, any other never
    └── anything else               no answer within the timeout (ReadTimeout, WriteTimeout, …)

`misdirected(exc, url)` says whether a failure is `Misdirected`, and which: httpx raises
`ConnectError` for a refused connection, a host name that does not resolve and a failed TLS
handshake alike, and keeps the operating system's error as its cause (`raise ... from`), which
names the kind. `WrongScheme` is asked of the server itself: an http:// URL whose server
dropped the request unanswered is probed once with a TLS handshake (nothing is sent over it).
"""

from __future__ import annotations

import socket
import ssl

import httpx

DROPPED = (httpx.WriteError, httpx.ReadError, httpx.RemoteProtocolError)
"""The connection closed under a request that had begun to go out: it may have been applied."""


class Misdirected(httpx.TransportError):
    """The URL, as given, cannot reach an API (see the module's docstring for the tree)."""


class NoSuchHost(Misdirected):
    pass


class TlsError(Misdirected):
    pass


class WrongScheme(Misdirected):
    pass


def misdirected(exc: httpx.TransportError, url: str) -> Misdirected | None:
    """`exc`, which a request to `url` raised, as the `Misdirected` it is, else None
    (waiting, or a resend, may cure it)."""
    said = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.ConnectError):
        cause = _os_error(exc)
        if isinstance(cause, socket.gaierror):
            return NoSuchHost(said)
        if isinstance(cause, ssl.SSLError):
            return TlsError(said)
    if isinstance(exc, DROPPED) and url.startswith("http://"):
        to = httpx.URL(url)
        if _speaks_tls(to.host, to.port or 80, _timeout_s(exc)):
            return WrongScheme(f"{said}; a TLS handshake succeeds")
    return None


def _os_error(exc: BaseException) -> OSError | None:
    """The operating system's error under httpx's (httpx's `from` httpcore's, `from` the
    socket's or the TLS library's)."""
    seen: BaseException | None = exc
    while seen is not None and not isinstance(seen, OSError):
        seen = seen.__cause__ or seen.__context__
    return seen


def _timeout_s(exc: httpx.TransportError) -> float:
    try:
        connect = exc.request.extensions.get("timeout", {}).get("connect")
    except RuntimeError:  # an error raised with no request (a test's transport)
        connect = None
    return float(connect) if connect else 5.0


def _speaks_tls(host: str, port: int, timeout_s: float) -> bool:
    """Whether `host:port` completes a TLS handshake (its certificate unchecked: this only
    asks what the server speaks, and nothing is sent over it)."""
    probe = ssl.create_default_context()
    probe.check_hostname = False
    probe.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection((host, port), timeout=timeout_s) as raw,
            probe.wrap_socket(raw, server_hostname=host),
        ):
            return True
    except (OSError, ValueError):
        return False
