"""A fleet worker on the real Linux target owns its daemon: a pool child SIGKILLed mid-run
leaves no broken device (the redelivered run ends `done`), and stopping the worker mid-run leaves
no daemon process. Real Redis, real API and scheduler, a real `goalfleet worker`."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from ad_support import (
    PASSWORD,
    App,
    daemons_under,
    kill_owner,
    sign_in_body,
    start_leftover_owner,
)
from fleetkit import quick_settings

from scheduler.client.api_client import FleetClient
from scheduler.local.fleet import LocalFleet
from scheduler.local.redis import LocalRedis
from testing.linux_desktop import LinuxDesktop
from workers.core.model import RunStatus
from workers.core.records import RunRecord
from workers.processes import spawn, stop_group

TOKEN = "ad-worker-token"
DEVICE = "lx-1"
SIGN_IN = sign_in_body(DEVICE)


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


@pytest.fixture
def bare_fleet(redis_binary: str, desktop: LinuxDesktop, tmp_path: Path) -> Iterator[LocalFleet]:
    """The API and the scheduler; `start_worker` adds the agent-device worker for the desktop's
    app, with a HOME of its own (so its daemon's state dir is the test's)."""
    home = tmp_path / "home"
    env = {
        **{k: v for k, v in desktop.env.items() if k != "PATH"},
        "HOME": str(home),
        "GOALFLEET_SECRET_GF_PW": PASSWORD,
    }
    with LocalRedis(binary=redis_binary) as server:
        settings = quick_settings(server.url, key_prefix="gfad", token=TOKEN)
        with LocalFleet(settings, log_dir=tmp_path, extra_env=env) as f:
            f.start_api()
            f.start_scheduler()
            yield f
        for pid in daemons_under(home):
            stop_group(pid, 5.0)


def start_worker(fleet: LocalFleet) -> None:
    argv = [
        *(sys.executable, "-m", "scheduler", "worker", "--device", DEVICE),
        *("--backend", "agent-device", "--platform", "linux"),
        *("--target", "agent-device:linux", "--loglevel", "INFO"),
    ]
    log = fleet.log_dir / f"worker-{DEVICE}.log"
    fleet.workers[DEVICE] = spawn(argv, env=fleet.env, log=log)
    fleet.wait_devices([DEVICE], timeout_s=90)


@pytest.fixture
def fleet(bare_fleet: LocalFleet) -> LocalFleet:
    """`bare_fleet` with its worker up."""
    start_worker(bare_fleet)
    return bare_fleet


def state_root(fleet: LocalFleet) -> Path:
    return Path(fleet.env["HOME"]) / ".cache" / "goalfleet"


def wait_for(what: str, check: Callable[[], object], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def wait_terminal(c: FleetClient, run_id: str, timeout_s: float = 120.0) -> RunRecord:
    deadline = time.monotonic() + timeout_s
    while not (run := c.run(run_id)).status.terminal:
        assert time.monotonic() < deadline, run
        time.sleep(0.2)
    return run


def test_a_pool_child_killed_mid_run_leaves_the_device_working(fleet: LocalFleet, app: App):
    """SIGKILL the worker's pool child while its run drives the app: the run is redelivered to
    a new pool child and ends `done` on its second attempt; a later run is `done` too."""
    root = state_root(fleet)
    worker = fleet.workers[DEVICE]
    with fleet.client() as c:
        run = c.submit_run(SIGN_IN)
        wait_for("the run's daemon", lambda: daemons_under(root))
        wait_for("a device action", lambda: c.steps(run.id))
        for pid in children(worker.pid):
            os.kill(pid, signal.SIGKILL)
        done = wait_terminal(c, run.id)
        assert done.status is RunStatus.DONE, done.reason
        assert app.state()["screen"] == "welcome"
        assert done.attempt == 2
        again = wait_terminal(c, c.submit_run(SIGN_IN).id)
        assert again.status is RunStatus.DONE, again.reason


def test_stopping_a_worker_mid_run_leaves_no_daemon(fleet: LocalFleet, app: App):
    """Stop the worker (SIGTERM to its group, then SIGKILL after a short grace) while a run
    drives the app: no daemon process of its state dir is left."""
    root = state_root(fleet)
    with fleet.client() as c:
        c.submit_run(SIGN_IN)
        wait_for("the run's daemon", lambda: daemons_under(root))
        fleet.stop_worker(DEVICE, grace_s=1.0)
    deadline = time.monotonic() + 20
    while daemons_under(root) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert daemons_under(root) == []


def test_a_worker_stops_a_dead_owners_daemon_before_its_first_run(
    bare_fleet: LocalFleet, desktop: LinuxDesktop, app: App, tmp_path: Path
):
    """A daemon left in the worker's state dir by a dead owner, its session open: the worker
    stops it when it starts, before any run; its first run ends `done`."""
    root = state_root(bare_fleet)
    home = Path(bare_fleet.env["HOME"])
    owner, leftover = start_leftover_owner(
        desktop, root / "agent-device", tmp_path / "owner.log", home=home
    )
    kill_owner(owner)
    assert leftover in daemons_under(root)
    start_worker(bare_fleet)
    wait_for("the leftover daemon to go", lambda: leftover not in daemons_under(root), 30)
    with bare_fleet.client() as c:
        run = wait_terminal(c, c.submit_run(SIGN_IN).id)
    assert run.status is RunStatus.DONE, run.reason
    assert run.attempt == 1
