"""No secret on any command line or in any environment while it is typed on the real stack
(the run filmed: ffmpeg's recording and painting are among the processes watched).

A watcher process (`testing.proc_watch`) scans `/proc/*/cmdline` and `/proc/*/environ`
of every process on the host but itself (the test process included) every few ms, from before
the device's daemon starts until after it stops, while `run_goal` signs in to the real GTK app
through a real agent-device daemon with the password as a secret, filled four times. It must
see nothing; the same watcher must then catch a value planted in a `sleep`'s argv and another's
environment, and, on the real stack, the value of a *plain* fill on xdotool's command line (what
every secret fill did before the FIFO channel): so it can fail.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from ad_support import EMAIL, PASSWORD, App
from pydantic import SecretStr

from testing.linux_desktop import LinuxDesktop
from testing.proc_watch import ProcWatcher
from workers.core.loop import run_goal
from workers.core.model import Inputs, InputValue, Platform, RunStatus
from workers.core.shots import MemoryArtifacts
from workers.core.video import Videographer
from workers.decide.rules import RulesDecider
from workers.devices.agent_device.daemon import DaemonProcess
from workers.devices.agent_device.device import AgentDeviceDevice
from workers.devices.agent_device.host import open_device
from workers.devices.agent_device.secrets import PLACEHOLDER_PREFIX
from workers.devices.video import FfmpegFilms

TYPING = b"xdotool\0type\0"
"""The command line of agent-device's typing xdotool (the shim's, then the real one's)."""
FROM_FIFO = b"\0--file\0"
"""The real xdotool typing a secret from the FIFO."""
FFMPEG = b"ffmpeg\0-hide_banner\0"
"""ffmpeg filming the run's window, then painting its secret's field over (the run's video)."""


def test_no_secret_in_any_argv_or_environ_during_a_run(
    desktop: LinuxDesktop, app: App, tmp_path: Path
):
    secret = InputValue(name="password", value=SecretStr(PASSWORD), sensitive=True)
    inputs = Inputs.of(plain={"email": EMAIL}, secret={"password": PASSWORD})
    started = time.monotonic()
    with ProcWatcher([PASSWORD], probes=[TYPING, FROM_FIFO, FFMPEG]) as watch:
        dev = open_device("agent-device:linux", env=desktop.env, state_root=tmp_path)
        try:
            snap = dev.snapshot()
            field = next(c for c in snap.candidates if c.name == "Password")
            for _ in range(3):  # three fills of the secret, then the run's own
                dev.fill(snap.pin(field.ref), secret)
                snap = dev.snapshot()
                field = next(c for c in snap.candidates if c.name == "Password")
            video = Videographer(MemoryArtifacts(), FfmpegFilms())  # its boxes: geometry only
            result = run_goal(dev, "Sign in", decider=RulesDecider(), inputs=inputs, video=video)
        finally:
            dev.close()
        run_s = time.monotonic() - started
        # the same watcher, still running, must catch a value planted in an argv and an env
        in_argv = subprocess.Popen([PASSWORD, "5"], executable="/bin/sleep")
        in_env = subprocess.Popen(["/bin/sleep", "5"], env={"GF_PLANTED": PASSWORD})
        time.sleep(0.2)
        for planted in (in_argv, in_env):
            planted.kill()
            planted.wait()
    report = watch.report
    print(  # noqa: T201 - the figures the report quotes (pytest -s)
        f"run {run_s:.2f} s; watcher: {report.scans} scans in {report.elapsed_s} s, "
        f"mean scan {report.mean_scan_ms} ms, max gap {report.max_gap_ms} ms, "
        f"{report.processes} processes, typing xdotools seen {report.sightings}, "
        f"hits {report.hits}"
    )
    assert result.status is RunStatus.DONE, result.reason
    assert app.state()["password_matches"] is True
    assert app.state()["screen"] == "welcome"
    # the only hits are the two planted ones: nothing during the run
    assert {(h.pid, h.file) for h in report.hits} == {
        (in_argv.pid, "cmdline"),
        (in_env.pid, "environ"),
    }
    # it sampled the typing processes while they lived: it would have seen a value in them
    typing, from_fifo, ffmpeg = report.sightings
    assert from_fifo >= 4, report  # one xdotool per secret fill, each seen
    assert typing >= from_fifo + 1  # and the email's
    assert result.video is not None, result.video_note
    assert ffmpeg >= 2, report  # the recording and the painting, each seen
    # a sanity bound only (a loaded 2-core host stretches gaps to tens of ms): the sightings
    # above are what shows it looked often enough
    assert report.scans > 100, report
    assert report.max_gap_ms < 500, report


def test_the_watcher_catches_a_value_typed_from_a_command_line(daemon: DaemonProcess, app: App):
    """The leak the channel closes, on the real stack: a *plain* fill is typed as
    `xdotool type -- <value>`, and the watcher sees the value in xdotool's cmdline."""
    dev = AgentDeviceDevice.connect(daemon.state_dir, platform=Platform.LINUX)
    try:
        snap = dev.snapshot()
        field = next(c for c in snap.candidates if c.name == "Email")
        plain = InputValue(name="email", value=SecretStr(PASSWORD))
        with ProcWatcher([PASSWORD, PLACEHOLDER_PREFIX]) as watch:
            dev.fill(snap.pin(field.ref), plain)
    finally:
        dev.close()
    hits = watch.report.hits
    assert any(h.file == "cmdline" and h.comm == "xdotool" and h.needle == 0 for h in hits), hits
    assert not any(h.needle == 1 for h in hits)  # and no placeholder: it was not a secret
