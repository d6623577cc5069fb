"""The fake beside the `Transport` seam: a function plays the server.

    def handler(request: Request) -> Response:
        assert request.target == "/v1/devices"
        return Response.of_json(200, [])

    with FleetClient("http://api.test", transport=FunctionTransport(handler)) as fleet:
        fleet.devices()

The handler sees each request as the client built it (method, path and query, headers, body)
and answers it, or raises a `TransportError` (`ConnectError`, `ReadTimeout`, …) to play a
network failure; everything above the transport runs as in production.
"""

from __future__ import annotations

from collections.abc import Callable

from scheduler.client.transport import Request, Response

Handler = Callable[[Request], Response]


class FunctionTransport:
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.closed = False

    def handle(self, request: Request) -> Response:
        if self.closed:
            raise RuntimeError("the transport is closed")
        return self.handler(request)

    def close(self) -> None:
        self.closed = True
