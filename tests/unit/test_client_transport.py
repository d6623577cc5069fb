"""The Python client's transport seam: `StdlibTransport` (`http.client`) against real servers on
loopback keeps one connection per thread calling at the same moment and keeps it between
calls, replaces a connection the server timed out while it sat idle, closes what it kept
when the client closes, verifies https against the system's CA store and reads no proxy from
the environment, and tells a connection error the API starting would cure (refused, timed
out: retried within the wait) from one of the URL (a host that does not resolve, https for
the http API, http for a TLS server, an untrusted certificate: at once, saying which);
`FunctionTransport` hands the handler the request the client built."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from httpkit import EchoServer, echo_server, url

from scheduler.client.api_client import ApiUnreachableError, FleetClient
from scheduler.client.function_transport import FunctionTransport
from scheduler.client.stdlib_transport import StdlibTransport
from scheduler.client.transport import Request, Response
from scheduler.local.redis import free_port


@pytest.fixture
def server() -> Iterator[EchoServer]:
    with echo_server() as srv:
        yield srv


def test_threads_calling_at_once_each_hold_a_connection_and_keep_it(server: EchoServer) -> None:
    """Two threads whose requests the server answers only once both are in flight (`/meet`):
    both answered, on two connections; later calls, one thread's or both at once again, go
    out on those two."""
    server.meet = threading.Barrier(2, timeout=5)
    answered: list[str] = []
    failed: list[BaseException] = []

    def meet(client: FleetClient) -> None:
        try:
            answered.append(client._call("GET", "/meet")["path"])
        except BaseException as exc:  # noqa: BLE001 - reported below
            failed.append(exc)

    def both(client: FleetClient) -> None:
        threads = [threading.Thread(target=meet, args=(client,)) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=15)

    with FleetClient(url(server)) as client:
        both(client)
        assert (failed, answered) == ([], ["/meet", "/meet"])
        assert server.connections == 2
        for _ in range(5):
            client._call("GET", "/v1/devices")
        both(client)
    assert failed == []
    assert len(answered) == 4
    assert server.connections == 2


def test_a_connection_the_server_timed_out_while_idle_is_replaced(server: EchoServer) -> None:
    """The server closes a kept connection after 0.2 s idle (as servers do, by their
    keep-alive timeout): the next POST goes out once, on a new connection, and is answered."""
    server.idle_timeout_s = 0.2
    with FleetClient(url(server)) as client:
        client._call("POST", "/v1/runs", body={"n": 1})
        server.wait_closed(1)
        assert client._call("POST", "/v1/runs", body={"n": 2})["path"] == "/v1/runs"
    assert server.connections == 2
    assert [json.loads(b) for m, _, b in server.requests if m == "POST"] == [{"n": 1}, {"n": 2}]


def test_closing_the_client_closes_its_connections_and_ends_it(server: EchoServer) -> None:
    """The kept connection is closed by the client's close (held here, so no garbage
    collection closes it instead); a call after it is refused."""
    client = FleetClient(url(server))
    client._call("GET", "/health")
    assert isinstance(client.transport, StdlibTransport)
    kept = list(client.transport._idle)
    assert len(kept) == 1
    client.close()
    server.wait_closed(1)
    with pytest.raises(RuntimeError, match="closed"):
        client._call("GET", "/health")
    client.close()  # again: nothing to do
    assert server.connections == 1


def test_an_answer_is_its_status_body_and_headers_in_lower_case(server: EchoServer) -> None:
    transport = StdlibTransport("http", "127.0.0.1", server.server_address[1], timeout_s=5)
    try:
        answer = transport.handle(Request("GET", "/x?y=1", {"Authorization": "Bearer t"}))
    finally:
        transport.close()
    assert answer.status == 200
    assert json.loads(answer.body) == {"path": "/x?y=1", "auth": "Bearer t"}
    assert answer.headers["content-type"] == "application/json"
    assert transport.tls is None  # http makes no TLS context


def test_no_proxy_is_read_from_the_environment(
    server: EchoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # the discard port: nothing answers
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with FleetClient(url(server)) as client:
        assert client._call("GET", "/health")["path"] == "/health"


# -- https -------------------------------------------------------------------------------------


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key (the openssl command line)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no openssl command")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


def test_https_is_verified_against_the_system_ca_store(
    certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server whose certificate no CA in the system's store signed: no connection (nothing
    sent). The same certificate added to the store (OpenSSL's `SSL_CERT_FILE`): answered."""
    cert, key = certificate
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    with echo_server(tls) as srv:
        with (
            FleetClient(url(srv, scheme="https")) as client,
            pytest.raises(ApiUnreachableError, match=r"TlsError: .*CERTIFICATE_VERIFY_FAILED"),
        ):
            client.health()
        assert srv.requests == []
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        with FleetClient(url(srv, scheme="https"), token="t") as client:
            assert client._call("GET", "/v1/devices") == {"path": "/v1/devices", "auth": "Bearer t"}
            assert isinstance(client.transport, StdlibTransport)
            assert client.transport.tls is not None
            assert client.transport.tls.verify_mode is ssl.CERT_REQUIRED
            assert client.transport.tls.check_hostname


