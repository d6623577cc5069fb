"""What the idempotent submit routes share: the `Idempotency-Key` header and the answer
(`_Submit`), its OpenAPI where a route reads both itself (`GUARDED_IDEMPOTENT`), and the
threads their blocking Redis calls run on (`Submits`)."""

from __future__ import annotations

import asyncio
import contextvars
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, TypeVar

import structlog
from fastapi import Header, Response
from pydantic import BaseModel

from scheduler.errors import InvalidRequestError
from scheduler.service.fleet import IDEMPOTENCY_KEY

log = structlog.stdlib.get_logger("goalfleet.api")
_IDEM = re.compile(IDEMPOTENCY_KEY)
_JSON = "application/json"
T = TypeVar("T")


class Submit:
    """What the idempotent submits share: the `Idempotency-Key` header (checked when read, so
    a bad body is reported first), and the answer: 201 when this request created the record,
    200 when it replays an earlier one, with one log line either way."""

    def __init__(self, idempotency_key: str | None) -> None:
        self._key = idempotency_key

    @property
    def key(self) -> str | None:
        if self._key is not None and not _IDEM.fullmatch(self._key):
            raise InvalidRequestError(
                "Idempotency-Key",
                "is not a valid key",
                "use 1-128 letters, digits or . _ : -",
            )
        return self._key

    @staticmethod
    def answer(event: str, record: BaseModel, *, created: bool, **fields: object) -> Response:
        """The record as the route's JSON answer, serialised once here: FastAPI would validate
        a returned model against the route's `response_model` again before serialising it (the
        model stays declared on the route for the OpenAPI schema)."""
        log.info(event, **fields, new=created)
        return Response(
            record.model_dump_json(), status_code=201 if created else 200, media_type=_JSON
        )


GUARDED_IDEMPOTENT: dict[str, object] = {
    "security": [{"HTTPBearer": []}],
    "parameters": [
        {
            "name": "idempotency-key",
            "in": "header",
            "required": False,
            "schema": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Idempotency-Key"},
        }
    ],
}
"""The OpenAPI of a route that reads the bearer guard and the `Idempotency-Key` header itself:
what `Depends(auth)` and `Depends(_submit)` would document (`tests/security/test_api_fuzz.py`
holds the two equal)."""


async def submit_header(idempotency_key: Annotated[str | None, Header()] = None) -> Submit:
    """The submits' dependency. Async, as `auth` and the submit routes are, because FastAPI
    runs every sync dependency and a sync route's response validation in the thread pool, one
    hop each; a submit makes the one hop its Redis calls need (`Submits`)."""
    return Submit(idempotency_key)


class Submits:
    """The threads the submits' blocking Redis calls run on: one hop from the event loop per
    submit, on the loop's own executor machinery (`run_in_executor`, with the request's
    context, so its log line carries the request id). Starlette's `run_in_threadpool` does the
    same through anyio's capacity limiter and cancel scopes, at several times the CPU."""

    def __init__(self, threads: int = 16) -> None:
        self.threads = threads
        self._pool: ThreadPoolExecutor | None = None

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        if self._pool is None:  # started with the first submit, again after a shutdown
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="submit")
        ctx = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(self._pool, ctx.run, fn, *args)

    def close(self) -> None:
        """At the app's shutdown (an app served again, as a test client does, starts anew)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)
