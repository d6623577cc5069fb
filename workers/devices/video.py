"""Run videos with ffmpeg (Debian's `ffmpeg`): `X11Recording` films a rectangle of an X display
(x11grab) into a VP8 WebM, which Debian's chromium plays (it has no H.264); `FfmpegFilms` is the
`workers.core.video.Films` seam: it paints time-ranged boxes over a clip (`drawbox` with
`enable='between(t,a,b)'`) and encodes it within a byte cap.

ffmpeg's command line holds geometry, times and paths only: a secret never reaches it (the
boxes are rectangles and seconds). A clip lives in a private directory (0700) until the
recording is discarded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from signal import SIGINT

from workers.core.shots import Rect
from workers.core.video import Box, Clip, VideoUnavailableError
from workers.processes import Child, spawn

FPS = 5
"""Frames a second: a UI run changes a few times a second; 5 keeps the worker's CPU low."""
BITRATE = "400k"
"""VP8's target for a window-sized UI video (mostly still frames)."""
STOP_GRACE_S = 10.0
"""How long ffmpeg may take to finish the file after SIGINT."""
PAD = 3
"""Pixels a box reaches beyond a field's bounds (antialiased edges, a focus ring)."""
MIME = "video/webm"
VP8 = ("-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "8", "-b:v", BITRATE)
"""The encoder: libvpx's fastest settings (a recording must keep up with the screen)."""


def ffmpeg() -> str:
    path = shutil.which("ffmpeg")
    if path is None:
        raise VideoUnavailableError("ffmpeg is not installed (scripts/setup-linux-target.sh)")
    return path


def even(rect: Rect) -> Rect:
    """`rect` with an even width and height (VP8's 4:2:0 needs them)."""
    return Rect(x=rect.x, y=rect.y, w=rect.w - rect.w % 2, h=rect.h - rect.h % 2)


class X11Recording:
    """ffmpeg filming `area` of `display` until `stop` (SIGINT: ffmpeg finishes the file)."""

    def __init__(self, display: str, area: Rect, *, fps: int = FPS) -> None:
        area = even(area)
        if area.w <= 0 or area.h <= 0:
            raise VideoUnavailableError(f"the window's bounds {area} are empty")
        self.area = area
        self._dir = Path(tempfile.mkdtemp(prefix="goalfleet-video-"))  # mode 0700
        self.path = self._dir / "raw.webm"
        argv = [
            ffmpeg(),
            *("-hide_banner", "-nostdin", "-loglevel", "error"),
            *(
                "-probesize",
                "32",
                "-analyzeduration",
                "0",
            ),  # film at once, not after 5 s of probing
            *("-f", "x11grab", "-draw_mouse", "0", "-framerate", str(fps)),
            *("-video_size", f"{area.w}x{area.h}", "-i", f"{display}+{area.x},{area.y}"),
            *VP8,
            *("-an", "-y", str(self.path)),
        ]
        self.argv = tuple(argv)
        self._child: Child | None = spawn(
            argv, env={"PATH": os.environ.get("PATH", "/usr/bin")}, log=self._dir / "ffmpeg.log"
        )

    @property
    def origin(self) -> tuple[int, int]:
        return (self.area.x, self.area.y)

    def stop(self) -> Clip:
        child, self._child = self._child, None
        if child is not None:
            child.stop(STOP_GRACE_S, sig=SIGINT)
        if not self.path.is_file() or self.path.stat().st_size == 0:
            log = (self._dir / "ffmpeg.log").read_text(errors="replace")[-300:]
            raise VideoUnavailableError(f"ffmpeg left no video: {log.strip() or 'no output'}")
        return Clip(
            path=self.path, mime=MIME, width=self.area.w, height=self.area.h, origin=self.origin
        )

    def discard(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            child.stop(STOP_GRACE_S, sig=SIGINT)
        shutil.rmtree(self._dir, ignore_errors=True)


def drawboxes(boxes: Sequence[Box], width: int, height: int) -> str:
    """The `-vf` filter painting `boxes` (opaque black, `PAD` wider) while each is on."""
    parts = []
    for b in boxes:
        x, y = max(0, b.rect.x - PAD), max(0, b.rect.y - PAD)
        w = min(width - x, b.rect.w + 2 * PAD)
        h = min(height - y, b.rect.h + 2 * PAD)
        if w <= 0 or h <= 0:
            continue
        on = f"between(t\\,{max(0.0, b.start):.3f}\\,{b.end:.3f})"
        parts.append(f"drawbox=x={x}:y={y}:w={w}:h={h}:color=black:t=fill:enable='{on}'")
    return ",".join(parts)


class FfmpegFilms:
    """`Films`: the clip as recorded when nothing is painted, else re-encoded with the boxes."""

    def finish(self, clip: Clip, boxes: tuple[Box, ...], *, max_bytes: int) -> bytes | None:
        path = clip.path
        vf = drawboxes(boxes, clip.width, clip.height)
        if vf and not clip.paintable:
            raise VideoUnavailableError(
                "withheld: a secret is on screen and this device's bounds are not in pixels"
            )
        if vf or clip.mime != MIME:  # painted, or recorded as MP4: WebM for every browser
            path = clip.path.with_name("painted.webm")
            argv = [
                ffmpeg(),
                *("-hide_banner", "-nostdin", "-loglevel", "error", "-y"),
                *("-i", str(clip.path), *(("-vf", vf) if vf else ()), *VP8, "-an", str(path)),
            ]
            done = subprocess.run(argv, capture_output=True, check=False, timeout=600)  # noqa: S603
            if done.returncode != 0:
                why = done.stderr.decode(errors="replace")[-300:].strip()
                raise VideoUnavailableError(f"ffmpeg could not paint the video: {why}")
        if path.stat().st_size > max_bytes:
            return None
        return path.read_bytes()
