"""Five-field cron expressions (minute hour day-of-month month day-of-week, UTC), read by
cronsim (the cron reader of Healthchecks.io, no dependencies): `*`, lists `1,15`, ranges `1-5`,
steps `*/15`, names `MON-FRI`, `JAN`, the last day of a month `L`. Day-of-week 0 or 7 is
Sunday. When both day fields are restricted, either matching is a match (as in Debian cron).

A bad expression is a `CronError` naming the field and the fix."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from cronsim import CronSim, CronSimError

_FIELDS = {"minute": "0-59", "hour": "0-23", "day-of-month": "1-31", "month": "1-12 or JAN-DEC",
           "day-of-week": "0-7 or SUN-SAT"}  # fmt: skip
"""cronsim's field names, in order, and what each takes."""


class CronError(ValueError):
    pass


@dataclass(frozen=True)
class Cron:
    text: str

    @classmethod
    def parse(cls, text: str) -> Cron:
        parts = text.split()
        if len(parts) != len(_FIELDS):
            raise CronError(
                f"cron {text!r}: give 5 fields (minute hour day-of-month month day-of-week), "
                "e.g. '0 * * * *' for every hour"
            )
        cron = cls(text)
        cron._reader(dt.datetime.now(tz=dt.UTC))
        return cron

    def _reader(self, after: dt.datetime) -> CronSim:
        try:
            return CronSim(self.text, after)
        except CronSimError as exc:  # "Bad minute": the field, not what is wrong with it
            name = str(exc).removeprefix("Bad ")
            if name not in _FIELDS:
                raise CronError(f"cron {self.text!r}: {exc}") from None
            part = self.text.split()[list(_FIELDS).index(name)]
            also = ", a day the months have" if name == "day-of-month" else ""
            raise CronError(
                f"cron {self.text!r}: the {name} field takes {_FIELDS[name]}, a list (1,15), a "
                f"range (1-5), * or a step (*/15){also}, not {part!r}"
            ) from None

    def next_after(self, epoch: float) -> float:
        """The first matching minute after `epoch` (UTC)."""
        after = dt.datetime.fromtimestamp(epoch, tz=dt.UTC)
        at = next(self._reader(after), None)  # cronsim looks 50 years ahead
        if at is None:
            raise CronError(f"cron {self.text!r} never matches")
        return at.timestamp()
