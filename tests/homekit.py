"""The user's own directories, kept out of the tests' reach (tests/conftest.py).

Every test runs with HOME and the XDG state, cache, config and data homes pointed at a
temporary folder, in the test process and in every process it starts (they inherit the
environment). `REAL_HOME` and `REAL_GOALFLEET_DIRS` are read when this module is first
imported, before the fixture changes anything: the session's end compares what goalfleet keeps
there (`snapshot`) with what it kept at the start: a change fails the run under CI (and is a
warning elsewhere, where another process may share the home).
tests/conftest.py takes the fixture and the hook from here (`-p homekit` loads them alone).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

USER_DIRS = ("HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME")
"""The variables that name a user's directories; each gets a folder of its own."""

REAL_HOME = Path.home()


def _xdg(name: str, default: str) -> Path:
    return Path(os.environ.get(name) or REAL_HOME / default)


REAL_GOALFLEET_DIRS = tuple(
    _xdg(name, default) / "goalfleet"
    for name, default in (
        ("XDG_STATE_HOME", ".local/state"),
        ("XDG_CACHE_HOME", ".cache"),
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_DATA_HOME", ".local/share"),
    )
)
"""Where goalfleet keeps a user's files under the real home (state: the run history)."""


def snapshot() -> dict[str, tuple[int, int]]:
    """Every file under `REAL_GOALFLEET_DIRS`: its size and modification time (ns)."""
    seen: dict[str, tuple[int, int]] = {}
    for top in REAL_GOALFLEET_DIRS:
        for path in top.rglob("*") if top.is_dir() else ():
            try:
                st = path.lstat()
            except FileNotFoundError:  # removed while we looked
                continue
            seen[str(path)] = (st.st_size, st.st_mtime_ns)
    return seen


def changed(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    """The files made, changed or removed between two snapshots, sorted."""
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


_BEFORE = snapshot()


@pytest.fixture(scope="session", autouse=True)
def private_user_dirs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """HOME and every XDG user directory at a folder of their own under the session's temporary
    one, for the whole session (a child process inherits them); put back at the end."""
    root = tmp_path_factory.mktemp("user-dirs")
    saved = {name: os.environ.get(name) for name in USER_DIRS}
    for name in USER_DIRS:
        where = root / name.lower()
        where.mkdir(mode=0o700)
        os.environ[name] = str(where)
    yield root
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Say so if anything under the real home's goalfleet folders was made, changed or removed
    while the run lasted (xdist: the controller checks, once, after every worker); under CI the
    run fails. Elsewhere it is a warning: on a shared machine another process (a demo, an older
    checkout's tests) may write there meanwhile, and CI runs alone."""
    if hasattr(session.config, "workerinput"):
        return
    wrote = changed(_BEFORE, snapshot())
    if not wrote:
        return
    shown = ", ".join(wrote[:5]) + (f" and {len(wrote) - 5} more" if len(wrote) > 5 else "")
    line = (
        f"the tests (or another process meanwhile) wrote under the real home ({REAL_HOME}): {shown}"
    )
    if os.environ.get("CI"):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    else:
        line = f"warning: {line} (under CI=true this fails the run)"
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line, red=True, bold=True)
    else:
        print(line)  # noqa: T201 - no terminal reporter (-p no:terminal): the run's one line
