"""Two real `goalfleet scheduler` processes share placement (`scheduler.dispatch.shares`); one is
killed (SIGKILL, mid-placement). The survivor places everything that comes, the dead one's
share included once its membership lapses, and sends what the dead one reserved but never sent
(its orphan sweep); no run goes to two devices and no device is given two runs: read from what
was really sent, the messages on the devices' Celery queues. (With no worker here to claim
them, the orphan sweep sends an unclaimed reservation again and again, to the same device: a
duplicate the claim skips, the delivery protocol's at-least-once.)"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from signal import SIGKILL

from scheduler.local.redis import LocalRedis
from scheduler.service.fleet import new_id
from scheduler.store.runs import FleetStore
from workers.core.model import Platform
from workers.core.records import DeviceInfo, RunRecord, Selector
from workers.core.request import GoalRunRequest
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys, lease_holder, worker_name
from workers.processes import spawn, stop_all

DEVICES_A_WAVE = 30


def add(store: FleetStore, first: int, n: int) -> None:
    """Devices d<first>..d<first+n-1> registered idle (their leases held as a worker holds
    them), and n pending selector runs; the schedulers woken."""
    for i in range(first, first + n):
        info = DeviceInfo(id=f"d{i}", platform=Platform.IOS, os_version="17.5")
        store.registry.register(info, lease_holder(worker_name(f"d{i}")), lease_s=600)
    request = GoalRunRequest(goal="Sign in")
    store.create(
        [
            RunRecord(id=new_id(), request=request, selector=Selector(), submitted_at=time.time())
            for _ in range(n)
        ]
    )
    store.wake()


def _sent(client, prefix: str) -> list[tuple[str, str]]:
    """(run id, device id) of every message on the devices' queues: a run task's id is its
    run id, and its queue names its device (`workers.fleet.keys.device_queue`)."""
    out = []
    for key in client.scan_iter(f"{prefix}device.*"):
        device = key.removeprefix(f"{prefix}device.")
        for raw in client.lrange(key, 0, -1):
            message = json.loads(raw)
            (run_id,), _, _ = json.loads(base64.b64decode(message["body"]))
            assert message["headers"]["id"] == run_id
            out.append((run_id, device))
    return out


def _placed(store: FleetStore, deadline_s: float) -> bool:
    deadline = time.monotonic() + deadline_s
    while store.pending_count() and time.monotonic() < deadline:
        time.sleep(0.05)
    return store.pending_count() == 0


def test_a_killed_scheduler_s_share_goes_to_the_survivor(tmp_path: Path) -> None:
    prefix = "kill"
    with LocalRedis() as server:
        client = redis_client(server.url)
        keys = Keys(prefix)
        store = FleetStore(client, keys, retention_s=600)
        env = {
            **os.environ,
            "GOALFLEET_REDIS_URL": server.url,
            "GOALFLEET_KEY_PREFIX": prefix,
            "GOALFLEET_DISPATCH_INTERVAL_S": "0.05",
            "GOALFLEET_ORPHAN_AFTER_S": "2",  # a reservation the dead one never sent: resent
        }
        argv = [sys.executable, "-m", "scheduler", "scheduler", "--loglevel", "WARNING"]
        schedulers = [spawn(argv, env=env, log=tmp_path / f"scheduler-{i}.log") for i in range(2)]
        try:
            add(store, 0, DEVICES_A_WAVE)  # a scheduler joins the shares at its first pass
            assert _placed(store, 60)  # with idle devices
            deadline = time.monotonic() + 30
            while client.zcard(keys.schedulers) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert client.zcard(keys.schedulers) == 2  # both are members: each has a share
            killed, survivor = schedulers
            add(store, DEVICES_A_WAVE, DEVICES_A_WAVE)
            killed.signal(SIGKILL)  # mid-placement, or just after it: either way it is gone
            killed.wait(timeout=10)
            add(store, 2 * DEVICES_A_WAVE, DEVICES_A_WAVE)  # devices of both shares among them
            assert _placed(store, 30), "the survivor left runs pending"
            deadline = time.monotonic() + 30
            while len(set(_sent(client, keys.celery))) < 3 * DEVICES_A_WAVE:
                assert time.monotonic() < deadline, "reserved runs left without a message"
                time.sleep(0.1)
            assert client.zcard(keys.schedulers) == 1  # the dead membership lapsed
            assert survivor.alive()
        finally:
            stop_all(schedulers)
        sent = set(_sent(client, keys.celery))
    assert len(sent) == 3 * DEVICES_A_WAVE  # every run reached a device
    assert max(Counter(run for run, _ in sent).values()) == 1  # no run went to two devices
    assert max(Counter(device for _, device in sent).values()) == 1  # no device got two runs
    assert {device for _, device in sent} == {f"d{i}" for i in range(3 * DEVICES_A_WAVE)}
