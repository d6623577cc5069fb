"""Fencing by lease against a real redis-server: the heartbeat tells a renewed lease from one
that vanished with Redis's data (registered again) and from one another worker took (stand
down); an outage is waited out without deregistering; the fence is shared with a forked
child; and once another holder has the lease, the claim, every step write and the finish are
refused in their scripts and the run in flight goes back to pending before its next device
action."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Iterator

import pytest
import redis
from structlog.testing import capture_logs

from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.local.redis import LocalRedis
from scheduler.service.fleet import Fleet
from scheduler.service.requests import RunSubmit
from scheduler.store.enqueue import RecordingEnqueuer
from scheduler.store.runs import FleetStore
from workers.core.device_hooks import DeviceHook, with_hooks
from workers.core.model import ActionResult, InputValue, Outcome, Platform, Snapshot, StepRow
from workers.core.ports import Device
from workers.core.records import DeviceInfo
from workers.core.request import SecretRef
from workers.core.secrets import DictSecrets
from workers.decide.factory import make_decider
from workers.devices.sim.device import make_sim_device
from workers.fleet.connections import redis_client
from workers.fleet.fence import Fence, LeaseLostError, open_fenced
from workers.fleet.keys import Keys, lease_holder, worker_name
from workers.fleet.presence import Presence
from workers.fleet.runtime import WorkerRuntime, WorkerSpec
from workers.fleet.state.devices import DeviceRegistry, Renewal
from workers.fleet.state.runs import ClaimKind, RunStore
from workers.fleet.state.states import Failure
from workers.fleet.tasks import execute_run
from workers.settings import Settings

INFO = DeviceInfo(id="d1", platform=Platform.IOS, os_version="17.5", labels={"pool": "a"})
SPEC = WorkerSpec(info=INFO, device_spec="sim:signin-ios")


def _settings(**over: object) -> Settings:
    base: dict[str, object] = {"redis_url": "redis://unused", "key_prefix": "t", "lease_s": 30}
    return Settings.model_validate({**base, **over})


@pytest.fixture
def parts(client: redis.Redis):
    keys = Keys("t")
    store = FleetStore(client, keys, retention_s=3600)
    fleet = Fleet(store, Dispatcher(store, RecordingEnqueuer(client, keys)), max_pending=100)
    return store, RunStore(client, keys), fleet


def _row(i: int) -> StepRow:
    return StepRow(index=i, screen="s", refs_generation="g", candidates=1, outcome=Outcome.ACTED)


def _take_over(client: redis.Redis, registry: DeviceRegistry) -> str:
    """What a replacement does once the first worker's lease lapsed: it registers."""
    client.delete(Keys("t").lease("d1"))
    other = lease_holder(worker_name("d1"))
    registry.register(INFO, other, lease_s=30)
    return other


# -- renew, tri-state -------------------------------------------------------------------------


def test_renew_tells_renewed_vanished_and_taken(client: redis.Redis) -> None:
    """RENEWED for the holder (also after its own lease lapsed with nobody else registered),
    TAKEN for anyone else and for a lapsed holder once another registered, VANISHED when the
    lease and the registration are gone with nobody else holding the device."""
    reg = DeviceRegistry(client, Keys("t"))
    me, other = lease_holder("w@d1"), lease_holder("w@d1")
    reg.register(INFO, me, lease_s=30)
    assert reg.renew("d1", me, lease_s=30) is Renewal.RENEWED
    assert reg.renew("d1", other, lease_s=30) is Renewal.TAKEN
    client.delete(Keys("t").lease("d1"))  # lapsed: nobody registered since
    assert reg.renew("d1", me, lease_s=30) is Renewal.RENEWED
    assert client.get(Keys("t").lease("d1")) == me
    client.flushdb()  # Redis lost its data
    assert reg.renew("d1", me, lease_s=30) is Renewal.VANISHED
    assert not client.exists(Keys("t").lease("d1"))  # renew never registers by itself
    reg.register(INFO, other, lease_s=30)
    assert reg.renew("d1", me, lease_s=30) is Renewal.TAKEN
    client.delete(Keys("t").lease("d1"))  # the other's lease lapsed: still not mine to take
    assert reg.renew("d1", me, lease_s=30) is Renewal.TAKEN
    assert reg.renew("d1", other, lease_s=30) is Renewal.RENEWED


