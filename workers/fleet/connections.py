"""Redis connections, made the one way the store expects (decoded strings, short timeouts)."""

from __future__ import annotations

import redis


def redis_client(url: str, *, timeout_s: float = 5.0) -> redis.Redis:
    """A client for the store. Timeouts are short so a dead Redis answers as an error (503 at
    the API) instead of a hang."""
    return redis.Redis.from_url(
        url,
        decode_responses=True,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        health_check_interval=30,
    )
