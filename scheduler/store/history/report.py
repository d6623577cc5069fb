"""The three questions over one window, as `goalfleet history` prints them and
`GET /v1/history` answers them; the window as a person writes it (`7d`, `24h`, `90m`, or a
date `2026-11-30`)."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import asdict, dataclass

from scheduler.store.history.queries import Cost, Outlier, PassRate, StepTime
from scheduler.store.history.store import HistoryStore
from workers.core.errors import ConfigError

_SPAN = re.compile(r"^(\d+(?:\.\d+)?)([mhdw])$")
_UNIT_S = {"m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}
MAX_SPAN_S = 100 * 366 * 86_400


def parse_span(value: str, field: str) -> int:
    """`90m`, `24h`, `7d`, `2w` in seconds; else ConfigError naming `field` and the fix."""
    m = _SPAN.fullmatch(value.strip())
    if not m or float(m.group(1)) <= 0:
        raise ConfigError(f"{field}: {value!r} is not a span; give one like 90m, 24h, 7d or 2w")
    seconds = round(float(m.group(1)) * _UNIT_S[m.group(2)])
    if seconds > MAX_SPAN_S:
        raise ConfigError(f"{field}: {value!r} is longer than 100 years; give a shorter span")
    return seconds


def parse_since(value: str, now: float, field: str = "since") -> float:
    """A span back from `now` (`7d`) or a UTC date or time (`2026-11-30`, `2026-11-30T08:00`)."""
    if _SPAN.fullmatch(value.strip()):
        return now - parse_span(value, field)
    try:
        when = dt.datetime.fromisoformat(value.strip())
    except ValueError:
        raise ConfigError(
            f"{field}: {value!r} is neither a span (7d, 24h) nor a date (2026-11-30)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


@dataclass(frozen=True)
class HistoryReport:
    since: float
    until: float
    bucket_s: int
    where: str
    pass_rates: list[PassRate]
    step_times: list[StepTime]
    outliers: list[Outlier]
    costs: list[Cost]
    """Model spending per bucket (`queries.costs`)."""

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def history_report(
    store: HistoryStore, *, since: float, until: float, bucket_s: int, min_runs: int = 10
) -> HistoryReport:
    if until <= since:
        raise ConfigError("until: the window ends before it starts; give an earlier since")
    return HistoryReport(
        since=since,
        until=until,
        bucket_s=bucket_s,
        where=store.where(),
        pass_rates=store.pass_rates(since, until),
        step_times=store.step_times(since, until, bucket_s=bucket_s),
        outliers=store.outliers(since, until, min_runs=min_runs),
        costs=store.costs(since, until, bucket_s=bucket_s),
    )
