"""The one percentile function: nearest-rank, and no p99 from fewer than 1,000 samples."""

from __future__ import annotations

import pytest

from workers.stats import TAIL_MIN_SAMPLES, TooFewSamplesError, median, percentile, tail


def test_nearest_rank_is_a_measured_value() -> None:
    xs = [15.0, 20.0, 35.0, 40.0, 50.0]
    assert percentile(xs, 30) == 20.0
    assert percentile(xs, 40) == 20.0
    assert percentile(xs, 50) == 35.0
    assert percentile(xs, 95) == 50.0
    assert percentile(xs, 0) == 15.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.0


def test_p95_of_100_samples_is_the_95th_smallest() -> None:
    xs = [float(i) for i in range(100, 0, -1)]
    assert percentile(xs, 95) == 95.0


def test_p99_needs_1000_samples() -> None:
    with pytest.raises(TooFewSamplesError, match="needs >= 1000"):
        percentile([float(i) for i in range(300)], 99)
    xs = [float(i) for i in range(1, TAIL_MIN_SAMPLES + 1)]
    assert percentile(xs, 99) == 990.0


def test_tail_is_p95_below_1000_samples_and_p99_from_there() -> None:
    assert tail([float(i) for i in range(1, 301)]) == ("p95", 285.0)
    assert tail([float(i) for i in range(1, 1001)]) == ("p99", 990.0)


def test_no_values_and_bad_q_are_clear_errors() -> None:
    with pytest.raises(TooFewSamplesError, match="no values"):
        percentile([], 50)
    with pytest.raises(ValueError, match="between 0 and 100"):
        percentile([1.0], 101)
