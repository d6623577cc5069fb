"""The URLs a setting or a flag may hold, checked where they are read: the API's (`http`,
`https`), Redis's (`redis`, `rediss`, `unix`) and the run history's database
(`postgresql`, `sqlite`). Each check returns the URL, or raises ValueError saying what to
give."""

from __future__ import annotations

import urllib.parse

HTTP_SCHEMES = ("http", "https")
REDIS_SCHEMES = ("redis", "rediss", "unix")


def checked_url(value: str, schemes: tuple[str, ...]) -> str:
    """`value` when it is a URL of one of `schemes` with a host (a `unix://` one with a
    path); else ValueError saying what to give, e.g. for `127.0.0.1:8797`."""
    parsed = urllib.parse.urlsplit(value.strip())
    example = "http://127.0.0.1:8787" if schemes == HTTP_SCHEMES else "redis://127.0.0.1:6379/0"
    if parsed.scheme not in schemes:
        wanted = " or ".join(f"{s}://" for s in schemes)
        raise ValueError(f"{value!r} is not a {wanted} URL; give one like {example}")
    if not (parsed.path if parsed.scheme == "unix" else parsed.hostname):
        raise ValueError(f"{value!r} names no host; give one like {example}")
    return value.strip()


DATABASE_SCHEMES = ("postgresql", "postgres", "sqlite")


def checked_database_url(value: str) -> str:
    """`value` when it is a `postgresql://` URL with a host or a `sqlite:///path` one; else
    ValueError saying what to give."""
    parsed = urllib.parse.urlsplit(value.strip())
    example = "postgresql://user@host:5432/db or sqlite:///path/to/history.db"
    if parsed.scheme not in DATABASE_SCHEMES:
        raise ValueError(f"{parsed.scheme or value!r} is not a database URL scheme; give {example}")
    if parsed.scheme == "sqlite" and not parsed.path.strip("/"):
        raise ValueError("a sqlite URL names a file: sqlite:///path/to/history.db")
    if parsed.scheme != "sqlite" and not parsed.hostname and "host=" not in parsed.query:
        raise ValueError(f"the postgresql URL names no host; give {example}")
    return value.strip()


PORT_MAX = 65535


def sentinel_address(entry: str) -> tuple[str, int]:
    """`host:port` of one Redis Sentinel as (host, port); else ValueError saying what to give."""
    host, _, port = entry.strip().rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) <= PORT_MAX:
        raise ValueError(f"{entry!r} is not host:port; give e.g. 10.0.0.5:26379,10.0.0.6:26379")
    return host.strip("[]"), int(port)
