"""Recurring batches and suites.

POST   /v1/schedules                  add one (`every_s` or `cron`)
GET    /v1/schedules                  those the token may read
DELETE /v1/schedules/{schedule_id}    remove one
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from scheduler.api.bodies import BoundedRoute
from scheduler.api.limits import Limits
from scheduler.api.views import Who, need, shown_schedule
from scheduler.errors import ForbiddenError, NotFoundError
from scheduler.service.requests import ScheduleBody, SuiteScheduleSubmit
from scheduler.service.run_ids import checked
from scheduler.service.schedules import Schedule, Schedules
from workers.core.access import Action


def schedules_router(schedules: Schedules, *, limits: Limits, signed: bool) -> APIRouter:
    """`signed`: the fleet signs webhooks (a suite may name its own)."""
    router = APIRouter(route_class=BoundedRoute)

    @router.post("/v1/schedules", status_code=201, response_model=Schedule)
    def add_schedule(sub: ScheduleBody, who: Who) -> Schedule:
        need(who, Action.SUBMIT)
        if isinstance(sub, SuiteScheduleSubmit):
            limits.check_suite(sub, signed=signed)
        else:
            limits.check_batch(sub)
        return schedules.add(sub, owner=who.name)

    @router.get("/v1/schedules", response_model=list[Schedule])
    def list_schedules(who: Who) -> list[Schedule]:
        need(who, Action.READ_OWN, Action.READ_ANY)
        return [shown_schedule(who, s) for s in schedules.list() if who.may_read(s.owner)]

    @router.delete("/v1/schedules/{schedule_id}", status_code=204)
    def remove_schedule(schedule_id: str, who: Who) -> Response:
        need(who, Action.CANCEL_OWN, Action.CANCEL_ANY)
        found = schedules.get(checked(schedule_id, "schedule"))
        if found is None or not (who.may_read(found.owner) or who.may_cancel(found.owner)):
            raise NotFoundError(f"no schedule {schedule_id!r}")
        if not who.may_cancel(found.owner):
            raise ForbiddenError(who.describe(), "delete another token's schedule", "admin")
        schedules.remove(schedule_id)
        return Response(status_code=204)

    return router
