"""A run's video on the real stack: the GTK app driven through the agent-device daemon, its
window filmed by ffmpeg (x11grab on the Xvfb display), the secret's field painted over
(time-ranged boxes) before the clip is stored, and every frame within ±1 s of the secret's
fill read back by tesseract.

The e-mail goes in as a secret typed into a plain field (as in the pictures' test): its pixels
are the app's, so only the painting keeps it out of a frame. The same e-mail typed as a plain
input is read in those frames, and with the painting off the secret is read: the OCR can fail.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ad_support import EMAIL, PASSWORD, App
from test_screenshots_e2e import fragments, ocr

from testing.linux_desktop import LinuxDesktop
from workers.core.device_hooks import DeviceCommand, DeviceHook, with_hooks
from workers.core.loop import run_goal
from workers.core.model import Inputs, Platform, RunStatus
from workers.core.params import RunParams
from workers.core.shots import MemoryArtifacts
from workers.core.video import Videographer
from workers.decide.scripted import ScriptedDecider, fill, press
from workers.devices.agent_device.daemon import DaemonProcess
from workers.devices.agent_device.device import AgentDeviceDevice
from workers.devices.video import FfmpegFilms

SECRET_EMAIL = Inputs.of(
    plain={}, secret={"email": EMAIL, "password": PASSWORD}, plain_fields=frozenset({"email"})
)
PLAIN_EMAIL = Inputs.of(plain={"email": EMAIL}, secret={"password": PASSWORD})
WINDOW_S = 1.0


@pytest.fixture
def filmed(desktop: LinuxDesktop, daemon: DaemonProcess, app: App) -> Iterator[AgentDeviceDevice]:
    del app  # up and visible
    dev = AgentDeviceDevice.connect(
        daemon.state_dir, platform=Platform.LINUX, settle_quiet_ms=200, display=desktop.display
    )
    yield dev
    dev.close()


class FillTimes(DeviceHook):
    """When the recording started and when each fill ran, on one clock."""

    def __init__(self) -> None:
        self.started = 0.0
        self.fills: list[tuple[float, float]] = []
        self._t = 0.0

    def before(self, command: str) -> None:
        self._t = time.perf_counter()

    def after(self, command: DeviceCommand) -> None:
        if command.name == "record":
            self.started = time.perf_counter()
        elif command.name == "fill" and command.meta.get("input") == "email":
            self.fills.append((self._t - self.started, time.perf_counter() - self.started))


def frames_around_fill(
    device: AgentDeviceDevice, inputs: Inputs, tmp: Path, *, paint: bool
) -> list[str]:
    """Sign in with the run filmed; the OCR text of every frame within ±1 s of the e-mail's fill."""
    store = MemoryArtifacts()
    times = FillTimes()
    decider = ScriptedDecider(
        [fill("Email", "email"), fill("Password", "password"), press("Sign in")]
    )
    result = run_goal(
        with_hooks(device, times),
        "Sign in",
        decider=decider,
        inputs=inputs,
        params=RunParams(done_when="Welcome"),
        video=Videographer(store, FfmpegFilms(), paint=paint),
        clock=time.perf_counter,
    )
    assert result.status is RunStatus.DONE, result.reason
    assert result.video is not None, result.video_note
    clip = tmp / "run.webm"
    clip.write_bytes(store.blobs[result.video])
    assert store.blobs[result.video][:4] == b"\x1a\x45\xdf\xa3"  # Matroska/WebM
    [(start, end)] = times.fills
    out = tmp / "frames"
    out.mkdir()
    pick = f"select='between(t\\,{max(0.0, start - WINDOW_S):.3f}\\,{end + WINDOW_S:.3f})'"
    subprocess.run(
        [
            "ffmpeg",
            "-loglevel",
            "error",
            "-i",
            str(clip),
            "-vf",
            pick,
            "-vsync",
            "0",
            str(out / "f%04d.png"),
        ],
        check=True,
        timeout=120,
    )
    frames = sorted(out.glob("f*.png"))
    assert len(frames) >= 5, frames  # 5 fps over 2 s and more
    return [ocr(f.read_bytes()) for f in frames]


def test_no_frame_around_a_secret_fill_shows_it(filmed: AgentDeviceDevice, tmp_path: Path) -> None:
    texts = frames_around_fill(filmed, SECRET_EMAIL, tmp_path, paint=True)
    shown = sorted({f for t in texts for f in fragments(EMAIL) if f in t})
    assert shown == [], shown
    assert any("signin" in t for t in texts), texts  # the frames are read


def test_a_plain_input_is_read_in_the_frames(filmed: AgentDeviceDevice, tmp_path: Path) -> None:
    """The control: an e-mail typed as a plain input is not painted, and the OCR reads it."""
    texts = frames_around_fill(filmed, PLAIN_EMAIL, tmp_path, paint=True)
    assert any(f in t for t in texts for f in fragments(EMAIL)), texts


def test_with_the_painting_off_the_secret_is_read(
    filmed: AgentDeviceDevice, tmp_path: Path
) -> None:
    texts = frames_around_fill(filmed, SECRET_EMAIL, tmp_path, paint=False)
    assert any(f in t for t in texts for f in fragments(EMAIL)), texts
