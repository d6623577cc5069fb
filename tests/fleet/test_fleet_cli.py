"""The CLI against the test fleet, as a user types it: run ids as the tables show them
(prefixes), `submit --watch --json` piped into a JSON parser, and output that survives a pipe
(full width, the run id on its own line)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from conftest import SECRET_VALUE, TOKEN
from conftest import SIGN_IN as SIGN_IN_BODY

from scheduler.client.api_client import ApiError, FleetClient
from scheduler.local.fleet import LocalFleet
from workers.fleet.keys import Keys
from workers.settings import Settings

SUBMIT = ["submit", "--device", "ios-1", "--goal", "Sign in", "--input", "email=ada@example.com"]
SUBMIT += ["--secret", "password=env:FLEET_PW", "--done-when", "Welcome"]


@pytest.fixture
def cli_env(fleet: LocalFleet) -> dict[str, str]:
    """The CLI's environment for this fleet."""
    return {**os.environ, "GOALFLEET_API_URL": fleet.api_url, "GOALFLEET_API_TOKEN": TOKEN}


def goalfleet(env: dict[str, str], *argv: str) -> tuple[int, str, str]:
    """The installed CLI in a fresh process (this one's stdout carries the API's logs)."""
    proc = subprocess.run(
        [sys.executable, "-m", "scheduler.cli.main", *argv],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def done_run(cli_env: dict[str, str]) -> str:
    code, out, _ = goalfleet(cli_env, *SUBMIT, "--watch", "--json")
    assert code == 0
    return str(json.loads(out)["id"])


def test_prefixes_name_runs_in_status_steps_watch_cancel(
    cli_env: dict[str, str], done_run: str
) -> None:
    """8 characters (as the tables show) or 6 work wherever a run id is asked for."""
    code, out, _ = goalfleet(cli_env, "status", done_run[:8], "--json")
    assert (code, json.loads(out)["id"]) == (0, done_run)
    code, out, _ = goalfleet(cli_env, "steps", done_run[:6], "--json")
    assert code == 0
    assert json.loads(out)
    code, out, _ = goalfleet(cli_env, "watch", done_run[:8], "--json")
    assert (code, json.loads(out)["id"]) == (0, done_run)
    code, _, err = goalfleet(cli_env, "cancel", done_run[:8])
    assert code == 2
    assert f"run {done_run} already ended (done)" in err  # found, not "no run"


def test_steps_saves_the_picture_of_every_step_a_fleet_run_took(
    cli_env: dict[str, str], done_run: str, tmp_path: Path
) -> None:
    """The sim worker's pictures, through the fleet's wrappers (fence, logs, metrics), the
    shared artifact directory and the screenshot route, saved by `goalfleet steps`."""
    shots = tmp_path / "shots"
    code, out, err = goalfleet(
        cli_env, "steps", done_run[:8], "--json", "--screenshots", str(shots)
    )
    assert code == 0, err
    rows = json.loads(out)
    assert all(r["screenshot"] for r in rows), [r["screenshot_note"] for r in rows]
    saved = sorted(p.name for p in shots.iterdir())
    assert saved == [f"step-{r['index']:03d}.png" for r in rows]
    assert all((shots / n).read_bytes().startswith(b"\x89PNG\r\n\x1a\n") for n in saved)
    assert f"saved {len(rows)} screenshot(s)" in err


def test_an_ambiguous_prefix_lists_the_matches(
    cli_env: dict[str, str], db: redis.Redis, settings: Settings
) -> None:
    keys = Keys(settings.key_prefix)
    twins = ["abcdef12" + "0" * 24, "abcdef34" + "0" * 24]
    for run_id in twins:
        db.hset(keys.run(run_id), "id", run_id)
    try:
        code, _, err = goalfleet(cli_env, "status", "abcdef")
    finally:
        db.delete(*(keys.run(r) for r in twins))
    assert code == 2
    assert "ambiguous" in err
    assert all(run_id in err for run_id in twins)
    assert len(err.strip().splitlines()) == 1


def test_submit_watch_json_pipes_into_a_json_parser(cli_env: dict[str, str]) -> None:
    """`goalfleet submit --watch --json | python -m json.tool`: stdout is one JSON document."""
    submit = subprocess.run(  # stdout into a pipe, as `| python -m json.tool` gives it
        [sys.executable, "-m", "scheduler.cli.main", *SUBMIT, "--watch", "--json"],
        env=cli_env,
        capture_output=True,
        check=False,
        timeout=120,
    )
    tool = subprocess.run(
        [sys.executable, "-m", "json.tool"],
        input=submit.stdout.decode(),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert submit.returncode == 0, submit.stderr
    assert tool.returncode == 0, tool.stderr
    assert json.loads(tool.stdout)["status"] == "done"
    assert submit.stderr == b""  # no live view in a pipe
    assert SECRET_VALUE not in tool.stdout


def test_piped_output_is_full_width_with_the_run_id_on_its_own_line(
    cli_env: dict[str, str],
) -> None:
    """In a pipe: the final table once, plain (no box-drawing lines), one line per step,
    nothing cut to 80 columns, then the run id alone on the last line."""
    code, out, _ = goalfleet(cli_env, *SUBMIT, "--watch")
    assert code == 0
    assert not any(0x2500 <= ord(c) <= 0x257F for c in out), out
    assert out.count("on ios-1 (attempt") == 1  # the live view, printed once
    steps = [line.split()[0] for line in out.splitlines()[2:-1]]  # status line, header … id
    assert steps == [str(i) for i in range(1, len(steps) + 1)], out
    lines = out.rstrip("\n").splitlines()
    run_id = lines[-1]
    assert len(run_id) == 32
    assert all(c in "0123456789abcdef" for c in run_id)
    assert "{email}" in out  # the fill names its input whole; no row holds a typed value
    assert "ada@example.com" not in out
    assert "…" not in out
    assert out.count("Sign in") >= 1
    code, out, _ = goalfleet(cli_env, "status", run_id[:8])
    assert code == 0
    assert "…" not in out
    assert not any(0x2500 <= ord(c) <= 0x257F for c in out), out
    assert any("~s" in line and "@e" in line for line in out.splitlines())


def test_a_rejected_submit_and_a_wrong_token_are_one_line_each(cli_env: dict[str, str]) -> None:
    """A 422 names the field and fix once (not the message, then the same problem again);
    a wrong token says which variable to set."""
    code, out, err = goalfleet(cli_env, *SUBMIT, "--priority", "99")
    assert (code, out) == (2, "")
    assert err.count("priority") == 1, err
    assert len(err.strip().splitlines()) == 1, err
    code, _, err = goalfleet({**cli_env, "GOALFLEET_API_TOKEN": "wrong"}, "devices")
    assert code == 2
    assert "set GOALFLEET_API_TOKEN" in err
    assert len(err.strip().splitlines()) == 1, err


HOSTILE = "[bold red]PWNED[/bold red] [link=http://evil.example]click[/link] \x1b[31mred"


def test_markup_and_escapes_a_submitter_typed_print_inert(
    api: FleetClient, cli_env: dict[str, str]
) -> None:
    """A goal holding Rich markup and a typed value holding markup and an escape sequence:
    the API keeps them as given (a goal with the escape itself is refused: goals are plain
    text); `status` prints the goal as typed, its markup inert (no style, no link, no escape
    sequence reaches the terminal); no step row holds the typed value (`steps` and `watch` show
    its input's name)."""
    goal, email = f"Sign in {HOSTILE.replace(chr(27), '')}", f"ada@example.com{HOSTILE}"
    body = {**SIGN_IN_BODY, "device": "ios-1", "goal": goal, "inputs": {"email": email}}
    with pytest.raises(ApiError, match="goal: holds a control, bidi or invisible character"):
        api.submit_run({**body, "goal": f"Sign in {HOSTILE}"})
    run = api.submit_run(body)
    ended = api.wait(run.id, timeout_s=120)
    assert (ended.request.goal, ended.request.inputs["email"]) == (goal, email)  # as given
    shown = HOSTILE.replace("\x1b", "")  # the goal's markup, printed as typed
    for argv in (["status", run.id[:8]], ["steps", run.id[:8]], ["watch", run.id[:8]]):
        code, out, err = goalfleet(cli_env, *argv)
        assert code in {0, 1}, err  # 1: the run ended but not done (watch)
        assert "\x1b" not in out + err
        assert "ada@example.com" not in out  # the typed value: in no row
        if argv[0] != "status":  # the rows: the fill names its input
            assert "{email}" in out, out
        else:  # the goal, in the title (which may wrap where the table is narrower)
            assert " ".join(shown.split()) in " ".join(out.split()), (argv, out)
    _, out, _ = goalfleet(cli_env, "status", run.id[:8])
    title = " ".join(f"Sign in {shown} → {ended.status.value}".split())
    assert title in " ".join(out.split())  # the goal, in the table's title


def test_submit_without_the_secret_presses_nothing_over_the_empty_password(
    cli_env: dict[str, str],
) -> None:
    """`goalfleet submit` without the secret (issue 42) used to press "Sign in" over the empty
    password field. Through the fleet now: `blocked`, the reason naming the field and the
    missing input, and no action at all on the password screen."""
    without = SUBMIT[: SUBMIT.index("--secret")]
    code, out, err = goalfleet(cli_env, *without, "--watch", "--json")
    result = json.loads(out)
    assert result["status"] == "blocked", err
    assert result["reason"] == (
        "this screen asks for 'Password'; no input named password was supplied"
    )
    code, out, err = goalfleet(cli_env, "steps", result["id"], "--json")
    assert code == 0, err
    rows = json.loads(out)
    on_password = [r for r in rows if r["screen"] == "Enter your password"]
    assert on_password
    assert [r["action"] for r in on_password] == [None]
