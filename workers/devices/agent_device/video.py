"""A run's video over agent-device: on the Linux target, ffmpeg films the app's window on the
daemon's X display (`workers.devices.video.X11Recording`: agent-device 0.21.5 answers
`record` there with UNSUPPORTED_OPERATION); on iOS and Android, agent-device's own `record
start <path>` / `record stop` (simctl / adb screenrecord; `--hide-touches`: no overlays to
burn in, the fastest raw recording), into a private directory, painted and re-encoded to WebM
by the `Films` seam.

iOS gives element bounds in points, a scale nothing here can check against a real simulator:
an iOS video that would need a box is withheld rather than risk one in the wrong place.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from workers.core.errors import DeviceError
from workers.core.model import Platform
from workers.core.video import Clip, VideoUnavailableError

Call = Callable[[str, list[str], dict[str, Any]], Mapping[str, Any]]
RECORD_START_FLAGS: dict[str, Any] = {"hideTouches": True}
"""`record start`'s flags: no touch overlays (agent-device burns them in at stop otherwise)."""
UNKNOWN_SIZE = 1 << 15
"""A daemon clip's size is not read back: boxes are clamped by ffmpeg's drawbox itself."""


def record_start_argv(path: Path) -> tuple[str, list[str], dict[str, Any]]:
    """The daemon command that starts a recording into `path` (contract-tested)."""
    return "record", ["start", str(path)], dict(RECORD_START_FLAGS)


def record_stop_argv() -> tuple[str, list[str], dict[str, Any]]:
    return "record", ["stop"], {}


class DaemonRecording:
    """agent-device recording the device's screen until `stop`."""

    def __init__(self, call: Call, platform: Platform) -> None:
        self._call = call
        self.platform = platform
        self._dir = Path(tempfile.mkdtemp(prefix="goalfleet-video-"))  # mode 0700
        self.path = self._dir / "screen.mp4"
        self._live = False
        command, args, flags = record_start_argv(self.path)
        try:
            call(command, args, flags)
        except DeviceError as exc:  # a dead daemon: the run's first snapshot says so
            self.discard()
            raise VideoUnavailableError(f"agent-device records none: {exc}") from exc
        self._live = True

    @property
    def origin(self) -> tuple[int, int]:
        return (0, 0)

    def stop(self) -> Clip:
        if self._live:
            self._live = False
            command, args, flags = record_stop_argv()
            try:
                data = self._call(command, args, flags)
            except DeviceError as exc:
                raise VideoUnavailableError(f"agent-device's record stop failed: {exc}") from exc
            out = data.get("outPath")
            if isinstance(out, str) and Path(out) != self.path and Path(out).is_file():
                shutil.move(out, self.path)
        if not self.path.is_file():
            raise VideoUnavailableError("agent-device wrote no video")
        return Clip(
            path=self.path,
            mime="video/mp4",
            width=UNKNOWN_SIZE,
            height=UNKNOWN_SIZE,
            paintable=self.platform is not Platform.IOS,
        )

    def discard(self) -> None:
        if self._live:
            self._live = False
            with contextlib.suppress(DeviceError):  # the session is going anyway
                self._call(*record_stop_argv())
        shutil.rmtree(self._dir, ignore_errors=True)
