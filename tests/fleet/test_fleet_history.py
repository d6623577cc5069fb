"""The run history through a whole fleet (API and scheduler in-process, sim workers as
processes, a real Redis) into a scratch database on the machine's PostgreSQL: runs with a
secret and with a plain-field secret (a one-time code typed into a plain field) end `done`,
reach the database through the outbox, and no column of any table holds a secret or a typed
value. `goalfleet history` and `GET /v1/history` then answer from the same rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pgkit
import psycopg
import pytest
from conftest import SECRET_VALUE, SIGN_IN, TOKEN
from fleetkit import quick_settings

from scheduler.local.fleet import LocalFleet, SimWorker
from scheduler.local.redis import LocalRedis
from scheduler.store.history.db import Database
from workers.core.model import RunStatus
from workers.devices.sim.apps import OTP_CODE

PHONE = "5551234567"
EMAIL = "ada@example.com"
TYPED = (SECRET_VALUE, OTP_CODE, PHONE, EMAIL)
OTP_RUN = {
    "goal": "Sign in",
    "device": "hist-privacy",
    "inputs": {"phone": PHONE},
    "secrets": {"code": {"ref": "env:FLEET_OTP", "plain_field": True}},
    "done_when": "You're in",
}


@pytest.fixture(scope="module")
def history_fleet(
    redis_server: LocalRedis, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LocalFleet, str]]:
    with pgkit.scratch_database() as url:
        assert Database(url).upgrade() == ["0001_runs_steps", "0002_run_cost"]
        settings = quick_settings(redis_server.url, key_prefix="gfh", token=TOKEN, database_url=url)
        env = {"GOALFLEET_SECRET_FLEET_PW": SECRET_VALUE, "GOALFLEET_SECRET_FLEET_OTP": OTP_CODE}
        workers = [
            SimWorker("hist-ios", "ios", "17.5", "iPhone 15", {"pool": "hist"}),
            SimWorker("hist-privacy", "android", "14", "Pixel 8", app="privacy"),
        ]
        logs = tmp_path_factory.mktemp("history-fleet")
        with LocalFleet(settings, log_dir=logs, extra_env=env) as fleet:
            yield fleet.start_all(workers, timeout_s=90), url


def _every_value(url: str) -> dict[str, list[str]]:
    """Every column of every table in the database's public schema, as text."""
    out: dict[str, list[str]] = {}
    with psycopg.connect(url) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            )
        ]
        for table in tables:
            rows = conn.execute(f'SELECT * FROM "{table}"').fetchall()  # noqa: S608 - its names
            out[table] = [str(v) for row in rows for v in row]
    return out


def _stored(url: str, ids: list[str], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            got = conn.execute("SELECT COUNT(*) FROM runs WHERE run_id = ANY(%s)", (ids,))
            row = got.fetchone()
            if row is not None and row[0] == len(ids):
                return
            assert time.monotonic() < deadline, f"{row} of {len(ids)} runs stored"
            time.sleep(0.2)


def test_no_column_holds_a_secret_or_a_typed_value(
    history_fleet: tuple[LocalFleet, str],
) -> None:
    fleet, url = history_fleet
    with fleet.client() as c:
        runs = [
            c.submit_run({**SIGN_IN, "device": "hist-ios"}),
            c.submit_run({**SIGN_IN, "device": "hist-ios"}),
            c.submit_run(OTP_RUN),
        ]
        ended = [c.wait(r.id, timeout_s=60) for r in runs]
    assert [r.status for r in ended] == [RunStatus.DONE] * 3, [r.reason for r in ended]
    ids = [r.id for r in runs]
    _stored(url, ids)
    values = _every_value(url)
    assert set(values) == {"runs", "steps", "step_hist", "schema_migrations"}
    hits = {t: [v for v in vs if any(typed in v for typed in TYPED)] for t, vs in values.items()}
    assert hits == {table: [] for table in values}
    # the scan can see: the runs and their fills are there, by input name
    assert set(ids) <= set(values["runs"])
    assert "fill 'Verification code' <- {code}" in values["steps"]
    assert any("<- {password}" in v for v in values["steps"])

    # the same rows through the CLI (a process of its own) and the API
    cli = subprocess.run(
        [sys.executable, "-m", "scheduler", "history", "--since", "1h", "--json"],
        env={**os.environ, "GOALFLEET_DATABASE_URL": url},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert cli.returncode == 0, cli.stderr
    report = json.loads(cli.stdout)
    rates = {(r["flow"], r["device_class"]): r for r in report["pass_rates"]}
    assert rates["Sign in", "ios/iPhone 15/17"]["runs"] == 2
    assert rates["Sign in", "android/Pixel 8/14"]["pass_rate"] == 1.0
    with httpx.Client(base_url=fleet.api_url, headers={"Authorization": f"Bearer {TOKEN}"}) as h:
        api = h.get("/v1/history/pass-rates", params={"since": "1h"})
        assert api.status_code == 200, api.text
        assert {(r["flow"], r["device_class"]) for r in api.json()} == set(rates)
        bad = h.get("/v1/history", params={"since": "yesterday"})
        assert bad.status_code == 422
        assert "since" in bad.text
