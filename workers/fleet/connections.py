"""Redis connections, made the one way the store expects (decoded strings, short timeouts)."""

from __future__ import annotations

from typing import Any

import redis

from workers.fleet.outages import REDIS_OUTAGE_ERRORS, OutageRetry


def redis_client(url: str, *, timeout_s: float = 5.0, outage_wait_s: float = 0.0) -> redis.Redis:
    """A client for the store. Timeouts are short so a dead Redis answers as an error (503 at
    the API) instead of a hang.

    `outage_wait_s` > 0 (the worker's run store): a command that meets an outage (Redis
    unreachable, full, read-only, loading: `outages.is_outage`) waits it out with backoff and
    jitter for up to that long before it raises (`outages.OutageRetry`)."""
    patience: dict[str, Any] = {}
    if outage_wait_s > 0:
        patience = {
            "retry": OutageRetry(wait_s=outage_wait_s),
            "retry_on_error": list(REDIS_OUTAGE_ERRORS),
        }
    return redis.Redis.from_url(
        url,
        decode_responses=True,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        health_check_interval=30,
        **patience,
    )
