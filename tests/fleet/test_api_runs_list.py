"""`GET /v1/runs` and `goalfleet runs` over the real fleet: the runs a filter names, newest
first, paged by cursor; bad filters are 422 naming the field; batch ids take unique prefixes."""

from __future__ import annotations

import os

import httpx
import pytest
from clikit import goalfleet_json
from conftest import SIGN_IN, TOKEN

from scheduler.client.api_client import FleetClient
from scheduler.local.fleet import LocalFleet

pytestmark = pytest.mark.fleet


def test_runs_listed_filtered_and_paged(api: FleetClient, http: httpx.Client, fleet: LocalFleet):
    goal = "Sign in to the list test"
    batch = api.submit_batch({**SIGN_IN, "goal": goal, "count": 3})
    api.wait_batch(batch.id, timeout_s=120)
    one = api.wait(api.submit_run({**SIGN_IN, "goal": goal}).id, timeout_s=60)

    resp = http.get("/v1/runs", params={"goal": "list test", "limit": 2})
    assert resp.status_code == 200, resp.text
    page = resp.json()
    assert [r["id"] for r in page["runs"]][:1] == [one.id]  # newest first
    seen = [r["id"] for r in page["runs"]]
    while page["next"]:
        page = http.get(
            "/v1/runs", params={"goal": "list test", "limit": 2, "cursor": page["next"]}
        ).json()
        seen += [r["id"] for r in page["runs"]]
    assert sorted(seen) == sorted([one.id, *batch.runs])

    done, _ = api.runs(status="done", batch=batch.id[:8], limit=10)
    assert sorted(r.id for r in done) == sorted(batch.runs)
    assert http.get(f"/v1/batches/{batch.id[:8]}").json()["id"] == batch.id

    env = {**os.environ, "GOALFLEET_API_URL": fleet.api_url, "GOALFLEET_API_TOKEN": TOKEN}
    listed, _ = goalfleet_json("runs", "--status", "done", "--since", "1h", "--goal",
                               "list test", env=env)  # fmt: skip
    assert sorted(r["id"] for r in listed) == sorted([one.id, *batch.runs])


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"status": "finished"}, "status"),
        ({"limit": 0}, "limit"),
        ({"limit": 201}, "limit"),
        ({"cursor": "not a cursor"}, "cursor"),
        ({"since": -1}, "since"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_a_bad_filter_is_422_naming_it(http: httpx.Client, params: dict, field: str):
    resp = http.get("/v1/runs", params=params)
    assert resp.status_code == 422, resp.text
    assert resp.json()["problems"][0]["field"] == field
