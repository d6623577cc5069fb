"""The API's edge: what is refused before a request's body is read.

`Edge` is an ASGI middleware in front of the routes. It answers at once, reading nothing of
the body, when a guarded path comes without a valid bearer token (401; 429 with a
`Retry-After` once its client gave too many wrong ones: `scheduler.api.throttle`, which also
counts a wrong token sent to an open path such as `/health`), or when the body is
declared bigger than the cap (413, `Content-Length`). A body sent without a length (chunked)
is counted as it is read and refused with a 413 as soon as it passes the cap, so the API
never holds more than the cap of any request. Open paths (`/health`, the OpenAPI docs) pass.

`Tokens` is the one place bearer tokens are compared (constant time, every token): the edge
uses it to refuse early, the routes' guard to learn who the token is (its `Principal`: name and
roles, `workers.core.access`).
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Sequence
from typing import Any

import anyio.to_thread
from pydantic import BaseModel
from starlette.datastructures import Headers
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from scheduler.api.docs import asset_paths
from scheduler.api.throttle import AuthFailures, client_of
from scheduler.errors import AuthError
from workers.core.access import Principal


class ErrorBody(BaseModel):
    """The API's error shape, for every 4xx and 5xx it answers."""

    error: str
    message: str
    fix: str = ""
    problems: list[dict[str, str]] = []


class Tokens:
    """The API's bearer tokens and who each one is."""

    def __init__(self, principals: Iterable[tuple[Principal, str]]) -> None:
        self._tokens = [(who, token.encode()) for who, token in principals]

    def who(self, authorization: str | None) -> Principal | None:
        """Who the token an `Authorization: Bearer <token>` header carries is, or None.
        Every token is compared, in constant time, whatever matched before."""
        scheme, _, given = (authorization or "").partition(" ")
        raw = given.strip().encode() if scheme.lower() == "bearer" else b""
        who = None
        for principal, token in self._tokens:
            if hmac.compare_digest(raw, token) and raw:
                who = principal
        return who


async def _answer(send: Send, status: int, body: ErrorBody, headers: dict[str, str]) -> None:
    raw = body.model_dump_json().encode()
    head = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(raw)).encode()),
        *((k.encode(), v.encode()) for k, v in headers.items()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": raw})


def _unauthorized() -> ErrorBody:
    exc = AuthError("missing or wrong bearer token")
    return ErrorBody(error=exc.code, message=exc.message, fix=exc.hint)


def _too_many_failures(wait_s: int) -> ErrorBody:
    return ErrorBody(
        error="TOO_MANY_FAILURES",
        message=f"too many wrong tokens from this client; no token of it is checked for {wait_s} s",
        fix="wait for the Retry-After seconds, then send a right token (GOALFLEET_API_TOKEN)",
    )


def _too_large(cap: int) -> ErrorBody:
    return ErrorBody(
        error="BODY_TOO_LARGE",
        message=f"the request body is over the API's limit of {cap} bytes; nothing was read",
        fix="send a smaller request (fewer or shorter inputs, a smaller batch), or raise "
        "GOALFLEET_API_MAX_BODY_BYTES on the API",
    )


CONSOLE_PREFIX = ("/ui/",)
"""The console's own paths: its routes check their session cookie themselves."""


class Edge:
    """Refuses unauthenticated requests and oversized bodies before the body is read."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        tokens: Tokens,
        max_body_bytes: int,
        open_paths: Iterable[str],
        open_prefixes: tuple[str, ...] = (),
        routes: Sequence[BaseRoute] = (),
        failures: AuthFailures | None = None,
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.failures = failures
        """Wrong tokens counted per client (None: not counted)."""
        self.cap = max_body_bytes
        self.open_paths = frozenset(open_paths)
        self.open_prefixes = open_prefixes
        """Paths under these are let through without a bearer token: the console's, which
        checks its own session cookie on every route (`scheduler.console.pages`)."""
        self.routes = routes
        """The app's routes (the live list), to label a refused request with its route."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        path = scope["path"]
        if not path.startswith(self.open_prefixes):  # the console checks its own sign-ins
            authorization = headers.get("authorization")
            who = self.tokens.who(authorization) if authorization else None
            wait = (
                await self._throttled(scope, authorization, right=who is not None)
                if authorization
                else None
            )
            if wait is not None:
                self._label(scope)
                await _answer(send, 429, _too_many_failures(wait), {"retry-after": str(wait)})
                return
            if who is None and path not in self.open_paths:
                self._label(scope)
                await _answer(send, 401, _unauthorized(), {"www-authenticate": "Bearer"})
                return
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.cap:
            self._label(scope)
            await _answer(send, 413, _too_large(self.cap), {"connection": "close"})
            return
        await _Capped(self.app, self.cap)(scope, receive, send)

    async def _throttled(self, scope: Scope, authorization: str, *, right: bool) -> int | None:
        """The seconds to wait when the token's client is blocked (429), else None: a wrong
        token is counted, a right one checked against what this process learnt, and in Redis
        only while the fleet's count is past its limit (`scheduler.api.throttle`). Redis is
        asked in a thread: its client blocks."""
        failures = self.failures
        if failures is None:
            return None
        client = client_of((scope.get("client") or (None,))[0])
        if not right:
            return await anyio.to_thread.run_sync(failures.failed, client, authorization)
        known = failures.known_blocked(client)
        if known is None and failures.fleet_past_limit():
            return await anyio.to_thread.run_sync(failures.blocked, client)
        return known

    def _label(self, scope: Scope) -> None:
        """Set `scope["route"]` as the router would, so a refusal is counted by its route
        template (the metrics middleware reads it), not as unmatched."""
        for route in self.routes:
            match, _ = route.matches(scope)
            if match is not Match.NONE:
                scope["route"] = route
                return


class _Capped:
    """One request whose body is counted as the app reads it: past the cap, the client gets
    a 413, the app sees a disconnect, and whatever the app sends after that is dropped."""

    def __init__(self, app: ASGIApp, cap: int) -> None:
        self.app = app
        self.cap = cap
        self.read = 0
        self.refused = False
        self.started = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def capped_receive() -> Message:
            if self.refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                self.read += len(message.get("body", b""))
                if self.read > self.cap:
                    self.refused = True
                    if not self.started:
                        self.started = True
                        await _answer(send, 413, _too_large(self.cap), {"connection": "close"})
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            if self.refused:
                return
            if message["type"] == "http.response.start":
                self.started = True
            await send(message)

        await self.app(scope, capped_receive, guarded_send)


def open_paths(app: Any) -> set[str]:  # noqa: ANN401 - a FastAPI app (no import cycle here)
    """The paths served without a token: /health, the OpenAPI docs and their assets, and the
    console's entry (`/ui`; the paths under it are `CONSOLE_PREFIX`)."""
    paths = {"/health", app.openapi_url, "/docs", app.redoc_url, "/ui", *asset_paths()}
    paths.add(app.swagger_ui_oauth2_redirect_url)
    return {p for p in paths if p}
