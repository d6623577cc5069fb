"""`FleetClient` on `http.client`: against real HTTP servers on loopback, its connections are
kept between requests, replaced when the server closed them while idle, never used to send a
POST twice, and its failures told apart (nothing sent: retried for `connect_wait_s`; answer
lost: failed at once); through its transport seam (`FunctionTransport`), what it sends and
how answers and transport errors become goalfleet errors."""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from httpkit import EchoServer, echo_server, url

from scheduler.client.api_client import ApiError, ApiUnreachableError, FleetClient
from scheduler.client.function_transport import FunctionTransport
from scheduler.client.transport import (
    ConnectError,
    ConnectTimeout,
    ReadError,
    ReadTimeout,
    RemoteProtocolError,
    Request,
    Response,
    TransportError,
    WriteError,
)
from scheduler.local.redis import free_port
from workers.core.model import RunStatus
from workers.core.records import RunRecord
from workers.core.request import GoalRunRequest

# -- real servers on loopback ------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[EchoServer]:
    with echo_server() as srv:
        yield srv


def test_one_connection_serves_every_request(server: EchoServer) -> None:
    with FleetClient(url(server), token="t") as client:
        for i in range(5):
            answer = client._call("POST", "/v1/runs", body={"i": i})
            assert answer == {"path": "/v1/runs", "auth": "Bearer t"}
    assert server.connections == 1
    assert [b for _, _, b in server.requests] == [f'{{"i": {i}}}'.encode() for i in range(5)]


def test_threads_sharing_a_client_each_get_a_connection_of_their_own(server: EchoServer) -> None:
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


def test_a_connection_the_server_closed_while_idle_is_replaced_not_failed(
    server: EchoServer,
) -> None:
    """The server closes after each answer without saying so: each next request, sent once
    the server has closed, notices the dead connection before sending and opens another;
    every request is answered, once."""
    server.close_after_answer = True
    with FleetClient(url(server)) as client:
        for i in range(3):
            assert client._call("POST", "/v1/runs", body={})["path"] == "/v1/runs"
            server.wait_closed(i + 1)
    assert server.connections == 3
    assert len(server.requests) == 3


def test_a_kept_connection_dropped_under_a_request_resends_only_an_idempotent_one(
    server: EchoServer,
) -> None:
    """The server reads the second request on a connection and hangs up: a GET is sent once
    more on a new connection and answered; a POST is `ApiUnreachableError`, on the wire once."""
    server.drop_second = True
    with FleetClient(url(server)) as client:
        client._call("GET", "/health")
        assert client._call("GET", "/v1/devices")["path"] == "/v1/devices"
        assert server.connections == 2
        assert [p for _, p, _ in server.requests] == ["/health", "/v1/devices", "/v1/devices"]
        client._call("GET", "/health")  # dropped too (the second on that one), sent on a third
        with pytest.raises(ApiUnreachableError, match="POST /v1/runs: RemoteProtocolError"):
            client._call("POST", "/v1/runs", body={})
    assert [m for m, _, _ in server.requests].count("POST") == 1


def test_a_path_prefix_and_query_parameters(server: EchoServer) -> None:
    with FleetClient(url(server, "/fleet/")) as client:
        answer = client._call("GET", "/v1/memory", params={"goal": "Sign in & out"})
    assert answer["path"] == "/fleet/v1/memory?goal=Sign+in+%26+out"


def test_a_lost_answer_is_not_sent_again() -> None:
    """A server that reads the request and hangs up without answering: `ApiUnreachableError`
    (the request may have been applied), after exactly one request on the wire, however long
    the client would wait for a refused connection (the TLS probe that follows sends none)."""
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
            pytest.raises(ApiUnreachableError, match="POST /v1/runs: RemoteProtocolError"),
        ):
            client.submit_run({"goal": "g"})
    finally:
        listener.close()
    # then the client asks, with a TLS handshake, whether the server speaks TLS (a
    # ClientHello: no request); the request itself went out once
    requests = [s for s in seen if not s.startswith(b"\x16\x03")]
    assert len(requests) == 1, seen
    assert requests[0].startswith(b"POST /v1/runs HTTP/1.1")


