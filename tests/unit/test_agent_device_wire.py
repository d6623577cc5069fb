"""The daemon transports against tiny real servers on 127.0.0.1 (no mocks of sockets), and the
HTTP transport's error translation behind `httpx.MockTransport` (its seam)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from workers.core.errors import FatalDeviceError, ProtocolError, TransientDeviceError
from workers.devices.agent_device.wire import HttpTransport, SocketTransport

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agent_device"
BODY = {"session": "s", "command": "snapshot", "positionals": [], "flags": {}, "meta": {}}


def fx(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


@pytest.fixture
def line_server() -> Iterator[Callable[[Callable[[socket.socket], None]], int]]:
    """Start a one-connection TCP server running `serve(conn)`; yields a starter."""
    servers: list[socket.socket] = []

    def start(serve: Callable[[socket.socket], None]) -> int:
        srv = socket.create_server(("127.0.0.1", 0))
        servers.append(srv)

        def run() -> None:
            conn, _ = srv.accept()
            with conn:
                serve(conn)

        threading.Thread(target=run, daemon=True).start()
        return int(srv.getsockname()[1])

    yield start
    for srv in servers:
        srv.close()


def test_socket_reuses_one_connection_and_skips_progress_frames(line_server):
    """Two requests on one connection; a progress frame before a response frame is skipped."""
    seen: list[dict[str, Any]] = []

    def serve(conn: socket.socket) -> None:
        f = conn.makefile("rwb")
        for reply in (
            [fx("snapshot_signin")],
            [{"type": "progress", "event": {}}, {"type": "response", "response": fx("close")}],
        ):
            seen.append(json.loads(f.readline()))
            for frame in reply:
                f.write(json.dumps(frame).encode() + b"\n")
            f.flush()

    port = line_server(serve)
    wire = SocketTransport("127.0.0.1", port, timeout_s=5)
    assert wire.request(BODY)["data"]["nodes"]
    assert wire.request({**BODY, "command": "close"}) == fx("close")
    assert [s["command"] for s in seen] == ["snapshot", "close"]
    wire.close()


def test_socket_dropped_mid_request_is_transient(line_server):
    """The daemon closing the connection mid-request is worth a retry."""
    port = line_server(lambda conn: conn.recv(1024))
    wire = SocketTransport("127.0.0.1", port, timeout_s=5)
    with pytest.raises(TransientDeviceError, match="mid-request"):
        wire.request(BODY)


def test_socket_garbage_is_a_protocol_error(line_server):
    """A reply line that is not an envelope is a ProtocolError."""

    def serve(conn: socket.socket) -> None:
        conn.recv(1024)
        conn.sendall(b'{"hello": 1}\n')

    wire = SocketTransport("127.0.0.1", line_server(serve), timeout_s=5)
    with pytest.raises(ProtocolError, match="ok"):
        wire.request(BODY)


def test_socket_nothing_listening_is_fatal():
    """Connection refused means no daemon: fatal, with a hint."""
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    srv.close()
    with pytest.raises(FatalDeviceError, match="nothing listens"):
        SocketTransport("127.0.0.1", port, timeout_s=2).request(BODY)


class _Rpc(BaseHTTPRequestHandler):
    token = "tok"

    def log_message(self, *_args: object) -> None:
        pass

    def _send(self, obj: object) -> None:
        raw = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self) -> None:
        self._send(fx("http_health"))

    def do_POST(self) -> None:
        rpc = json.loads(self.rfile.read(int(self.headers["content-length"])))
        assert "token" not in rpc["params"]
        if self.headers.get("Authorization") != f"Bearer {self.token}":
            err = fx("http_rpc_unauthorized")["error"]
            self._send({"jsonrpc": "2.0", "id": rpc["id"], "error": {"code": -32000, "data": err}})
        elif rpc["method"] != "agent_device.command":
            self._send({"jsonrpc": "2.0", "id": rpc["id"], "error": {"code": -32601}})
        else:
            self._send({"jsonrpc": "2.0", "id": rpc["id"], "result": fx("close")})


@pytest.fixture
def rpc_port() -> Iterator[int]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Rpc)
    # a short poll: `shutdown()` waits for the loop's next poll (0.5 s by default)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    yield int(srv.server_address[1])
    srv.shutdown()
    srv.server_close()


def test_http_health_and_rpc_result(rpc_port):
    """GET /health gives rpcProtocolVersion; POST /rpc unwraps the JSON-RPC result."""
    wire = HttpTransport("127.0.0.1", rpc_port, "tok", timeout_s=5)
    assert wire.health()["rpcProtocolVersion"] == 2
    assert wire.request({**BODY, "token": "tok"}) == fx("close")
    wire.close()


def test_http_daemon_error_comes_back_as_an_envelope(rpc_port):
    """A JSON-RPC error that carries the daemon's error (UNAUTHORIZED) is a normal envelope."""
    wire = HttpTransport("127.0.0.1", rpc_port, "wrong", timeout_s=5)
    reply = wire.request(BODY)
    assert reply["ok"] is False
    assert reply["error"]["code"] == "UNAUTHORIZED"


