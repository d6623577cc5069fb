"""Decision memory through the real fleet (API → scheduler → Celery worker processes, one
Redis): the first done run of a flow teaches every device; later runs decide those screens
from memory with no decider call; per-run opt-out; the memory routes and CLI."""

from __future__ import annotations

import httpx
import pytest
import redis
from conftest import TOKEN

from scheduler.cli.main import main
from scheduler.client.api_client import FleetClient
from workers.core.model import RunStatus

GOAL = "Log in to the memory test"  # a goal no other fleet test uses: its own entries
FLOW = {
    "goal": GOAL,
    "inputs": {"email": "mem@example.com"},
    "secrets": {"password": {"ref": "env:FLEET_PW"}},
}


@pytest.fixture
def clean_memory(http: httpx.Client) -> None:
    http.delete("/v1/memory", params={"goal": GOAL})


@pytest.mark.usefixtures("clean_memory")
def test_a_done_run_teaches_the_other_devices(api: FleetClient, db: redis.Redis) -> None:
    first = api.wait(api.submit_run({**FLOW, "device": "ios-1"}).id, timeout_s=60)
    assert first.status is RunStatus.DONE, first.reason
    assert first.result is not None
    assert first.result.memory_writes == len(first.result.steps)
    learned = api.memory(goal=GOAL)
    assert len(learned) == len(first.result.steps)
    assert {e.source for e in learned} == {"rules"}

    second = api.wait(api.submit_run({**FLOW, "device": "ios-2"}).id, timeout_s=60)
    assert second.status is RunStatus.DONE, second.reason
    rows = api.steps(second.id)
    assert [r.decision.decided_by for r in rows if r.decision] == ["memory"] * len(rows)
    assert all(r.memory is not None and r.memory.outcome == "hit" for r in rows)
    assert second.result is not None
    assert second.result.memory_writes == 0
    assert all(e.hits >= 1 for e in api.memory(goal=GOAL))
    # no typed or secret value in any memory key or entry
    for key in db.scan_iter("gft:mem*"):
        blob = key + "".join(db.hvals(key) if db.type(key) == "hash" else db.smembers(key))
        assert "mem@example.com" not in blob


@pytest.mark.usefixtures("clean_memory")
def test_a_run_can_opt_out(api: FleetClient) -> None:
    run = api.wait(api.submit_run({**FLOW, "device": "ios-1", "memory": False}).id, timeout_s=60)
    assert run.status is RunStatus.DONE
    assert api.memory(goal=GOAL) == []
    assert all(r.memory is None for r in api.steps(run.id))


@pytest.mark.usefixtures("clean_memory")
def test_memory_routes_and_cli(
    api: FleetClient,
    http: httpx.Client,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GOALFLEET_API_TOKEN", TOKEN)
    api.wait(api.submit_run({**FLOW, "device": "android-1"}).id, timeout_s=60)
    entries = api.memory(goal=GOAL)
    assert entries
    key = entries[0].key
    assert http.get(f"/v1/memory/{key}").json()["key"] == key
    assert http.get("/v1/memory/" + "0" * 32).status_code == 404
    assert http.get("/v1/memory/not-a-key").status_code == 422
    assert http.delete("/v1/memory").status_code == 422  # neither goal nor all
    assert httpx.get(http.base_url.join("/v1/memory")).status_code == 401  # auth as every route

    argv = ["--api", str(http.base_url).rstrip("/")]
    assert main(["memory", "list", "--goal", GOAL, *argv]) == 0
    assert key[:12] in capsys.readouterr().out
    assert main(["memory", "show", key[:8], *argv]) == 0
    assert GOAL.lower() in capsys.readouterr().out
    assert main(["memory", "forget", key[:8], *argv]) == 0
    assert key not in {e.key for e in api.memory(goal=GOAL)}
    assert main(["memory", "forget", *argv]) == 2  # nothing chosen: one-line error
    assert "exactly one" in capsys.readouterr().err
    assert main(["memory", "forget", "--goal", GOAL, *argv]) == 0
    assert api.memory(goal=GOAL) == []
