"""Tests never touch the user's own files: every user directory is a temporary one
(tests/homekit.py, loaded by tests/conftest.py)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from homekit import REAL_HOME, USER_DIRS

from scheduler.store.history.store import SqlHistory
from workers.settings import Settings, state_dir


def test_every_user_directory_is_a_temporary_one() -> None:
    """HOME and the XDG state, cache, config and data homes all lie outside the real home, and
    the history `goalfleet run` writes goes there too."""
    for name in USER_DIRS:
        where = Path(os.environ[name])
        assert where.is_dir(), name
        assert not where.is_relative_to(REAL_HOME), f"{name}={where} is under {REAL_HOME}"
    assert Path.home() == Path(os.environ["HOME"])
    assert not state_dir().is_relative_to(REAL_HOME)
    assert not Settings().history_path.is_relative_to(REAL_HOME)


def test_a_process_a_test_starts_gets_the_same_directories() -> None:
    """A child process (a `goalfleet` command a test runs) sees the temporary directories."""
    code = f"import os; print('\\n'.join(os.environ[n] for n in {USER_DIRS!r}))"
    seen = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert seen == [os.environ[name] for name in USER_DIRS]


def test_the_embedded_history_is_private(tmp_path: Path) -> None:
    """The history file (and SQLite's journal files beside it) is made 0600, its folder 0700:
    a run's goals and devices are the user's own."""
    path = tmp_path / "state" / "goalfleet" / "history.db"
    store = SqlHistory.open(f"sqlite:///{path}", upgrade=True)
    try:
        assert store.pass_rates(0, 1) == []
    finally:
        store.close()
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    made = sorted(path.parent.iterdir())
    assert path in made
    for file in made:
        assert stat.S_IMODE(file.stat().st_mode) == 0o600, file.name


WRITER = """
import os
from pathlib import Path


def test_writes_a_history() -> None:
    default = Path.home() / ".local" / "state" / "goalfleet"
    where = Path(os.environ.get("GF_WRITE_UNDER") or default) / "history.db"
    where.parent.mkdir(parents=True, exist_ok=True)
    where.write_text("a run the user never had")
"""


@pytest.mark.parametrize(
    ("home", "ci", "code", "said"),
    [
        ("real", "true", 1, "the tests (or another process meanwhile) wrote under the real home"),
        ("real", "", 0, "warning: the tests (or another process meanwhile) wrote under"),
        ("own", "true", 0, None),
    ],
)
def test_a_run_that_writes_under_the_real_home_fails_under_ci(
    tmp_path: Path, home: str, ci: str, code: int, said: str | None
) -> None:
    """The session's end fails a pytest run (under CI; elsewhere it warns) whose test wrote into
    the real home's goalfleet state (the run's HOME at `real-home`), and says nothing of a run
    that wrote only under the HOME the fixture gave it."""
    real_home = tmp_path / "real-home"
    real_home.mkdir()
    (tmp_path / "test_writer.py").write_text(WRITER)
    env = {k: v for k, v in os.environ.items() if k not in USER_DIRS and k != "PYTEST_ADDOPTS"}
    env |= {
        "HOME": str(real_home),
        "PYTHONPATH": str(Path(__file__).parents[1]),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "CI": ci,
    }
    if home == "real":
        env["GF_WRITE_UNDER"] = str(real_home / ".local" / "state" / "goalfleet")
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "homekit", "-q", "-p", "no:cacheprovider",
         "test_writer.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    out = ran.stdout + ran.stderr
    assert ran.returncode == code, out
    if said is None:
        assert "real home" not in out, out
    else:
        assert said in out, out
        assert "history.db" in out, out
