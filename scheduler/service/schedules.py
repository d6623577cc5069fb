"""Recurring batches, driven by the scheduler's own loop (no ETA/countdown tasks, no beat).

A schedule is a `BatchSubmit` plus `every_s`. Each due schedule is claimed with a
compare-and-set on its next-due time, so several scheduler processes never fire it twice.
Missed periods (scheduler down) are skipped, not replayed.
"""

from __future__ import annotations

import time
from typing import cast

import structlog
from pydantic import BaseModel, ConfigDict

from scheduler.errors import FleetError, NotFoundError
from scheduler.service.cron import Cron
from scheduler.service.fleet import Fleet, new_id
from scheduler.service.requests import (
    BatchSubmit,
    ScheduleSubmit,
    SuiteScheduleSubmit,
    SuiteSubmit,
)
from workers.fleet.state.scripts import RedisStore, Script

log = structlog.stdlib.get_logger("goalfleet.scheduler")


class Schedule(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    every_s: float | None = None
    cron: str | None = None
    batch: BatchSubmit | SuiteSubmit
    created_at: float
    next_at: float | None = None
    last_batch: str | None = None
    owner: str | None = None
    """Who added it; its batches' runs are that owner's (`workers.core.access`)."""


class Schedules(RedisStore):
    _advance = Script("advance_schedule")

    def add(
        self,
        sub: ScheduleSubmit | SuiteScheduleSubmit,
        *,
        now: float | None = None,
        owner: str | None = None,
    ) -> Schedule:
        now = time.time() if now is None else now
        kind = SuiteSubmit if isinstance(sub, SuiteScheduleSubmit) else BatchSubmit
        batch = kind.model_validate(
            sub.model_dump(exclude={"name", "every_s", "cron"}, exclude_none=True)
        )
        first = now if sub.cron is None else Cron.parse(sub.cron).next_after(now)
        sched = Schedule(
            id=new_id(),
            name=sub.name,
            every_s=sub.every_s,
            cron=sub.cron,
            batch=batch,
            created_at=now,
            next_at=first,
            owner=owner,
        )
        with self.r.pipeline(transaction=True) as p:
            p.set(self.k.schedule(sched.id), sched.model_dump_json())
            p.zadd(self.k.schedules, {sched.id: first})
            p.execute()
        return sched

    def get(self, schedule_id: str) -> Schedule | None:
        raw = cast("str | None", self.r.get(self.k.schedule(schedule_id)))
        return Schedule.model_validate_json(raw) if raw else None

    def remove(self, schedule_id: str) -> None:
        with self.r.pipeline(transaction=True) as p:
            p.delete(self.k.schedule(schedule_id))
            p.zrem(self.k.schedules, schedule_id)
            deleted, _ = p.execute()
        if not deleted:
            raise NotFoundError(f"no schedule {schedule_id!r}")

    def list(self) -> list[Schedule]:
        due = cast(
            "list[tuple[str, float]]", self.r.zrange(self.k.schedules, 0, -1, withscores=True)
        )
        out = []
        for sid, score in due:
            raw = cast("str | None", self.r.get(self.k.schedule(sid)))
            if raw:
                out.append(Schedule.model_validate_json(raw).model_copy(update={"next_at": score}))
        return out

    def tick(self, fleet: Fleet, *, now: float | None = None) -> int:
        """Fire every due schedule once; return how many batches were submitted."""
        now = time.time() if now is None else now
        due = cast(
            "list[tuple[str, float]]",
            self.r.zrangebyscore(self.k.schedules, "-inf", now, withscores=True),
        )
        fired = 0
        for sid, score in due:
            raw = cast("str | None", self.r.get(self.k.schedule(sid)))
            if raw is None:
                self.r.zrem(self.k.schedules, sid)
                continue
            sched = Schedule.model_validate_json(raw)
            nxt = _next(sched, score, now)
            if not self._advance(keys=[self.k.schedules], args=[sid, repr(score), repr(nxt)]):
                continue  # another scheduler fired it
            try:
                if isinstance(sched.batch, SuiteSubmit):
                    batch, _ = fleet.submit_suite(sched.batch, schedule=sid, owner=sched.owner)
                else:
                    batch, _ = fleet.submit_batch(sched.batch, schedule=sid, owner=sched.owner)
            except FleetError as exc:
                log.warning(
                    "schedule_not_fired", schedule_id=sid, schedule=sched.name, error=str(exc)
                )
                continue
            self.r.set(
                self.k.schedule(sid),
                sched.model_copy(update={"last_batch": batch.id}).model_dump_json(),
            )
            fired += 1
        return fired


def _next(sched: Schedule, due: float, now: float) -> float:
    """When `sched` fires after the period due at `due` (missed periods skipped)."""
    if sched.cron is not None:
        return Cron.parse(sched.cron).next_after(now)
    every = sched.every_s or 3600.0
    nxt = due + every
    while nxt <= now:  # skip missed periods
        nxt += every
    return nxt
