"""`goalfleet api`: serve the queue API (uvicorn)."""

from __future__ import annotations

import argparse
import errno
import socket
from typing import Any

from scheduler.cli._common import EXIT_OK, add_log_args, shown_store, start_line, with_settings
from scheduler.cli.api_processes import supervise
from scheduler.cli.commands import summary
from scheduler.errors import UnavailableError
from workers.core.errors import ConfigError
from workers.settings import API_PROCESSES_MAX, Settings
from workers.telemetry.logs import configure_logging, install_celery_hooks


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
    configure_logging(level=args.loglevel, fmt=args.log_format or settings.log_format)
    install_celery_hooks()  # the request id rides on the run messages the API enqueues
    port = sock.getsockname()[1]
    shown_host = f"[{host}]" if ":" in host else host
    start_line(
        "api",
        f"listening on http://{shown_host}:{port} ({shown_store(settings)}, "
        f"key prefix {settings.key_prefix}; OpenAPI at /docs"
        + (f"; {processes} processes)" if processes > 1 else ")"),
    )
    with sock:
        if processes == 1:
            serve(settings, sock)
            return EXIT_OK
        load_server()  # in the parent: a replacement process forks with it loaded
        return supervise(processes, lambda: serve(settings, sock))


def load_server() -> None:
    """Import the server and the app (they load only for this command)."""
    import uvicorn  # noqa: F401, PLC0415

    import scheduler.api.app  # noqa: F401, PLC0415


def serve(settings: Settings, sock: socket.socket) -> None:
    """Serve the API on `sock` in this process until SIGTERM or SIGINT (uvicorn's handlers)."""
    import uvicorn  # noqa: PLC0415 - the server loads only for this command

    from scheduler.api.app import create_app  # noqa: PLC0415 - same reason
    from scheduler.api.connection import ConnectionLimits, bounded_protocol  # noqa: PLC0415

    limits = ConnectionLimits.of(settings)
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings),
            loop="uvloop",  # a dependency: the dispatch bench's HTTP paths 0.02-0.06x faster
            # the C parser (a dependency: ~15 % less CPU a submit than h11), bounded: head
            # size and count, read time, connections (`scheduler.api.connection`)
            http=bounded_protocol(limits),
            log_level="warning",
            log_config=None,  # keep our handlers: uvicorn's lines go through structlog too
            access_log=False,  # the API's middleware logs (debug) and counts every request
            # the client and scheme a trusted proxy names (throttling, Secure cookies)
            forwarded_allow_ips=settings.api_forwarded_allow_ips,
        )
    )
    server.run(sockets=[sock])
