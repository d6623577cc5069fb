"""`GET /v1/runs`: the run list, newest first, filtered and paged (`scheduler.store.listing`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import FastAPI, Query
from pydantic import BaseModel, ConfigDict, Field

from scheduler.service.fleet import Fleet
from scheduler.service.run_ids import RunIds
from scheduler.store.listing import MAX_LIMIT, RunQuery
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


def add_list_routes(app: FastAPI, fleet: Fleet, batch_ids: RunIds, *, guarded: list[Any]) -> None:
    @app.get("/v1/runs", dependencies=guarded, response_model=RunPageOut)
    def list_runs(filters: Annotated[RunFilters, Query()]) -> RunPageOut:
        """Runs newest first. A page may hold fewer than `limit` runs when a filter matches
        little (each page reads a bounded part of the list): go on while `next` is given."""
        f = filters
        query = RunQuery(
            status=f.status,
            device=f.device,
            batch=batch_ids.resolve(f.batch) if f.batch else None,
            schedule=f.schedule,
            suite=f.suite,
            flow=f.flow,
            goal=f.goal,
            since=f.since,
            until=f.until,
            limit=f.limit,
            cursor=f.cursor,
        )
        page = fleet.runs(query)
        return RunPageOut(runs=page.runs, next=page.next)
