"""Escalations that resolve themselves, through real fleet processes (own Redis, API,
scheduler, two sim workers running the `twins` app, whose account chooser the rules decider
cannot decide): the run parks `awaiting_answer` with its question and its device free; a
person answers through the CLI or the API; the answer is remembered (source human, the
token's name) and the run finishes; the next run on the other device passes the screen from
memory without escalating. Invalid answers are refused with the valid ones; an unanswered
question expires `escalated`; a parked run can be cancelled; no secret in any question."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from fleetkit import quick_settings

from scheduler.cli.main import main
from scheduler.client.api_client import FleetClient
from scheduler.local.fleet import LocalFleet, SimWorker
from scheduler.local.redis import LocalRedis
from workers.core.model import RunStatus
from workers.core.records import RunRecord
from workers.fleet.connections import redis_client

TOKEN = "ops-token-4711"
SECRET = "twins-Secret-55"
EMAIL = "ada.twins@example.com"
TWINS = ("twins-1", "twins-2")
RUN = {
    "goal": "Sign in",
    "inputs": {"email": EMAIL},
    "secrets": {"password": {"ref": "env:TWINS_PW"}},
    "selector": {"labels": {"pool": "twins"}},
}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalFleet]:
    twins = [SimWorker(d, "ios", "17.5", labels={"pool": "twins"}, app="twins") for d in TWINS]
    with LocalRedis() as server:
        # a named token: answers say who
        settings = quick_settings(server.url, key_prefix="gfq", token=f"ada-ops:{TOKEN}")
        with LocalFleet(
            settings,
            log_dir=tmp_path_factory.mktemp("q-logs"),
            extra_env={"GOALFLEET_SECRET_TWINS_PW": SECRET},
        ) as f:
            yield f.start_all(twins, timeout_s=90)


@pytest.fixture
def api(fleet: LocalFleet) -> Iterator[FleetClient]:
    with FleetClient(fleet.api_url, token=TOKEN) as c:
        yield c


@pytest.fixture
def http(fleet: LocalFleet) -> Iterator[httpx.Client]:
    """Raw HTTP with the token (status codes and bodies)."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=fleet.api_url, headers=headers) as client:
        yield client


@pytest.fixture
def db(fleet: LocalFleet) -> Iterator[redis.Redis]:
    c = redis_client(fleet.settings.redis_url)
    yield c
    c.close()


