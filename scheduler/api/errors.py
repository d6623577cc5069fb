"""Every error the API answers, in one shape (`scheduler.api.edge.ErrorBody`), from one place.

- a request the models refuse: 422 naming each field and the fix (400 for malformed JSON);
- Starlette's own refusals (unknown route, wrong method): their status, our shape;
- our typed errors (`scheduler.errors`): their status and code;
- Redis in trouble — unreachable, full (maxmemory under `noeviction`), read-only, loading, or
  the broker's error around any of these (`workers.fleet.outages.is_outage`): 503 with a
  `Retry-After`, saying nothing was written (each write is one transaction or script);
- anything else: a 500 in the same shape (the traceback goes to the log, never to the client).
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import redis
import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from scheduler.api.edge import ErrorBody
from scheduler.errors import AuthError, FleetError, InvalidRequestError, Problem
from scheduler.service.requests import BODY_TAGS
from workers.fleet.outages import OUTAGE_ERRORS, is_outage, outage_reply

log = structlog.stdlib.get_logger("goalfleet.api")

RETRY_AFTER_S = 5
"""What a 503 asks the client to wait before trying again."""

_FIXES = {
    "missing": "add this field",
    "extra_forbidden": "remove this field; it is not part of the request",
    "string_too_long": "shorten it",
    "string_too_short": "give a non-empty value",
    "string_pattern_mismatch": "use the pattern shown",
    "int_parsing": "give a whole number",
    "int_type": "give a whole number",
    "float_parsing": "give a number",
    "greater_than_equal": "raise it to the minimum shown",
    "less_than_equal": "lower it to the maximum shown",
    "enum": "use one of the values shown",
    "dict_type": "give a JSON object",
    "model_type": "give a JSON object",
    "bool_parsing": "give true or false",
}

_HTTP_FIXES = {
    400: "send a UTF-8 JSON object with Content-Type: application/json",
    404: "see GET /openapi.json for the routes",
    405: "use one of the methods in the Allow header",
}

_WHAT = {
    "OOM": "is full (maxmemory reached)",
    "READONLY": "is read-only (a replica)",
    "LOADING": "is loading its data set",
    "MASTERDOWN": "is a replica cut off from its master",
    "UNBLOCKED": "is changing its role (a failover)",
}
"""What a 503 says of Redis, by the code of its refusal (`outage_reply`): from a command, a
script or a transaction alike."""


_NOT_FIELDS = {"body", "query", "path", "header", *BODY_TAGS}
"""A location's parts that name no field: where it was, and which kind of body it is."""


def problems_from(exc: RequestValidationError) -> list[Problem]:
    out = []
    for err in exc.errors():
        loc = [str(p) for p in err.get("loc", ()) if p not in _NOT_FIELDS]
        field = ".".join(loc) or "body"
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        ctx = err.get("ctx") or {}
        fix = _FIXES.get(str(err.get("type")), "")
        if err.get("type") == "too_long":
            fix = f"give at most {ctx.get('max_length')} entries"
        elif "max_length" in ctx:
            fix = f"shorten it to at most {ctx['max_length']} characters"
        elif "le" in ctx and "ge" not in ctx:
            fix = f"use a value of at most {ctx['le']}"
        elif "ge" in ctx:
            fix = f"use a value of at least {ctx['ge']}"
        elif "pattern" in ctx:
            fix = f"match the pattern {ctx['pattern']}"
        if field.startswith("secrets.") and field.endswith(".ref"):
            fix = "give a reference like env:NAME and set GOALFLEET_SECRET_NAME on the workers"
        if not fix and ";" in msg:  # our own validators say "<problem>; <fix>"
            fix = msg.split(";", 1)[1].strip()
        if not fix and ":" in msg:  # "<problem>: <how>"
            fix = msg.split(":", 1)[1].strip()
        out.append(Problem(field=field, problem=msg, fix=fix or "see the problem"))
    return out


def error(status: int, code: str, message: str, fix: str = "", problems: Any = ()) -> JSONResponse:  # noqa: ANN401 - problem dicts
    body = ErrorBody(
        error=code,
        message=message,
        fix=fix,
        problems=[{"field": p.field, "problem": p.problem, "fix": p.fix} for p in problems],
    )
    return JSONResponse(status_code=status, content=body.model_dump())


def unavailable(exc: BaseException) -> JSONResponse:
    """The 503 for an outage: what is wrong with Redis, and when to retry."""
    what = _WHAT.get(outage_reply(exc) or "", "is not reachable")
    resp = error(
        503,
        "REDIS_UNAVAILABLE",
        f"the fleet's Redis {what} ({type(exc).__name__}); nothing was written",
        "retry after the Retry-After seconds; if it lasts, check Redis at GOALFLEET_REDIS_URL "
        "(memory, replication, that it is up)",
    )
    resp.headers["Retry-After"] = str(RETRY_AFTER_S)
    return resp


async def _invalid(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)  # noqa: S101 - registered for this class
    problems = problems_from(exc)
    if any(e.get("type") == "json_invalid" for e in exc.errors()):
        return error(
            400,
            "MALFORMED_JSON",
            "the request body is not valid JSON",
            "send a JSON object with Content-Type: application/json",
            problems,
        )
    first = problems[0] if problems else Problem("body", "invalid")
    return error(422, "INVALID_REQUEST", f"{first.field}: {first.problem}", first.fix, problems)


async def _http_error(_: Request, exc: Exception) -> JSONResponse:
    # Starlette's own refusals (unknown route, wrong method, a body it cannot decode) in our
    # error shape rather than FastAPI's bare {"detail": ...}.
    assert isinstance(exc, StarletteHTTPException)  # noqa: S101 - registered for this class
    fix = _HTTP_FIXES.get(exc.status_code, "")
    code = HTTPStatus(exc.status_code).phrase.upper().replace(" ", "_")
    resp = error(exc.status_code, code, str(exc.detail), fix)
    for name, value in (exc.headers or {}).items():
        resp.headers[name] = value
    return resp


async def _fleet_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, FleetError)  # noqa: S101 - registered for this class
    problems = exc.problems if isinstance(exc, InvalidRequestError) else ()
    resp = error(exc.status, exc.code, exc.message, exc.hint, problems)
    if isinstance(exc, AuthError):
        resp.headers["WWW-Authenticate"] = "Bearer"
    if exc.status == 503:  # noqa: PLR2004 - unavailable: say when to retry
        resp.headers["Retry-After"] = str(RETRY_AFTER_S)
    return resp


async def _redis_error(_: Request, exc: Exception) -> JSONResponse:
    return unavailable(exc) if is_outage(exc) else _internal(exc)


async def _bug(_: Request, exc: Exception) -> JSONResponse:
    return _internal(exc)


def install(app: FastAPI) -> None:
    """The handlers above, on `app`."""
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(FleetError, _fleet_error)
    for exc_type in (*OUTAGE_ERRORS, redis.RedisError):
        app.add_exception_handler(exc_type, _redis_error)
    app.add_exception_handler(Exception, _bug)


def _internal(exc: Exception) -> JSONResponse:
    log.error("api.internal_error", error=type(exc).__name__, exc_info=exc)
    return error(
        500,
        "INTERNAL",
        f"the API failed on this request ({type(exc).__name__}); nothing is known to be written",
        "retry once; if it repeats, report it with the API's log line (its request_id)",
    )
