"""The run task's failure handling: what counts against a device, and no run left running."""

from __future__ import annotations

import time

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from redis_values import keys_holding
from test_fleet_store import parts, register  # noqa: F401 - pytest fixtures

from scheduler.service.requests import BatchSubmit, RunSubmit
from workers.core.app import AppConfig, AppRequest, AppUnderTest, ResetPolicy
from workers.core.errors import DeviceNotFoundError, ModelUnavailableError
from workers.core.model import DecideState, Decision, Platform, RunStatus, TokenUsage
from workers.core.records import DeviceInfo
from workers.core.request import SecretRef
from workers.core.rows import totals
from workers.core.secrets import DictSecrets
from workers.decide.factory import make_decider
from workers.devices.sim.device import make_sim_device
from workers.devices.sim.host import SimHost
from workers.fleet.runtime import WorkerRuntime, WorkerSpec
from workers.fleet.tasks import execute_run
from workers.settings import Settings

SECRET = "pw-that-must-not-leak-7"


class Raising:
    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def decide(self, state: DecideState) -> Decision:
        raise self.exc


def runtime(client, rs, *, decider=None, open_device=None) -> WorkerRuntime:
    return WorkerRuntime(
        settings=Settings(redis_url="redis://unused", key_prefix="t"),
        spec=WorkerSpec(info=DeviceInfo(id="d1", platform=Platform.IOS), device_spec="x"),
        redis=client,
        store=rs,
        open_device=open_device or (lambda _rid: make_sim_device("sim:signin-ios")),
        make_decider=(lambda _spec: decider) if decider else make_decider,
        secrets=DictSecrets({"PW": SECRET}),
    )


def submit(fleet, inputs: dict[str, str] | None = None) -> str:
    run, _ = fleet.submit_run(
        RunSubmit(
            goal="Sign in",
            device="d1",
            inputs=inputs or {},
            secrets={"password": SecretRef(ref="env:PW")},
        )
    )
    return run.id


def test_model_outage_does_not_count_against_the_device(parts, client):
    """A model that cannot be reached ends the run errored, but the device stays healthy:
    an outage of the provider must not quarantine the whole fleet."""
    store, rs, _, fleet = parts
    register(store, "d1")
    rt = runtime(client, rs, decider=Raising(ModelUnavailableError("connection refused")))
    for _ in range(4):
        assert execute_run(rt, submit(fleet)) == "errored"
    device = store.registry.devices()[0]
    assert device.infra_failures == 0
    assert not device.quarantined


def test_device_failure_counts_against_the_device(parts, client):
    store, rs, _, fleet = parts
    register(store, "d1")

    def gone(_rid: str):
        raise DeviceNotFoundError("simulator is gone")

    rt = runtime(client, rs, open_device=gone)
    run_id = submit(fleet)
    assert execute_run(rt, run_id) == "errored"
    assert "device could not be opened" in store.load(run_id).reason
    assert store.registry.devices()[0].infra_failures == 1


def test_a_bug_ends_the_run_errored_without_its_message(parts, client):
    """An unexpected exception is recorded (never left `running`), by type only: its message
    could carry anything, here the secret, and must not reach the stored result."""
    store, rs, _, fleet = parts
    register(store, "d1")
    rt = runtime(client, rs, decider=Raising(RuntimeError(f"oops {SECRET}")))
    run_id = submit(fleet)
    assert execute_run(rt, run_id) == "errored"
    final = store.load(run_id)
    assert final.status is RunStatus.ERRORED
    assert final.reason == "internal error (RuntimeError); see the worker log"
    assert final.result.error.code == "INTERNAL"
    assert keys_holding(client, SECRET) == []
    assert store.registry.devices()[0].infra_failures == 0


class Billing:
    """The rules decider, billed 120 input / 9 output tokens a decision, 30 ms each."""

    def __init__(self) -> None:
        self.inner = make_decider("rules")

    def decide(self, state: DecideState) -> Decision:
        time.sleep(0.03)
        usage = TokenUsage(input_tokens=120, output_tokens=9, requests=1)
        return self.inner.decide(state).model_copy(update={"usage": usage})


