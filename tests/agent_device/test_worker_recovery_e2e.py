"""A device recovers by its reset policy, on the path a user runs (issue 42, item 6): a real
`goalfleet worker` on the Linux target (the real daemon, the GTK sign-in app started from its
`--app-command`), a real Redis, the API and the scheduler, one errored run enough to quarantine
(`GOALFLEET_QUARANTINE_AFTER=1`), a probe every 2 s.

- The app killed in the middle of a run: the run ends `errored` with the app's window gone, the
  device is quarantined, its probe relaunches the app (the display is empty: a probe that only
  looked would fail) and lifts the quarantine, and the next run signs in — the app says so.
- An app that cannot start: the device is `down` with the app's reason in `goalfleet devices`;
  `goalfleet status` says why a run for it waits, and `--device-wait` ends it `unplaceable`
  with that reason instead of leaving it queued; once the app can start, the probe brings the
  device back and it serves the next run.

(Before: the probe took one snapshot of the desktop as it was; with the app gone it failed 43
times in 11 minutes, and a run for the device stayed queued, silently, until cancelled.)
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from ad_support import APP, EMAIL, PASSWORD, sign_in_body
from clikit import goalfleet
from fleetkit import quick_settings

from scheduler.client.api_client import FleetClient
from scheduler.local.fleet import LocalFleet
from scheduler.local.redis import LocalRedis
from testing.linux_desktop import LinuxDesktop
from workers.core.model import RunStatus
from workers.core.records import DeviceState, RunRecord
from workers.processes import spawn

TOKEN = "recovery-token"
DEVICE = "linux-1"
SIGN_IN = sign_in_body(DEVICE)
WHY = "cannot start: its configuration is missing"


@dataclass
class Site:
    fleet: LocalFleet
    state_file: Path
    """What the app wrote: its screen, the e-mail it got, whether the password matched."""
    broken: Path
    """While this file exists the app's command exits 1 at once."""
    command: Path
    worker_log: Path

    def cli(self, *argv: str) -> str:
        env = {
            **os.environ,
            "GOALFLEET_API_URL": self.fleet.api_url,
            "GOALFLEET_API_TOKEN": TOKEN,
        }
        proc = goalfleet(*argv, env=env, timeout_s=60)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout

    def app_state(self) -> dict[str, object]:
        return json.loads(self.state_file.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def _app_command(tmp_path: Path, state_file: Path, broken: Path) -> Path:
    """An executable that starts the GTK sign-in app (expecting `PASSWORD`), or, while
    `broken` exists, says why it cannot and exits 1."""
    digest = hashlib.sha256(PASSWORD.encode()).hexdigest()
    app = shlex.join(
        [
            *("exec", "/usr/bin/env", f"GTK_SIGNIN_STATE_FILE={state_file}"),
            *(f"GTK_SIGNIN_EXPECTED_PASSWORD_SHA256={digest}", "/usr/bin/python3", str(APP)),
        ]
    )
    script = tmp_path / "acme-app"
    script.write_text(
        "#!/bin/sh\n"
        f"if [ -e {shlex.quote(str(broken))} ]; then echo {shlex.quote(WHY)} >&2; exit 1; fi\n"
        f"{app}\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script


@pytest.fixture
def site(desktop: LinuxDesktop, redis_binary: str, tmp_path: Path) -> Iterator[Site]:
    """The API, the scheduler and one `goalfleet worker --backend agent-device` serving the
    sign-in app (relaunched before each run) on the session's display."""
    state_file, broken = tmp_path / "app.json", tmp_path / "broken"
    command = _app_command(tmp_path, state_file, broken)
    env = {"HOME": str(tmp_path / "home"), "GOALFLEET_SECRET_GF_PW": PASSWORD}
    with LocalRedis(binary=redis_binary) as server:
        settings = quick_settings(
            server.url, key_prefix="gfrec", token=TOKEN, quarantine_after=1, probe_interval_s=2.0
        )
        with LocalFleet(settings, log_dir=tmp_path, extra_env=env) as fleet:
            fleet.start_api()
            fleet.start_scheduler()
            argv = [
                *(sys.executable, "-m", "scheduler", "worker", "--device", DEVICE),
                *("--backend", "agent-device", "--platform", "linux", "--loglevel", "INFO"),
                *("--app-id", "acme", "--reset", "relaunch", "--app-command", str(command)),
            ]
            worker_env = {
                **fleet.env,
                **{k: v for k, v in desktop.env.items() if k not in {"PATH", "HOME"}},
            }
            log = tmp_path / f"worker-{DEVICE}.log"
            fleet.workers[DEVICE] = spawn(argv, env=worker_env, log=log)
            fleet.wait_devices([DEVICE], timeout_s=120)
            yield Site(fleet, state_file, broken, command, log)


def _until(what: str, check: Callable[[], object], timeout_s: float = 90.0) -> object:
    deadline = time.monotonic() + timeout_s
    while not (got := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return got


def _ended(c: FleetClient, run_id: str, timeout_s: float = 120.0) -> RunRecord:
    return _until(  # type: ignore[return-value]
        f"run {run_id} to end",
        lambda: (run := c.run(run_id)).status.terminal and run,
        timeout_s,
    )


def _device(c: FleetClient) -> DeviceState:
    return next(d for d in c.devices() if d.info.id == DEVICE)


def _app_pid(state_file: Path) -> int | None:
    """The live app process the worker started (found by the state file in its environment)."""
    wanted = f"GTK_SIGNIN_STATE_FILE={state_file}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            env = (proc / "environ").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().rpartition(")")[2].split()[0]
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if state != "Z" and wanted in env:
            return int(proc.name)
    return None


def _killed_mid_run(site: Site, c: FleetClient) -> RunRecord:
    """A sign-in run whose app is killed (SIGKILL, its whole group) once its first step is
    recorded; tried again if the run was quicker than the kill (it then ended `done`)."""
    for _ in range(3):
        run_id = c.submit_run(SIGN_IN).id
        _until("the run's first step", lambda rid=run_id: c.steps(rid))  # type: ignore[misc]
        pid = _app_pid(site.state_file)
        assert pid is not None, "the worker's app is not running"
        os.killpg(pid, signal.SIGKILL)
        run = _ended(c, run_id)
        if run.status is not RunStatus.DONE:
            return run
        _until("the device to be free", lambda: _device(c).idle)
    raise AssertionError("three runs were quicker than the kill")


def test_a_device_whose_app_was_killed_is_relaunched_by_its_probe_and_serves_the_next_run(
    site: Site,
) -> None:
    """The killed app's run errors (the app's window closed, not a broken accessibility
    stack); the device is quarantined; the probe relaunches the app on an empty display and
    lifts the quarantine; the next run signs in, as the app itself recorded."""
    with site.fleet.client() as c:
        killed = _killed_mid_run(site, c)
        assert killed.status is RunStatus.ERRORED, (killed.status, killed.reason)
        assert "DBUS" not in killed.reason
        _until("the quarantine", lambda: _device(c).quarantined, timeout_s=30)
        _until("the quarantine lifted", lambda: not _device(c).quarantined)
        log = site.worker_log.read_text(encoding="utf-8", errors="replace")
        assert "quarantine_lifted" in log
        assert _app_pid(site.state_file) is None  # the probe's app stopped with the probe
        served = _ended(c, c.submit_run(SIGN_IN).id)
    assert served.status is RunStatus.DONE, (served.status, served.reason)
    state = site.app_state()
    assert (state["screen"], state["email"], state["password_matches"]) == (
        "welcome",
        EMAIL,
        True,
    )


def test_a_device_whose_app_cannot_start_is_down_saying_why_and_a_run_for_it_does_not_wait_forever(
    site: Site,
) -> None:
    """`goalfleet devices` shows the probe's reason (the app's exit), `goalfleet status` says
    why a run waits, `--device-wait 4` ends it `unplaceable` with that reason; once the app
    can start again, the probe lifts the quarantine and the device serves the next run."""
    site.broken.touch()
    down = f"down: the probe failed: the app {str(site.command)!r} exited with 1"
    with site.fleet.client() as c:
        first = _ended(c, c.submit_run(SIGN_IN).id)
        assert first.status is RunStatus.ERRORED, (first.status, first.reason)
        assert f"the app {str(site.command)!r} exited with 1" in first.reason
        _until("the probe's reason", lambda: _device(c).quarantine_reason == down)
        listed = site.cli("devices")
        assert "exited with 1" in listed, listed
        submitted = site.cli(
            *("submit", "--goal", "Sign in", "--device", DEVICE, "--input", f"email={EMAIL}"),
            *("--secret", "password=env:GF_PW", "--device-wait", "4", "--json"),
        )
        run_id = json.loads(submitted)["id"]
        status = site.cli("status", run_id)
        assert status.startswith(f"queued run {run_id[:8]} on {DEVICE}"), status
        assert f"why it waits: device {DEVICE}: quarantined, {down}" in status, status
        assert "ends unplaceable after 4 s" in status
        waited = _ended(c, run_id, timeout_s=30)
        assert waited.status is RunStatus.UNPLACEABLE
        assert waited.reason == (
            f"waited 4 s (device_wait_s) for device {DEVICE}: quarantined, {down}"
        )
        site.broken.unlink()
        _until("the quarantine lifted", lambda: not _device(c).quarantined)
        served = _ended(c, c.submit_run(SIGN_IN).id)
    assert served.status is RunStatus.DONE, (served.status, served.reason)
    assert site.app_state()["screen"] == "welcome"
