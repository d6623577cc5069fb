"""The console's sign-in: a person gives one of the API's named tokens once; the console keeps
a signed cookie naming the token's name (never the token), and a CSRF token bound to it that
every form sends back.

The cookie is `<name>.<expiry>.<nonce>.<signature>`, HMAC-SHA256 under a key derived from every
API token, so each API process (and a restart) accepts it without shared state, and rotating
the tokens signs everyone out. It is `HttpOnly`, `SameSite=Strict` and `Path=/ui`; a name whose
token is gone from the settings no longer signs in.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

COOKIE = "goalfleet_console"
PARTS = 4
"""name, expiry, nonce, signature."""
TTL_S = 12 * 3600
"""A console session lasts a working day."""


@dataclass(frozen=True)
class Session:
    name: str
    """The token's name: who answers, as `POST /v1/runs/{id}/answer` records it."""
    csrf: str
    """What every form of this session must send back (`csrf` field)."""


class Sessions:
    """Issues and reads console session cookies (see the module docstring)."""

    def __init__(
        self, named_tokens: Iterable[tuple[str, str]], clock: Callable[[], float] = time.time
    ) -> None:
        tokens = sorted(named_tokens)
        self._names = {name for name, _ in tokens}
        material = b"\0".join(f"{n}:{t}".encode() for n, t in tokens)
        self._key = hashlib.sha256(b"goalfleet-console-v1\0" + material).digest()
        self._clock = clock

    def issue(self, name: str) -> tuple[str, Session]:
        """A new session for `name` (one of the tokens' names): the cookie value and the
        session it carries."""
        body = f"{name}.{int(self._clock()) + TTL_S}.{secrets.token_urlsafe(12)}"
        cookie = f"{body}.{self._sign(body)}"
        return cookie, self._session(name, body)

    def read(self, cookie: str | None) -> Session | None:
        """The session a cookie carries, or None: missing, forged, expired, or its token gone."""
        if not cookie or cookie.count(".") != PARTS - 1:
            return None
        body, _, signature = cookie.rpartition(".")
        if not hmac.compare_digest(signature, self._sign(body)):
            return None
        name, expiry, _ = body.split(".")
        if not expiry.isdigit() or int(expiry) < self._clock() or name not in self._names:
            return None
        return self._session(name, body)

    def _session(self, name: str, body: str) -> Session:
        return Session(name=name, csrf=self._sign(f"csrf:{body}"))

    def _sign(self, text: str) -> str:
        return hmac.new(self._key, text.encode(), hashlib.sha256).hexdigest()
