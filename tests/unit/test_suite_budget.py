"""A suite's budget (`budget:` in a flows file): what all its runs together may spend. Each run
reads the batch's ledger before each model call and adds to it after; the call that would
cross the suite's budget is not made, whichever run would make it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from fakes.model_server import FakeModelServer
from pydantic import SecretStr
from test_fleet_store import parts, register  # noqa: F401 - pytest fixtures

from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.service.fleet import Fleet
from scheduler.service.requests import SuiteSubmit
from scheduler.store.enqueue import RecordingEnqueuer
from scheduler.store.runs import FleetStore
from scheduler.suites.flows import load
from workers.core.loop import run_goal
from workers.core.model import (
    DecideState,
    Decision,
    Inputs,
    Platform,
    RunResult,
    RunStatus,
    TokenUsage,
)
from workers.core.prices import Budget, Price, PriceTable
from workers.core.records import DeviceInfo
from workers.core.secrets import DictSecrets
from workers.decide.factory import make_decider
from workers.decide.options import ModelSettings
from workers.decide.rules import RulesDecider
from workers.devices.sim.device import make_sim_device
from workers.fleet.keys import Keys, lease_holder, worker_name
from workers.fleet.runtime import WorkerRuntime, WorkerSpec
from workers.fleet.spend import RedisLedger
from workers.fleet.tasks import execute_run
from workers.settings import Settings

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


@dataclass
class Paid:
    """A decider that answers as the rules do and reports a model's tokens for each answer
    (a fake at the decider seam: 1,000 tokens in, 100 out)."""

    calls: int = 0

    def decide(self, state: DecideState) -> Decision:
        self.calls += 1
        usage = TokenUsage(input_tokens=1000, output_tokens=100, requests=1)
        return RulesDecider().decide(state).model_copy(update={"usage": usage})


def test_the_run_task_keeps_the_suite_budget_across_its_runs(parts, client: redis.Redis) -> None:
    """Through `execute_run`, as a worker runs a suite's two runs one after the other on one
    device, with 3,000 tokens for the suite: the first makes two calls (2,200; a third would
    cross it) and ends over-budget; the second may make one (3,300) and no more."""
    store, rs, _, fleet = parts
    register(store, "d1")
    paid = Paid()
    rt = WorkerRuntime(
        settings=Settings(redis_url="redis://unused", key_prefix="t"),
        spec=WorkerSpec(info=DeviceInfo(id="d1", platform=Platform.IOS), device_spec="x"),
        redis=client,
        store=rs,
        open_device=lambda _rid: make_sim_device("sim:signin-ios"),
        make_decider=lambda _spec: paid,
        secrets=DictSecrets({"PW": "pw-budget-77"}),
    )
    flow = {"goal": "Sign in", "matrix": [{"platform": "ios"}], "inputs": {"email": "a@b.c"},
            "secrets": {"password": {"ref": "env:PW"}}}  # fmt: skip
    sub = SuiteSubmit.model_validate(
        {
            "suite": "s",
            "budget": {"tokens": 3000},
            "flows": [{"name": "a", **flow}, {"name": "b", **flow}],
        }
    )
    batch, _ = fleet.submit_suite(sub)
    calls = []
    for run_id in batch.runs:
        fleet.dispatcher.view.reload()
        fleet.dispatcher.dispatch()
        before = paid.calls
        assert execute_run(rt, run_id) == "over-budget"
        calls.append(paid.calls - before)
        ended = rs.load(run_id)
        assert ended is not None
        assert ended.result is not None
        assert ended.result.error is not None
        assert ended.result.error.code == "BUDGET_EXCEEDED"
        assert ended.reason.startswith("suite token budget 3000: ")
    assert calls == [2, 1]
    spent = RedisLedger.of(client, Keys("t"), batch.id, ttl_s=1).spent()
    assert spent == (3300, 0.0)
