"""The Python client's seam: one HTTP exchange, `Transport.handle(request) -> Response`.

`FleetClient` builds each `Request` (method, path and query, headers, body) and reads each
`Response` (status, body, headers); the transport carries it. `StdlibTransport`
(`scheduler.client.stdlib_transport`, the standard library's `http.client`) carries it over
the network; `FunctionTransport` (`scheduler.client.function_transport`) answers from a
function, so a test sees what the client sends and plays any answer or failure, with the rest
of the client running as in production.

A transport that gets no answer raises one of these, and nothing else (a foreign error is
translated where it is caught, in the transport), so the client can tell "nothing was sent"
from "the request may have been applied". Their names are httpx's, which the client was on
before; `ApiUnreachableError`'s message names the one that happened:

    TransportError              no answer came
    ├── ConnectError            no connection was made (refused, unreachable): nothing sent;
    │   │                       the API may be starting, so the client retries within its wait
    │   └── ConnectTimeout      the connection was not made within the timeout
    ├── Misdirected             the URL, as given, cannot reach an API: the client fails at once
    │   ├── NoSuchHost          its host name does not resolve: nothing sent
    │   ├── TlsError            the TLS handshake failed (an https:// URL for a plain-http
    │   │                       server, a certificate not trusted): nothing sent
    │   └── WrongScheme         an http:// URL for a server that speaks TLS: it closed without
    │                           an answer, and a TLS handshake with it succeeds
    ├── DroppedError            the connection closed under a request that had begun to go out
    │   ├── WriteError          while the request went out
    │   ├── ReadError           while the answer came in (reset)
    │   └── RemoteProtocolError the server closed without an answer, or answered no HTTP
    ├── WriteTimeout            the request did not go out within the timeout
    └── ReadTimeout             no answer within the timeout
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class Request:
    method: str
    """`GET`, `POST`, … (upper case)."""
    target: str
    """The path and query as they go on the request line: `/v1/memory?goal=Sign+in`."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """What the client sets (the transport adds `Host` and `Content-Length`)."""
    body: bytes | None = None


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Names in lower case."""

    @classmethod
    def of_json(cls, status: int, data: object) -> Response:
        """An answer with `data` as its JSON body."""
        return cls(status, json.dumps(data).encode(), {"content-type": "application/json"})


class Transport(Protocol):
    def handle(self, request: Request) -> Response:
        """The answer to `request`, or a `TransportError`."""
        ...

    def close(self) -> None:
        """Close the connections kept; calling it again does nothing."""
        ...


class TransportError(Exception):
    """No answer came (see the module's docstring for the tree)."""


class ConnectError(TransportError):
    pass


class ConnectTimeout(ConnectError):  # noqa: N818 - httpx's name, which the client's errors show
    pass


class Misdirected(TransportError):  # noqa: N818 - a kind of failure, not an error's name
    pass


class NoSuchHost(Misdirected):
    pass


class TlsError(Misdirected):
    pass


class WrongScheme(Misdirected):
    pass


class DroppedError(TransportError):
    pass


class WriteError(DroppedError):
    pass


class ReadError(DroppedError):
    pass


class RemoteProtocolError(DroppedError):
    pass


class WriteTimeout(TransportError):  # noqa: N818 - httpx's name, which the client's errors show
    pass


class ReadTimeout(TransportError):  # noqa: N818 - httpx's name, which the client's errors show
    pass
