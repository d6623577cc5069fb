"""What one run's submit costs Redis: one round trip (backlog check, idempotency key, write,
and the reservation of the device the cached view picked with its message, in one script).

Counted with MONITOR, which shows each command a client sent apart from those a script ran
(`client_type` "lua"): the commands on the wire are the round trips."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

import pytest
import redis
from test_fleet_store import parts, register  # noqa: F401 - pytest fixtures

from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.errors import TooManyPendingError
from scheduler.service.fleet import Fleet
from scheduler.service.requests import RunSubmit
from scheduler.store.enqueue import CeleryEnqueuer, RecordingEnqueuer
from scheduler.store.runs import FleetStore
from workers.core.model import RunStatus
from workers.core.records import RunRecord
from workers.fleet.celery_app import make_celery
from workers.fleet.keys import RUN_TASK, Keys
from workers.settings import Settings


def wire(client: redis.Redis, action: Callable[[], object]) -> list[str]:
    """The commands clients sent while `action` ran (not those its scripts ran), in order."""
    seen: list[tuple[str, str]] = []  # (command line, client type)
    ready = threading.Event()
    done = threading.Event()

    def watch() -> None:
        with client.monitor() as m:
            ready.set()
            for cmd in m.listen():
                seen.append((cmd["command"], cmd.get("client_type", "")))
                if "mark-end" in cmd["command"]:
                    done.set()
                    return

    threading.Thread(target=watch, daemon=True).start()
    assert ready.wait(5)
    for i in range(400):  # MONITOR may start a moment after its reply: probe until one shows
        client.echo(f"mark-probe-{i}")
        time.sleep(0.005)
        if any("mark-probe" in line for line, _ in seen):
            break
    client.echo("mark-start")
    while not any("mark-start" in line for line, _ in seen):
        time.sleep(0.001)
    first = len(seen)
    action()
    client.echo("mark-end")
    assert done.wait(5)
    return [line.split(" ", 1)[0].strip('"').upper() for line, kind in seen[first:-1]
            if kind != "lua"]  # fmt: skip


def cached(parts, client):
    """`parts`, with the Fleet built as the API builds it (a cached device view, 10 s), warm:
    one run submitted to a device of its own first (a script's first call on a server loads
    it), and that device's run forgotten by the recording enqueuer."""
    store, rs, enq, _ = parts
    fleet = Fleet(store, Dispatcher(store, enq, view_max_age_s=10), max_pending=100)
    register(store, "warm")
    fleet.submit_run(RunSubmit(goal="g", device="warm"))
    client.delete(enq.key)
    return store, rs, enq, fleet


def submit_to_new_device(
    client: redis.Redis, store: FleetStore, fleet: Fleet, device: str
) -> tuple[list[str], RunRecord]:
    """Register `device`, let the view see it, submit one run for it: the commands on the
    wire and the run."""
    register(store, device)
    fleet.dispatcher.view.reload()
    placed: list[tuple[RunRecord, bool]] = []
    sent = wire(client, lambda: placed.append(fleet.submit_run(RunSubmit(goal="g", device=device))))
    run, created = placed[0]
    assert created
    return sent, run


def test_a_submit_to_an_idle_device_is_the_script_then_the_send(parts, client):
    """A submit onto an idle device: one script writes and reserves, then one send carries
    its message (here the fake's LPUSH; Celery's `send_task` is one LPUSH too: test_enqueue)."""
    store, _, enq, fleet = cached(parts, client)
    sent, run = submit_to_new_device(client, store, fleet, "d1")
    assert sent == ["EVALSHA", "LPUSH"], sent
    assert run.device == "d1"
    assert enq.sent == [(run.id, "d1")]
    stored = store.load(run.id)
    assert stored is not None
    assert stored.device == "d1"
    assert stored.dispatched_at == run.dispatched_at
    assert store.pending_ids() == []
    assert client.zscore(Keys("t").reserved, run.id) is not None


def test_a_submit_to_a_busy_fleet_is_one_round_trip_and_wakes_the_scheduler(parts, client):
    """The view thinks the device busy: the script still tries it (the view learns of
    finishes only at its re-read), finds it busy, leaves the run pending and wakes the
    scheduler, all in the one round trip."""
    store, _, enq, fleet = cached(parts, client)
    register(store, "d1")
    first, _ = fleet.submit_run(RunSubmit(goal="g", device="d1"))
    wakes = client.llen(Keys("t").wake)
    out: list[object] = []
    sent = wire(client, lambda: out.append(fleet.submit_run(RunSubmit(goal="g", device="d1"))))
    assert sent == ["EVALSHA"], sent
    run, _ = out[0]  # type: ignore[misc]
    assert run.device is None
    assert store.pending_ids() == [run.id]
    assert client.llen(Keys("t").wake) == wakes + 1
    assert enq.sent == [(first.id, "d1")]


def test_a_selector_run_with_no_idle_device_writes_and_wakes_in_one_round_trip(parts, client):
    store, _, _, fleet = cached(parts, client)
    register(store, "d1")
    fleet.submit_run(RunSubmit(goal="g", device="d1"))
    fleet.dispatcher.view.reload()
    sent = wire(client, lambda: fleet.submit_run(RunSubmit(goal="g", selector={"platform": "ios"})))
    assert sent == ["EVALSHA"], sent
    assert len(store.pending_ids()) == 1