@pytest.mark.parametrize(
    ("failure", "reason", "infra_failures"),
    [
        (SoftTimeLimitExceeded(), "soft time limit (300 s) exceeded", 1),
        (RuntimeError("a bug of ours"), "internal error (RuntimeError); see the worker log", 0),
    ],
)
def test_an_errored_run_keeps_its_rows_tokens_and_duration(
    parts, client, failure, reason, infra_failures
):
    """A run ended by a soft time limit or by a bug on its third snapshot is `errored` with the
    two step rows written before, their totals (tokens included: the one totals function) and
    the attempt's true duration, as a run that ends by itself would be; the device is closed,
    and only the time limit (a run that hung on the device) counts against it."""
    store, rs, _, fleet = parts
    register(store, "d1")
    device = make_sim_device("sim:signin-ios")
    real_snapshot = device.snapshot
    calls = {"n": 0}

    def snapshot():
        calls["n"] += 1
        if calls["n"] == 3:
            raise failure
        return real_snapshot()

    device.snapshot = snapshot  # type: ignore[method-assign]
    rt = runtime(client, rs, decider=Billing(), open_device=lambda _rid: device)
    run_id = submit(fleet, {"email": "ada@example.com"})
    assert execute_run(rt, run_id) == "errored"
    result = store.load(run_id).result
    assert result.reason == reason
    assert len(result.steps) == 2
    assert result.totals == totals(result.steps)
    assert (result.totals.input_tokens, result.totals.output_tokens) == (240, 18)
    assert result.totals.decide_ms >= 60.0
    phases = result.totals.snapshot_ms + result.totals.decide_ms + result.totals.action_ms
    assert result.duration_ms >= phases
    assert device.closed
    assert store.registry.devices()[0].infra_failures == infra_failures


class Started:
    """Remembers the record every `run_started` hook was given."""

    def __init__(self) -> None:
        self.records = []

    def run_started(self, record, attempt):
        self.records.append((record, attempt))

    def step(self, record, row):
        pass

    def run_finished(self, record, result):
        pass

    def run_parked(self, record, result, question):
        pass


@pytest.mark.parametrize("batched", [False, True])
def test_the_run_starts_with_its_record_as_the_claim_left_it(parts, client, batched):
    """The claim hands back the run as it wrote it (one round trip; no read before it): the
    observers see it running on this device with its attempt, worker and start time, and a
    batch run's request (stored once, on its batch) is there too."""
    store, rs, _, fleet = parts
    register(store, "d1")
    seen = Started()
    rt = runtime(client, rs, decider=Raising(RuntimeError("stop here")))
    rt.observers = (seen,)
    if batched:
        batch, _ = fleet.submit_batch(
            BatchSubmit(goal="Sign in", count=1, selector={"platform": "ios"})
        )
        run_id = batch.runs[0]
    else:
        run_id = submit(fleet)
    before = time.time()
    assert execute_run(rt, run_id) == "errored"
    [(record, attempt)] = seen.records
    assert attempt == 1
    assert record.id == run_id
    assert record.status is RunStatus.RUNNING
    assert record.device == "d1"
    assert record.attempt == 1
    assert record.worker == rt.spec.name
    assert record.started_at is not None
    assert before <= record.started_at <= time.time()
    assert record.request.goal == "Sign in"


def with_host(rt: WorkerRuntime, host: SimHost) -> WorkerRuntime:
    rt.host = host
    rt.open_device = host.open
    return rt


def test_the_app_a_run_drove_is_in_its_result_and_every_stored_row(parts, client):
    """A run asking for the worker's app: `done`, and its result and each step row (as stored)
    name the app (id, version) and the reset it got."""
    store, rs, _, fleet = parts
    register(store, "d1")
    served = AppConfig(id="signin", version="1.2")
    rt = with_host(runtime(client, rs), SimHost("sim:signin-ios", app=served))
    run, _ = fleet.submit_run(
        RunSubmit(
            goal="Sign in",
            device="d1",
            inputs={"email": "a@example.com"},
            secrets={"password": SecretRef(ref="env:PW")},
            app=AppRequest(id="signin", version="1.2"),
            reset=ResetPolicy.RELAUNCH,
        )
    )
    assert execute_run(rt, run.id) == "done"
    want = AppUnderTest(id="signin", version="1.2", reset=ResetPolicy.RELAUNCH)
    record = rs.load(run.id)
    assert record is not None
    assert record.result is not None
    assert record.result.app == want
    rows = fleet.steps(run.id)
    assert rows
    assert all(row.app == want for row in rows)


def test_a_run_for_an_app_the_device_does_not_serve_errors_as_configuration(parts, client):
    """Another app than the worker's: `errored` as a configuration error, before the device is
    opened, not counted against the device."""
    store, rs, _, fleet = parts
    register(store, "d1")
    opened: list[str] = []
    host = SimHost("sim:signin-ios", app=AppConfig(id="signin"))

    def open_device(run_id: str):
        opened.append(run_id)
        return host.open(run_id)

    rt = runtime(client, rs, open_device=open_device)
    rt.host = host
    run, _ = fleet.submit_run(RunSubmit(goal="Sign in", device="d1", app=AppRequest(id="other")))
    assert execute_run(rt, run.id) == "errored"
    record = rs.load(run.id)
    assert record is not None
    assert record.reason.startswith("configuration: app.id 'other'")
    assert opened == []
    assert store.registry.devices()[0].infra_failures == 0
