"""Wrong tokens, counted per client: the API's bearer check (`scheduler.api.edge`) and the
console's sign-in (`scheduler.console.pages`) share one count, so neither is a faster way to
guess a token.

A client is its address as the server saw it (a trusted proxy's `X-Forwarded-For`:
`Settings.api_forwarded_allow_ips`), an IPv6 address by its /64 (one host holds a whole /64).
Each wrong token joins the client's set of wrong tokens and, when new to it, adds one to every
client's count (`lua/auth_failed.lua`: one script, both keys, each expiring with its window:
`{p}:authfail:<hash of the client>`, a set of keyed hashes of at most `api_auth_failures` + 1
tokens, and `{p}:authfail`). A token given again counts once: a client stuck on an old token
is not a guesser, and guessing needs new tokens. A client is *blocked* once it gave
`api_auth_failures` wrong tokens, or once the
fleet's reaches `api_auth_failures_fleet` and it gave a wrong token too (many addresses
guessing get one guess each); until its window ends, every request of it with a token is
answered 429 with a `Retry-After`, its right tokens too (so guessing on learns nothing), while
a right token from any other client is served as usual.

The API's bearer check asks Redis about a wrong token; a right one is checked against what
this process has learnt of blocked clients (its own answers), so the hot path reads no Redis
(but while this process knows the fleet's count is past its limit: then every right token's
client is looked up). A blocked client may so get one more token checked on each other API
process before that one learns it: at most `api_auth_failures` + processes guesses a window.

Redis out (down, full, read-only): a failure is not counted and nothing is blocked (the answer
is the usual 401), rather than every wrong token turning into a 503; it is logged.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis
import structlog

from workers.fleet.keys import Keys
from workers.fleet.outages import is_outage
from workers.fleet.state.scripts import RedisStore, Script
from workers.settings import Settings

log = structlog.stdlib.get_logger("goalfleet.api")

REMEMBERED = 10_000
"""Blocked clients one process remembers at most (the oldest are forgotten first)."""
IPV6_CLIENT_BITS = 64


@dataclass(frozen=True)
class Limits:
    per_client: int
    fleet: int
    """0: no fleet-wide count."""
    window_s: int

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        return cls(
            per_client=settings.api_auth_failures,
            fleet=settings.api_auth_failures_fleet,
            window_s=settings.api_auth_window_s,
        )


def client_of(host: str | None) -> str:
    """The client a request came from, as failures are counted: an IPv4 address (an
    IPv4-mapped IPv6 one too), an IPv6 /64, or the host as the server named it."""
    if not host:
        return "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host[:100]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, IPV6_CLIENT_BITS), strict=False))
    return str(address)


class AuthFailures(RedisStore):
    """Counts wrong tokens and tells who is blocked (see the module docstring)."""

    _failed = Script("auth_failed")

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        limits: Limits,
        salt: bytes,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(client, keys)
        self.limits = limits
        self._salt = salt
        """Keys the hashes of a client's address and of its wrong tokens (an IPv4 address is
        too few bits to hide in a plain hash, and a wrong token may be a right one mistyped)."""
        self._clock = clock
        self._until: dict[str, float] = {}
        """Clients this process learnt are blocked: until when (its clock)."""
        self._fleet_until = 0.0
        """Until when this process learnt the fleet's count is past its limit: meanwhile a
        right token's client is looked up in Redis (it may have given one wrong token)."""

    def failed(self, client: str, authorization: str) -> int | None:
        """Count a wrong token from `client`, as its `Authorization` header (the console's
        sign-in makes one) carries it. The seconds to wait when this one is past the limit
        (answer 429), else None (answer 401)."""
        mac = hmac.new(self._salt, f"token:{authorization}".encode(), hashlib.sha256)
        hashed = mac.hexdigest()
        try:
            n, total, client_ms, fleet_ms, new = self._failed(
                keys=self._keys(client),
                args=[self.limits.window_s * 1000, hashed[:32], self.limits.per_client + 1],
            )
        except redis.RedisError as exc:
            if not is_outage(exc):
                raise
            log.warning("auth_failure_not_counted", reason=str(exc)[:200])
            return None
        counts = (int(n), int(total), int(client_ms), int(fleet_ms))
        if new and counts[0] == self.limits.per_client:  # once a window: this one reached it
            log.warning("auth_client_blocked", client=client, wait_s=math.ceil(client_ms / 1000))
        if self.limits.fleet and counts[1] >= self.limits.fleet:
            if new and counts[1] == self.limits.fleet:
                log.warning("auth_fleet_past_limit", failures=counts[1], client=client)
            self._fleet_until = self._clock() + counts[3] / 1000
        blocked = self._wait(*counts, past=0)  # from now on
        if blocked is not None:
            self._remember(client, blocked)
        return self._wait(*counts, past=1)  # this token already

    def blocked(self, client: str) -> int | None:
        """The seconds `client` must wait before a token of its is checked, or None: read
        from Redis (the console's sign-in)."""
        try:
            tokens, every = self._keys(client)
            with self.r.pipeline(transaction=False) as p:
                p.scard(tokens)
                p.pttl(tokens)
                p.get(every)
                p.pttl(every)
                n, client_ms, total, fleet_ms = p.execute()
        except redis.RedisError as exc:
            if not is_outage(exc):
                raise
            return None
        return self._wait(int(n or 0), int(total or 0), int(client_ms), int(fleet_ms), past=0)

    def known_blocked(self, client: str) -> int | None:
        """The seconds `client` must wait, as far as this process learnt (no Redis read)."""
        until = self._until.get(client)
        if until is None:
            return None
        left = until - self._clock()
        if left <= 0:
            del self._until[client]
            return None
        return math.ceil(left)

    def fleet_past_limit(self) -> bool:
        """Whether this process learnt that the fleet's count is past its limit (then a right
        token's client is looked up with `blocked`)."""
        return self._fleet_until > self._clock()

    def _wait(self, n: int, total: int, client_ms: int, fleet_ms: int, *, past: int) -> int | None:
        """The seconds to wait when the counts are `past` beyond their limits, else None."""
        waits = []
        if n >= self.limits.per_client + past:
            waits.append(client_ms)
        fleet = self.limits.fleet
        if fleet and n >= 1 and total >= fleet + past:
            waits.append(max(client_ms, fleet_ms))
        if not waits:
            return None
        return max(1, math.ceil(max(waits) / 1000))

    def _remember(self, client: str, wait_s: int) -> None:
        if len(self._until) >= REMEMBERED:
            now = self._clock()
            self._until = {c: t for c, t in self._until.items() if t > now}
            while len(self._until) >= REMEMBERED:
                del self._until[next(iter(self._until))]
        self._until.pop(client, None)
        self._until[client] = self._clock() + wait_s

    def _keys(self, client: str) -> list[str]:
        hashed = hmac.new(self._salt, client.encode(), hashlib.sha256).hexdigest()[:32]
        return [self.k.auth_failures(hashed), self.k.auth_failures_all]
