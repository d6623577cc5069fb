"""The one percentile function every benchmark and report uses.

Nearest-rank: the q-th percentile of n values is the ceil(q/100 * n)-th smallest, a value that
was actually measured (no interpolation). A tail percentile says little when only a handful of
samples lie above it, so p99 (or anything above p95) is refused below `TAIL_MIN_SAMPLES`
samples: report `tail(values)`, which is p99 from ≥ 1,000 samples and p95 otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

TAIL_MIN_SAMPLES = 1000
"""Fewest samples a percentile above p95 (p99) may be computed from."""


class TooFewSamplesError(ValueError):
    """A percentile asked of too few samples to mean anything."""


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank q-th percentile (q in 0..100) of a non-empty sample.

    Above p95 the sample must hold at least `TAIL_MIN_SAMPLES` values.
    """
    if not values:
        raise TooFewSamplesError("percentile of no values: measure at least one sample")
    if not 0 <= q <= 100:  # noqa: PLR2004 - a percent
        raise ValueError(f"q={q!r}: a percentile is between 0 and 100")
    if q > 95 and len(values) < TAIL_MIN_SAMPLES:  # noqa: PLR2004 - the documented cut-off
        raise TooFewSamplesError(
            f"p{q:g} from {len(values)} samples: needs >= {TAIL_MIN_SAMPLES}; report p95 "
            "(or use tail())"
        )
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return float(ordered[rank - 1])


def median(values: Sequence[float]) -> float:
    """The 50th percentile (nearest-rank, so always a measured value)."""
    return percentile(values, 50)


def tail_q(n: int) -> int:
    """The tail percentile `n` samples support: 99 from `TAIL_MIN_SAMPLES` on, else 95."""
    return 99 if n >= TAIL_MIN_SAMPLES else 95


def tail(values: Sequence[float]) -> tuple[str, float]:
    """("p99", value) from ≥ 1,000 samples, else ("p95", value)."""
    q = tail_q(len(values))
    return f"p{q}", percentile(values, q)