def test_nothing_listening_fails_at_once_without_a_wait() -> None:
    with FleetClient(f"http://127.0.0.1:{free_port()}") as client:
        t0 = time.monotonic()
        with pytest.raises(ApiUnreachableError, match=r"ConnectError: .*Connection refused"):
            client.health()
        assert time.monotonic() - t0 < 1.0


def test_a_read_timeout_is_a_lost_answer() -> None:
    listener = socket.create_server(("127.0.0.1", 0))  # accepts (backlog), never answers
    try:
        port = listener.getsockname()[1]
        with (
            FleetClient(f"http://127.0.0.1:{port}", timeout_s=0.2, connect_wait_s=5) as client,
        ):
            t0 = time.monotonic()
            with pytest.raises(ApiUnreachableError, match="GET /health: ReadTimeout: timed out"):
                client.health()
            assert time.monotonic() - t0 < 2.0
    finally:
        listener.close()


@pytest.mark.parametrize("bad", ["127.0.0.1:8787", "ftp://host/", "http://", "http:///x"])
def test_a_url_without_scheme_or_host_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="http:// or https://"):
        FleetClient(bad)


# -- the transport seam ------------------------------------------------------------------------

RUN = RunRecord(id="r1", request=GoalRunRequest(goal="Sign in"), submitted_at=1.0).model_dump(
    mode="json"
)


def mock(handler: Callable[[Request], Response], **kw: Any) -> FleetClient:
    return FleetClient("http://api.test/base", transport=FunctionTransport(handler), **kw)


def test_a_submit_sends_the_token_the_key_and_the_json_body() -> None:
    seen: list[Request] = []

    def handler(request: Request) -> Response:
        seen.append(request)
        return Response.of_json(201, RUN)

    with mock(handler, token="tok") as client:
        run = client.submit_run({"goal": "Sign in", "device": "d1"}, idempotency_key="k-1")
    assert run.id == "r1"
    assert run.status is RunStatus.QUEUED
    (req,) = seen
    assert (req.method, req.target) == ("POST", "/base/v1/runs")
    assert req.headers["Authorization"] == "Bearer tok"
    assert req.headers["Idempotency-Key"] == "k-1"
    assert req.headers["Content-Type"] == "application/json"
    assert req.headers["Accept"] == "application/json"
    assert req.body is not None
    assert json.loads(req.body) == {"goal": "Sign in", "device": "d1"}


def test_no_token_sends_no_authorization() -> None:
    seen: list[Request] = []

    def handler(request: Request) -> Response:
        seen.append(request)
        return Response.of_json(200, {"status": "ok"})

    with mock(handler) as client:
        assert client.health() == {"status": "ok"}
    assert "Authorization" not in seen[0].headers
    assert "Content-Type" not in seen[0].headers


def test_an_error_answer_is_an_api_error_with_its_code_message_and_fix() -> None:
    def handler(request: Request) -> Response:
        body = {"error": "TOO_MANY_PENDING", "message": "backlog full", "fix": "wait"}
        return Response.of_json(429, body)

    with mock(handler) as client, pytest.raises(ApiError) as raised:
        client.submit_run({"goal": "g"})
    assert (raised.value.status, raised.value.code) == (429, "TOO_MANY_PENDING")
    assert str(raised.value.message) == "backlog full"
    assert raised.value.hint == "wait"


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"<html>bad gateway</html>", "<html>bad gateway</html>"), (b'["x"]', "HTTP 502")],
)
def test_an_error_answer_that_is_not_a_json_object_keeps_what_it_said(
    content: bytes, message: str
) -> None:
    with (
        mock(lambda _: Response(502, content)) as client,
        pytest.raises(ApiError) as raised,
    ):
        client.devices()
    assert (raised.value.status, raised.value.code, raised.value.message) == (502, "API", message)


