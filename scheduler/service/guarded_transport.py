"""`GuardedTransport`: an httpx transport whose every connection is checked, once connected,
against `outbound.reachable` (the address it reached, after the name was resolved), for the
webhooks a submitter names."""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Iterable, Sequence

import httpcore
import httpx

from scheduler.service.outbound import ALLOW_SETTING, Address, Network, reachable


class AddressRefusedError(httpx.ConnectError):
    """A webhook's connection reached an address it may not (`outbound.reachable`)."""


def _peer(stream: httpcore.NetworkStream) -> Address:
    host = str(stream.get_extra_info("server_addr")[0])
    return ipaddress.ip_address(host.partition("%")[0])  # an IPv6 scope (`fe80::1%eth0`) off


class _GuardedBackend(httpcore.NetworkBackend):
    """httpcore's own sockets, each checked once connected: the address it reached."""

    def __init__(self, allow: Sequence[Network]) -> None:
        self.allow = tuple(allow)
        self.inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        stream = self.inner.connect_tcp(
            host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )
        address = _peer(stream)
        if not reachable(address, self.allow):
            stream.close()
            raise AddressRefusedError(
                f"{host} reached {address}, which is not a public address; allow its network "
                f"with {ALLOW_SETTING} on the scheduler if the fleet should call it"
            )
        return stream

    def connect_unix_socket(  # the base class's signature
        self,
        path: str,
        timeout: float | None = None,  # noqa: ARG002
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,  # noqa: ARG002
    ) -> httpcore.NetworkStream:
        raise AddressRefusedError(f"a webhook calls no unix socket ({path})")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class GuardedTransport(httpx.BaseTransport):
    """An httpx transport (TLS verified as httpx verifies it, no proxy from the environment)
    whose every connection is checked by `reachable`. A webhook's answer is read whole: it
    is only its status that counts."""

    def __init__(self, allow: Sequence[Network] = ()) -> None:
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(), network_backend=_GuardedBackend(allow)
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.read(),
            extensions=request.extensions,
        )
        try:
            answer = self._pool.handle_request(core)
            try:
                content = answer.read()
            finally:
                answer.close()
        except httpcore.TimeoutException as exc:
            raise httpx.TimeoutException(str(exc), request=request) from exc
        except (httpcore.NetworkError, httpcore.ProtocolError) as exc:
            raise httpx.TransportError(str(exc), request=request) from exc
        return httpx.Response(answer.status, headers=answer.headers, content=content,
                              request=request)  # fmt: skip

    def close(self) -> None:
        self._pool.close()
