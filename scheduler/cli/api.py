"""`goalfleet api`: serve the queue API (uvicorn)."""

from __future__ import annotations

import argparse
import errno
import socket
from typing import Any

from scheduler.cli._common import (
    EXIT_OK,
    add_log_args,
    check_stores,
    shown_store,
    start_line,
    with_settings,
)
from scheduler.cli.commands import summary
from scheduler.errors import UnavailableError
from workers.core.errors import ConfigError
from workers.settings import API_PROCESSES_MAX, Settings
from workers.telemetry.logs import configure_logging


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = sub.add_parser("api", help=summary("api"))
    p.add_argument(
        "--host", default=None, help="address to listen on (default: GOALFLEET_API_HOST, 127.0.0.1)"
    )
    p.add_argument(
        "--port",
        type=int,
        default=None,
        help="port to listen on, 0 for any free one (default: GOALFLEET_API_PORT, 8787); "
        "clients find it through GOALFLEET_API_URL",
    )
    p.add_argument(
        "--processes",
        type=int,
        default=None,
        help="API processes serving the one socket, each with its own Redis connections and "
        "device view (default: GOALFLEET_API_PROCESSES, 1); one process is CPU-bound at a few "
        "hundred submits a second",
    )
    add_log_args(p)
    p.set_defaults(func=main)


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so a busy port is one line (exit 3), not a uvicorn
    log record, and so the start line can name the port actually bound (`--port 0`)."""
    if not 0 <= port <= 65535:  # noqa: PLR2004 - the TCP port range
        raise ConfigError(f"--port {port}: give a port between 0 and 65535")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not 0: asyncio turns Nagle off (TCP_NODELAY) only on accepted sockets
    # whose proto says TCP, and uvicorn writes a response's head and body separately, so with
    # Nagle on every answer waited ~40 ms for the client's delayed ACK
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise UnavailableError(
                f"port {port} on {host} is in use; choose another --port"
            ) from None
        raise UnavailableError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    # listening from here on: a client that read the start line queues in the backlog while
    # the app is built (uvicorn's own listen() on this socket changes nothing)
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


@with_settings("api")
def main(settings: Settings, args: argparse.Namespace) -> int:
    host = args.host or settings.api_host
    processes = args.processes if args.processes is not None else settings.api_processes
    if not 1 <= processes <= API_PROCESSES_MAX:
        raise ConfigError(f"--processes {processes}: give 1 to {API_PROCESSES_MAX} API processes")
    sock = bind(host, args.port if args.port is not None else settings.api_port)
    check_stores(settings)  # cannot connect at start: one line, exit 3
    fmt = args.log_format or settings.log_format
    configure_logging(level=args.loglevel, fmt=fmt)
    port = sock.getsockname()[1]
    shown_host = f"[{host}]" if ":" in host else host
    start_line(
        "api",
        f"listening on http://{shown_host}:{port} ({shown_store(settings)}, "
        f"key prefix {settings.key_prefix}; OpenAPI at /docs"
        + (f"; {processes} processes)" if processes > 1 else ")"),
    )
    from scheduler.api.served import Build, serve  # noqa: PLC0415 - only for this command

    with sock:
        serve(Build(settings, args.loglevel, fmt), sock, processes)
    return EXIT_OK
