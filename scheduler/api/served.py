"""The API as uvicorn's own command serves it, for a deployment that runs `uvicorn` rather
than `goalfleet api`, with the same guards:

    uvicorn --factory scheduler.api.served:app --http scheduler.api.served:Bounded \
        --host 0.0.0.0 --port 8787 --loop uvloop

- `app` builds the API of the settings in the environment, and refuses to (`ConfigError`,
  naming the variable, never its value) when a `GOALFLEET_SECRET_*` is in that environment:
  only workers use secrets (`workers.core.secrets.refuse_secrets`);
- `Bounded` is `goalfleet api`'s connection protocol (`scheduler.api.connection`): head size
  and count, read time and connections bounded before anything reaches the app, by the
  limits the environment's settings give.
"""

from __future__ import annotations

import os

from fastapi import FastAPI

from scheduler.api.app import create_app
from scheduler.api.connection import ConnectionLimits, bounded_protocol
from workers.core.secrets import refuse_secrets
from workers.settings import Settings

Bounded = bounded_protocol(ConnectionLimits.of(Settings()))


def app() -> FastAPI:
    refuse_secrets("the API", os.environ)
    return create_app(Settings())
