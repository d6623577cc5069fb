"""Acknowledged means replicated, against a real master with real replicas (`SentinelLab`): a
write the store acknowledged is on a replica when the call returns, and one no replica took
(the replicas stopped) is not acknowledged; with the replicas gone
the heartbeat's renews are still written to the master but no longer acknowledged, so the
worker's fence runs out, and the worker stands down, while the master still holds its lease:
a replacement, which must wait for that lease to lapse (on the master or on a replica promoted
in its place), can never act while this worker does."""

from __future__ import annotations

import time

import pytest

from testing.sentinels import SentinelLab
from workers.core.model import Platform
from workers.core.records import DeviceInfo
from workers.fleet.connections import store_client
from workers.fleet.keys import Keys
from workers.fleet.presence import Presence
from workers.fleet.runtime import WorkerSpec
from workers.fleet.state.devices import DeviceRegistry, Renewal
from workers.fleet.state.scripts import NotReplicatedError
from workers.settings import Settings

INFO = DeviceInfo(id="d1", platform=Platform.IOS, os_version="17.5")
SPEC = WorkerSpec(info=INFO, device_spec="sim:signin-ios")
KEYS = Keys("fr")


def _settings(lab: SentinelLab, **over: object) -> Settings:
    base = {
        "redis_sentinels": lab.sentinel_addresses,
        "redis_sentinel_master": lab.name,
        "key_prefix": "fr",
        "heartbeat_interval_s": 0.5,
        "lease_s": 3.0,
        "redis_wait_timeout_ms": 200,
    }
    return Settings.model_validate({**base, **over})


def test_a_write_is_acknowledged_once_a_replica_has_it(lab: SentinelLab) -> None:
    client = store_client(_settings(lab))
    registry = DeviceRegistry(client, KEYS)
    replicas = [n.client() for n in lab.data[1:]]
    for i in range(20):
        registry.register(INFO.model_copy(update={"id": f"d{i}"}), f"h{i}", lease_s=30)
        # read at once, no waiting: a replica already has it
        assert any(r.get(KEYS.lease(f"d{i}")) == f"h{i}" for r in replicas), i
    for node in lab.data[1:]:
        assert node.child is not None
        node.child.pause()  # SIGSTOP: connected, taking nothing
    try:
        with pytest.raises(NotReplicatedError):
            registry.register(INFO.model_copy(update={"id": "late"}), "h", lease_s=30)
    finally:
        for node in lab.data[1:]:
            assert node.child is not None
            node.child.resume()
    registry.register(INFO.model_copy(update={"id": "later"}), "h", lease_s=30)
    assert any(r.get(KEYS.lease("later")) == "h" for r in replicas)


def test_a_worker_whose_renews_no_replica_takes_stands_down_while_it_still_holds_the_lease(
    lab: SentinelLab,
) -> None:
    settings = _settings(lab)
    presence = Presence(DeviceRegistry(store_client(settings), KEYS), SPEC, settings)
    presence.register()
    assert presence.beat_once() is Renewal.RENEWED
    master = lab.master().client()
    for replica in lab.data[1:]:
        lab.kill(replica)  # the master lives on: no failover, just no replica to take writes
    deadline = time.monotonic() + 10
    while not presence.standing_down and time.monotonic() < deadline:
        presence.beat_once()
        time.sleep(settings.heartbeat_interval_s)
    assert presence.standing_down, "the fence did not run out"
    # it stood down with its lease still held on the master, renewed by the beats nobody
    # acknowledged: no replacement could have registered yet
    assert master.get(KEYS.lease("d1")) == presence.holder
    assert master.pttl(KEYS.lease("d1")) > 0
