"""The app under test at the edges: `goalfleet worker`'s app flags and the run request's `app`
and `reset` fields; bad input is an error naming the field and the fix."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from scheduler.cli.main import build_parser
from scheduler.cli.worker import spec_from
from workers.core.app import AppConfig, AppRequest, ResetPolicy
from workers.core.errors import ConfigError
from workers.core.request import GoalRunRequest

LINUX = ("worker", "--device", "gtk-1", "--backend", "agent-device", "--platform", "linux")


def spec(*argv: str):
    return spec_from(build_parser().parse_args(list(argv)))


def test_a_linux_worker_with_an_app_command_serves_it_relaunched_by_default():
    got = spec(
        *LINUX, "--app-id", "signin", "--app-command", "/usr/bin/app --x", "--app-version", "2"
    )
    assert got.app == AppConfig(
        id="signin", command="/usr/bin/app --x", version="2", reset=ResetPolicy.RELAUNCH
    )


def test_a_worker_without_app_flags_serves_no_app():
    assert spec(*LINUX).app is None


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (("--reset", "relaunch"), "--reset relaunch needs --app-id"),
        (("--app-id", "bad id!"), "--app-id"),
    ],
)
def test_bad_app_flags_name_the_flag(extra: tuple[str, ...], match: str):
    with pytest.raises(ConfigError, match=match):
        spec(*LINUX, *extra)


def test_an_app_command_is_for_the_linux_target_only():
    argv = ("worker", "--device", "emulator-5554", "--backend", "agent-device")
    with pytest.raises(ConfigError, match="--app-command is for --platform linux"):
        spec(*argv, "--platform", "android", "--app-command", "/usr/bin/app")


def test_the_request_carries_the_app_and_the_reset():
    req = GoalRunRequest.model_validate(
        {
            "goal": "Sign in",
            "app": {"id": "com.example.app", "version": "2.1"},
            "reset": "clear-state",
        }
    )
    assert req.app == AppRequest(id="com.example.app", version="2.1")
    assert req.reset is ResetPolicy.CLEAR_STATE


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"app": {"id": "no spaces"}}, "app.id"),
        ({"app": {"id": "x", "command": "/bin/sh -c evil"}}, "app.command"),
        ({"reset": "reboot"}, "reset"),
    ],
)
def test_a_bad_app_or_reset_in_a_request_names_the_field(body: dict[str, object], field: str):
    """No command can come with a request: a worker's command is its own configuration."""
    with pytest.raises(ValidationError) as info:
        GoalRunRequest.model_validate({"goal": "Sign in", **body})
    assert field in ".".join(str(p) for p in info.value.errors()[0]["loc"])


def test_the_start_line_names_the_app_and_its_reset():
    from scheduler.cli.worker import _describe  # noqa: PLC0415
    from workers.settings import Settings  # noqa: PLC0415

    got = spec(*LINUX, "--app-id", "signin", "--app-command", "/usr/bin/app", "--app-version", "2")
    line = _describe(got, Settings(redis_url="redis://127.0.0.1:6379/0"))
    assert "app signin 2 (reset relaunch before each run)" in line