@pytest.fixture(autouse=True)
def cli_env(fleet: LocalFleet, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOALFLEET_API_URL", fleet.api_url)
    monkeypatch.setenv("GOALFLEET_API_TOKEN", TOKEN)
    monkeypatch.setenv("GOALFLEET_REDIS_URL", fleet.settings.redis_url)


def until(api: FleetClient, run_id: str, status: RunStatus, timeout_s: float = 60) -> RunRecord:
    deadline = time.monotonic() + timeout_s
    while True:
        run = api.run(run_id)
        if run.status is status:
            return run
        assert not run.status.terminal or status.terminal, (run.status, run.reason)
        assert time.monotonic() < deadline, f"{run_id} still {run.status}: {run.reason}"
        time.sleep(0.2)


def forget_all(api: FleetClient) -> None:
    api.forget_many()


def test_a_person_answers_and_the_whole_fleet_learns(
    api: FleetClient, db: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    forget_all(api)
    first = api.submit_run(RUN)
    parked = until(api, first.id, RunStatus.AWAITING_ANSWER)
    assert "min_confidence" in parked.reason
    # the device is released while the run waits
    device = parked.device
    assert device is not None
    assert db.hget(f"gfq:device:{device}", "run") == ""
    [question] = api.questions()
    assert question.run_id == first.id
    assert {c.name for c in question.screen.candidates} >= {"Continue as ada", "Continue as guest"}
    assert question.attempts[0].decider == "rules"
    for raw in (db.get(f"gfq:question:{first.id}") or "", question.model_dump_json()):
        assert SECRET not in raw
        assert EMAIL not in raw

    assert main(["questions"]) == 0
    assert "Continue as guest" in capsys.readouterr().out
    assert main(["answer", first.id, "--target", "Continue as ada"]) == 0
    assert "queued" in capsys.readouterr().out
    done = api.wait(first.id, timeout_s=60)
    assert done.status is RunStatus.DONE, done.reason
    rows = api.steps(first.id)
    [chooser] = [r for r in rows if r.screen == "Choose how to continue"]
    assert chooser.decision is not None
    assert chooser.decision.decided_by == "memory"
    assert chooser.memory is not None
    assert chooser.memory.source == "human"
    [entry] = [e for e in api.memory() if e.source == "human"]
    assert entry.origin == "ada-ops"  # the answering token's name
    assert api.questions() == []

    # every later run, on every device of the kind, passes the screen without a person
    later = [api.submit_run(RUN) for _ in range(2)]
    for run in later:
        final = api.wait(run.id, timeout_s=60)
        assert final.status is RunStatus.DONE, final.reason
    assert {api.run(r.id).device for r in later} | {done.device} == {"twins-1", "twins-2"}


def test_an_answer_naming_no_candidate_is_refused_with_the_valid_ones(
    api: FleetClient, fleet: LocalFleet, http: httpx.Client
) -> None:
    forget_all(api)
    run = api.submit_run(RUN)
    until(api, run.id, RunStatus.AWAITING_ANSWER)
    bad = http.post(f"/v1/runs/{run.id}/answer", json={"target": "Proceed"})
    assert bad.status_code == 422
    assert "Continue as ada" in bad.text
    assert http.post(f"/v1/runs/{run.id}/answer", json={}).status_code == 422
    assert (
        http.post(f"/v1/runs/{run.id}/answer", json={"ref": "e2", "done": True}).status_code == 422
    )
    assert httpx.get(f"{fleet.api_url}/v1/questions").status_code == 401
    assert api.run(run.id).status is RunStatus.AWAITING_ANSWER  # nothing changed
    ok = http.post(f"/v1/runs/{run.id}/answer", json={"blocked": True})
    assert ok.status_code == 200
    assert ok.json()["status"] == "blocked"
    assert http.post(f"/v1/runs/{run.id}/answer", json={"blocked": True}).status_code == 409
    assert not [e for e in api.memory() if e.source == "human"]  # blocked teaches nothing


def test_an_unanswered_question_expires_escalated(api: FleetClient, db: redis.Redis) -> None:
    forget_all(api)
    run = api.submit_run(RUN)
    until(api, run.id, RunStatus.AWAITING_ANSWER)
    db.zadd("gfq:questions", {run.id: time.time() - 1})  # as if its hour had passed
    final = until(api, run.id, RunStatus.ESCALATED, timeout_s=30)
    assert "expired" in final.reason
    assert db.get(f"gfq:question:{run.id}") is None


def test_a_parked_run_can_be_cancelled(api: FleetClient, db: redis.Redis) -> None:
    forget_all(api)
    run = api.submit_run(RUN)
    until(api, run.id, RunStatus.AWAITING_ANSWER)
    assert api.cancel(run.id).status is RunStatus.CANCELLED
    assert api.questions() == []
    assert db.zscore("gfq:questions", run.id) is None


def test_a_run_can_skip_the_person(api: FleetClient) -> None:
    forget_all(api)
    run = api.submit_run({**RUN, "ask_person": False})
    final = api.wait(run.id, timeout_s=60)
    assert final.status is RunStatus.ESCALATED


def test_logs_hold_no_secret(fleet: LocalFleet) -> None:
    for log in Path(fleet.log_dir).glob("*.log"):
        text = log.read_text(errors="replace")
        assert SECRET not in text, log


def test_eval_capture_turns_a_runs_steps_into_draft_cases(
    api: FleetClient, capsys: pytest.CaptureFixture[str]
) -> None:
    """`goalfleet eval --capture RUN` prints one draft case per decided step: what the decider
    saw (no values) and what it decided, tagged for review; the drafts load as a corpus."""
    from workers.decide.evaluate import EvalCase  # noqa: PLC0415

    run = api.wait(api.submit_run({**RUN, "ask_person": False}).id, timeout_s=60)
    capsys.readouterr()
    assert main(["eval", "--capture", run.id]) == 0
    lines = capsys.readouterr().out.splitlines()
    cases = [EvalCase.model_validate_json(line) for line in lines if line.startswith("{")]
    assert len(cases) == len([r for r in api.steps(run.id) if r.decision and r.seen])
    assert all("needs-review" in c.tags and c.source == f"run:{run.id}" for c in cases)
    assert EMAIL not in "".join(lines)
    assert SECRET not in "".join(lines)


def test_the_answer_route_takes_a_prefix_like_every_run_route(
    api: FleetClient, fleet: LocalFleet, http: httpx.Client
) -> None:
    forget_all(api)
    run = api.submit_run(RUN)
    until(api, run.id, RunStatus.AWAITING_ANSWER)
    answered = http.post(f"/v1/runs/{run.id[:8]}/answer", json={"blocked": True})
    assert answered.status_code == 200, answered.text
    assert answered.json()["id"] == run.id
