"""The GTK sign-in app on a bench's private desktop (tests/apps/gtk_signin.py)."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from testing.linux_desktop import LinuxDesktop, desktop_with_daemon
from workers.devices.agent_device.daemon import DaemonProcess

APP = Path(__file__).resolve().parents[1] / "tests" / "apps" / "gtk_signin.py"


def start_signin(desk: LinuxDesktop, tmp: Path) -> None:
    """Start the app on `desk` (its state file in `tmp`), up and registered on the AT-SPI bus."""
    state = tmp / "app.json"
    desk.start_app(
        ["/usr/bin/python3", str(APP)],
        extra_env={"GTK_SIGNIN_STATE_FILE": str(state)},
        ready=state.exists,
    )
    time.sleep(1.0)  # let the app register on the AT-SPI bus


@contextmanager
def signin_lab() -> Iterator[tuple[LinuxDesktop, DaemonProcess]]:
    """A private desktop, a daemon on it and the sign-in app, all stopped on the way out."""
    with (
        tempfile.TemporaryDirectory(prefix="gf-bench-", ignore_cleanup_errors=True) as tmp,
        desktop_with_daemon(Path(tmp)) as (desk, daemon),
    ):
        start_signin(desk, Path(tmp))
        yield desk, daemon
