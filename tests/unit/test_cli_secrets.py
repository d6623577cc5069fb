"""Secrets only where they are used: `goalfleet api` and `goalfleet scheduler` refuse to start
with a `GOALFLEET_SECRET_*` variable in their environment (exit 2, one line naming the
variable and the fix, never its value); a worker's secret is the worker's alone."""

from __future__ import annotations

import os

import pytest
from clikit import goalfleet

from scheduler.cli._common import refuse_secrets
from workers.core.errors import ConfigError

VALUE = "hunter2-never-shown"


def test_a_secret_in_the_environment_is_refused_by_name() -> None:
    """The first variable (and how many more) is named; the values never are."""
    env = {"GOALFLEET_SECRET_SIGNIN_PASSWORD": VALUE, "GOALFLEET_SECRET_OTP": VALUE, "HOME": "/"}
    with pytest.raises(ConfigError) as refused:
        refuse_secrets("api", env)
    said = str(refused.value)
    assert said.startswith("GOALFLEET_SECRET_OTP (and 1 more) is set in this process's environ")
    assert "env -u GOALFLEET_SECRET_OTP" in said
    assert VALUE not in said
    refuse_secrets("api", {"GOALFLEET_API_TOKENS": "t", "GOALFLEET_SECRETS": "not one"})


@pytest.mark.slow  # the whole command as a process: make test, not make unit
@pytest.mark.parametrize("command", ["api", "scheduler"])
def test_api_and_scheduler_refuse_to_start_holding_a_secret(command: str) -> None:
    """Exit 2 before anything starts (no Redis is even asked: the URL leads nowhere)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOALFLEET_")}
    env |= {
        "GOALFLEET_REDIS_URL": "redis://127.0.0.1:1/0",
        "GOALFLEET_API_TOKENS": "t",
        "GOALFLEET_SECRET_SIGNIN_PASSWORD": VALUE,
    }
    argv = [command, "--port", "0"] if command == "api" else [command]
    proc = goalfleet(*argv, env=env, timeout_s=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(
        f"goalfleet {command}: GOALFLEET_SECRET_SIGNIN_PASSWORD is set in this process's"
    ), proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert VALUE not in proc.stderr + proc.stdout
