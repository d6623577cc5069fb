"""The batches: one goal over a selector (or `count` runs), or a suite's flows over their
device matrix, in one batch.

    POST /v1/batches                  a batch or a suite (`Idempotency-Key` honoured)
    GET  /v1/batches/{batch_id}       its totals and per-status counts
    GET  /v1/batches/{batch_id}/runs  its runs
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Response

from scheduler.api.bodies import BoundedRoute
from scheduler.api.limits import Limits
from scheduler.api.reads import Reads
from scheduler.api.submits import Submit, Submits, submit_header
from scheduler.api.views import Who, need, shown_run
from scheduler.service.requests import BatchBody, BatchSubmit, SuiteSubmit
from scheduler.store.runs import FleetStore
from workers.core.access import Action, Principal
from workers.core.records import BatchRecord, RunRecord


def batches_router(
    reads: Reads, *, store: FleetStore, submits: Submits, limits: Limits, signed: bool
) -> APIRouter:
    """`signed`: the fleet signs webhooks (a suite may name its own)."""
    fleet = reads.fleet
    router = APIRouter(route_class=BoundedRoute)

    def batch_submitted(sub: BatchSubmit | SuiteSubmit, submit: Submit, who: Principal) -> Response:
        if isinstance(sub, SuiteSubmit):  # a suite's flows over their device matrix
            limits.check_suite(sub, signed=signed)
            batch, created = fleet.submit_suite(sub, idempotency_key=submit.key, owner=who.name)
        else:
            limits.check_batch(sub)
            batch, created = fleet.submit_batch(sub, idempotency_key=submit.key, owner=who.name)
        return submit.answer(
            "batch.submitted", batch, created=created, batch_id=batch.id, runs=batch.total
        )

    @router.post("/v1/batches", status_code=201, response_model=BatchRecord)
    async def submit_batch(
        sub: BatchBody, submit: Annotated[Submit, Depends(submit_header)], who: Who
    ) -> Response:
        """One goal over a selector (or `count` runs), or a suite (`suite`, `flows`): each
        flow over its device matrix, all in one batch."""
        need(who, Action.SUBMIT)
        return await submits.run(batch_submitted, sub, submit, who)  # Redis calls block

    @router.get("/v1/batches/{batch_id}", response_model=BatchRecord)
    def get_batch(batch_id: str, who: Who) -> BatchRecord:
        return reads.batch(who, batch_id)

    @router.get("/v1/batches/{batch_id}/runs", response_model=list[RunRecord])
    def get_batch_runs(batch_id: str, who: Who) -> list[RunRecord]:
        batch = reads.batch(who, batch_id)
        return [shown_run(who, r) for r in store.load_many(list(batch.runs))]

    return router
