"""A JSON body's nesting, bounded before it is parsed.

The edge caps a body's size (`scheduler.api.edge`); its depth is capped here. Python's JSON
parser and pydantic's validators recurse once per level, so 2 KB of `[` (1,000 levels) runs
out of stack (`RecursionError`) where 1 MB of flat JSON is nothing. No request nests near
`MAX_DEPTH` (a suite's flow selector's labels are four levels down), so a body past it is the
caller's 422 naming the body, and nothing of it is parsed.

`depth` counts brackets outside JSON strings: with fewer than `MAX_DEPTH` brackets in the
whole body (every ordinary request) it is two `bytes.count` calls; else one pass of C loops
(strip strings, keep brackets, a running sum): under 50 ms for 1 MB (the default cap) of
nothing but brackets. `BoundedRoute` applies it to every FastAPI route of the app.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable, Coroutine
from email.message import Message as MimeHeader
from itertools import accumulate
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.requests import ClientDisconnect

from scheduler.errors import InvalidRequestError

MAX_DEPTH = 32
"""Arrays and objects one inside another that a request body may hold."""

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_OPEN, _CLOSE = b"[{", b"]}"
_SIGNS = bytes.maketrans(_OPEN + _CLOSE, b"\x01\x01\xff\xff")
"""An opening bracket as +1 and a closing one as -1 (a signed byte)."""
_NOT_BRACKETS = bytes(b for b in range(256) if b not in _OPEN + _CLOSE)


def depth(raw: bytes) -> int:
    """How deep `raw`'s arrays and objects nest (JSON or not: brackets outside strings);
    any value up to `MAX_DEPTH` when the body holds no more brackets than that."""
    opening = raw.count(b"[") + raw.count(b"{")
    if opening <= MAX_DEPTH:
        return opening
    signs = _STRING.sub(b"", raw).translate(_SIGNS, _NOT_BRACKETS)
    return max(accumulate(array("b", signs)), default=0)


def too_deep() -> InvalidRequestError:
    return InvalidRequestError(
        "body",
        f"the JSON nests deeper than {MAX_DEPTH} arrays or objects; nothing of it was read",
        f"send a flatter body (a request nests a few levels; at most {MAX_DEPTH})",
    )


def check_depth(raw: bytes) -> None:
    """Refuse (422) a body nested deeper than `MAX_DEPTH`."""
    if depth(raw) > MAX_DEPTH:
        raise too_deep()


def is_json(content_type: str | None) -> bool:
    """`application/json` or `application/*+json`, as FastAPI decides to parse JSON."""
    if not content_type:
        return False
    header = MimeHeader()
    header["content-type"] = content_type
    subtype = header.get_content_subtype()
    return header.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


class BoundedRoute(APIRoute):
    """A FastAPI route whose JSON body is refused before it is parsed when it nests deeper
    than `MAX_DEPTH` (the app's `route_class`: every route it declares is one)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def bounded(request: Request) -> Response:
            kind = request.headers.get("content-type")
            if kind is None or is_json(kind):  # FastAPI may read a body without a type as JSON
                try:
                    raw = await request.body()  # read once: the handler reads it again
                except ClientDisconnect:  # gone, or refused by the edge: FastAPI's own answer
                    return await handler(request)
                check_depth(raw)
            return await handler(request)

        return bounded