def test_health_returns_a_down_answer_instead_of_raising() -> None:
    down = {"status": "down", "redis": "ConnectionError"}
    with mock(lambda _: Response.of_json(503, down)) as client:
        assert client.health() == down


def test_no_content_is_none_and_query_parameters_are_sent() -> None:
    seen: list[Request] = []

    def handler(request: Request) -> Response:
        seen.append(request)
        if request.method == "DELETE" and request.target.startswith("/base/v1/memory?"):
            return Response.of_json(200, {"forgotten": 3})
        return Response(204)

    with mock(handler) as client:
        client.forget("abc")
        assert client.forget_many(goal="Sign in") == 3
        assert client.forget_many() == 3
    assert [r.target for r in seen] == [
        "/base/v1/memory/abc",
        "/base/v1/memory?goal=Sign+in",
        "/base/v1/memory?all=true",
    ]


def test_refused_connections_are_retried_with_backoff_until_the_api_answers() -> None:
    """Refused three times, then answered: one call, four attempts, with pauses growing
    from 0.1 s (0.1 + 0.2 + 0.4 s between them)."""
    attempts: list[float] = []

    def handler(request: Request) -> Response:
        attempts.append(time.monotonic())
        if len(attempts) <= 3:
            raise ConnectError("[Errno 111] Connection refused")
        return Response.of_json(201, RUN)

    with mock(handler, connect_wait_s=30) as client:
        assert client.submit_run({"goal": "g"}).id == "r1"
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    assert len(attempts) == 4
    for gap, pause in zip(gaps, [0.1, 0.2, 0.4], strict=True):
        assert pause <= gap < pause + 0.3


def test_refused_past_the_wait_says_how_long_it_waited() -> None:
    attempts: list[Request] = []

    def handler(request: Request) -> Response:
        attempts.append(request)
        raise ConnectTimeout("timed out")

    with mock(handler, connect_wait_s=0.35) as client:
        t0 = time.monotonic()
        with pytest.raises(ApiUnreachableError, match=r"\(waited 0\.35 s\): ConnectTimeout"):
            client.submit_run({"goal": "g"})
        assert time.monotonic() - t0 >= 0.35
    # at 0, 0.1, 0.3 and 0.35 s (the last pause cut to the deadline); 3 if a pause overslept
    assert len(attempts) in {3, 4}
    n = len(attempts)
    with mock(handler) as client, pytest.raises(ApiUnreachableError) as refused:
        client.run("r1")
    assert "waited" not in str(refused.value)
    assert len(attempts) == n + 1  # no wait: one attempt
    assert refused.value.code == "API_UNREACHABLE"
    assert "goalfleet api" in refused.value.hint


@pytest.mark.parametrize(
    "error",
    [RemoteProtocolError, ReadError, WriteError],
    ids=lambda e: e.__name__,
)
def test_a_dropped_connection_resends_a_get_once_and_a_post_never(
    error: type[TransportError],
) -> None:
    calls: list[str] = []

    def handler(request: Request) -> Response:
        calls.append(request.method)
        raise error("connection dropped")

    with mock(handler, connect_wait_s=30) as client:
        with pytest.raises(ApiUnreachableError, match=f"GET /v1/devices: {error.__name__}"):
            client.devices()
        assert calls == ["GET", "GET"]
        with pytest.raises(ApiUnreachableError, match=f"POST /v1/runs: {error.__name__}"):
            client.submit_run({"goal": "g"})
        assert calls == ["GET", "GET", "POST"]
        with pytest.raises(ApiUnreachableError, match=f"POST /v1/runs/r1/cancel: {error.__name__}"):
            client.cancel("r1")
        assert calls == ["GET", "GET", "POST", "POST"]


def test_a_read_timeout_is_not_retried() -> None:
    calls: list[str] = []

    def handler(request: Request) -> Response:
        calls.append(request.method)
        raise ReadTimeout("timed out")

    with (
        mock(handler, connect_wait_s=30) as client,
        pytest.raises(ApiUnreachableError, match="GET /v1/runs/r1: ReadTimeout"),
    ):
        client.run("r1")
    assert calls == ["GET"]
