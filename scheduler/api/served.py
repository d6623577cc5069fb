"""The API as a server process serves it: uvicorn's own request limits and process
supervision, and the app built in each process from settings read once.

`goalfleet api` serves through `serve(...)`; a deployment that runs uvicorn's own command
gets the same app and the same limits with

    uvicorn --factory scheduler.api.served:app --host 0.0.0.0 --port 8787 --loop uvloop \
        --http h11 --h11-max-incomplete-event-size 32768 --limit-concurrency 1024 [--workers N]

(the numbers: `GOALFLEET_API_MAX_HEADER_BYTES` and `GOALFLEET_API_MAX_CONNECTIONS`).

- **Head size**: h11, the parser uvicorn bounds (`h11_max_incomplete_event_size`): a request
  line and headers past `GOALFLEET_API_MAX_HEADER_BYTES` are a 400 and the connection is
  closed, so a connection holds at most the cap and one read of a head. Only the head counts:
  a body is read as a body whatever its size, up to the edge's body cap
  (`scheduler.api.edge`, 413). (httptools, uvicorn's other parser, keeps any head whole.)
- **Connections**: past `GOALFLEET_API_MAX_CONNECTIONS` connections (or requests in
  flight) in one process, a request is answered 503 (`limit_concurrency`).
- **Processes**: `--processes N` is uvicorn's supervisor (`uvicorn.supervisors.Multiprocess`):
  N processes on the one socket, a process that dies is replaced, one that fails at its start
  stops the API.
- `app` refuses to build (`ConfigError`, naming the variable, never its value) when a
  `GOALFLEET_SECRET_*` is in the environment: only workers use secrets
  (`workers.core.secrets.refuse_secrets`).
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI

from workers.settings import Settings
from workers.telemetry.logs import LogFormat


def limits(settings: Settings) -> dict[str, Any]:
    """uvicorn's `Config` arguments for the API's limits (see the module)."""
    return {
        "http": "h11",
        "h11_max_incomplete_event_size": settings.api_max_header_bytes,
        "limit_concurrency": settings.api_max_connections,
    }


@dataclass(frozen=True)
class Build:
    """The app factory each server process calls (picklable: uvicorn's supervisor starts
    its processes with `spawn`): logging as `goalfleet api` set it up, then the app of
    `settings`."""

    settings: Settings
    loglevel: str
    log_format: LogFormat

    def __call__(self) -> FastAPI:
        from scheduler.api.app import create_app  # noqa: PLC0415 - in the server process
        from workers.telemetry.logs import (  # noqa: PLC0415 - same reason
            configure_logging,
            install_celery_hooks,
        )

        configure_logging(level=self.loglevel, fmt=self.log_format)
        install_celery_hooks()  # the request id rides on the run messages the API enqueues
        return create_app(self.settings)


def serve(build: Build, sock: socket.socket, processes: int) -> None:
    """Serve the API on `sock` until SIGTERM or SIGINT (uvicorn's handlers): in this process,
    or in `processes` processes that uvicorn supervises."""
    import uvicorn  # noqa: PLC0415 - the server loads only where it serves
    from uvicorn.supervisors import Multiprocess  # noqa: PLC0415 - same reason

    config = uvicorn.Config(
        build,
        factory=True,
        workers=processes,
        loop="uvloop",  # a dependency: the dispatch bench's HTTP paths 0.02-0.06x faster
        log_level="warning",
        log_config=None,  # keep our handlers: uvicorn's lines go through structlog too
        access_log=False,  # the API's middleware logs (debug) and counts every request
        # the client and scheme a trusted proxy names (throttling, Secure cookies)
        forwarded_allow_ips=build.settings.api_forwarded_allow_ips,
        **limits(build.settings),
    )
    if processes == 1:
        uvicorn.Server(config).run(sockets=[sock])
        return
    # the supervisor's own lines (a process that died and its replacement) at INFO, in this
    # process only: each server process sets its own level from `log_level` again
    logging.getLogger("uvicorn.error").setLevel(logging.INFO)
    Multiprocess(config, sockets=[sock]).run()


def app() -> FastAPI:
    """The app of the environment's settings, for `uvicorn --factory`."""
    from scheduler.api.app import create_app  # noqa: PLC0415 - after the secrets check
    from workers.core.secrets import refuse_secrets  # noqa: PLC0415 - loads the request models

    refuse_secrets("the API", os.environ)
    return create_app(Settings())
