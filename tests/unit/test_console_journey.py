"""The console's run page shows a journey by step (issue 43, item 7): its rows under each
step's heading (title, who decided it, passed or why not), through the real app on a real
Redis (`rolekit.world`), as a signed-in person sees `/ui/runs/{id}`."""

from __future__ import annotations

from pathlib import Path

from journeykit import EMAIL, JOURNEY, PASSWORD
from rolekit import sign_in, world

from scheduler.local.redis import LocalRedis
from workers.core.journey import run_journey
from workers.core.model import Inputs
from workers.core.request import GoalRunRequest
from workers.decide.rules import RulesDecider
from workers.devices.sim.device import make_sim_device
from workers.fleet.keys import worker_name
from workers.fleet.state.states import Failure


def test_the_run_page_groups_a_journey_by_step(redis_server: LocalRedis, tmp_path: Path) -> None:
    """Alice's journey run, its rows written and its result finished as a worker does: the
    page heads each step's rows with the step's title, who decided it and how it went."""
    raw = [*JOURNEY[:2], "back", {"name": "theme is dark", "check": '"Theme: Dark" is visible'}]
    steps = GoalRunRequest.model_validate({"steps": raw}).steps or []
    inputs = Inputs.of(plain={"email": EMAIL}, secret={"password": PASSWORD})
    result = run_journey(
        make_sim_device("sim:settings-ios"), "j", steps=steps, decider=RulesDecider(), inputs=inputs
    )
    with world(redis_server.url, "gfconsolej", tmp_path) as w:
        did = w.device()
        body = {"steps": raw, "device": did, "secrets": {}}
        run_id = str(w.post("alice", "/v1/runs", body)["id"])
        claim = w.runs.claim(run_id, did, worker_name(did), cap=3)
        for row in result.steps:
            w.runs.write_step(run_id, claim.token, row)
        record = w.runs.load(run_id)
        assert record is not None
        failure, retention = Failure.DECISION, 3600
        w.runs.finish(
            record, claim.token, result, failure=failure, quarantine_after=3, retention_s=retention
        )
        signed = sign_in(w.client, "alice")
        page = w.client.get(f"/ui/runs/{run_id}", headers=signed.headers)
    assert page.status_code == 200, page.text
    assert page.text.count('<tr class="journey-step">') == 4
    assert "step 2: 2. press Settings (plain) — passed" in page.text
    assert (
        "step 4: theme is dark (rules) — failed: &#39;Theme: Dark&#39; is not visible" in page.text
    )
