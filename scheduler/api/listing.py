"""`GET /v1/runs`: the run list, newest first, filtered and paged (`scheduler.store.listing`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import FastAPI, Query
from pydantic import BaseModel

from scheduler.api.views import Who, need, shown_run
from scheduler.service.fleet import Fleet
from scheduler.service.requests import RunFilters
from scheduler.service.run_ids import RunIds
from scheduler.store.listing import RunQuery
from workers.core.access import Action
from workers.core.records import RunRecord


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
