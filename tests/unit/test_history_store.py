"""The history store (`scheduler.store.history`) over both of its databases: a scratch
database on the machine's PostgreSQL and an SQLite file. Writes are idempotent upserts; the
three questions give the numbers worked out by hand here, and the same numbers on both."""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Iterator
from pathlib import Path

import pgkit
import pytest

from scheduler.store.history.db import MIGRATIONS, Database, HistoryUnavailableError
from scheduler.store.history.hist import FLOOR_MS, RATIO, bucket, upper_ms
from scheduler.store.history.rows import RunHistory, history_of
from scheduler.store.history.store import SqlHistory
from workers.core.errors import ConfigError
from workers.core.model import Outcome, PhaseTotals, Platform, RunResult, RunStatus, StepRow
from workers.core.records import DeviceInfo, RunRecord
from workers.core.request import GoalRunRequest

T0 = 1_700_000_000.0
DAY = 86_400


def step(i: int, *, snap: float, decide: float, action: float) -> StepRow:
    return StepRow(
        index=i,
        screen="Sign in",
        refs_generation="g",
        candidates=2,
        outcome=Outcome.ACTED,
        snapshot_ms=snap,
        decide_ms=decide,
        action_ms=action,
    )


def ended(
    rid: str,
    *,
    device: str = "d1",
    status: RunStatus = RunStatus.DONE,
    at: float = T0,
    goal: str = "Sign in",
    steps: tuple[StepRow, ...] = (),
    attempt: int = 1,
    model: str = "iPhone15",
    totals: PhaseTotals | None = None,
) -> RunHistory:
    result = RunResult(status=status, goal=goal, steps=steps, totals=totals or PhaseTotals())
    record = RunRecord(
        id=rid,
        request=GoalRunRequest(goal=goal, inputs={"email": "ada@example.com"}),
        status=status,
        device=device,
        attempt=attempt,
        submitted_at=at - 5,
        started_at=at - 4,
        finished_at=at,
        result=result,
    )
    info = DeviceInfo(id=device, platform=Platform.IOS, os_version="17.5", model=model)
    return history_of(record, steps, info)


@pytest.fixture(params=["postgresql", "sqlite"])
def history(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlHistory]:
    if request.param == "sqlite":
        store = SqlHistory.open(f"sqlite:///{tmp_path / 'h.db'}", upgrade=True)
        yield store
        store.close()
        return
    with pgkit.scratch_database() as url:
        store = SqlHistory.open(url, upgrade=True)
        yield store
        store.close()


def count(store: SqlHistory, table: str) -> int:
    return int(store.db.query(f"SELECT COUNT(*) FROM {table}")[0][0])  # noqa: S608 - our names


def test_upgrade_applies_each_migration_once(history: SqlHistory) -> None:
    """A second `upgrade` finds nothing to do; the tables are there."""
    assert history.db.upgrade() == []
    assert history.db.pending_migrations() == []
    assert count(history, "runs") == 0


