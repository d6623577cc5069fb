"""`GET /v1/runs`: the run list, newest first, filtered and paged (`scheduler.store.listing`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import FastAPI, Query
from pydantic import BaseModel, ConfigDict, Field

from scheduler.api.views import Who, need, shown_run
from scheduler.service.fleet import Fleet
from scheduler.service.run_ids import RunIds
from scheduler.store.listing import MAX_LIMIT, RunQuery
from workers.core.access import Action
from workers.core.model import RunStatus
from workers.core.records import RunRecord

CURSOR = r"^[0-9a-f]{1,64}@[0-9.eE+-]{1,32}$"


class RunFilters(BaseModel):
    """`GET /v1/runs`'s query: every filter optional, all of them at once."""

    model_config = ConfigDict(extra="forbid")

    status: RunStatus | None = None
    device: Annotated[str | None, Field(min_length=1, max_length=128)] = None
    batch: Annotated[str | None, Field(min_length=6, max_length=64)] = None
    """A batch id, or a unique prefix of 6+ characters of one."""
    schedule: Annotated[str | None, Field(min_length=1, max_length=64)] = None
    suite: Annotated[str | None, Field(min_length=1, max_length=64)] = None
    """Runs of this suite's batches (a flows file's `suite`)."""
    flow: Annotated[str | None, Field(min_length=1, max_length=64)] = None
    """Attempts of this suite flow (a flows file's flow `name`)."""
    goal: Annotated[str | None, Field(min_length=1, max_length=200)] = None
    """Words the goal contains (case-insensitive)."""
    since: Annotated[float | None, Field(ge=0)] = None
    """Submitted at or after this time (epoch seconds)."""
    until: Annotated[float | None, Field(ge=0)] = None
    """Submitted before this time (epoch seconds)."""
    limit: Annotated[int, Field(ge=1, le=MAX_LIMIT)] = 50
    cursor: Annotated[str | None, Field(pattern=CURSOR, max_length=100)] = None
    """The `next` of the page before."""


class RunPageOut(BaseModel):
    runs: list[RunRecord]
    next: str | None
    """Pass it as `cursor` for the next page; null: this was the last one."""


def add_list_routes(app: FastAPI, fleet: Fleet, batch_ids: RunIds) -> None:
    @app.get("/v1/runs", response_model=RunPageOut)
    def list_runs(filters: Annotated[RunFilters, Query()], who: Who) -> RunPageOut:
        """Runs newest first. A page may hold fewer than `limit` runs when a filter matches
        little (each page reads a bounded part of the list): go on while `next` is given.
        A token that may read only its own runs lists only those."""
        need(who, Action.READ_OWN, Action.READ_ANY)
        f = filters
        owner = None if who.sees_all else who.name
        query = RunQuery(
            status=f.status,
            device=f.device,
            batch=batch_ids.resolve(f.batch, owner=owner) if f.batch else None,
            schedule=f.schedule,
            suite=f.suite,
            flow=f.flow,
            goal=f.goal,
            since=f.since,
            until=f.until,
            limit=f.limit,
            cursor=f.cursor,
            owner=owner,
        )
        page = fleet.runs(query)
        return RunPageOut(runs=[shown_run(who, r) for r in page.runs], next=page.next)
