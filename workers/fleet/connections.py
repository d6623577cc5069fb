"""Redis connections, made the one way the store expects (decoded strings, short timeouts), to
one Redis (`redis_url`) or to the master a set of Redis Sentinels name (`redis_sentinels`).

`store_client(settings)` is the fleet's store, for every part of the fleet (API, scheduler,
workers, CLI); `redis_client(url)` is a client of any other Redis URL (a decision memory of
`goalfleet run`). A store client behind sentinels follows a promotion by itself: each new
connection asks the sentinels for the master, and a connection still on a demoted master is
dropped at its first refused write (redis-py's `SentinelManagedConnection`), so the command is
retried, with the client's retry policy, on the new master.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any, cast

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import Sentinel

from workers.fleet.outages import REDIS_OUTAGE_ERRORS, OutageRetry
from workers.settings import Settings
from workers.urls import sentinel_address


@dataclass(frozen=True)
class Replication:
    """How many replicas an acknowledged write must reach (`WAIT`), and for how long it waits
    (`workers.fleet.state.scripts`). 0 replicas: a write is acknowledged once the master has
    it."""

    replicas: int = 0
    timeout_ms: int = 1000


class StoreClient(redis.Redis):
    """A client of the fleet's store: a redis-py client that knows its `replication`."""

    replication = Replication()


def _patience(outage_wait_s: float) -> dict[str, Any]:
    if outage_wait_s <= 0:
        return {}
    return {"retry": OutageRetry(wait_s=outage_wait_s), "retry_on_error": list(REDIS_OUTAGE_ERRORS)}


def redis_client(url: str, *, timeout_s: float = 5.0, outage_wait_s: float = 0.0) -> StoreClient:
    """A client of `url`. Timeouts are short so a dead Redis answers as an error (503 at the
    API) instead of a hang.

    `outage_wait_s` > 0 (the worker's run store): a command that meets an outage (Redis
    unreachable, full, read-only, loading: `outages.is_outage`) waits it out with backoff and
    jitter for up to that long before it raises (`outages.OutageRetry`)."""
    client = StoreClient.from_url(
        url,
        decode_responses=True,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        health_check_interval=30,
        **_patience(outage_wait_s),
    )
    return cast("StoreClient", client)


SENTINEL_TIMEOUT_S = 1.0
"""How long one sentinel may take to answer before the next is asked (they answer in ms)."""


def sentinel_options(settings: Settings) -> dict[str, Any]:
    """How a client talks to the sentinels themselves: their password, a short timeout and no
    retries (redis-py's default backs off for seconds on a dead sentinel before it asks the
    next one; the list of sentinels is the retry)."""
    password = settings.redis_sentinel_password
    return {
        "password": password.get_secret_value() if password else None,
        "socket_timeout": SENTINEL_TIMEOUT_S,
        "socket_connect_timeout": SENTINEL_TIMEOUT_S,
        "retry": Retry(NoBackoff(), 0),
    }


def sentinels(settings: Settings) -> Sentinel:
    """The Sentinel set of `settings.redis_sentinels`."""
    return Sentinel(  # type: ignore[no-untyped-call,unused-ignore]  # untyped before redis-py 8.2
        [sentinel_address(a) for a in settings.redis_sentinels],
        sentinel_kwargs=sentinel_options(settings),
    )


def store_client(
    settings: Settings, *, timeout_s: float = 5.0, outage_wait_s: float = 0.0
) -> StoreClient:
    """The fleet's store as `settings` name it: `redis_url`, or the master the sentinels name
    (with `redis_url`'s password and DB number), waiting for `settings.wait_replicas()`
    replicas after each acknowledged write."""
    if not settings.redis_sentinels:
        client = redis_client(settings.redis_url, timeout_s=timeout_s, outage_wait_s=outage_wait_s)
    else:
        url = urllib.parse.urlsplit(settings.redis_url)
        db = url.path.strip("/")
        client = sentinels(settings).master_for(  # type: ignore[no-untyped-call,unused-ignore]
            settings.redis_sentinel_master,
            redis_class=StoreClient,
            username=urllib.parse.unquote(url.username) if url.username else None,
            password=urllib.parse.unquote(url.password) if url.password else None,
            db=int(db) if db.isdigit() else 0,
            decode_responses=True,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            health_check_interval=30,
            **_patience(outage_wait_s),
        )
    client.replication = Replication(settings.wait_replicas(), settings.redis_wait_timeout_ms)
    return client
