"""The run history's routes (`read_any`: they aggregate every run), over the history database
(`GOALFLEET_DATABASE_URL`); without one, 503 saying how to turn it on.

GET /v1/history?since=7d&until=...&bucket=1d&min_runs=10   all three, as `goalfleet history`
GET /v1/history/pass-rates                                   pass and flaky rate, flow x class
GET /v1/history/step-times                                   step p50 / p95, flow x phase x days
GET /v1/history/outliers                                     devices failing more than their class
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Annotated, TypeVar

from fastapi import APIRouter, Query

from scheduler.api.bodies import BoundedRoute
from scheduler.api.views import Who, need
from scheduler.errors import InvalidRequestError, UnavailableError
from scheduler.store.history.db import HistoryUnavailableError
from scheduler.store.history.queries import Outlier, PassRate, StepTime
from scheduler.store.history.report import HistoryReport, history_report, parse_since, parse_span
from scheduler.store.history.store import HistoryStore, SqlHistory
from workers.core.access import Action
from workers.core.errors import ConfigError

T = TypeVar("T")
SINCE = Query(max_length=40, description="a span back (7d, 24h, 90m) or a UTC date")
UNTIL = Query(max_length=40, description="a UTC date or time (default: now)")
BUCKET = Query(max_length=10, description="the step-time bucket: whole days (1d, 7d)")


class _Window:
    def __init__(self, since: str, until: str | None, bucket: str) -> None:
        now = time.time()
        try:
            self.since = parse_since(since, now, "since")
            self.until = parse_since(until, now, "until") if until else now
            self.bucket_s = parse_span(bucket, "bucket")
            if self.bucket_s % 86_400:
                raise ConfigError("bucket: step times are counted by the day; give 1d or 7d")
        except ConfigError as exc:
            field, _, problem = exc.message.partition(": ")
            raise InvalidRequestError(field, problem, "e.g. since=7d&bucket=1d") from None
        if self.until <= self.since:
            raise InvalidRequestError("until", "the window ends before it starts", "")


def history_router(database_url: str | None) -> APIRouter:
    router = APIRouter(route_class=BoundedRoute)
    store: HistoryStore | None = None
    if database_url:  # an embedded (SQLite) one gets its tables here; PostgreSQL: `db upgrade`
        store = SqlHistory.open(database_url, upgrade=database_url.startswith("sqlite"))
    lock = threading.Lock()  # one connection, one query at a time

    def ask(question: Callable[[HistoryStore], T]) -> T:
        if store is None:
            raise UnavailableError(
                "this API keeps no run history: set GOALFLEET_DATABASE_URL "
                "(and run goalfleet db upgrade)"
            )
        try:
            with lock:
                return question(store)
        except HistoryUnavailableError as exc:
            raise UnavailableError(str(exc)) from None

    @router.get("/v1/history")
    def history(
        who: Who,
        since: Annotated[str, SINCE] = "7d",
        until: Annotated[str | None, UNTIL] = None,
        bucket: Annotated[str, BUCKET] = "1d",
        min_runs: Annotated[int, Query(ge=1, le=100_000)] = 10,
    ) -> dict[str, object]:
        need(who, Action.READ_ANY)  # fleet-wide aggregates: every run counts
        w = _Window(since, until, bucket)

        def report(s: HistoryStore) -> HistoryReport:
            return history_report(
                s, since=w.since, until=w.until, bucket_s=w.bucket_s, min_runs=min_runs
            )

        return ask(report).as_dict()

    @router.get("/v1/history/pass-rates", response_model=list[PassRate])
    def pass_rates(
        who: Who, since: Annotated[str, SINCE] = "7d", until: Annotated[str | None, UNTIL] = None
    ) -> list[PassRate]:
        need(who, Action.READ_ANY)  # fleet-wide aggregates: every run counts
        w = _Window(since, until, "1d")
        return ask(lambda s: s.pass_rates(w.since, w.until))

    @router.get("/v1/history/step-times", response_model=list[StepTime])
    def step_times(
        who: Who,
        since: Annotated[str, SINCE] = "7d",
        until: Annotated[str | None, UNTIL] = None,
        bucket: Annotated[str, BUCKET] = "1d",
    ) -> list[StepTime]:
        need(who, Action.READ_ANY)  # fleet-wide aggregates: every run counts
        w = _Window(since, until, bucket)
        return ask(lambda s: s.step_times(w.since, w.until, bucket_s=w.bucket_s))

    @router.get("/v1/history/outliers", response_model=list[Outlier])
    def outliers(
        who: Who,
        since: Annotated[str, SINCE] = "7d",
        until: Annotated[str | None, UNTIL] = None,
        min_runs: Annotated[int, Query(ge=1, le=100_000)] = 10,
    ) -> list[Outlier]:
        need(who, Action.READ_ANY)  # fleet-wide aggregates: every run counts
        w = _Window(since, until, "1d")
        return ask(lambda s: s.outliers(w.since, w.until, min_runs=min_runs))

    return router
