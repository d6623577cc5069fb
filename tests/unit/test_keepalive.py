"""`KeepAlive`, the client's one connection, against real HTTP servers on loopback: kept
between requests, replaced when the server closed it while idle, never used to send a request
twice, and its two failures told apart (nothing sent / answer lost)."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from scheduler.client.api_client import ApiUnreachableError, FleetClient
from scheduler.client.keepalive import KeepAlive, LostError, NotConnectedError
from scheduler.local.redis import free_port


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    close_after_answer = False
    """Close each connection after one answer, without saying so (no `Connection: close`):
    what a server does to a kept-alive connection that sat idle past its timeout."""
    drop_second = False
    """Read a connection's second request and close it unanswered: a server closing a kept
    connection just as a request goes out on it."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Echo)
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


class _Echo(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive unless the handler closes
    server: _Server

    def setup(self) -> None:
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


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server()
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def url(srv: _Server, path: str = "") -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}{path}"


def test_one_connection_serves_every_request(server: _Server) -> None:
    conn = KeepAlive(url(server), headers={"Authorization": "Bearer t"})
    try:
        for i in range(5):
            status, body = conn.request("POST", "/v1/runs", body=f'{{"i": {i}}}'.encode())
            assert status == 200
            assert json.loads(body) == {"path": "/v1/runs", "auth": "Bearer t"}
    finally:
        conn.close()
    assert server.connections == 1
    assert [b for _, _, b in server.requests] == [f'{{"i": {i}}}'.encode() for i in range(5)]


def test_threads_sharing_a_client_each_get_a_connection_of_their_own(server: _Server) -> None:
    """Eight threads posting through one `FleetClient` at once: every request answered, none
    sent on a connection another thread is using (at most one connection a thread)."""
    answered: list[str] = []
    failed: list[BaseException] = []
    with FleetClient(url(server), token="t") as client:
        start = threading.Barrier(8)

        def post(i: int) -> None:
            start.wait()
            try:
                answered.extend(
                    client._call("POST", f"/v1/runs/{i}-{j}", body={})["path"] for j in range(20)
                )
            except BaseException as exc:  # noqa: BLE001 - reported below
                failed.append(exc)

        threads = [threading.Thread(target=post, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert failed == []
    assert sorted(answered) == sorted(f"/v1/runs/{i}-{j}" for i in range(8) for j in range(20))
    assert server.connections <= 8  # one a thread at most


def test_a_connection_the_server_closed_while_idle_is_replaced_not_failed(server: _Server) -> None:
    """The server closes after each answer without saying so: each next request, sent once
    the server has closed, notices the dead connection before sending and opens another;
    every request is answered, once."""
    server.close_after_answer = True
    conn = KeepAlive(url(server))
    try:
        for i in range(3):
            assert conn.request("POST", "/v1/runs", body=b"{}")[0] == 200
            server.wait_closed(i + 1)
    finally:
        conn.close()
    assert server.connections == 3
    assert len(server.requests) == 3


def test_a_kept_connection_dropped_under_a_request_resends_only_an_idempotent_one(
    server: _Server,
) -> None:
    """The server reads the second request on a connection and hangs up: a GET is sent once
    more on a new connection and answered; a POST is `LostError`, on the wire once."""
    server.drop_second = True
    conn = KeepAlive(url(server))
    try:
        conn.request("GET", "/health")
        assert conn.request("GET", "/v1/devices")[0] == 200
        assert server.connections == 2
        assert [p for _, p, _ in server.requests] == ["/health", "/v1/devices", "/v1/devices"]
        conn.request("GET", "/health")  # dropped too (the second on that one), sent on a third
        with pytest.raises(LostError, match="RemoteDisconnected"):
            conn.request("POST", "/v1/runs", body=b"{}")
    finally:
        conn.close()
    assert [m for m, _, _ in server.requests].count("POST") == 1


def test_a_path_prefix_and_query_parameters(server: _Server) -> None:
    conn = KeepAlive(url(server, "/fleet/"))
    try:
        _, body = conn.request("GET", "/v1/memory", params={"goal": "Sign in & out"})
    finally:
        conn.close()
    assert json.loads(body)["path"] == "/fleet/v1/memory?goal=Sign+in+%26+out"


def test_a_lost_answer_is_not_sent_again() -> None:
    """A server that reads the request and hangs up without answering: `LostError` (the
    request may have been applied), after exactly one request on the wire."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen: list[bytes] = []

    def hang_up() -> None:
        while True:
            try:
                peer, _ = listener.accept()
            except OSError:
                return
            seen.append(peer.recv(65536))
            peer.close()

    threading.Thread(target=hang_up, daemon=True).start()
    port = listener.getsockname()[1]
    try:
        with (
            FleetClient(f"http://127.0.0.1:{port}", connect_wait_s=5) as client,
            pytest.raises(ApiUnreachableError, match="RemoteDisconnected"),
        ):
            client.submit_run({"goal": "g"})
    finally:
        listener.close()
    assert len(seen) == 1
    assert seen[0].startswith(b"POST /v1/runs HTTP/1.1")


def test_nothing_listening_is_not_connected() -> None:
    conn = KeepAlive(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(NotConnectedError, match="ConnectionRefusedError"):
        conn.request("GET", "/health")


def test_a_read_timeout_is_a_lost_answer() -> None:
    listener = socket.create_server(("127.0.0.1", 0))  # accepts (backlog), never answers
    try:
        conn = KeepAlive(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout_s=0.2)
        with pytest.raises(LostError, match="timed out"):
            conn.request("GET", "/health")
    finally:
        listener.close()


@pytest.mark.parametrize("bad", ["127.0.0.1:8787", "ftp://host/", "http://", "http:///x"])
def test_a_url_without_scheme_or_host_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="http:// or https://"):
        KeepAlive(bad)