def test_renew_keeps_the_lease_of_a_full_redis(client: redis.Redis) -> None:
    """A live lease is extended even when Redis refuses writes that need memory (maxmemory
    reached under noeviction): a full Redis does not fence the fleet."""
    reg = DeviceRegistry(client, Keys("t"))
    me = lease_holder("w@d1")
    reg.register(INFO, me, lease_s=2)
    client.set("filler", "x" * 200_000)
    used = int(client.info("memory")["used_memory"])
    client.config_set("maxmemory", str(used - 50_000))
    try:
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            client.set("more", "y")
        assert reg.renew("d1", me, lease_s=30) is Renewal.RENEWED
        assert client.pttl(Keys("t").lease("d1")) > 2_000
    finally:
        client.config_set("maxmemory", "0")


# -- presence ---------------------------------------------------------------------------------


def test_presence_registers_again_after_redis_lost_its_data(client: redis.Redis) -> None:
    """FLUSHDB under a live worker: its next beat registers the device again, capabilities
    and lease, and says so once; the beat after that is an ordinary renewal."""
    reg = DeviceRegistry(client, Keys("t"))
    presence = Presence(reg, SPEC, _settings())
    presence.register()
    client.flushdb()
    with capture_logs() as logs:
        assert presence.beat_once() is Renewal.VANISHED
        assert presence.beat_once() is Renewal.RENEWED
    assert [e["event"] for e in logs] == ["presence_repaired"]
    assert client.get(Keys("t").lease("d1")) == presence.holder
    (state,) = reg.devices()
    assert state.alive
    assert state.info == INFO
    assert not presence.standing_down
    assert not presence.fence.lost


def test_presence_stands_down_when_another_worker_holds_the_lease(client: redis.Redis) -> None:
    """Another holder: the beat closes the fence for good and calls `on_lost` once; it never
    touches the other's lease, and later beats do nothing."""
    reg = DeviceRegistry(client, Keys("t"))
    lost: list[str] = []
    presence = Presence(reg, SPEC, _settings(), on_lost=lost.append)
    presence.register()
    other = _take_over(client, reg)
    with capture_logs() as logs:
        assert presence.beat_once() is Renewal.TAKEN
        assert presence.beat_once() is None
    assert presence.standing_down
    assert presence.fence.taken
    assert lost == [presence.lost_reason]
    assert "another worker" in lost[0]
    assert [e["event"] for e in logs] == ["lease_lost_standing_down"]
    presence.stop()
    assert client.get(Keys("t").lease("d1")) == other
    assert reg.device_ids() == ["d1"]


@pytest.fixture
def own_redis(redis_binary: str) -> Iterator[LocalRedis]:
    """A Redis this test kills and starts again (AOF on: its data survives)."""
    server = LocalRedis(binary=redis_binary, appendonly=True, appendfsync="always")
    try:
        server.start(timeout_s=15)
        yield server
    finally:
        server.stop()


def test_an_outage_is_waited_out_without_deregistering(own_redis: LocalRedis) -> None:
    """Redis down for a few beats (shorter than the lease): each beat is an outage, logged
    once, with backoff; nothing deregisters, the worker does not stand down, and the first
    beat after Redis is back renews the same lease."""
    client = redis_client(own_redis.url, timeout_s=1)
    reg = DeviceRegistry(client, Keys("t"))
    presence = Presence(reg, SPEC, _settings(heartbeat_interval_s=0.5))
    presence.register()
    own_redis.kill()
    with capture_logs() as logs:
        assert presence.beat_once() is None
        assert presence.beat_once() is None
        assert presence.next_delay_s() > 0.5 * 0.8
        own_redis.start(timeout_s=15)
        assert presence.beat_once() is Renewal.RENEWED
    assert [e["event"] for e in logs] == ["heartbeat_outage", "heartbeat_recovered"]
    assert not presence.standing_down
    assert client.get(Keys("t").lease("d1")) == presence.holder
    assert reg.device_ids() == ["d1"]
    assert presence.next_delay_s() == 0.5
    client.close()


