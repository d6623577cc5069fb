"""`goalfleet api`: serve the queue API (uvicorn)."""

from __future__ import annotations

import argparse
from typing import Any

from scheduler.commands._common import EXIT_OK, add_log_args, with_settings
from workers.settings import Settings
from workers.telemetry.logs import configure_logging, install_celery_hooks


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = sub.add_parser("api", help="serve the HTTP API")
    p.add_argument("--host", default=None, help="default: GOALFLEET_API_HOST")
    p.add_argument("--port", type=int, default=None, help="default: GOALFLEET_API_PORT")
    add_log_args(p)
    p.set_defaults(func=main)


@with_settings("api")
def main(settings: Settings, args: argparse.Namespace) -> int:
    configure_logging(level=args.loglevel, fmt=args.log_format or settings.log_format)
    install_celery_hooks()  # the request id rides on the run messages the API enqueues
    import uvicorn  # noqa: PLC0415 - the server loads only for this command

    from scheduler.api import create_app  # noqa: PLC0415 - same reason

    uvicorn.run(
        create_app(settings),
        host=args.host or settings.api_host,
        port=args.port if args.port is not None else settings.api_port,
        log_level="warning",
        log_config=None,  # keep our handlers: uvicorn's lines go through structlog too
        access_log=False,  # the API's middleware logs (debug) and counts every request
    )
    return EXIT_OK
