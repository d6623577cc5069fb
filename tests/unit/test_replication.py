"""Acknowledged means replicated, against a real redis-server that has no replica: a store
that waits for one refuses to acknowledge any script's write (an outage, nothing the caller
may count on), a heartbeat whose renew reached no replica leaves the fence where it was (the
worker stands down before a promoted replica's copy of the lease can lapse), and a script
unknown to the server (a new master) is loaded and run once. With a replica:
tests/failover/test_replica_acks.py."""

from __future__ import annotations

import time

import pytest

from scheduler.local.redis import LocalRedis
from workers.core.model import Platform
from workers.core.records import DeviceInfo
from workers.fleet.connections import Replication, store_client
from workers.fleet.keys import Keys
from workers.fleet.outages import is_outage
from workers.fleet.presence import Presence
from workers.fleet.runtime import WorkerSpec
from workers.fleet.state.devices import DeviceRegistry, Renewal
from workers.fleet.state.scripts import Acknowledged, NotReplicatedError, Registered
from workers.settings import Settings

INFO = DeviceInfo(id="d1", platform=Platform.IOS, os_version="17.5")
SPEC = WorkerSpec(info=INFO, device_spec="sim:signin-ios")


def _settings(url: str, **over: object) -> Settings:
    base = {"redis_url": url, "key_prefix": "t", "lease_s": 30, "redis_wait_timeout_ms": 50}
    return Settings.model_validate({**base, **over})


def test_the_wait_follows_the_settings(redis_server: LocalRedis) -> None:
    plain = store_client(_settings(redis_server.url))
    asked = store_client(_settings(redis_server.url, redis_wait_replicas=2))
    behind = _settings(redis_server.url, redis_sentinels="127.0.0.1:26379")
    assert plain.replication == Replication(0, 50)
    assert asked.replication == Replication(2, 50)
    assert behind.wait_replicas() == 1  # sentinels: one replica unless told otherwise


def test_a_write_no_replica_took_is_not_acknowledged(redis_server: LocalRedis) -> None:
    client = store_client(_settings(redis_server.url, redis_wait_replicas=1))
    client.flushdb()
    registry = DeviceRegistry(client, Keys("t"))
    t0 = time.perf_counter()
    with pytest.raises(NotReplicatedError) as caught:
        registry.register(INFO, "holder-1", lease_s=30)
    assert time.perf_counter() - t0 >= 0.05  # it waited its timeout
    assert "reached 0 of 1 replica(s) within 50 ms" in str(caught.value)
    assert is_outage(caught.value)  # every edge waits it out or answers 503
    # the master has the write: it is the acknowledgement that is missing, not the data
    assert client.get(Keys("t").lease("d1")) == "holder-1"


def test_a_renew_no_replica_took_leaves_the_fence_where_it_was(
    redis_server: LocalRedis,
) -> None:
    settings = _settings(redis_server.url)
    plain = store_client(settings)
    plain.flushdb()
    presence = Presence(DeviceRegistry(plain, Keys("t")), SPEC, settings)
    presence.register()
    assert presence.beat_once() is Renewal.RENEWED
    left = presence.fence.remaining_s()
    waiting = store_client(_settings(redis_server.url, redis_wait_replicas=1))
    presence.registry = DeviceRegistry(waiting, Keys("t"))
    time.sleep(0.2)
    assert presence.beat_once() is None  # an outage: the renew was not acknowledged
    assert presence.fence.remaining_s() < left - 0.15  # the deadline did not move
    assert not presence.standing_down  # not yet: only once the fence runs out


def test_a_script_the_server_forgot_is_loaded_and_run_once(redis_server: LocalRedis) -> None:
    """After a promotion the new master knows none of the fleet's scripts (a replica caches
    none): the acknowledged call loads it and runs it, once."""
    client = store_client(_settings(redis_server.url))
    client.flushdb()
    script = Registered("return redis.call('INCR', KEYS[1])", client)
    call = Acknowledged(script, client, Replication(replicas=0, timeout_ms=50))
    assert call(keys=["n"]) == 1
    client.script_flush()
    assert call(keys=["n"]) == 2  # NOSCRIPT, loaded, run: counted once
    assert client.get("n") == "2"


def test_a_plain_script_the_server_forgot_is_loaded_and_run_once(
    redis_server: LocalRedis,
) -> None:
    """Without replicas a store's script is a plain `EVALSHA`: after a restart (the server
    forgot every script) the call loads it and runs it, once."""
    client = store_client(_settings(redis_server.url))
    client.flushdb()
    call = Registered("return redis.call('INCR', KEYS[1])", client)
    assert call(keys=["n"]) == 1
    client.script_flush()
    assert call(keys=["n"]) == 2  # NOSCRIPT, loaded, run: counted once
    assert client.get("n") == "2"


@pytest.mark.parametrize("bad", ["sentinel-1", "h:0", "h:port", ":26379", "h:70000"])
def test_a_sentinel_address_that_is_not_host_port_is_refused_by_name(bad: str) -> None:
    with pytest.raises(ValueError, match="redis_sentinels") as caught:
        Settings(redis_sentinels=f"10.0.0.5:26379,{bad}")
    assert "is not host:port; give e.g. 10.0.0.5:26379,10.0.0.6:26379" in str(caught.value)
