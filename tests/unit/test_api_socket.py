"""The socket `goalfleet api` listens on (`scheduler.cli.api.bind`)."""

from __future__ import annotations

import asyncio
import socket

from scheduler.cli.api import bind


async def _nodelay_of_accepted(sock: socket.socket) -> int:
    """TCP_NODELAY of the first connection a server on `sock` accepts (asyncio's accept path,
    which uvicorn's `Server.run(sockets=[sock])` takes)."""
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def on_connect(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = writer.get_extra_info("socket")
        accepted.set_result(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(on_connect, sock=sock)
    async with server:
        _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
        try:
            return await asyncio.wait_for(accepted, timeout=10)
        finally:
            writer.close()


def test_accepted_connections_have_nagle_off() -> None:
    """Each connection the API accepts sends at once (TCP_NODELAY): uvicorn writes a response's
    head and body separately, and with Nagle's algorithm on the body waited for the client's
    delayed ACK, ~40 ms on every answer of a kept-alive connection (`bench.bench_api_rate`)."""
    sock = bind("127.0.0.1", 0)
    assert asyncio.run(_nodelay_of_accepted(sock)) != 0