@pytest.mark.slow  # waits out a lease: make test, not make unit
def test_an_outage_longer_than_the_lease_stands_the_worker_down(own_redis: LocalRedis) -> None:
    """Redis unreachable for longer than the fence's validity: a replacement may hold the
    device by now, so the next beat stands the worker down (and never deregisters)."""
    client = redis_client(own_redis.url, timeout_s=1)
    reg = DeviceRegistry(client, Keys("t"))
    lost: list[str] = []
    presence = Presence(
        reg, SPEC, _settings(lease_s=1.0, heartbeat_interval_s=0.5), on_lost=lost.append
    )
    presence.register()
    own_redis.kill()
    assert presence.beat_once() is None
    assert not lost
    deadline = time.monotonic() + 10
    while not presence.fence.lost and time.monotonic() < deadline:
        time.sleep(0.05)
    assert presence.beat_once() is None
    assert len(lost) == 1
    assert "longer than its validity" in lost[0]
    own_redis.start(timeout_s=15)
    assert reg.device_ids() == ["d1"]  # never deregistered because of the outage
    client.close()


# -- the fence ----------------------------------------------------------------------------------


def _wait_lost(fence: Fence, q: multiprocessing.SimpleQueue[bool]) -> None:
    deadline = time.monotonic() + 10
    while not fence.lost and time.monotonic() < deadline:
        time.sleep(0.01)
    q.put(fence.taken)


def test_the_fence_is_shared_with_a_forked_child() -> None:
    """The pool child sees the heartbeat thread close the fence after the fork."""
    fence = Fence("d1", "h", lease_s=30)
    fence.granted(time.monotonic_ns())
    ctx = multiprocessing.get_context("fork")
    q: multiprocessing.SimpleQueue[bool] = ctx.SimpleQueue()
    child = ctx.Process(target=_wait_lost, args=(fence, q))
    child.start()
    time.sleep(0.2)
    fence.lose()
    child.join(timeout=15)
    assert q.get() is True


def test_the_fence_expires_before_the_lease() -> None:
    """Valid for the lease less the drift margin from when the renew was sent; a renew that
    comes back after that does not revive it."""
    now = [0]
    fence = Fence("d1", "h", lease_s=10, clock=lambda: now[0])
    fence.granted(0)
    now[0] = 8_999_000_000
    fence.check("press")
    now[0] = 9_000_000_001
    with pytest.raises(LeaseLostError, match="not renewed in time") as err:
        fence.check("press")
    assert err.value.taken is False
    assert not fence.renewed(8_000_000_000)
    assert fence.taken


def test_a_fenced_device_takes_its_devices_pictures_behind_the_fence() -> None:
    """The fleet fences every device (`FenceHook` on its chain): its pictures pass through (a
    sim draws one), checked by the fence like any command."""
    fence = Fence("d1", "h", lease_s=30)
    fence.granted(time.monotonic_ns())
    fenced = open_fenced(lambda _rid: make_sim_device("sim:signin-ios"), "r1", fence)
    fenced.snapshot()
    assert fenced.screenshot().png.startswith(b"\x89PNG")
    fence.lose()
    with pytest.raises(LeaseLostError):
        fenced.screenshot()


# -- fenced writes ------------------------------------------------------------------------------