@pytest.mark.parametrize("dialect", ["postgresql", "sqlite"])
def test_processes_starting_at_once_upgrade_one_schema(dialect: str, tmp_path: Path) -> None:
    """The API, the scheduler and a CLI command each upgrade the embedded database as they
    start: four of them upgrading one new database at the same moment all succeed, and each
    migration is applied (and recorded) once."""
    with contextlib.ExitStack() as stack:
        url = (
            f"sqlite:///{tmp_path / 'h.db'}"
            if dialect == "sqlite"
            else stack.enter_context(pgkit.scratch_database())
        )
        start = threading.Barrier(4)
        applied: list[list[str]] = []
        failed: list[BaseException] = []

        def upgrade() -> None:
            db = Database(url)
            start.wait()
            try:
                applied.append(db.upgrade())
            except Exception as exc:  # noqa: BLE001 - the test reports whatever one raised
                failed.append(exc)
            finally:
                db.close()

        threads = [threading.Thread(target=upgrade) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failed == []
        everyone = sorted(p.stem for p in MIGRATIONS.glob("*.sql"))
        assert sorted(name for names in applied for name in names) == everyone
        db = Database(url)
        assert db.pending_migrations() == []
        assert db.query("SELECT COUNT(*) FROM schema_migrations") == [(len(everyone),)]
        db.close()


def test_writes_are_idempotent_and_a_new_attempt_replaces_its_steps(history: SqlHistory) -> None:
    """The same run stored twice is one row with one row per step; stored again at a later
    attempt with fewer steps, it keeps only that attempt's."""
    three = tuple(step(i, snap=1, decide=2, action=3) for i in (1, 2, 3))
    history.write([ended("r1", steps=three), ended("r2")])
    history.write([ended("r1", steps=three)])
    assert count(history, "runs") == 2
    assert count(history, "steps") == 3
    history.write([ended("r1", steps=three[:1], attempt=2, status=RunStatus.BLOCKED)])
    assert history.db.query("SELECT attempt, step FROM steps ORDER BY step") == [(2, 1)]
    assert history.db.query("SELECT status FROM runs WHERE run_id = 'r1'") == [("blocked",)]


def test_model_cost_per_day(history: SqlHistory) -> None:
    """What runs cost by the price table, summed per UTC day of their end; a run that called
    no model is not counted."""
    day = 86_400
    start = T0 // day * day
    paid = PhaseTotals(input_tokens=1000, output_tokens=100, cost=0.0028)
    history.write([
        ended("c1", at=start + 10, totals=paid),
        ended("c2", at=start + day - 1, totals=paid),
        ended("c3", at=start + day + 5, totals=paid),
        ended("c4", at=start + 20),  # the rules decider: no tokens, no cost
    ])  # fmt: skip
    got = history.costs(start, start + 2 * day, bucket_s=day)
    assert [(c.bucket, c.runs, c.input_tokens, c.output_tokens) for c in got] == [
        (start, 2, 2000, 200),
        (start + day, 1, 1000, 100),
    ]
    assert [c.cost for c in got] == pytest.approx([0.0056, 0.0028])


def test_pass_and_flaky_rates_per_flow_and_device_class(history: SqlHistory) -> None:
    """Pass rate over the counted runs; flaky = outcome flips between consecutive runs on one
    device (the run before the window is the first one's previous); a cancelled run and a run
    outside the window count for nothing."""
    seq = [RunStatus.DONE, RunStatus.BLOCKED, RunStatus.DONE, RunStatus.DONE]  # 2 flips of 3
    runs = [ended(f"a{i}", status=s, at=T0 + i) for i, s in enumerate(seq)]
    runs += [ended(f"b{i}", device="d2", status=RunStatus.ERRORED, at=T0 + i) for i in range(2)]
    runs += [ended("c", status=RunStatus.CANCELLED, at=T0 + 10)]
    runs += [ended("old", status=RunStatus.BLOCKED, at=T0 - 2 * DAY)]
    runs += [ended("p", device="px", model="Pixel8", at=T0 + 1)]
    history.write(runs)
    rates = {(r.flow, r.device_class): r for r in history.pass_rates(T0 - DAY, T0 + DAY)}
    ios = rates["Sign in", "ios/iPhone15/17"]
    assert (ios.runs, ios.passed) == (6, 3)
    assert ios.pass_rate == 0.5
    assert ios.flaky_rate == pytest.approx(3 / 5)  # d1: old, then 3 flips in 4; d2: 0 in 1
    assert rates["Sign in", "ios/Pixel8/17"].runs == 1
    assert len(rates) == 2


def test_a_flip_is_seen_across_writes_and_only_on_its_own_device(history: SqlHistory) -> None:
    """Runs stored one write after another: each follows the last counted one of its flow on
    its device, whatever else was stored between."""
    history.write([ended("a", status=RunStatus.DONE, at=T0)])
    history.write([ended("x", device="d2", status=RunStatus.BLOCKED, at=T0 + 1)])
    history.write([ended("c", status=RunStatus.CANCELLED, at=T0 + 2)])
    history.write([ended("b", status=RunStatus.BLOCKED, at=T0 + 3)])
    rows = history.db.query("SELECT run_id, follows, flipped FROM runs")
    got = {r[0]: (r[1], r[2]) for r in rows}
    assert got == {"a": (0, 0), "x": (0, 0), "c": (0, 0), "b": (1, 1)}


def _discrete(values: list[float], p: float) -> float:
    ordered = sorted(values)
    for i, v in enumerate(ordered, 1):
        if i * 100 >= p * 100 * len(ordered):
            return v
    raise AssertionError


def _near(got: float, exact: float) -> bool:
    """The histogram's answer: the upper bound of the exact value's bucket."""
    return exact <= got <= exact * RATIO or (exact <= FLOOR_MS and got == FLOOR_MS)


def test_step_percentiles_per_flow_phase_and_day(history: SqlHistory) -> None:
    """p50 / p95 per flow, phase and day: never below the exact discrete percentile of the
    steps' times, and at most one bucket (9 %) above it."""
    rng = random.Random(7)
    snaps: list[float] = []
    runs = []
    for i in range(40):
        rows = tuple(
            step(j, snap=rng.choice([5.0, 10.0, 20.0, 90.0]), decide=1.0 * i, action=3.0)
            for j in range(1, 4)
        )
        snaps += [r.snapshot_ms for r in rows]
        runs.append(ended(f"r{i}", steps=rows, at=T0 + i))
    runs.append(ended("other", goal="Pay", steps=(step(1, snap=1, decide=1, action=1),)))
    history.write(runs)
    got = {(t.flow, t.phase): t for t in history.step_times(T0 - DAY, T0 + DAY, bucket_s=DAY)}
    snap = got["Sign in", "snapshot"]
    assert snap.steps == 120
    assert _near(snap.p50_ms, _discrete(snaps, 0.5)), snap
    assert _near(snap.p95_ms, _discrete(snaps, 0.95)), snap
    decides = [1.0 * i for i in range(40) for _ in range(3)]
    assert _near(got["Sign in", "decide"].p95_ms, _discrete(decides, 0.95))
    assert _near(got["Pay", "action"].p50_ms, 1.0)
    assert snap.bucket == (T0 // DAY) * DAY


def test_the_step_counts_follow_rewrites_and_replaced_attempts(history: SqlHistory) -> None:
    """A run stored again counts its steps once; a later attempt replaces its counts; the
    prune takes whole days of them away."""
    slow = tuple(step(i, snap=1000.0, decide=1, action=1) for i in (1, 2))
    history.write([ended("r1", steps=slow)])
    history.write([ended("r1", steps=slow)])

    def snapshot() -> tuple[int, float]:
        [t] = [t for t in history.step_times(T0 - DAY, T0 + DAY, bucket_s=DAY)
               if t.phase == "snapshot"]  # fmt: skip
        return t.steps, t.p50_ms

    steps, p50 = snapshot()
    assert steps == 2
    assert _near(p50, 1000.0)
    fast = (step(1, snap=10.0, decide=1, action=1),)
    history.write([ended("r1", steps=fast, attempt=2)])
    steps, p50 = snapshot()
    assert steps == 1
    assert _near(p50, 10.0)
    assert history.prune(T0 + DAY) == 1
    assert history.step_times(T0 - DAY, T0 + DAY, bucket_s=DAY) == []
    assert count(history, "step_hist") == 0


def test_a_bucket_of_part_of_a_day_is_refused(history: SqlHistory) -> None:
    with pytest.raises(ConfigError, match="whole number of days"):
        history.step_times(T0, T0 + DAY, bucket_s=6 * 3600)


@pytest.mark.parametrize("ms", [0.0, 0.1, 0.11, 1.0, 3.7, 250.0, 59_999.0, 1e7])
def test_each_time_falls_in_the_bucket_whose_bounds_hold_it(ms: float) -> None:
    k = bucket(ms)
    assert ms <= upper_ms(k)
    assert k == 0 or upper_ms(k - 1) < ms


def test_a_device_that_fails_more_than_its_class_stands_out(history: SqlHistory) -> None:
    """Four devices of one class pass 9 runs in 10; a fifth fails 12 of 20. Only the fifth
    is named, with its class's rate without it."""
    runs = []
    for d in ("d1", "d2", "d3", "d4"):
        runs += [
            ended(f"{d}-{i}", device=d, status=RunStatus.BLOCKED if i == 0 else RunStatus.DONE)
            for i in range(10)
        ]
    runs += [
        ended(f"bad-{i}", device="bad", status=RunStatus.ERRORED if i < 12 else RunStatus.DONE)
        for i in range(20)
    ]
    history.write(runs)
    [out] = history.outliers(T0 - 1, T0 + 1)
    assert (out.device, out.runs, out.failed) == ("bad", 20, 12)
    assert out.class_rate == pytest.approx(0.1)
    assert out.z > 3


def test_prune_deletes_what_ended_before(history: SqlHistory) -> None:
    one = (step(1, snap=1, decide=1, action=1),)
    history.write([ended("old", at=T0 - DAY, steps=one), ended("new", at=T0, steps=one)])
    assert history.prune(T0 - 1) == 1
    assert history.db.query("SELECT run_id FROM steps") == [("new",)]


def test_an_unreachable_database_is_one_typed_error_without_the_password() -> None:
    """Nothing listens: `HistoryUnavailableError`, and the password is not in it."""
    url = f"postgresql://gf:pw-s3cret@127.0.0.1:{pgkit.free_port()}/h"
    with pytest.raises(HistoryUnavailableError) as caught:
        Database(url, connect_timeout_s=1).query("SELECT 1")
    assert "pw-s3cret" not in str(caught.value)
    assert ":***@" in str(caught.value)
