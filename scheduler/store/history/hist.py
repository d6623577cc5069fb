"""Step times as histograms: log-spaced buckets of ratio `RATIO` (2^(1/8), about 9 %) from
`FLOOR_MS`, counted per UTC day, flow and phase (table `step_hist`). A percentile read from them
is the upper bound of the bucket holding the exact (discrete) percentile: never below it, and
at most `RATIO` times it.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
from collections import Counter
from collections.abc import Iterable

RATIO = 2 ** (1 / 8)
FLOOR_MS = 0.1
"""Bucket 0 holds every time up to 0.1 ms (a sim device's phases without latency)."""
DAY = 86_400
PHASES = ("snapshot", "decide", "action")

Group = tuple[int, str, str]
"""(day, flow, phase): one row of `step_hist`"""


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


def counts(rows: Iterable[tuple[str, float, float, float, float]]) -> dict[Group, Counter[int]]:
    """(flow, finished_at, snapshot_ms, decide_ms, action_ms) rows as histograms."""
    out: dict[Group, Counter[int]] = {}
    for flow, at, *times in rows:
        d = day_of(at)
        for phase, ms in zip(PHASES, times, strict=True):
            out.setdefault((d, flow, phase), Counter())[bucket(ms)] += 1
    return out


Dense = tuple[int, list[int]]
"""A histogram as stored: its lowest bucket, then the count of every bucket from there on."""


def dumps(hist: Counter[int]) -> str:
    """`hist` as the JSON array `[lowest bucket, n, n, ...]` (what `step_hist.counts` holds:
    dense, so a reader parses it in C and sums it with `accumulate`)."""
    used = [k for k, n in hist.items() if n]
    if not used:
        return "[0]"
    lo, hi = min(used), max(used)
    return json.dumps([lo, *(hist.get(k, 0) for k in range(lo, hi + 1))], separators=(",", ":"))


def loads(text: str) -> Dense:
    values: list[int] = json.loads(text)
    return values[0], values[1:]


def counter(dense: Dense) -> Counter[int]:
    lo, ns = dense
    return Counter({lo + i: n for i, n in enumerate(ns) if n})


def add(a: Dense, b: Dense) -> Dense:
    """The histogram of both (several days merged into one bucket of time)."""
    if not a[1]:
        return b
    if not b[1]:
        return a
    lo = min(a[0], b[0])
    hi = max(a[0] + len(a[1]), b[0] + len(b[1]))
    out = [0] * (hi - lo)
    for start, ns in (a, b):
        for i, n in enumerate(ns, start - lo):
            out[i] += n
    return lo, out


def total(dense: Dense) -> int:
    return sum(dense[1])


def percentile(dense: Dense, p: float) -> float:
    """The upper bound of the bucket holding the discrete `p` percentile of `dense`."""
    lo, ns = dense
    running = list(itertools.accumulate(ns))
    if not running or running[-1] <= 0:
        raise ValueError("an empty histogram has no percentile")
    rank = max(1, math.ceil(p * running[-1] - 1e-9))
    return upper_ms(lo + bisect.bisect_left(running, rank))
