"""What a run cost, and its budget (`workers.core.cost`): the operator's price table (a TOML
settings file) prices each model call by the test model server's reported tokens, per step,
run and report; a budget below a run's cost ends that run `over-budget` with no call past it."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pytest
from fakes.model_server import FakeModelServer

from scheduler.cli import runs
from scheduler.cli.main import main
from scheduler.cli.report import verdict_lines
from scheduler.client.api_client import FleetClient
from scheduler.client.function_transport import FunctionTransport
from scheduler.client.transport import Request, Response
from scheduler.suites.html import to_html
from scheduler.suites.outcome import Report, cases
from workers.core.chain import Tier
from workers.core.cost import Budget, Meter, PriceTable
from workers.core.errors import ConfigError
from workers.core.model import PhaseTotals, RunResult, RunStatus, TokenUsage
from workers.core.records import BatchRecord, RunRecord
from workers.core.request import GoalRunRequest
from workers.decide.rules import RulesDecider
from workers.settings import Settings

PRICES = """
currency = "USD"
[models."openai/fake-model"]
input = 2.0     # per million input tokens
output = 8.0    # per million output tokens
"""
CALL = (1000 * 2.0 + 100 * 8.0) / 1_000_000
"""One answer of the fake server below (1,000 tokens in, 100 out): 0.0028."""
SIGN_IN = ("e2=email", "e3", "e2=password", "e3", "done")
"""The sim sign-in as a model answers it, one call a step."""


@pytest.fixture
def priced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_server: FakeModelServer
) -> FakeModelServer:
    """`goalfleet run` pointed at the fake server, with the price table in a settings file."""
    prices = tmp_path / "prices.toml"
    prices.write_text(PRICES)
    monkeypatch.setenv("GOALFLEET_PRICE_FILE", str(prices))
    monkeypatch.setenv("GOALFLEET_MODEL_BASE_URL", model_server.base_url)
    monkeypatch.setenv("GOALFLEET_MODEL_API_KEY", "test")
    monkeypatch.setenv("SIGNIN_PASSWORD", "pw-cost-4242")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    for action in SIGN_IN:
        model_server.answer({"action": action}, usage=(1000, 100))
    return model_server


def run(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict[str, object], str]:
    code = main(
        [
            *("run", "--device", "sim:signin-ios", "--goal", "Sign in"),
            *("--decider", "openai/fake-model", "--input", "email=ada@example.com"),
            *("--secret", "password=env:SIGNIN_PASSWORD", "--json", *extra),
        ]
    )
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def test_each_step_and_the_run_are_priced_and_the_report_shows_it(
    priced: FakeModelServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    html = tmp_path / "r.html"
    code, result, err = run(capsys, "--html", str(html))
    assert code == 0, err
    steps = result["steps"]
    assert [s["decision"]["usage"]["cost"] for s in steps] == pytest.approx([CALL] * 5)
    assert result["totals"]["cost"] == pytest.approx(5 * CALL)
    assert len(priced.bodies) == len(SIGN_IN)
    text = html.read_text()
    assert "1 cases, cost 0.014, made" in text  # the report's total
    assert text.count('<td class="num">0.0028</td>') == len(SIGN_IN)  # each step's
    assert main(["history", "--since", "1d"]) == 0  # the day's cost, from the history
    out = capsys.readouterr().out
    day = next(line for line in out.splitlines() if "5000" in line and "500" in line)
    assert day.split()[-1] == "0.014"  # 1 run, 5,000 tokens in, 500 out


def test_a_budget_below_the_runs_cost_ends_it_before_the_call_that_would_cross_it(
    priced: FakeModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """0.007 holds two calls (0.0056); a third would cross it: it is not made, and the run
    ends `over-budget`, its error typed."""
    code, result, err = run(capsys, "--budget-cost", "0.007")
    assert code == 1, err
    assert result["status"] == "over-budget"
    assert len(priced.bodies) == 2  # no call past the budget
    assert result["error"]["type"] == "BudgetExceededError"
    assert result["error"]["code"] == "BUDGET_EXCEEDED"
    assert result["reason"].startswith("cost budget 0.007 USD: 0.005600 spent")
    assert result["totals"]["cost"] == pytest.approx(2 * CALL)
    assert result["steps"][-1]["outcome"] == "blocked"


def test_a_token_budget_counts_input_and_output(
    priced: FakeModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, result, _ = run(capsys, "--budget-tokens", "3500")
    assert (code, result["status"]) == (1, "over-budget")
    assert len(priced.bodies) == 3  # 3 x 1,100 = 3,300; a fourth would make 4,400


def test_a_cost_budget_refuses_a_model_with_no_price() -> None:
    """A cost budget cannot be kept on a model the table does not price: refused at once."""
    meter = Meter(PriceTable(), Budget(cost=1.0))
    with pytest.raises(ConfigError, match="openai/other has no price in the price table"):
        meter.wrap(Tier("openai/other", RulesDecider()))
    meter.wrap(Tier("rules", RulesDecider()))  # a decider that calls no model costs nothing


def test_a_bad_price_file_is_one_line_naming_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "p.toml"
    bad.write_text('[models."openai/x"]\ninput = -1\noutput = 2\n')
    with pytest.raises(ValueError, match=r"price_file .*p.toml: models.openai/x.input: "):
        Settings(price_file=bad)
    good = tmp_path / "g.toml"
    good.write_text(PRICES)
    table = Settings(price_file=good).prices
    usage = TokenUsage(input_tokens=1000, output_tokens=100)
    assert table.cost("openai/fake-model", usage) == pytest.approx(CALL)
    assert table.cost("openai/unpriced", usage) == 0.0


def test_a_suites_report_sums_what_every_attempt_cost(capsys: pytest.CaptureFixture[str]) -> None:
    """Two flows, one retried: the report's cost is every attempt's (a retry was paid for),
    on the HTML report and on the summary line CI reads."""

    def attempt(flow: str, retry: int, status: RunStatus, cost: float) -> RunRecord:
        result = RunResult(status=status, goal="g", totals=PhaseTotals(cost=cost))
        return RunRecord(id=f"{flow}{retry}" * 8, request=GoalRunRequest(goal="g"), status=status,
                         device="d1", batch="b", flow=flow, retry=retry, submitted_at=1.0,
                         result=result)  # fmt: skip

    runs = [attempt("a", 0, RunStatus.BLOCKED, 0.01), attempt("a", 1, RunStatus.DONE, 0.02),
            attempt("b", 0, RunStatus.DONE, 0.004)]  # fmt: skip
    batch = BatchRecord(id="b" * 32, total=3, created_at=1.0, suite="smoke")
    report = Report(batch, cases(runs, lambda _r: []), time.time())
    assert report.cost == pytest.approx(0.034)
    assert "2 cases, cost 0.034, made" in to_html(report)
    verdict_lines(report, allow_flaky=True)
    assert "suite smoke: 1 passed, 1 flaky; cost 0.034" in capsys.readouterr().err


def test_goalfleet_runs_shows_each_runs_cost(capsys: pytest.CaptureFixture[str]) -> None:
    """`goalfleet runs`: a cost column, the run's `totals.cost` (blank for an unpriced run)."""

    def record(run_id: str, cost: float) -> dict[str, object]:
        result = RunResult(status=RunStatus.DONE, goal="Sign in", totals=PhaseTotals(cost=cost))
        run = RunRecord(id=run_id, request=GoalRunRequest(goal="Sign in"), status=RunStatus.DONE,
                        device="d1", submitted_at=1.0, result=result)  # fmt: skip
        return run.model_dump(mode="json")

    page = {"runs": [record("a" * 32, 0.0123), record("b" * 32, 0.0)], "next": None}

    def handler(_request: Request) -> Response:
        return Response.of_json(200, page)

    flags = dict.fromkeys(("status", "device", "batch", "schedule", "suite", "flow", "goal",
                           "since", "until"))  # fmt: skip
    args = argparse.Namespace(**flags, limit=50, json=False)
    with FleetClient("http://api.test", transport=FunctionTransport(handler)) as client:
        assert runs.main(client, args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "cost" in lines[0]
    assert "0.0123" in next(x for x in lines if x.startswith("aaaaaaaa"))
    assert "0.0" not in next(x for x in lines if x.startswith("bbbbbbbb"))