def test_a_full_backlog_refuses_the_run_and_writes_nothing(client):
    keys = Keys("t")
    store = FleetStore(client, keys, retention_s=3600)
    fleet = Fleet(store, Dispatcher(store, RecordingEnqueuer(client, keys)), max_pending=2)
    register(store, "d1")
    for _ in range(3):
        fleet.submit_run(RunSubmit(goal="g", device="d1"))  # one reserved, two pending
    before = sorted(client.keys("*"))
    wakes = client.llen(keys.wake)
    with pytest.raises(TooManyPendingError):
        fleet.submit_run(RunSubmit(goal="g", device="d1"))
    assert sorted(client.keys("*")) == before
    assert client.llen(keys.wake) == wakes
    assert len(store.pending_ids()) == 2


def test_a_replay_is_answered_even_when_the_backlog_is_full(client):
    """The first request was accepted: its retry gets the run it created, not a 429, though
    the backlog filled meanwhile (the key is read before the backlog is counted)."""
    keys = Keys("t")
    store = FleetStore(client, keys, retention_s=3600)
    fleet = Fleet(store, Dispatcher(store, RecordingEnqueuer(client, keys)), max_pending=1)
    register(store, "d1")
    fleet.submit_run(RunSubmit(goal="g", device="d1"))  # reserved
    first, created = fleet.submit_run(RunSubmit(goal="g", device="d1"), idempotency_key="k1")
    assert created
    assert first.status is RunStatus.QUEUED
    with pytest.raises(TooManyPendingError):
        fleet.submit_run(RunSubmit(goal="g", device="d1"))
    again, created = fleet.submit_run(RunSubmit(goal="g", device="d1"), idempotency_key="k1")
    assert not created
    assert again.id == first.id


def test_the_send_follows_the_submit_script(redis_server, client):
    """With Celery's enqueuer the reserved run's message is Celery's own send after the
    submit script: two round trips (the script, one LPUSH), and the device's queue holds the
    run's message; a run left pending sends none."""
    app = make_celery(Settings(redis_url=redis_server.url, key_prefix="t"))
    keys = Keys("t")
    store = FleetStore(client, keys, retention_s=3600)
    fleet = Fleet(store, Dispatcher(store, CeleryEnqueuer(app), view_max_age_s=10), max_pending=9)
    try:
        register(store, "warm")
        fleet.submit_run(RunSubmit(goal="g", device="warm"))  # loads the script
        sent, run = submit_to_new_device(client, store, fleet, "d1")
        # the script, then Celery's send: one LPUSH (kombu checks a queue it has not sent to
        # yet with a few reads first)
        assert (sent[0], sent.count("EVALSHA"), sent.count("LPUSH")) == ("EVALSHA", 1, 1), sent
        assert sent[-1] == "LPUSH", sent
        assert run.device == "d1"
        queued = [json.loads(m) for m in client.lrange(keys.queue("d1"), 0, -1)]
        assert [m["headers"]["id"] for m in queued] == [run.id]
        assert [m["headers"]["task"] for m in queued] == [RUN_TASK]
        second, _ = fleet.submit_run(RunSubmit(goal="g", device="d1"))  # d1 is busy now
        assert second.device is None
        assert client.llen(keys.queue("d1")) == 1
        assert store.pending_ids() == [second.id]
    finally:
        app.close()


def test_a_dispatch_pass_sends_after_the_reserve_script(redis_server, client):
    """The scheduler's pass (and a batch's placement) reserves an idle device for a pending
    run in one script, then sends the run's message (Celery's one LPUSH); the device's queue
    holds the message, once."""
    app = make_celery(Settings(redis_url=redis_server.url, key_prefix="t"))
    keys = Keys("t")
    store = FleetStore(client, keys, retention_s=3600)
    fleet = Fleet(store, Dispatcher(store, CeleryEnqueuer(app)), max_pending=9)
    try:
        register(store, "d1")
        busy, _ = fleet.submit_run(RunSubmit(goal="g", device="d1"))
        waiting, _ = fleet.submit_run(RunSubmit(goal="g", device="d1"))
        client.hset(keys.device("d1"), "run", "")  # d1 is free again (its run ended)
        client.delete(keys.queue("d1"))
        fleet.dispatcher.view.reload()
        store.reserve("no-such-run", "d1")  # loads the script
        sent = wire(client, fleet.dispatcher.dispatch)
        assert sent.count("EVALSHA") == 1, " ".join(sent)  # the reserve
        assert sent.count("LPUSH") == 1, sent  # then its message, Celery's own send
        queued = [json.loads(m) for m in client.lrange(keys.queue("d1"), 0, -1)]
        assert [m["headers"]["id"] for m in queued] == [waiting.id]
        assert store.load(waiting.id).device == "d1"
        assert store.pending_ids() == []
        assert busy.id != waiting.id
    finally:
        app.close()
