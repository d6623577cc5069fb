"""A run's video behind seams: what a device records (`Recording`, started by
`DevicePort.record`), the image seam that paints boxes over a clip and encodes it within a byte
cap (`Films`, ffmpeg in `workers.devices.video`), and `Videographer`, the per-run policy the loop
calls at the start and end of a run and at each snapshot and secret fill.

No secret reaches a stored video: the loop tells the session when it types a secret and where
(the field's bounds), and at each snapshot which elements hold or show one (`secret_refs`, the
same rule as the pictures'); each becomes a box painted over the clip from a margin before it
was typed until a margin after the field left the screen (or the run's end). A field that must
be painted but has no bounds withholds the whole video; a device that records nothing, a mode
that is off or a clip over the cap is a note on the result, never an error. The boxes are
geometry and times only: no text of a secret reaches ffmpeg's command line.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from workers.core.model import Inputs, RunStatus
from workers.core.screen import Snapshot
from workers.core.shot_mode import ShotMode
from workers.core.shots import ArtifactStore, Rect, field_key, secret_fragments, secret_refs

MARGIN_S = 1.0
"""How long before a secret's fill and after its field left the screen a box is painted: the
recording's clock starts a little after the loop's (the recorder's start-up), and a frame is
a fifth of a second."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Clip(_Frozen):
    """What a recording left: a video file (in a private directory the recording owns until
    `Recording.discard`), its pixel size, and the screen point its top-left corner shows."""

    path: Path
    mime: str
    width: int
    height: int
    origin: tuple[int, int] = (0, 0)
    paintable: bool = True
    """Whether element bounds are in the clip's pixels (iOS: points, unchecked): a clip that
    is not is withheld when it needs a box."""


class Box(_Frozen):
    """A rectangle of the clip's pixels painted over from `start` to `end` (seconds into it)."""

    rect: Rect
    start: float
    end: float


class VideoUnavailableError(Exception):
    """The device cannot record now (or ever): the result says why."""


class NoVideoError(VideoUnavailableError):
    """The device records no video at all (`workers.core.ports.Device`'s default)."""

    def __init__(self, message: str = "this device records no video") -> None:
        super().__init__(message)


class Recording(Protocol):
    """A recording under way (`DevicePort.record`)."""

    @property
    def origin(self) -> tuple[int, int]:
        """The screen point the clip's top-left corner shows (element bounds are moved by it)."""
        ...

    def stop(self) -> Clip:
        """End the recording; `VideoUnavailableError` when it left no readable clip."""
        ...

    def discard(self) -> None:
        """Delete what the recording wrote (its clip too); safe to call twice."""
        ...


class Films(Protocol):
    """The video seam: `clip` with `boxes` painted over (filled, opaque), encoded within
    `max_bytes`; None when it does not fit."""

    def finish(self, clip: Clip, boxes: tuple[Box, ...], *, max_bytes: int) -> bytes | None: ...


class VideoPort(Protocol):
    """What the videographer asks of a device (`DevicePort.record`)."""

    def record(self) -> Recording: ...


@dataclass
class Videographer:
    """How a run keeps its video (built at a composition root from Settings)."""

    store: ArtifactStore
    films: Films
    mode: ShotMode = "on"
    """`on`: every run's; `failure-only`: only a run that did not end `done`; `off`: none."""
    max_bytes: int = 8_000_000
    """The most bytes one run's video may take (a longer one is not stored, noted)."""
    paint: bool = True
    """Paint over secrets. Only a test turns this off, to prove the OCR test can fail."""

    def session(
        self, device: VideoPort, inputs: Inputs, clock: Callable[[], float]
    ) -> VideoSession:
        return VideoSession(self, device, inputs, clock)


@dataclass
class VideoSession:
    """One run's video: `start`, `seen` after each snapshot, `filling` before a secret's fill,
    `finish` at the run's end (the artifact id, or None and why)."""

    camera: Videographer
    device: VideoPort
    inputs: Inputs
    clock: Callable[[], float] = time.perf_counter
    recording: Recording | None = None
    note: str = ""
    boxes: list[Box] = field(default_factory=list)
    _open: dict[Rect, float] = field(default_factory=dict)
    _t0: float = 0.0
    _last_seen: float = 0.0
    _filled: set[str] = field(default_factory=set)
    _fragments: set[str] = field(default_factory=set)

    def start(self) -> None:
        if self.camera.mode == "off":
            self.note = "video is off"
            return
        try:
            self.recording = self.device.record()
        except VideoUnavailableError as exc:
            self.note = str(exc) if isinstance(exc, NoVideoError) else f"no video: {exc}"
            return
        self._t0 = self._last_seen = self.clock()
        self._fragments = set().union(*map(secret_fragments, self.inputs.secrets()))

    def _now(self) -> float:
        return self.clock() - self._t0

    def _rect(self, snap: Snapshot, ref: str) -> Rect | None:
        node = next((n for n in snap.nodes if n.ref == ref), None)
        if node is None or node.rect is None or self.recording is None:
            return None
        x, y, w, h = node.rect
        ox, oy = self.recording.origin
        return Rect(x=x - ox, y=y - oy, w=w, h=h)

    def filling(self, snap: Snapshot, ref: str) -> None:
        """The run is about to type a secret into `ref` of `snap`: paint its field from now
        (less the margin) on, and every field of that key on later screens."""
        if self.recording is None:
            return
        for n in snap.nodes:
            if n.ref == ref:
                self._filled.add(field_key(n))
        self._hold(snap, (ref,), self._now() - MARGIN_S)

    def seen(self, snap: Snapshot) -> None:
        """A snapshot was just taken: paint every element that holds or shows a secret from
        the previous snapshot on (it may have appeared any time since); close the boxes of
        those that left the screen, a margin from now."""
        if self.recording is None:
            return
        now = self._now()
        refs = secret_refs(snap, self.inputs, self._filled, fragments=self._fragments)
        held = self._hold(snap, refs, self._last_seen - MARGIN_S)
        for rect in [r for r in self._open if r not in held]:
            self.boxes.append(Box(rect=rect, start=self._open.pop(rect), end=now + MARGIN_S))
        self._last_seen = now

    def _hold(self, snap: Snapshot, refs: tuple[str, ...], since: float) -> set[Rect]:
        held: set[Rect] = set()
        for ref in refs:
            rect = self._rect(snap, ref)
            if rect is None:
                self.note = f"withheld: {ref} shows a secret and the device gave no bounds"
                continue
            held.add(rect)
            self._open.setdefault(rect, max(0.0, since))
        return held

    def abort(self) -> None:
        """The run raised: stop the recording and keep nothing (a no-op after `finish`)."""
        recording, self.recording = self.recording, None
        if recording is not None:
            recording.discard()

    def finish(self, status: RunStatus) -> tuple[str | None, str]:
        """Stop the recording, paint and store the clip as the mode says."""
        recording, self.recording = self.recording, None
        if recording is None:
            return None, self.note
        end = self._now() + MARGIN_S
        boxes = [*self.boxes, *(Box(rect=r, start=s, end=end) for r, s in self._open.items())]
        self._open.clear()
        try:
            clip = recording.stop()
            if self.note.startswith("withheld"):
                return None, self.note
            if self.camera.mode == "failure-only" and status is RunStatus.DONE:
                return None, "kept on failure only"
            painted = tuple(boxes) if self.camera.paint else ()
            data = self.camera.films.finish(clip, painted, max_bytes=self.camera.max_bytes)
            if data is None:
                return None, f"the run's video is over its cap ({self.camera.max_bytes} B)"
            return self.camera.store.put(data, kind="webm"), ""
        except VideoUnavailableError as exc:
            return None, f"no video: {exc}"
        finally:
            recording.discard()