def test_http_nothing_listening_is_fatal():
    """Connection refused on the HTTP port means no daemon: fatal, with a hint."""
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    srv.close()
    wire = HttpTransport("127.0.0.1", port, "tok", timeout_s=2)
    with pytest.raises(FatalDeviceError, match="nothing listens") as info:
        wire.health()
    assert info.value.code == "DAEMON_UNREACHABLE"


def mock_wire(handler: Callable[[httpx.Request], httpx.Response]) -> HttpTransport:
    return HttpTransport("127.0.0.1", 4310, "tok", transport=httpx.MockTransport(handler))


@pytest.mark.parametrize(
    "error",
    [
        httpx.ReadTimeout("timed out"),
        httpx.RemoteProtocolError("Server disconnected without sending a response."),
        httpx.ConnectError("[Errno 101] Network is unreachable"),
    ],
)
def test_http_timeouts_and_drops_are_transient(error):
    """A timeout, a dropped connection or a connect failure other than refused: retry."""

    def handler(request: httpx.Request) -> httpx.Response:
        raise error

    with pytest.raises(TransientDeviceError, match=type(error).__name__) as info:
        mock_wire(handler).request(BODY)
    assert info.value.code == "DAEMON_IO"
    assert info.value.__cause__ is error


def test_http_sends_json_rpc_with_the_token_as_bearer_only():
    """The token goes in the Authorization header, never in the params; ids count up."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        rpc = json.loads(request.content)
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": rpc["id"], "result": fx("close")})

    wire = mock_wire(handler)
    assert wire.request({**BODY, "token": "tok"}) == fx("close")
    wire.request({**BODY, "token": "tok"})
    first = json.loads(seen[0].content)
    assert seen[0].method == "POST"
    assert seen[0].url == "http://127.0.0.1:4310/rpc"
    assert seen[0].headers["authorization"] == "Bearer tok"
    assert first["method"] == "agent_device.command"
    assert first["params"] == BODY
    assert [json.loads(r.content)["id"] for r in seen] == [1, 2]
    wire.close()
    assert wire.is_closed


@pytest.mark.parametrize(
    ("status", "content", "match"),
    [
        (502, b"<html>bad gateway</html>", "502 with a body that is not JSON"),
        (200, b"[1, 2]", "not an object"),
        (200, b'{"jsonrpc": "2.0", "id": 1}', "neither 'result' nor 'error'"),
        (200, b'{"jsonrpc": "2.0", "id": 1, "error": {"code": -32601}}', "JSON-RPC error -32601"),
        (200, b'{"jsonrpc": "2.0", "id": 1, "result": {"hello": 1}}', "'ok'"),
    ],
)
def test_http_replies_we_do_not_understand_are_protocol_errors(status, content, match):
    """A body that is not a JSON-RPC reply carrying an envelope is a ProtocolError."""
    wire = mock_wire(lambda _request: httpx.Response(status, content=content))
    with pytest.raises(ProtocolError, match=match):
        wire.request(BODY)
