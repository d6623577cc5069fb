"""POST /v1/runs without FastAPI's per-request machinery, when the request is an ordinary one.

A run's submit is the API's hot path, and FastAPI's route machinery (the request wrapper, the
body's parsing, dependency solving, the response's exit stack) is most of what the API does
for one outside the submit itself (docs/benchmarks.md §2). `FastSubmit` is an ASGI route in
front of the declared FastAPI route for the same path. It reads the body (through the edge's
cap, as the declared route would), and when the body is a JSON object that `RunSubmit`
validates (`json.loads`, then the model in Python mode: FastAPI's own two steps) it hands the
model to the same submit code. Anything else — a body that is not JSON, a body the model
refuses, an unusual content type — goes to the declared route with the body replayed, which
answers it exactly as it always has. So there is one documented route and one set of error
answers; this is only the quicker way through for a request that would pass.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from fastapi.routing import APIRoute
from pydantic import ValidationError
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.routing import Match, Route
from starlette.types import Message, Receive, Scope, Send

from scheduler.api.bodies import MAX_DEPTH, depth, is_json
from scheduler.service.requests import RunSubmit

Submit = Callable[[RunSubmit, Headers], Awaitable[Response]]
"""The submit itself: the validated model and the request's headers → the answer."""


class FastSubmit:
    """The ASGI app of the quick route; `declared` is the FastAPI route it stands in front of
    (its path, methods and, for every request it does not take, its handling)."""

    def __init__(self, declared: APIRoute, submit: Submit) -> None:
        self.declared = declared
        self.submit = submit

    def route(self) -> Route:
        """The route to put before `declared` in the app's routes (not in the schema: the
        declared route documents it)."""
        return Route(
            self.declared.path,
            self,
            methods=sorted(self.declared.methods or ()),
            include_in_schema=False,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["route"] = self.declared  # metrics and logs name the declared route
        headers = Headers(scope=scope)
        body = await _body(receive) if is_json(headers.get("content-type")) else None
        sub = _validated(body) if body is not None else None
        if sub is None:
            await self._declared(scope, receive, body, send)
            return
        response = await self.submit(sub, headers)
        await response(scope, receive, send)

    async def _declared(
        self, scope: Scope, receive: Receive, body: bytes | None, send: Send
    ) -> None:
        """The declared route answers (in the scope its own match gives), the body replayed
        when it was read here."""
        match, child = self.declared.matches(scope)
        if match is Match.FULL:
            scope.update(child)
        if body is None:
            await self.declared.handle(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()  # a disconnect, as the server would say
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.declared.handle(scope, replay, send)


async def _body(receive: Receive) -> bytes | None:
    """The whole body; None when the client went away (or the edge refused the body for its
    size, having answered already) before it was read."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _validated(body: bytes) -> RunSubmit | None:
    """The model, when the body is JSON the model accepts as FastAPI would validate it
    (and nests no deeper than the declared route reads: `scheduler.api.bodies`)."""
    if depth(body) > MAX_DEPTH:
        return None
    try:
        return RunSubmit.model_validate(json.loads(body))
    except (ValueError, ValidationError):  # JSONDecodeError and UnicodeDecodeError too
        return None
