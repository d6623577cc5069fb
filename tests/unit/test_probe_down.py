"""A quarantined device whose probe fails says why it stays down (issue 42, item 6): the
probe's reason becomes the device's quarantine reason, which `goalfleet devices` shows and a
waiting run's device state carries; a probe that passes lifts the quarantine as before."""

from __future__ import annotations

import time

import redis

from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.service.fleet import Fleet
from scheduler.service.requests import RunSubmit
from scheduler.store.enqueue import RecordingEnqueuer
from scheduler.store.runs import FleetStore
from workers.core.errors import FatalDeviceError
from workers.core.model import Platform, RunResult, RunStatus
from workers.core.ports import DevicePort
from workers.core.records import DeviceInfo
from workers.devices.sim.device import make_sim_device
from workers.fleet.keys import Keys
from workers.fleet.presence import Presence
from workers.fleet.runtime import WorkerSpec
from workers.fleet.state.runs import RunStore
from workers.fleet.state.states import Failure
from workers.settings import Settings

CANNOT_START = "the app '/usr/bin/acme' exited with 1"


class Probe:
    """The worker's probe seam: fails with the app's reason until `fixed`, then a sim device."""

    def __init__(self) -> None:
        self.fixed = False
        self.calls = 0

    def __call__(self) -> DevicePort:
        self.calls += 1
        if not self.fixed:
            raise FatalDeviceError(CANNOT_START, code="APP_EXITED", hint="see app.log: secret?")
        return make_sim_device("sim:signin-ios")


def test_a_failed_probe_says_why_the_device_stays_down(client: redis.Redis) -> None:
    """The device's app cannot start: its probe fails, and the device's quarantine reason says
    so (it used to keep the reason of the runs that quarantined it, and only the worker's log
    said why it stayed down); once the probe passes, the quarantine lifts."""
    keys = Keys("t")
    store, runs = FleetStore(client, keys, retention_s=3600), RunStore(client, keys)
    fleet = Fleet(store, Dispatcher(store, RecordingEnqueuer(client, keys)), max_pending=100)
    settings = Settings(
        redis_url="redis://unused", key_prefix="t", lease_s=30, probe_interval_s=0.001
    )
    spec = WorkerSpec(info=DeviceInfo(id="d1", platform=Platform.IOS), device_spec="x")
    probe = Probe()
    presence = Presence(store.registry, spec, settings, probe=probe)
    presence.register()
    for i in range(2):  # two errored runs in a row: quarantined
        run, _ = fleet.submit_run(RunSubmit(goal=f"g{i}"))
        claim = runs.claim(run.id, "d1", "w@d1", cap=3)
        runs.finish(
            store.load(run.id), claim.token, RunResult(status=RunStatus.ERRORED, goal="g"),
            failure=Failure.INFRA, quarantine_after=2, retention_s=60,
        )  # fmt: skip
    [state] = store.registry.devices()
    assert state.quarantined
    presence.beat_once()
    [state] = store.registry.devices()
    assert (probe.calls, state.quarantined) == (1, True)
    assert state.quarantine_reason == f"down: the probe failed: {CANNOT_START}"
    assert "secret" not in state.quarantine_reason  # the hint (the app's log) stays out
    probe.fixed = True
    time.sleep(0.01)  # past the probe interval
    presence.beat_once()
    [state] = store.registry.devices()
    assert (state.quarantined, state.quarantine_reason) == (False, "")
    presence.stop()