# -- which connection errors are waited out ---------------------------------------------------

WAIT_S = 5.0
"""The client's wait in these tests: a URL error must fail well before it."""


def _fails(base: str, *, timeout_s: float = 10.0, wait_s: float = WAIT_S) -> tuple[str, str, float]:
    """`GET /health` through a `FleetClient` for `base`: the error's message, hint and the
    seconds it took."""
    with FleetClient(base, timeout_s=timeout_s, connect_wait_s=wait_s) as client:
        t0 = time.monotonic()
        with pytest.raises(ApiUnreachableError) as caught:
            client._call("GET", "/health")
    return str(caught.value), caught.value.hint, time.monotonic() - t0


def test_refused_is_retried_within_the_wait_with_the_hint_to_start_it() -> None:
    message, hint, took = _fails(f"http://127.0.0.1:{free_port()}", wait_s=0.5)
    assert took >= 0.5
    assert "(waited 0.5 s): ConnectError" in message
    assert "start it with `goalfleet api`" in hint


def test_a_connect_timeout_is_retried_within_the_wait_with_the_hint_to_start_it() -> None:
    """A listener whose backlog is full (the kernel drops the SYN): each connect times out,
    and the client goes on trying until its wait is over."""
    with socket.create_server(("127.0.0.1", 0), backlog=0) as full:
        port = full.getsockname()[1]
        queued = [socket.socket() for _ in range(3)]
        for q in queued:
            q.setblocking(False)  # noqa: FBT003 - the socket module's own signature
            q.connect_ex(("127.0.0.1", port))
        try:
            time.sleep(0.1)
            message, hint, took = _fails(f"http://127.0.0.1:{port}", timeout_s=0.2, wait_s=1.0)
        finally:
            for q in queued:
                q.close()
    assert took >= 1.0
    assert "(waited 1 s): ConnectTimeout" in message
    assert "start it with `goalfleet api`" in hint


def test_a_host_that_does_not_resolve_fails_at_once_saying_so() -> None:
    message, hint, took = _fails("http://no-such-host.invalid:8787")
    assert took < 2.0
    assert "its host name does not resolve (NoSuchHost:" in message
    assert hint == "check the host name in GOALFLEET_API_URL (or --api)"


def test_an_https_url_for_the_http_api_fails_at_once_saying_so(server: EchoServer) -> None:
    message, hint, took = _fails(url(server, scheme="https"))
    assert took < 2.0
    assert "it does not speak TLS (TlsError:" in message
    assert hint.startswith("use an http:// URL in GOALFLEET_API_URL (or --api)")
    assert server.requests == []


@pytest.fixture
def tls_server(certificate: tuple[Path, Path]) -> Iterator[EchoServer]:
    """An `EchoServer` over TLS, its certificate self-signed (no CA here trusts it)."""
    cert, key = certificate
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    with echo_server(tls) as srv:
        yield srv


@pytest.mark.parametrize(
    ("scheme", "said", "fix"),
    [
        ("http", "it speaks TLS (WrongScheme:", "use an https:// URL in GOALFLEET_API_URL"),
        ("https", "its TLS certificate is not trusted here (TlsError:", "SSL_CERT_FILE"),
    ],
)
def test_a_tls_server_wrongly_addressed_fails_at_once_saying_so(
    tls_server: EchoServer, scheme: str, said: str, fix: str
) -> None:
    """An http:// URL: the TLS server drops the plain request, and a TLS handshake with it
    succeeds, so the client says the server speaks TLS. An https:// URL: the handshake fails
    on the certificate. Either at once, well within the wait."""
    message, hint, took = _fails(url(tls_server, scheme=scheme))
    assert took < 2.0
    assert said in message
    assert fix in hint


# -- the fake ----------------------------------------------------------------------------------


def test_the_fake_sees_the_request_the_client_built_and_closes_with_it() -> None:
    """The path under the base URL's, each character that is not a path's %-encoded (an id
    or key names one resource), the query URL-encoded, the client's headers; the client's
    close closes the transport, and a closed one answers nothing."""
    seen: list[Request] = []

    def handler(request: Request) -> Response:
        seen.append(request)
        return Response.of_json(200, {"forgotten": 1}) if "?" in request.target else Response(204)

    fake = FunctionTransport(handler)
    with FleetClient("http://api.test/base/", token="t", transport=fake) as client:
        client.forget("a?b c#d/%")
        client.forget_many(goal="Sign in & out")
    assert [(r.method, r.target, r.body) for r in seen] == [
        ("DELETE", "/base/v1/memory/a%3Fb%20c%23d/%25", None),
        ("DELETE", "/base/v1/memory?goal=Sign+in+%26+out", None),
    ]
    assert seen[0].headers == {
        "Accept": "application/json",
        "User-Agent": "goalfleet-client",
        "Authorization": "Bearer t",
    }
    assert fake.closed
    with pytest.raises(RuntimeError, match="closed"):
        fake.handle(Request("GET", "/health"))
