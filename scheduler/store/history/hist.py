"""Step times as histograms: log-spaced buckets of ratio `RATIO` (2^(1/8), about 9 %) from
`FLOOR_MS`, counted per UTC day, flow and phase (table `step_hist`). A percentile read from them
is the upper bound of the bucket holding the exact (discrete) percentile: never below it, and
at most `RATIO` times it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

RATIO = 2 ** (1 / 8)
FLOOR_MS = 0.1
"""Bucket 0 holds every time up to 0.1 ms (a sim device's phases without latency)."""
DAY = 86_400
PHASES = ("snapshot", "decide", "action")

Key = tuple[int, str, str, int]
"""(day, flow, phase, bucket)"""


def bucket(ms: float) -> int:
    if ms <= FLOOR_MS:
        return 0
    k = math.ceil(math.log(ms / FLOOR_MS, RATIO) - 1e-9)
    return k if upper_ms(k) >= ms else k + 1


def upper_ms(k: int) -> float:
    return FLOOR_MS * RATIO**k


def day_of(ts: float) -> int:
    """The start of the UTC day `ts` falls in."""
    return int(ts // DAY) * DAY


def counts(rows: Iterable[tuple[str, float, float, float, float]]) -> Counter[Key]:
    """(flow, finished_at, snapshot_ms, decide_ms, action_ms) rows as histogram counts."""
    out: Counter[Key] = Counter()
    for flow, at, *times in rows:
        d = day_of(at)
        for phase, ms in zip(PHASES, times, strict=True):
            out[d, flow, phase, bucket(ms)] += 1
    return out


def percentile(hist: list[tuple[int, int]], p: float) -> float:
    """The upper bound of the bucket holding the discrete `p` percentile of the (bucket, n)
    counts `hist`."""
    total = sum(n for _, n in hist)
    rank = max(1, math.ceil(p * total - 1e-9))
    seen = 0
    for k, n in sorted(hist):
        seen += n
        if seen >= rank:
            return upper_ms(k)
    raise ValueError("an empty histogram has no percentile")
