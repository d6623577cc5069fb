"""Five-field cron expressions (minute hour day-of-month month day-of-week, UTC): `*`, lists
`1,15`, ranges `1-5`, steps `*/15`, `0-30/10`. Day-of-week 0 or 7 is Sunday. When both day
fields are restricted, either matching is a match (as in Vixie cron)."""

from __future__ import annotations

import calendar
import datetime as dt
from dataclasses import dataclass

_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12),
           ("day of week", 0, 7))  # fmt: skip
LOOKAHEAD = dt.timedelta(days=366 * 5)
"""How far ahead a match is looked for (Feb 29 comes within it); past it, none ever will."""


class CronError(ValueError):
    pass


def _field(text: str, name: str, low: int, high: int) -> frozenset[int]:
    out: set[int] = set()
    for part in text.split(","):
        span, _, step_s = part.partition("/")
        step = int(step_s) if step_s.isdigit() and int(step_s) > 0 else None
        if step_s and step is None:
            raise CronError(f"{name} {part!r}: a step is a positive number (*/15)")
        if span == "*":
            a, b = low, high
        else:
            a_s, _, b_s = span.partition("-")
            if not a_s.isdigit() or (b_s and not b_s.isdigit()):
                raise CronError(f"{name} {part!r}: give numbers {low}-{high}, ranges, * or steps")
            a, b = int(a_s), int(b_s or a_s)
        if not low <= a <= b <= high:
            raise CronError(f"{name} {part!r}: out of {low}-{high}")
        out.update(range(a, b + 1, step or 1))
    return frozenset(out)


@dataclass(frozen=True)
class Cron:
    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    """0 Sunday ... 6 Saturday."""
    any_day: bool
    any_weekday: bool

    @classmethod
    def parse(cls, text: str) -> Cron:
        parts = text.split()
        if len(parts) != len(_FIELDS):
            raise CronError(
                f"cron {text!r}: give 5 fields (minute hour day-of-month month day-of-week), "
                "e.g. '0 * * * *' for every hour"
            )
        sets = [_field(p, *f) for p, f in zip(parts, _FIELDS, strict=True)]
        weekdays = frozenset(d % 7 for d in sets[4])
        return cls(text, sets[0], sets[1], sets[2], sets[3], weekdays,
                   parts[2] == "*", parts[4] == "*")  # fmt: skip

    def _day_ok(self, t: dt.datetime) -> bool:
        day = t.day in self.days
        weekday = (t.weekday() + 1) % 7 in self.weekdays
        if self.any_day or self.any_weekday:
            return day and weekday
        return day or weekday

    def next_after(self, epoch: float) -> float:
        """The first matching minute after `epoch` (UTC)."""
        t = dt.datetime.fromtimestamp(epoch, tz=dt.UTC).replace(second=0, microsecond=0)
        limit = t + LOOKAHEAD
        while t < limit:
            t += dt.timedelta(minutes=1)
            if t.month not in self.months:
                days = calendar.monthrange(t.year, t.month)[1]
                t = t.replace(day=days, hour=23, minute=59)
                continue
            if not self._day_ok(t):
                t = t.replace(hour=23, minute=59)
                continue
            if t.hour not in self.hours:
                t = t.replace(minute=59)
                continue
            if t.minute in self.minutes:
                return t.timestamp()
        raise CronError(f"cron {self.text!r} never matches")