def test_claim_step_and_finish_are_refused_to_a_worker_that_lost_the_lease(
    parts, client: redis.Redis
) -> None:
    """Another holder registered: the first worker's step write, finish and next claim raise
    `LeaseLostError` from their scripts and write nothing; handing the run back makes it
    pending again with its attempt counted once and nothing counted against the device."""
    store, rs, fleet = parts
    fence = Fence("d1", lease_holder("w@d1"), lease_s=30)
    store.registry.register(INFO, fence.holder, lease_s=30)
    run, _ = fleet.submit_run(RunSubmit(goal="Sign in", device="d1"))
    later, _ = fleet.submit_run(RunSubmit(goal="Sign in", device="d1"))
    claim = rs.claim(run.id, "d1", "w@d1", cap=3, fence=fence)
    assert claim.kind is ClaimKind.CLAIMED
    rs.write_step(run.id, claim.token, _row(1), fence=fence)
    _take_over(client, store.registry)
    with pytest.raises(LeaseLostError, match="another worker holds") as err:
        rs.write_step(run.id, claim.token, _row(2), fence=fence)
    assert err.value.taken
    assert [r.index for r in store.steps(run.id)] == [1]
    from workers.core.model import RunResult, RunStatus  # noqa: PLC0415

    done = RunResult(status=RunStatus.DONE, goal="Sign in")
    with pytest.raises(LeaseLostError):
        rs.finish(
            store.load(run.id), claim.token, done, failure=Failure.NONE, quarantine_after=3,
            retention_s=60, fence=fence,
        )  # fmt: skip
    assert store.load(run.id).status is RunStatus.RUNNING
    with pytest.raises(LeaseLostError):
        rs.claim(later.id, "d1", "w@d1", cap=3, fence=fence)
    assert rs.hand_back(store.load(run.id), "d1", claim.token)
    back = store.load(run.id)
    assert back.status is RunStatus.QUEUED
    assert back.device is None
    assert back.attempt == 1
    assert run.id in store.pending_ids()
    dev = client.hgetall(Keys("t").device("d1"))
    assert dev.get("run", "") == ""
    assert dev.get("infra_failures", "0") == "0"
    assert not rs.hand_back(store.load(run.id), "d1", claim.token)  # once


class TakeoverDevice(Device):
    """A sim device whose `at`-th command lets a replacement register while it runs (the
    first worker froze mid-command and its lease lapsed); counts commands after that."""

    def __init__(self, takeover: object, at: int) -> None:
        self.inner = make_sim_device("sim:signin-ios")
        self.takeover = takeover
        self.at = at
        self.commands = 0
        self.after = 0

    @property
    def platform(self) -> Platform:
        return self.inner.platform

    def _count(self) -> None:
        self.commands += 1
        if self.commands == self.at:
            self.takeover()  # type: ignore[operator]
        elif self.commands > self.at:
            self.after += 1

    def snapshot(self) -> Snapshot:
        self._count()
        return self.inner.snapshot()

    def press(self, pinned_ref: str) -> ActionResult:
        self._count()
        return self.inner.press(pinned_ref)

    def fill(self, pinned_ref: str, value: InputValue) -> ActionResult:
        self._count()
        return self.inner.fill(pinned_ref, value)

    def close(self) -> None:
        self.inner.close()


def test_a_run_whose_lease_is_taken_mid_run_goes_back_to_pending(parts, client) -> None:
    """The worker froze during its run's third device command for longer than the lease,
    and a replacement registered: that command completes, no row is written after it (the
    row of commands 1-2 waits for the next action, as every row does, and the fence refuses
    that action first), no further command reaches the device, the run is pending again
    (attempt 1, nothing counted against the device) and the fence is closed."""
    store, rs, fleet = parts
    now = [time.monotonic_ns()]
    fence = Fence("d1", lease_holder("w@d1"), lease_s=30, clock=lambda: now[0])
    store.registry.register(INFO, fence.holder, lease_s=30)
    fence.granted(now[0])
    devices: list[TakeoverDevice] = []

    def freeze_and_take_over() -> None:
        now[0] += 31 * 10**9
        _take_over(client, store.registry)

    def open_device(_run_id: str) -> TakeoverDevice:
        devices.append(TakeoverDevice(freeze_and_take_over, at=3))
        return devices[-1]

    rt = WorkerRuntime(
        settings=_settings(),
        spec=SPEC,
        redis=client,
        store=rs,
        open_device=open_device,  # type: ignore[arg-type]
        make_decider=make_decider,
        secrets=DictSecrets({"PW": "hunter22"}),
        fence=fence,
    )
    run, _ = fleet.submit_run(
        RunSubmit(
            goal="Sign in",
            device="d1",
            inputs={"email": "ada@example.com"},
            secrets={"password": SecretRef(ref="env:PW")},
        )
    )
    assert execute_run(rt, run.id) == "skipped:lease-lost"
    (device,) = devices
    assert device.commands == 3
    assert device.after == 0
    assert device.inner.closed
    back = store.load(run.id)
    assert back.status.value == "queued"
    assert back.attempt == 1
    assert run.id in store.pending_ids()
    assert store.steps(run.id) == []  # nothing written once the lease was lost
    assert fence.lost
    assert client.hget(Keys("t").device("d1"), "infra_failures") in (None, "0")


