"""The agent-device daemon's wire: the transport seam and its two implementations.

`DaemonTransport.request(body) -> envelope` sends one request object
(`{"session", "command", "positionals", "flags", "meta", "token"}`) and returns the daemon's
envelope (`{"ok": true, "data": ...}` or `{"ok": false, "error": {...}}`), whatever the
transport:

- `SocketTransport`: the daemon's TCP socket, one JSON object per line each way, one reusable
  connection. The fastest; no protocol handshake exists on it.
- `HttpTransport`: `POST /rpc` JSON-RPC 2.0 (`agent_device.command`) with a bearer token, and
  `GET /health` for `rpcProtocolVersion`, on an `httpx.Client`. Its fake is httpx's own:
  `HttpTransport(..., transport=httpx.MockTransport(handler))` answers from a function (the unit
  tests replay the recorded envelopes under `tests/fixtures/agent_device/` that way).

Foreign exceptions (OSError, httpx's `TransportError`s, JSON errors) become
`TransientDeviceError` (the connection dropped or timed out: worth a retry) or
`FatalDeviceError`/`ProtocolError` here, so nothing above this module sees a socket or httpx
error.
"""

from __future__ import annotations

import json
import socket
from typing import Any, Protocol

import httpx

from workers.core.errors import FatalDeviceError, ProtocolError, TransientDeviceError

JsonObject = dict[str, Any]

RPC_METHOD = "agent_device.command"
SUPPORTED_RPC_PROTOCOL = 2
DEFAULT_IO_TIMEOUT_S = 60.0
"""Generous: a settled action waits up to its own `timeoutMs` (we send 5 s) inside the daemon."""
MAX_LINE_BYTES = 64 * 1024 * 1024
"""A 1500-node snapshot is ~1 MB; anything near this is not a reply we understand."""


class DaemonTransport(Protocol):
    """One request in, one envelope out. Raises only `workers.core.errors.DeviceError`s."""

    def request(self, body: JsonObject) -> JsonObject: ...

    def close(self) -> None: ...


def _envelope(obj: object) -> JsonObject:
    """Unwrap a socket reply line: a bare envelope, or a `{"type": "response"}` frame."""
    if not isinstance(obj, dict):
        raise ProtocolError("the daemon replied with a JSON value that is not an object")
    env: JsonObject = obj
    inner = env.get("response")
    if env.get("type") == "response" and isinstance(inner, dict):
        env = inner
    if not isinstance(env.get("ok"), bool):
        raise ProtocolError("the daemon's reply has no boolean 'ok'")
    return env


class SocketTransport:
    """Line-delimited JSON over the daemon's TCP port; the connection is kept and reused."""

    def __init__(self, host: str, port: int, *, timeout_s: float = DEFAULT_IO_TIMEOUT_S) -> None:
        self.host = host
        self.port = port
        self.timeout_s = timeout_s
        self._sock: socket.socket | None = None
        self._buf = b""

    def _connect(self) -> socket.socket:
        if self._sock is None:
            try:
                sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
            except ConnectionRefusedError as exc:
                raise FatalDeviceError(
                    f"nothing listens on {self.host}:{self.port}",
                    code="DAEMON_UNREACHABLE",
                    hint="the agent-device daemon is not running; start it (see daemon.json)",
                ) from exc
            except OSError as exc:
                raise TransientDeviceError(
                    f"could not connect to the daemon at {self.host}:{self.port}: "
                    f"{type(exc).__name__}",
                    code="DAEMON_CONNECT",
                ) from exc
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock = sock
            self._buf = b""
        return self._sock

    def _readline(self, sock: socket.socket) -> bytes:
        while b"\n" not in self._buf:
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise ConnectionResetError("the daemon closed the connection")
            self._buf += chunk
            if len(self._buf) > MAX_LINE_BYTES:
                raise ProtocolError("the daemon's reply line is larger than 64 MiB")
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def request(self, body: JsonObject) -> JsonObject:
        sock = self._connect()
        try:
            sock.sendall(json.dumps(body, separators=(",", ":")).encode() + b"\n")
            while True:
                frame = json.loads(self._readline(sock))
                if isinstance(frame, dict) and frame.get("type") == "progress":
                    continue  # only sent when meta.requestProgress is set; skip if it ever is
                return _envelope(frame)
        except (TimeoutError, ConnectionError, BrokenPipeError) as exc:
            self.close()
            raise TransientDeviceError(
                f"the daemon connection failed mid-request: {type(exc).__name__}",
                code="DAEMON_IO",
                hint="the request may or may not have run; pinned refs make a retry safe",
            ) from exc
        except json.JSONDecodeError as exc:
            self.close()
            raise ProtocolError("the daemon sent a line that is not JSON") from exc

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None
                self._buf = b""


