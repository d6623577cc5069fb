"""`goalfleet mcp [--http]`: the fleet as an MCP server for a coding agent (docs/mcp.md).

stdio by default (an MCP client starts `goalfleet mcp` and talks on its stdin and stdout),
with the CLI's API URL and token; `--http` serves streamable HTTP on 127.0.0.1 (`--host`,
`--port`) at `/mcp`, where each request's bearer token is the one the API sees. The MCP SDK
loads only here, when this command runs (`scheduler.cli.main`).
"""

from __future__ import annotations

import argparse
from typing import Any

from scheduler.cli._common import (
    EXIT_OK,
    make_client,
    start_line,
    version,
    with_settings,
)
from scheduler.cli.commands import summary
from workers.settings import Settings

DEFAULT_PORT = 8790
PATH = "/mcp"


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = sub.add_parser("mcp", help=summary("mcp"))
    p.add_argument("--api", default=None, help="API base URL (default: GOALFLEET_API_URL)")
    p.add_argument(
        "--http",
        action="store_true",
        help="serve streamable HTTP (each request's bearer token is sent on to the API) "
        "instead of stdio",
    )
    p.add_argument("--host", default="127.0.0.1", help="--http: address (default: 127.0.0.1)")
    p.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"--http: port, 0 for any free one (default: {DEFAULT_PORT})",
    )
    p.set_defaults(func=main)


@with_settings("mcp")
def main(settings: Settings, args: argparse.Namespace) -> int:
    import anyio  # noqa: PLC0415 - the MCP SDK loads with this command alone

    from scheduler.mcp import server  # noqa: PLC0415

    with make_client(settings, args) as fleet:
        if not args.http:
            start_line("mcp", f"serving MCP on stdio for the API at {fleet.base_url}")
            anyio.run(server.serve_stdio, fleet, version())
            return EXIT_OK
        return _serve_http(fleet.base_url, settings.api_wait_s, args)


def _serve_http(api_url: str, connect_wait_s: float, args: argparse.Namespace) -> int:
    import uvicorn  # noqa: PLC0415 - only --http serves HTTP

    from scheduler.cli.api import bind  # noqa: PLC0415
    from scheduler.mcp import server  # noqa: PLC0415

    sock = bind(args.host, args.port)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    app = server.http_app(
        api_url, host=args.host, path=PATH, version=version(), connect_wait_s=connect_wait_s
    )
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    start_line("mcp", f"serving MCP on http://{shown}:{port}{PATH} for the API at {api_url}")
    uvicorn.Server(config).run(sockets=[sock])
    return EXIT_OK
