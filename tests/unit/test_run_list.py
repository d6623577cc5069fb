"""The run list (`scheduler.store.listing`) against a real redis-server: newest first, each
filter, cursor paging with no run twice or missed (runs of one batch share a submit time),
expired runs forgotten, and a sparse filter paging on by cursor."""

from __future__ import annotations

import pytest
import redis
from storekit import finish, register

from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.service.fleet import Fleet
from scheduler.service.requests import BatchSubmit, RunSubmit
from scheduler.store.enqueue import RecordingEnqueuer
from scheduler.store.listing import MAX_SCAN, RunQuery
from scheduler.store.runs import FleetStore
from workers.core.model import RunStatus
from workers.fleet.keys import Keys
from workers.fleet.state.runs import RunStore


@pytest.fixture
def parts(client: redis.Redis):
    keys = Keys("t")
    store = FleetStore(client, keys, retention_s=3600)
    fleet = Fleet(store, Dispatcher(store, RecordingEnqueuer(client, keys)), max_pending=100_000)
    return store, RunStore(client, keys), fleet


def every(store: FleetStore, **filters) -> list[str]:
    """All pages of a query, two runs a page, as run ids."""
    ids: list[str] = []
    cursor = None
    for _ in range(1000):
        page = store.listing.page(RunQuery(limit=2, cursor=cursor, **filters))
        ids += [r.id for r in page.runs]
        cursor = page.next
        if cursor is None:
            return ids
    raise AssertionError("the pages never ended")


def test_newest_first_filters_and_pages(parts):
    store, rs, fleet = parts
    register(store, "d1")
    first, _ = fleet.submit_run(RunSubmit(goal="Sign in", device="d1"))
    batch, _ = fleet.submit_batch(BatchSubmit(goal="Log in", count=5))
    last, _ = fleet.submit_run(RunSubmit(goal="Sign in with email"))
    finish(store, rs, first.id, "d1")  # done

    listed = every(store)
    assert len(listed) == len(set(listed)) == 7  # none twice, none missed across the pages
    assert listed[0] == last.id
    assert listed[-1] == first.id
    assert set(listed[1:6]) == set(batch.runs)
    assert every(store, status=RunStatus.DONE) == [first.id]
    assert set(every(store, status=RunStatus.QUEUED)) == {*batch.runs, last.id}
    assert set(every(store, batch=batch.id)) == set(batch.runs)
    assert every(store, goal="WITH EMAIL") == [last.id]
    assert every(store, device="d1") == [first.id]
    assert every(store, since=last.submitted_at) == [last.id]
    assert every(store, until=last.submitted_at) == listed[1:]


def test_expired_runs_are_forgotten_by_the_list(parts, client):
    store, _, fleet = parts
    register(store, "d1")
    runs = [fleet.submit_run(RunSubmit(goal="Sign in"))[0] for _ in range(3)]
    client.delete(store.k.run(runs[1].id))  # past its retention
    assert every(store) == [runs[2].id, runs[0].id]
    assert client.zscore(store.k.runs, runs[1].id) is None


def test_a_sparse_filter_pages_on_by_cursor(parts, client):
    """A filter that matches one run far down the list: a page reads at most MAX_SCAN
    entries, returns what it found and a cursor that goes on from there."""
    store, rs, fleet = parts
    register(store, "d1", pool="a")
    register(store, "d2", pool="b")
    wanted, _ = fleet.submit_run(RunSubmit(goal="Sign in", device="d1"))
    finish(store, rs, wanted.id, "d1")
    others = BatchSubmit.model_validate(
        {"goal": "Sign in", "count": 1000, "selector": {"labels": {"pool": "b"}}}
    )
    for _ in range(MAX_SCAN // 1000 + 1):  # more runs than a page reads, all newer
        fleet.submit_batch(others)
    page = store.listing.page(RunQuery(device="d1"))
    pages = 1
    while not page.runs:
        assert page.next is not None  # nothing yet, and more to read
        page = store.listing.page(RunQuery(device="d1", cursor=page.next))
        pages += 1
    assert [r.id for r in page.runs] == [wanted.id]
    assert pages == (MAX_SCAN // 1000 + 1) * 1000 // MAX_SCAN + 1  # each read MAX_SCAN entries
