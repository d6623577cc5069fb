"""The client waits briefly for an API that is still starting (connection refused), with
backoff, instead of failing at once; with no wait it fails at once."""

from __future__ import annotations

import http.server
import threading
import time

import pytest

from scheduler.client.api_client import ApiUnreachableError, FleetClient
from scheduler.local.redis import free_port

pytestmark = pytest.mark.slow  # waits for an API that starts late: make test, not make unit


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"status": "ok", "redis": "ok"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_starting_api_is_waited_for() -> None:
    """The call starts while nothing listens; the API comes up half a second later; the call
    answers (instead of failing at once)."""
    port = free_port()
    servers: list[http.server.HTTPServer] = []
    calling = threading.Event()
    bound: list[float] = []

    def start_late() -> None:
        calling.wait(30)
        time.sleep(0.5)
        server = http.server.HTTPServer(("127.0.0.1", port), _Health)
        bound.append(time.monotonic())
        servers.append(server)
        server.serve_forever()

    threading.Thread(target=start_late, daemon=True).start()
    try:
        with FleetClient(f"http://127.0.0.1:{port}", connect_wait_s=30) as client:
            t0 = time.monotonic()
            calling.set()
            assert client.health()["status"] == "ok"
        assert t0 < bound[0]  # the call began before the API listened: it waited for it
    finally:
        for s in servers:
            s.shutdown()


def test_no_api_fails_after_the_wait_naming_it() -> None:
    """With a wait: it fails once the wait is over (not before), saying how long it waited;
    with none: at the first refusal, saying nothing of a wait."""
    port = free_port()
    with FleetClient(f"http://127.0.0.1:{port}", connect_wait_s=0.5) as client:
        t0 = time.monotonic()
        with pytest.raises(ApiUnreachableError, match=r"waited 0\.5 s"):
            client.devices()
        assert time.monotonic() - t0 >= 0.5
    with FleetClient(f"http://127.0.0.1:{port}") as client:
        with pytest.raises(ApiUnreachableError) as refused:
            client.devices()
        assert "waited" not in str(refused.value)