class HttpTransport:
    """JSON-RPC 2.0 over the daemon's HTTP port (`/rpc`), keep-alive, bearer token.

    An `httpx.Client` carries it; `transport=` is its seam (`httpx.MockTransport(handler)` in
    tests, the real connection pool otherwise).
    """

    def __init__(
        self,
        host: str,
        port: int,
        token: str,
        *,
        timeout_s: float = DEFAULT_IO_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self._token = token
        self.timeout_s = timeout_s
        self._client = httpx.Client(
            base_url=f"http://{host}:{port}",
            timeout=timeout_s,
            transport=transport,
            trust_env=False,  # the daemon is on loopback: no proxy, no netrc from the env
        )
        self._next_id = 0

    @property
    def is_closed(self) -> bool:
        return self._client.is_closed

    def _http(self, method: str, path: str, payload: JsonObject | None) -> httpx.Response:
        headers = {"Content-Type": "application/json"}
        content = None
        if payload is not None:
            headers["Authorization"] = f"Bearer {self._token}"
            content = json.dumps(payload).encode()
        try:
            return self._client.request(method, path, content=content, headers=headers)
        except httpx.TransportError as exc:
            if _refused(exc):
                raise FatalDeviceError(
                    f"nothing listens on {self.host}:{self.port}",
                    code="DAEMON_UNREACHABLE",
                    hint="the agent-device daemon is not running; start it (see daemon.json)",
                ) from exc
            raise TransientDeviceError(
                f"the daemon HTTP request failed: {type(exc).__name__}", code="DAEMON_IO"
            ) from exc

    def _json(self, method: str, path: str, payload: JsonObject | None) -> JsonObject:
        """What `path` answered, which must be a JSON object (else `ProtocolError`)."""
        resp = self._http(method, path, payload)
        try:
            obj = json.loads(resp.content)
        except json.JSONDecodeError as exc:
            raise ProtocolError(
                f"{path} answered {resp.status_code} with a body that is not JSON"
            ) from exc
        if not isinstance(obj, dict):
            raise ProtocolError(f"{path} answered with a JSON value that is not an object")
        return obj

    def health(self) -> JsonObject:
        """`GET /health`: `{"ok", "service", "version", "rpcProtocolVersion"}`."""
        return self._json("GET", "/health", None)

    def request(self, body: JsonObject) -> JsonObject:
        params = {k: v for k, v in body.items() if k != "token"}
        self._next_id += 1
        rpc = {"jsonrpc": "2.0", "id": self._next_id, "method": RPC_METHOD, "params": params}
        reply = self._json("POST", "/rpc", rpc)
        if "result" in reply:
            return _envelope(reply["result"])
        error = reply.get("error")
        if isinstance(error, dict):
            data = error.get("data")
            if isinstance(data, dict) and isinstance(data.get("code"), str):
                return {"ok": False, "error": data}  # the daemon's own error, e.g. UNAUTHORIZED
            raise ProtocolError(
                f"JSON-RPC error {error.get('code')}: {str(error.get('message'))[:200]}"
            )
        raise ProtocolError("/rpc answered with neither 'result' nor 'error'")

    def close(self) -> None:
        self._client.close()


def _refused(exc: BaseException) -> bool:
    """Whether a connection was refused somewhere in `exc`'s chain (httpx wraps httpcore,
    which wraps the OSError): nothing listens, which no retry will change."""
    chain: list[BaseException] = []
    link: BaseException | None = exc
    while link is not None and link not in chain:
        chain.append(link)
        link = link.__cause__ or link.__context__
    return any(isinstance(e, ConnectionRefusedError) for e in chain)
