"""A real HTTP/1.1 server on loopback for the Python client's tests (imported by name, as
`httpkit`): it answers each GET and POST with its path and Authorization header as JSON,
counts the connections it accepted and closed, keeps each request, and misbehaves on
request (closes kept connections, drops a request unanswered, makes two requests meet)."""

from __future__ import annotations

import contextlib
import http.server
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any


class EchoServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    close_after_answer = False
    """Close each connection after one answer, without saying so (no `Connection: close`):
    what a server does to a kept-alive connection that sat idle past its timeout."""
    drop_second = False
    """Read a connection's second request and close it unanswered: a server closing a kept
    connection just as a request goes out on it."""
    idle_timeout_s: float | None = None
    """Close a kept connection once it has waited this long for its next request."""
    meet: threading.Barrier | None = None
    """Answer `/meet` only once the barrier's parties are all waiting: each request to it
    must be in flight at the same moment as the others, on a connection of its own."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Echo)
        self.counting = threading.Lock()
        self.connections = 0
        self.closed = 0
        self.requests: list[tuple[str, str, bytes]] = []

    def shutdown_request(self, request: Any) -> None:
        """Counted once the socket is closed (the FIN sent), not when the handler returns."""
        super().shutdown_request(request)
        with self.counting:
            self.closed += 1

    def wait_closed(self, n: int, timeout_s: float = 5.0) -> None:
        deadline = time.monotonic() + timeout_s
        while self.closed < n:
            assert time.monotonic() < deadline, f"{self.closed} of {n} connections closed"
            time.sleep(0.001)


class Echo(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive unless the handler closes
    server: EchoServer

    def setup(self) -> None:
        self.timeout = self.server.idle_timeout_s  # the socket's, set by `setup`
        super().setup()
        with self.server.counting:
            self.server.connections += 1

    served = 0

    def _answer(self) -> None:
        size = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(size) if size else b""
        self.server.requests.append((self.command, self.path, body))
        self.served += 1
        if self.server.drop_second and self.served == 2:
            self.close_connection = True
            return
        if self.path == "/meet" and self.server.meet is not None:
            self.server.meet.wait()
        out = json.dumps({"path": self.path, "auth": self.headers.get("Authorization")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
        self.wfile.flush()
        if self.server.close_after_answer:
            self.close_connection = True

    do_GET = do_POST = _answer  # noqa: N815 - http.server's names

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def echo_server(tls: ssl.SSLContext | None = None) -> Iterator[EchoServer]:
    """An `EchoServer` serving in a thread of its own (over TLS with `tls`, a server-side
    context), shut down and closed on the way out."""
    srv = EchoServer()
    if tls is not None:
        srv.socket = tls.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def url(srv: EchoServer, path: str = "", scheme: str = "http") -> str:
    return f"{scheme}://127.0.0.1:{srv.server_address[1]}{path}"


class HookReceiver:
    """A webhook receiver on loopback (`host` 127.0.0.1 or ::1): answers each POST 204 once
    `go` is set (set from the start; clear it to hold the answers), keeping each call's
    `X-Goalfleet-Delivery` header."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.deliveries: list[str] = []
        self.go = threading.Event()
        self.go.set()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.go.wait(10)
                receiver.deliveries.append(self.headers.get("X-Goalfleet-Delivery", ""))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

        self.server = Server((host, 0), Handler)
        self.port = self.server.server_address[1]
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def posts(self) -> int:
        return len(self.deliveries)

    def stop(self) -> None:
        self.go.set()
        self.server.shutdown()
        self.server.server_close()
