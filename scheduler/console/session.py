"""The console's sign-in: a person gives one of the API's named tokens once; the console opens
a session in Redis and keeps its id in a signed cookie, with a CSRF token bound to it that every
form sends back.

- **The cookie** is `<name>.<session id>.<signature>`: the token's name, 32 random bytes, and
  an HMAC-SHA256 of both under a key derived from that name's token (a cookie of another name
  or a made-up id fails before Redis is asked). `HttpOnly`, `SameSite=Strict`, `Path=/ui`,
  `Secure` over TLS (`scheduler.console.pages`). `parse_cookie` is its one decoder.
- **The session** is `{p}:console:session:<SHA-256 of the id>` (name, generation), expiring
  after `TTL_S`: Redis holds no id a cookie could be made from, and no token. Signing out
  deletes it, so a copied cookie opens nothing after that, on any API process.
- **Tokens** are bound in `{p}:console:tokens` (name -> token fingerprint and generation, by
  `lua/console_tokens.lua` at the API's start): a name whose token is rotated or removed, or
  put back, takes the next generation, and a session opens only while its name's binding
  holds the generation it was opened in and this API's fingerprint. So rotating or removing a
  token ends its sessions, restoring it revives none, and other tokens' sessions live on. (The
  fingerprint is an HMAC of the token keyed by itself: a long random token cannot be found
  from it; a short one could be guessed offline by someone reading Redis.)
- **The sign-in form** carries a token bound to a short-lived `goalfleet_login` cookie
  (`SameSite=Strict`, so another site's form posts without it): a cross-site sign-in (login
  CSRF) is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
from collections.abc import Iterable
from dataclasses import dataclass

import redis

from workers.core.access import TOKEN_NAME
from workers.fleet.keys import Keys
from workers.fleet.state.scripts import RedisStore, Script

COOKIE = "goalfleet_console"
LOGIN_COOKIE = "goalfleet_login"
"""The sign-in form's own cookie: the nonce its CSRF token is bound to."""
TTL_S = 12 * 3600
"""A console session lasts a working day."""
LOGIN_TTL_S = 3600
"""How long a sign-in page's form may be sent."""
MAX_COOKIE_CHARS = 200
_ID = re.compile(r"^[A-Za-z0-9_-]{43}$")
"""`secrets.token_urlsafe(32)`."""
_NONCE = re.compile(r"^[A-Za-z0-9_-]{22}$")
"""`secrets.token_urlsafe(16)`."""
_SIGNATURE = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Session:
    name: str
    """The token's name: who answers, as `POST /v1/runs/{id}/answer` records it."""
    csrf: str
    """What every form of this session must send back (`csrf` field)."""
    digest: str
    """The SHA-256 of the session's id: its key in Redis."""


def parse_cookie(value: str | None) -> tuple[str, str, str] | None:
    """A session cookie's (name, session id, signature), or None for anything else: missing,
    too long, not ASCII, or not of that shape. The one place a session cookie is decoded."""
    if not value or len(value) > MAX_COOKIE_CHARS or not value.isascii():
        return None
    parts = value.split(".")
    if len(parts) != 3:  # noqa: PLR2004 - name, id, signature
        return None
    name, sid, signature = parts
    if TOKEN_NAME.fullmatch(name) and _ID.fullmatch(sid) and _SIGNATURE.fullmatch(signature):
        return name, sid, signature
    return None


def _digest(sid: str) -> str:
    return hashlib.sha256(sid.encode()).hexdigest()


def _derive(purpose: str, material: str) -> bytes:
    """A key for `purpose` from token material."""
    return hashlib.sha256(f"goalfleet-{purpose}\0{material}".encode()).digest()


def _mac(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


class Sessions(RedisStore):
    """Opens, reads and ends console sessions (see the module docstring)."""

    _bind_all = Script("console_tokens")
    _open = Script("console_open")

    def __init__(
        self, client: redis.Redis, keys: Keys, named_tokens: Iterable[tuple[str, str]]
    ) -> None:
        super().__init__(client, keys)
        tokens = sorted(named_tokens)
        self._keys = {name: _derive("console-v2", f"{name}:{token}") for name, token in tokens}
        self._fingerprints = {n: _mac(key, "fingerprint")[:32] for n, key in self._keys.items()}
        material = "\0".join(f"{n}:{t}" for n, t in tokens)
        self._login_key = _derive("console-login-v1", material)
        self.salt = _derive("clients-v1", material)
        """A key derived from every token, for what must not be readable in Redis but need
        not outlive a change of tokens (`scheduler.api.throttle`'s client hashes)."""
        self._bound = False
        self._binding = threading.Lock()

    # -- the tokens ---------------------------------------------------------------------------

    def bind(self) -> None:
        """Bind this API's tokens (`lua/console_tokens.lua`): at the API's start, and before
        the first session is opened or read if Redis was out then. Raises Redis's errors."""
        with self._binding:
            if self._bound:
                return
            pairs = sorted(self._fingerprints.items())
            self._bind_all(keys=[self.k.console_tokens], args=[x for p in pairs for x in p])
            self._bound = True

    # -- sessions -----------------------------------------------------------------------------

    def open(self, name: str) -> tuple[str, Session]:
        """A new session for `name` (one of the tokens' names): the cookie and the session."""
        self.bind()
        sid = secrets.token_urlsafe(32)
        digest = _digest(sid)
        self._open(
            keys=[self.k.console_tokens, self.k.console_session(digest)],
            args=[name, self._fingerprints[name], TTL_S],
        )
        key = self._keys[name]
        return f"{name}.{sid}.{_mac(key, f'{name}.{sid}')}", self._session(name, sid)

    def read(self, cookie: str | None) -> Session | None:
        """The session a cookie carries, or None: missing, malformed, forged, ended, expired,
        or its token rotated or gone since it opened."""
        parsed = parse_cookie(cookie)
        if parsed is None:
            return None
        name, sid, signature = parsed
        key = self._keys.get(name)
        if key is None or not hmac.compare_digest(signature, _mac(key, f"{name}.{sid}")):
            return None
        self.bind()
        with self.r.pipeline(transaction=False) as p:
            p.hmget(self.k.console_session(_digest(sid)), ["name", "gen"])
            p.hget(self.k.console_tokens, name)
            (opened_as, gen), binding = p.execute()
        if opened_as != name or binding != f"{self._fingerprints[name]}:{gen}":
            return None
        return self._session(name, sid)

    def end(self, session: Session) -> None:
        """Sign out: the session is gone for every API process."""
        self.r.delete(self.k.console_session(session.digest))

    def _session(self, name: str, sid: str) -> Session:
        csrf = _mac(self._keys[name], f"csrf:{sid}")
        return Session(name=name, csrf=csrf, digest=_digest(sid))

    # -- the sign-in form ---------------------------------------------------------------------

    @staticmethod
    def login_nonce(cookie: str | None) -> str:
        """The sign-in form's nonce: the one its cookie holds, or a new one."""
        if cookie and cookie.isascii() and _NONCE.fullmatch(cookie):
            return cookie
        return secrets.token_urlsafe(16)

    def login_csrf(self, nonce: str) -> str:
        """The sign-in form's CSRF token for the nonce its cookie holds."""
        return _mac(self._login_key, f"login:{nonce}")

    def login_form_ok(self, cookie: str | None, csrf: str | None) -> bool:
        """Whether a sign-in form was served to this browser: its token matches its cookie."""
        if not cookie or not csrf or not csrf.isascii() or not cookie.isascii():
            return False
        if not _NONCE.fullmatch(cookie):
            return False
        return hmac.compare_digest(csrf, self.login_csrf(cookie))
