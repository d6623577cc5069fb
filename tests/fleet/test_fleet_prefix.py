"""Two fleets on one Redis DB, told apart only by their key prefix: the same device ids, real
API and scheduler threads and real worker processes each. Neither sees the other's runs,
devices or metrics, and every key either writes (Celery's queues, kombu's unacked hash and
bindings, Celery's results, the store) starts with its own prefix."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from conftest import SECRET_VALUE, SIGN_IN, TOKEN
from fleetkit import quick_settings

from scheduler.local.fleet import LocalFleet, SimWorker
from scheduler.local.redis import LocalRedis
from workers.core.model import RunStatus
from workers.core.records import RunRecord
from workers.fleet.celery_app import make_celery
from workers.fleet.keys import Keys
from workers.settings import Settings

pytestmark = pytest.mark.fleet

PREFIXES = ("fa", "fb")
RUNS_EACH = 4


@pytest.fixture
def two_fleets(redis_binary: str, tmp_path: Path) -> Iterator[dict[str, LocalFleet]]:
    """Fleet `fa` and fleet `fb` on one Redis DB: each a `twin-1` worker (same id in both) and a
    device of its own (`only-fa`, `only-fb`)."""
    with LocalRedis(binary=redis_binary) as server:
        fleets: dict[str, LocalFleet] = {}
        try:
            for p in PREFIXES:
                # a 10 s lease: a late heartbeat on a loaded machine must not stand a worker down
                settings = quick_settings(
                    server.url, key_prefix=p, token=TOKEN, heartbeat_interval_s=1.0, lease_s=10.0
                )
                fleet = fleets[p] = LocalFleet(
                    settings,
                    log_dir=tmp_path / p,
                    extra_env={"GOALFLEET_SECRET_FLEET_PW": SECRET_VALUE},
                )
                (tmp_path / p).mkdir()
                fleet.start_api()
                fleet.start_scheduler()
                for device in ("twin-1", f"only-{p}"):
                    fleet.start_worker(SimWorker(device, "ios", labels={"fleet": p}))
            for p, fleet in fleets.items():
                fleet.wait_devices(["twin-1", f"only-{p}"], timeout_s=90)
            yield fleets
        finally:
            for fleet in fleets.values():
                fleet.stop()


def _foreign_keys(url: str) -> list[str]:
    """Keys in the DB that start with neither fleet's prefix."""
    db = redis.Redis.from_url(url, decode_responses=True)
    try:
        return sorted(
            k
            for k in db.scan_iter(count=1000)
            if not k.startswith(tuple(f"{p}:" for p in PREFIXES))
        )
    finally:
        db.close()


def _wait_keys(url: str, match: str, want: list[str], timeout_s: float = 30.0) -> list[str]:
    """The keys matching `match`, sorted: once they are `want` (any at all, for `want=[]`),
    or whatever they are after `timeout_s`."""
    db = redis.Redis.from_url(url, decode_responses=True)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            found = sorted(db.scan_iter(match=match, count=1000))
            if found == want or (not want and found) or time.monotonic() > deadline:
                return found
            time.sleep(0.1)
    finally:
        db.close()


def test_two_fleets_on_one_redis_never_mix(two_fleets: dict[str, LocalFleet]) -> None:
    """Runs for `twin-1` (the id both fleets use) end `done` in their own fleet; one fleet's
    API does not know the other's runs, lists only its own devices and exports only their
    metrics; and every key in the DB starts with `fa:` or `fb:`, Celery's and kombu's too."""
    url = two_fleets["fa"].settings.redis_url
    assert _foreign_keys(url) == []  # the workers' queue bindings, the registrations
    clients = {p: f.client() for p, f in two_fleets.items()}
    try:
        submitted: dict[str, list[RunRecord]] = {p: [] for p in PREFIXES}
        for _ in range(RUNS_EACH):  # interleaved, so both twin-1 queues hold runs at once
            for p, c in clients.items():
                submitted[p].append(c.submit_run({**SIGN_IN, "device": "twin-1"}))
        for p, c in clients.items():
            submitted[p].append(c.submit_run({**SIGN_IN, "device": f"only-{p}"}))
        assert _foreign_keys(url) == []  # with runs queued and in flight (unacked)
        for p, c in clients.items():
            finals = [c.wait(r.id, timeout_s=90) for r in submitted[p]]
            assert [f.status for f in finals] == [RunStatus.DONE] * len(finals), [
                (f.status, f.reason) for f in finals
            ]
            assert [f.device for f in finals] == ["twin-1"] * RUNS_EACH + [f"only-{p}"]

        for p, other in (("fa", "fb"), ("fb", "fa")):
            fleet = two_fleets[p]
            with httpx.Client(
                base_url=fleet.api_url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
            ) as http:
                for run in submitted[other]:
                    assert http.get(f"/v1/runs/{run.id}").status_code == 404
                metrics = http.get("/metrics").text
            assert f'"only-{p}"' in metrics
            assert f"only-{other}" not in metrics
            devices = clients[p].devices()
            assert sorted(d.info.id for d in devices) == sorted(["twin-1", f"only-{p}"])
            assert {d.info.labels["fleet"] for d in devices} == {p}

        for p in PREFIXES:
            assert _wait_keys(url, f"{Keys(p).celery}_kombu.binding.*", []) != []
        assert _foreign_keys(url) == []
    finally:
        for c in clients.values():
            c.close()


def test_celery_results_carry_the_fleets_prefix() -> None:
    """A task's result entry (when one is stored) is under the fleet's prefix too."""
    app = make_celery(Settings(redis_url="redis://127.0.0.1:9/0", key_prefix="fa"))
    assert app.backend.get_key_for_task("r1") == b"fa:celery:celery-task-meta-r1"
    options = app.conf.broker_transport_options
    assert options["global_keyprefix"] == "fa:celery:"