def test_a_run_whose_fence_expired_is_refused_before_its_next_device_action(parts, client):
    """The worker was frozen past its fence (nobody took the lease yet): the next device
    action is refused locally, without Redis, and the run goes back to pending."""
    store, rs, fleet = parts
    now = [time.monotonic_ns()]
    fence = Fence("d1", lease_holder("w@d1"), lease_s=30, clock=lambda: now[0])
    store.registry.register(INFO, fence.holder, lease_s=30)
    fence.granted(now[0])
    calls: list[str] = []

    class Freezing(DeviceHook):
        def before(self, command: str) -> None:
            if command == "snapshot":
                calls.append(command)
            if len(calls) == 2:  # the process froze for a minute before this snapshot
                now[0] += 60 * 10**9

    rt = WorkerRuntime(
        settings=_settings(),
        spec=SPEC,
        redis=client,
        store=rs,
        open_device=lambda _rid: with_hooks(make_sim_device("sim:signin-ios"), Freezing()),
        make_decider=make_decider,
        secrets=DictSecrets({"PW": "hunter22"}),
        fence=fence,
    )
    run, _ = fleet.submit_run(
        RunSubmit(
            goal="Sign in",
            device="d1",
            inputs={"email": "ada@example.com"},
            secrets={"password": SecretRef(ref="env:PW")},
        )
    )
    assert execute_run(rt, run.id) == "skipped:lease-lost"
    assert store.load(run.id).status.value == "queued"
    assert not fence.taken  # expired, not taken: the heartbeat decides what happens next
    assert fence.lost


def test_a_run_sent_again_after_its_child_died_is_handed_back_when_redis_lost_the_lease(
    parts, client
) -> None:
    """A pool child dies mid-run; its worker sends the run to its own device again; before
    that message is claimed, Redis loses the lease (a failover) while the worker's fence
    still holds. The claim is refused, and the worker hands the run back by its lease holder
    (its claim token died with the child): pending again, attempt 1. It used to stay
    `running`: the heartbeat took the lease back, and nothing executed the run or had a
    message for it until the overdue sweep (found by the state-machine test)."""
    store, rs, fleet = parts
    fence = Fence("d1", lease_holder("w@d1"), lease_s=30)
    store.registry.register(INFO, fence.holder, lease_s=30)
    fence.granted(time.monotonic_ns())
    run, _ = fleet.submit_run(RunSubmit(goal="Sign in", device="d1"))
    first = rs.claim(run.id, "d1", "w@d1", cap=3, fence=fence)  # the child that then dies
    assert first.record is not None
    client.delete(Keys("t").lease("d1"))  # Redis lost it; the fence has not expired
    rt = WorkerRuntime(
        settings=_settings(),
        spec=SPEC,
        redis=client,
        store=rs,
        open_device=lambda _run_id: pytest.fail("no device opens for a refused claim"),  # type: ignore[arg-type,return-value]
        make_decider=make_decider,
        secrets=DictSecrets({}),
        fence=fence,
    )
    assert execute_run(rt, run.id) == "skipped:lease-lost"  # the message sent again
    back = store.load(run.id)
    assert (back.status.value, back.device, back.attempt) == ("queued", None, 1)
    assert run.id in store.pending_ids()
    assert store.registry.renew("d1", fence.holder, lease_s=30)  # the heartbeat takes it back
    assert store.registry.devices()[0].run is None  # free for the run's next dispatch
