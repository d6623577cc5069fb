"""The contract of a run's video on iOS and Android: the exact agent-device commands,
positionals and flags the adapter sends (`record start <path>` with `hideTouches`, `record
stop`), through the daemon's real JSON-RPC framing (`ScriptedDaemon`), pinned against
agent-device 0.21.5's own source (its CLI help and its record runtime, read from
deploy/agent-device/node_modules); there is no simulator or emulator on this host, so these
are not run against a real one. The Linux target answers `record` with UNSUPPORTED_OPERATION
in 0.21.5, so there ffmpeg films the window (tests/agent_device/test_video_e2e.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_agent_device_adapter import OK_OPEN, ScriptedDaemon

from workers.core.model import Platform
from workers.core.shots import Rect
from workers.core.video import Box, Clip, VideoUnavailableError
from workers.devices.agent_device.device import AgentDeviceDevice
from workers.devices.agent_device.video import RECORD_START_FLAGS
from workers.devices.video import FfmpegFilms, drawboxes

PACKAGE = Path(__file__).resolve().parents[2] / "deploy" / "agent-device" / "node_modules"
DIST = PACKAGE / "agent-device" / "dist" / "src"
OK = {"ok": True, "data": {}}


def wire_of(wire: ScriptedDaemon) -> list[tuple[str, list[str], dict[str, Any]]]:
    return [(b["command"], b["positionals"], b["flags"]) for b in wire.requests]


@pytest.mark.parametrize(
    ("platform", "selector"),
    [(Platform.IOS, {"udid": "AAAA-1111"}), (Platform.ANDROID, {"serial": "emulator-5554"})],
)
def test_record_start_and_stop_are_agent_devices_own_commands(
    platform: Platform, selector: dict[str, str]
) -> None:
    stopped = {"ok": True, "data": {"recording": "stopped"}}
    wire = ScriptedDaemon([OK_OPEN, OK, stopped])
    dev = AgentDeviceDevice(
        wire.transport, token="tok-123", platform=platform, device=selector, app="com.x"
    )
    dev.open()
    recording = dev.record()
    path = Path(wire_of(wire)[1][1][1])
    path.write_bytes(b"mp4 bytes")  # what the daemon writes where it was asked to
    clip = recording.stop()
    recording.discard()
    assert wire_of(wire)[1:] == [
        ("record", ["start", str(path)], {"hideTouches": True}),
        ("record", ["stop"], {}),
    ]
    assert clip.path == path
    assert clip.paintable is (platform is Platform.ANDROID)  # iOS bounds are points
    assert not path.parent.exists()  # discarded with its private directory


def test_the_flags_are_the_installed_agent_devices() -> None:
    """`record start|stop [path]` and the `hideTouches` flag, as 0.21.5 reads them."""
    help_text = (DIST / "cli-help.js").read_text()
    runtime = (DIST / "record-runtime.js").read_text()
    assert "record start/stop" in help_text
    assert "--hide-touches" in help_text
    for flag in RECORD_START_FLAGS:
        assert f"flags?.{flag}" in runtime, flag
    assert "positionals?.[0]" in runtime  # start | stop
    assert "requestedPath:e.req.positionals?.[1]" in runtime.replace(" ", "")  # our path


def test_a_refused_record_start_is_a_note_not_an_error() -> None:
    refused = {
        "ok": False,
        "error": {"code": "UNSUPPORTED_OPERATION", "message": "record is not supported"},
    }
    wire = ScriptedDaemon([OK_OPEN, refused])
    dev = AgentDeviceDevice(
        wire.transport, token="tok-123", platform=Platform.ANDROID, device={}, app="com.x"
    )
    dev.open()
    with pytest.raises(VideoUnavailableError, match="agent-device records none"):
        dev.record()


def test_a_linux_device_without_a_display_records_nothing() -> None:
    wire = ScriptedDaemon([OK_OPEN])
    dev = AgentDeviceDevice(wire.transport, token="tok-123", platform=Platform.LINUX)
    dev.open()
    with pytest.raises(VideoUnavailableError, match="no X display"):
        dev.record()


def test_an_ios_clip_that_needs_a_box_is_withheld(tmp_path: Path) -> None:
    clip = Clip(path=tmp_path / "x.mp4", mime="video/mp4", width=10, height=10, paintable=False)
    box = Box(rect=Rect(x=1, y=1, w=4, h=4), start=0.0, end=1.0)
    with pytest.raises(VideoUnavailableError, match="withheld"):
        FfmpegFilms().finish(clip, (box,), max_bytes=1000)


def test_the_boxes_are_geometry_and_times_only() -> None:
    """ffmpeg's command line: rectangles and seconds, padded, clamped to the clip."""
    boxes = [
        Box(rect=Rect(x=10, y=20, w=100, h=30), start=0.5, end=2.25),
        Box(rect=Rect(x=0, y=0, w=400, h=400), start=0.0, end=1.0),
    ]
    assert drawboxes(boxes, 360, 280) == (
        "drawbox=x=7:y=17:w=106:h=36:color=black:t=fill:enable='between(t\\,0.500\\,2.250)',"
        "drawbox=x=0:y=0:w=360:h=280:color=black:t=fill:enable='between(t\\,0.000\\,1.000)'"
    )
