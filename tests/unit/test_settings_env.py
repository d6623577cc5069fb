"""How `Settings()` reads the environment (`workers.settings`): each field from its keyword,
else its `GOALFLEET_<FIELD>` variable (any case), else its default; every value validated,
defaults too; a bad variable is one line naming it and the fix (`load_settings`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from scheduler.cli._common import load_settings
from workers.core.access import Role
from workers.core.errors import ConfigError
from workers.settings import Settings


@pytest.fixture(autouse=True)
def _no_goalfleet_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts from an environment without `GOALFLEET_*` variables."""
    for key in [k for k in os.environ if k.lower().startswith("goalfleet_")]:
        monkeypatch.delenv(key)


def test_each_field_comes_from_its_variable_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Strings become the field's type: int, float, bool, Path, SecretStr, Literal."""
    monkeypatch.setenv("GOALFLEET_API_PORT", "9001")
    monkeypatch.setenv("GOALFLEET_API_WAIT_S", "0.5")
    monkeypatch.setenv("GOALFLEET_MEMORY", "false")
    monkeypatch.setenv("GOALFLEET_ARTIFACT_DIR", "/srv/shots")
    monkeypatch.setenv("GOALFLEET_API_TOKEN", "t-1")
    monkeypatch.setenv("GOALFLEET_SCREENSHOTS", "failure-only")
    s = Settings()
    assert (s.api_port, s.api_wait_s, s.memory) == (9001, 0.5, False)
    assert s.artifact_dir == Path("/srv/shots")
    assert isinstance(s.api_token, SecretStr)
    assert s.api_token.get_secret_value() == "t-1"
    assert s.screenshots == "failure-only"


def test_variable_names_match_in_any_case_and_others_are_ignored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("goalfleet_key_prefix", "lower")
    monkeypatch.setenv("GOALFLEET_NO_SUCH_KNOB", "x")
    monkeypatch.setenv("GOALFLEET_SECRET_PW", "hunter2")  # a worker's secret, not a setting
    monkeypatch.setenv("KEY_PREFIX", "unprefixed")
    s = Settings()
    assert s.key_prefix == "lower"
    assert "hunter2" not in repr(s.to_env())


def test_a_keyword_wins_over_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOALFLEET_API_PORT", "9001")
    monkeypatch.setenv("GOALFLEET_API_TOKEN", "from-env")
    s = Settings(api_port=9002, api_token=None)
    assert (s.api_port, s.api_token) == (9002, None)
    assert Settings().api_port == 9001


def test_lists_and_roles_are_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOALFLEET_API_TOKENS", "alice:a-1, bob:b-2,")
    monkeypatch.setenv("GOALFLEET_API_ROLES", "alice:submit+answer,bob:admin")
    monkeypatch.setenv("GOALFLEET_ESCALATE_TO", "openai/gpt-4o-mini,openai/gpt-4o")
    monkeypatch.setenv("GOALFLEET_DANGEROUS_CONTROLS", "")
    s = Settings()
    assert s.named_tokens() == [("alice", "a-1"), ("bob", "b-2")]
    assert s.api_roles == {"alice": {Role.SUBMIT, Role.ANSWER}, "bob": {Role.ADMIN}}
    assert s.escalate_to == ["openai/gpt-4o-mini", "openai/gpt-4o"]
    assert s.dangerous_controls == []  # empty turns the guard off


def test_settings_from_to_env_are_the_same_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """A child process given `to_env()` reads the settings its parent had."""
    given = Settings(api_tokens="alice:a-1", api_roles="alice:read", key_prefix="kid")
    for key, value in given.to_env().items():
        monkeypatch.setenv(key, value)
    assert Settings() == given


def test_defaults_are_validated_too() -> None:
    """The limits' order is checked on the defaults' values as well (`validate_default`)."""
    with pytest.raises(ValidationError, match="soft_time_limit_s < time_limit_s"):
        Settings(time_limit_s=200.0)


@pytest.mark.parametrize(
    ("name", "value", "line"),
    [
        ("GOALFLEET_API_PORT", "abc", "GOALFLEET_API_PORT: Input should be a valid integer"),
        ("GOALFLEET_API_PORT", "70000", "GOALFLEET_API_PORT: Input should be less than or"),
        ("GOALFLEET_MEMORY", "maybe", "GOALFLEET_MEMORY: Input should be a valid boolean"),
        ("GOALFLEET_API_URL", "127.0.0.1:8797", "GOALFLEET_API_URL: '127.0.0.1:8797' is not a"),
        ("GOALFLEET_MODEL_MODE", "json_schema", "GOALFLEET_MODEL_MODE: model mode 'json_schema'"),
        ("GOALFLEET_API_ROLES", "nonsense", "GOALFLEET_API_ROLES: 'nonsense' is not name:roles"),
        ("GOALFLEET_TIME_LIMIT_S", "100", "raise GOALFLEET_TIME_LIMIT_S"),
    ],
)
def test_a_bad_variable_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, line: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as err:
        load_settings()
    assert line in str(err.value)
    assert "\n" not in str(err.value)


def test_reading_settings_imports_no_model_or_settings_library() -> None:
    """`workers.settings` (what every command reads first) loads pydantic and nothing of the
    step models, the records or pydantic-settings (bench/bench_cli_start.py: their import is
    most of a client command's start)."""
    probe = (
        "import sys, workers.settings; workers.settings.Settings(); "
        "print(' '.join(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    heavy = {"pydantic_settings", "workers.core.model", "workers.core.records", "asyncio"}
    assert not heavy & set(out), sorted(heavy & set(out))
    assert "pydantic" in out


def test_the_embedded_history_is_the_users_own_and_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`goalfleet run`'s history is under `$XDG_STATE_HOME/goalfleet` (else
    `~/.local/state/goalfleet`), not the shared, cleared-at-boot temp folder; the history makes
    its folder private (0700)."""
    from scheduler.store.history.store import SqlHistory  # noqa: PLC0415 - the writer

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    s = Settings()
    assert s.history_path == tmp_path / "state" / "goalfleet" / "history.db"
    SqlHistory.open(s.history_url(), upgrade=True).close()
    assert s.history_path.exists()
    assert (s.history_path.parent.stat().st_mode & 0o777) == 0o700
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert Settings().history_path == tmp_path / "home" / ".local/state/goalfleet/history.db"
