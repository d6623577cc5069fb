"""Screenshots over agent-device: its `screenshot` command writes the screen to a PNG (on the
Linux target ImageMagick's `import -window root`, the whole X display), which is read back,
cropped to the app's window when the snapshot gave its bounds, and handed to the camera with
the bounds of the snapshot's elements (AT-SPI extents, in the same screen pixels).

The file the daemon writes lives in a private directory (0700) only for as long as it takes to
read it; the camera masks secret fields before anything is stored.
"""

from __future__ import annotations

import io
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workers.core.errors import DeviceError, FatalDeviceError, ToolMissingError
from workers.core.model import Platform
from workers.core.shots import Rect, Screenshot, ScreenshotUnavailableError
from workers.devices.agent_device.replies import read_rect

WINDOW_TYPES = frozenset({"Window", "Frame", "Dialog"})
"""Node types whose bounds are the app's window: the picture is cropped to the first."""

Call = Callable[[str, list[str], dict[str, Any]], Mapping[str, Any]]
"""The device's daemon call: command, positionals, flags → the reply's data."""


def _rect(raw: object) -> Rect | None:
    found = read_rect(raw)
    return None if found is None else Rect(x=found[0], y=found[1], w=found[2], h=found[3])


@dataclass
class Bounds:
    """The element bounds of the last snapshot, by ref, and its window's."""

    rects: dict[str, Rect] = field(default_factory=dict)
    window: Rect | None = None

    @classmethod
    def of(cls, raw_nodes: Sequence[object]) -> Bounds:
        out = cls()
        for raw in raw_nodes:
            if not isinstance(raw, Mapping) or not isinstance(raw.get("ref"), str):
                continue
            rect = _rect(raw.get("rect"))
            if rect is None:
                continue
            out.rects[raw["ref"]] = rect
            if out.window is None and raw.get("type") in WINDOW_TYPES:
                out.window = rect
        return out


def capture(call: Call, bounds: Bounds, platform: Platform) -> Screenshot:
    """The screen now, as the daemon captures it, cropped to `bounds.window` (element bounds
    moved to the crop's origin); `ScreenshotUnavailableError` when no picture comes back.

    Linux (AT-SPI extents) and Android (device pixels) give bounds in the picture's pixels;
    iOS gives them in points, a scale nothing here can check against a real simulator, so an
    iOS device takes no picture rather than risk a mask in the wrong place."""
    if platform is Platform.IOS:
        raise ScreenshotUnavailableError("screenshots over agent-device: Linux and Android only")
    from PIL import Image, UnidentifiedImageError  # noqa: PLC0415 - only a worker with a camera

    with tempfile.TemporaryDirectory(prefix="goalfleet-shot-") as tmp:  # mode 0700
        path = Path(tmp) / "screen.png"
        try:
            call("screenshot", [str(path)], {})
        except DeviceError as exc:  # no picture is a note in the row; a dead daemon is not
            if isinstance(exc, FatalDeviceError) and not isinstance(exc, ToolMissingError):
                raise
            raise ScreenshotUnavailableError(f"agent-device took none: {exc}") from exc
        try:
            image: Image.Image = Image.open(io.BytesIO(path.read_bytes()))
            image.load()
        except (FileNotFoundError, UnidentifiedImageError) as exc:
            raise ScreenshotUnavailableError(f"agent-device wrote no readable PNG ({exc})") from exc
    origin = (0, 0)
    win = bounds.window
    if win is not None and win.x + win.w <= image.width and win.y + win.h <= image.height:
        image = image.crop((win.x, win.y, win.x + win.w, win.y + win.h))
        origin = (win.x, win.y)
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    rects = {
        ref: Rect(x=r.x - origin[0], y=r.y - origin[1], w=r.w, h=r.h)
        for ref, r in bounds.rects.items()
    }
    return Screenshot(png=buf.getvalue(), width=image.width, height=image.height, bounds=rects)
