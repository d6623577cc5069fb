"""`goalfleet history` says which history it reads on its first line (and in `--json`), and
when the fleet it talks to (GOALFLEET_API_URL, with a token) records its runs elsewhere or not
at all: the fleet's API says where in its `/health` detail. Each case is the real command as a
process against the real API served over HTTP."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from clikit import goalfleet
from conftest import TOKEN, Served, create
from fleetkit import quick_settings

from scheduler.local.redis import LocalRedis


def _env(api: str | None, **over: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOALFLEET_")}
    if api is not None:
        env |= {"GOALFLEET_API_URL": api, "GOALFLEET_API_TOKEN": TOKEN, "GOALFLEET_API_WAIT_S": "0"}
    return env | over


def _history(env: dict[str, str], *flags: str) -> tuple[list[str], str]:
    proc = goalfleet("history", *flags, env=env, timeout_s=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines(), proc.stdout


def test_the_first_line_names_the_embedded_history() -> None:
    """No database URL: the embedded history under the user's state folder, named as such."""
    lines, _ = _history(_env(None))
    embedded = Path(os.environ["XDG_STATE_HOME"]) / "goalfleet" / "history.db"
    assert lines[0].startswith(f"history sqlite:///{embedded} (this machine's own"), lines[0]
    assert not any("the fleet at" in line for line in lines)


@pytest.mark.parametrize("fleet_keeps", ["none", "its own"])
def test_it_says_when_the_fleet_records_its_history_elsewhere(
    redis_server: LocalRedis, serve: type[Served], tmp_path: Path, fleet_keeps: str
) -> None:
    """A fleet without a database keeps no history; one with a database other than the one
    read here keeps it there: the second line says which, with the fix."""
    fleet_url = f"sqlite:///{tmp_path / 'fleet.db'}" if fleet_keeps == "its own" else None
    over = {"database_url": fleet_url} if fleet_url else {}
    settings = quick_settings(redis_server.url, key_prefix="gfhw", token=TOKEN, **over)
    served = serve(create(settings))
    lines, _ = _history(_env(served.url))
    assert lines[0].startswith("history sqlite:///"), lines[0]
    if fleet_url is None:
        assert lines[1] == (
            f"the fleet at {served.url} records no history (its API has no "
            "GOALFLEET_DATABASE_URL): its runs are in none"
        )
    else:
        assert lines[1] == (
            f"the fleet at {served.url} records its history in {fleet_url}, not here: "
            "set GOALFLEET_DATABASE_URL to it to read that one"
        )
    # the same database: nothing more to say
    if fleet_url is not None:
        lines, out = _history(_env(served.url, GOALFLEET_DATABASE_URL=fleet_url), "--json")
        report = json.loads(out)
        assert report["where"] == fleet_url
        assert report["store"] == "GOALFLEET_DATABASE_URL"
        assert report["fleet"] == {"api": served.url, "history": fleet_url}
        lines, _ = _history(_env(served.url, GOALFLEET_DATABASE_URL=fleet_url))
        assert lines[0].startswith(f"history {fleet_url} (GOALFLEET_DATABASE_URL): "), lines[0]
        assert not any("the fleet at" in line for line in lines)
