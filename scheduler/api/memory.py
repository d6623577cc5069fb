"""The decision memory's routes: list, show (`read`) and forget (`admin`) entries.

GET    /v1/memory?goal=Sign+in        entries (for one goal), most used first
GET    /v1/memory/{key}               one entry
DELETE /v1/memory/{key}               forget one entry
DELETE /v1/memory?goal=...|all=true   forget every entry of a goal, or all of them
"""

from __future__ import annotations

from typing import Annotated

import redis
from fastapi import APIRouter, Path, Query, Response
from pydantic import BaseModel

from scheduler.api.bodies import BoundedRoute
from scheduler.api.views import Who, need
from scheduler.errors import InvalidRequestError, NotFoundError
from workers.core.access import Action
from workers.core.memory import Remembered
from workers.fleet.keys import Keys
from workers.fleet.memory_store import RedisMemory

KEY = Path(pattern=r"^[0-9a-f]{32}$", description="an entry's key, as `memory list` shows it")


class Forgotten(BaseModel):
    forgotten: int


def memory_router(client: redis.Redis, keys: Keys, *, ttl_s: int) -> APIRouter:
    memory = RedisMemory(client, keys, decider="", ttl_s=ttl_s)
    router = APIRouter(route_class=BoundedRoute)

    @router.get("/v1/memory", response_model=list[Remembered])
    def list_memory(
        who: Who,
        goal: Annotated[str | None, Query(min_length=1, max_length=500)] = None,
    ) -> list[Remembered]:
        need(who, Action.MEMORY_READ)
        return memory.entries(goal=goal)

    @router.get("/v1/memory/{key}", response_model=Remembered)
    def show_memory(key: Annotated[str, KEY], who: Who) -> Remembered:
        need(who, Action.MEMORY_READ)
        entry = memory.get(key)
        if entry is None:
            raise NotFoundError(f"no memory entry {key!r} (it may have expired)")
        return entry

    @router.delete("/v1/memory/{key}", status_code=204)
    def forget_memory(key: Annotated[str, KEY], who: Who) -> Response:
        need(who, Action.MEMORY_FORGET)
        if not memory.forget(key):
            raise NotFoundError(f"no memory entry {key!r} (it may have expired)")
        return Response(status_code=204)

    @router.delete("/v1/memory", response_model=Forgotten)
    def forget_many(
        who: Who,
        goal: Annotated[str | None, Query(min_length=1, max_length=500)] = None,
        all: bool = False,  # noqa: A002, FBT001, FBT002 - the query's name
    ) -> Forgotten:
        need(who, Action.MEMORY_FORGET)
        if goal is None and not all:
            raise InvalidRequestError(
                "goal", "say what to forget", "pass ?goal=<goal> for one goal, or ?all=true"
            )
        return Forgotten(forgotten=memory.forget_many(goal=goal))

    return router
