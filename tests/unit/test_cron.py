"""Five-field cron (UTC) for schedules, read by cronsim: the next matching minute, lists,
ranges, steps, the day fields' either-or, Sunday as 0 or 7, day and month names, the last day
of a month; a bad expression names the field and the fix, and a schedule with one is refused
before it is stored."""

from __future__ import annotations

import datetime as dt

import pytest
from pydantic import ValidationError

from scheduler.service.cron import Cron, CronError
from scheduler.service.requests import ScheduleSubmit

T0 = dt.datetime(2026, 12, 2, 18, 7, 30, tzinfo=dt.UTC).timestamp()  # a Wednesday


def _next(expr: str, after: float = T0) -> str:
    return dt.datetime.fromtimestamp(Cron.parse(expr).next_after(after), tz=dt.UTC).strftime(
        "%a %Y-%m-%d %H:%M"
    )


@pytest.mark.parametrize(
    ("expr", "want"),
    [
        ("* * * * *", "Wed 2026-12-02 18:08"),
        ("0 * * * *", "Wed 2026-12-02 19:00"),
        ("*/15 * * * *", "Wed 2026-12-02 18:15"),
        ("5,35 9-17 * * 1-5", "Thu 2026-12-03 09:05"),
        ("0 0 * * 0", "Sun 2026-12-06 00:00"),
        ("0 0 * * 7", "Sun 2026-12-06 00:00"),
        ("0 12 1 * *", "Fri 2027-01-01 12:00"),
        ("0 0 29 2 *", "Tue 2028-02-29 00:00"),
        ("0 0 13 * 5", "Fri 2026-12-04 00:00"),  # the 13th or a Friday, as cron has it
        ("0-30/10 18 * * *", "Wed 2026-12-02 18:10"),
        ("30 9 * * MON-FRI", "Thu 2026-12-03 09:30"),
        ("0 6 L * *", "Thu 2026-12-31 06:00"),
        ("0 0 1 JAN *", "Fri 2027-01-01 00:00"),
    ],
)
def test_next_after(expr: str, want: str) -> None:
    assert _next(expr) == want


@pytest.mark.parametrize(
    ("expr", "says"),
    [
        ("* * * *", "give 5 fields"),
        ("0 * * * * *", "give 5 fields"),  # no seconds field
        ("60 * * * *", "the minute field takes 0-59"),
        ("* 24 * * *", "the hour field takes 0-23"),
        ("*/0 * * * *", r"the minute field takes .* a step \(\*/15\)"),
        ("a * * * *", "the minute field takes .*, not 'a'"),
        ("0 0 * 13 *", "the month field takes 1-12"),
        ("0 0 * * 8", "the day-of-week field takes 0-7"),
        ("0 0 31 2 *", "the day-of-month field takes .* a day the months have"),
    ],
)
def test_a_bad_expression_says_what_and_how(expr: str, says: str) -> None:
    with pytest.raises(CronError, match=says):
        Cron.parse(expr).next_after(T0)


def test_a_schedule_takes_every_s_or_cron() -> None:
    base = {"name": "n", "goal": "Sign in"}
    assert ScheduleSubmit.model_validate({**base, "cron": "0 * * * *"}).cron == "0 * * * *"
    for bad in ({}, {"every_s": 60, "cron": "0 * * * *"}, {"cron": "61 * * * *"},
                {"cron": "0 0 31 2 *"}):  # fmt: skip
        with pytest.raises(ValidationError):
            ScheduleSubmit.model_validate({**base, **bad})
