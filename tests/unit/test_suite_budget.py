"""A suite's budget (`budget:` in a flows file): what all its runs together may spend. Each run
reads the batch's ledger before each model call and adds to it after; the call that would
cross the suite's budget is not made, whichever run would make it."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from fakes.model_server import FakeModelServer
from pydantic import SecretStr

from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.service.fleet import Fleet
from scheduler.service.requests import SuiteSubmit
from scheduler.store.enqueue import RecordingEnqueuer
from scheduler.store.runs import FleetStore
from scheduler.suites.flows import load
from workers.core.loop import run_goal
from workers.core.model import Inputs, Platform, RunResult, RunStatus
from workers.core.prices import Budget, Price, PriceTable
from workers.core.records import DeviceInfo
from workers.decide.factory import make_decider
from workers.decide.options import ModelSettings
from workers.devices.sim.device import make_sim_device
from workers.fleet.keys import Keys, lease_holder, worker_name
from workers.fleet.spend import RedisLedger

MODEL = "openai/fake-model"
PRICES = PriceTable(models={MODEL: Price(input=2.0, output=8.0)})
CALL = 0.0028
"""One answer below (1,000 tokens in, 100 out) at those prices."""
SIGN_IN = ("e2=email", "e3", "e2=password", "e3", "done")


def signin(server: FakeModelServer, ledger: RedisLedger, budget: Budget) -> RunResult:
    decider = make_decider(MODEL, ModelSettings(base_url=server.base_url, api_key=SecretStr("t")))
    return run_goal(
        make_sim_device("sim:signin-ios"),
        "Sign in",
        decider=decider,
        decider_name=MODEL,
        inputs=Inputs.of({"email": "ada@example.com"}, secret={"password": "pw-4242-x"}),
        prices=PRICES,
        suite_budget=budget,
        ledger=ledger,
    )


def test_the_suite_budget_spans_its_runs_and_stops_the_call_that_would_cross_it(
    model_server: FakeModelServer, client: redis.Redis
) -> None:
    """0.02 for the suite: the first run signs in (5 calls, 0.014); the second may make two
    more (0.0196) and ends `over-budget` before a third; the server saw 7 requests."""
    for _ in range(2):
        for action in SIGN_IN:
            model_server.answer({"action": action}, usage=(1000, 100))
    ledger = RedisLedger.of(client, Keys("tb"), "batch-1", ttl_s=3600)
    first = signin(model_server, ledger, Budget(cost=0.02))
    assert first.status is RunStatus.DONE, first.reason
    second = signin(model_server, ledger, Budget(cost=0.02))
    assert second.status is RunStatus.OVER_BUDGET
    assert second.reason.startswith("suite cost budget 0.02 USD: 0.019600 spent")
    assert len(model_server.bodies) == 7  # no call past the suite's budget
    assert ledger.spent() == (7 * 1100, pytest.approx(7 * CALL))
    assert 0 < client.ttl(ledger.key) <= 3600


def test_a_flows_files_budget_reaches_every_run_of_its_batch(
    tmp_path: Path, client: redis.Redis
) -> None:
    flows = tmp_path / "flows.yaml"
    flows.write_text(
        "suite: s\nbudget: {cost: 0.5, tokens: 20000}\n"
        "flows:\n  - name: a\n    goal: Sign in\n    matrix: {platform: ios}\n"
    )
    body = load(flows).body
    keys = Keys("tf")
    store = FleetStore(client, keys, retention_s=3600)
    fleet = Fleet(store, Dispatcher(store, RecordingEnqueuer(client, keys)), max_pending=100)
    info = DeviceInfo(id="i1", platform=Platform.IOS)
    store.registry.register(info, lease_holder(worker_name("i1")), lease_s=30)
    batch, _ = fleet.submit_suite(SuiteSubmit.model_validate(body))
    run = store.load(batch.runs[0])
    assert run is not None
    assert run.request.suite_budget == Budget(cost=0.5, tokens=20000)
