"""Step screenshots behind seams: what a device gives (`Screenshot`), `ScreenshotPort` (the
camera's view of a `DevicePort`), the image seam that masks, marks and shrinks (`Pictures`,
drawn in `workers.devices.pictures`), the content-addressed `ArtifactStore`, and `Camera`, the
per-run policy the loop calls once a step.

No secret reaches a stored picture: before a picture is finished, the bounds of every element
that holds or shows a secret (`secret_refs`) are painted over. An element that must be masked
but has no bounds withholds the whole picture; a device without screenshots, a mode that is
off, or a spent byte budget is a note in the row, never an error.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict

from workers.core.model import Inputs, Outcome, StepRow
from workers.core.screen import Node, Snapshot
from workers.core.shot_mode import ShotMode

FRAGMENT_CHARS = 4
"""An element whose label, value or id holds 4+ consecutive characters of a secret is masked
(a secret shorter than that: the whole secret)."""
MASK_CHARS = frozenset("•●*·∙")
"""What a platform shows for a hidden value: a field whose value is only these is masked."""
ARTIFACT_ID = re.compile(r"^[0-9a-f]{64}$")
SUCCESS = frozenset({Outcome.ACTED, Outcome.DONE})


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Rect(_Frozen):
    """An element's bounds in the picture's pixels."""

    x: int
    y: int
    w: int
    h: int


class Screenshot(_Frozen):
    """The device's picture of its screen now, with the bounds of the elements of the
    snapshot just taken (by ref) where the device knows them."""

    png: bytes
    width: int
    height: int
    bounds: dict[str, Rect] = {}


class ScreenshotUnavailableError(Exception):
    """The device cannot take a picture now (or ever): the row says why."""


class NoScreenshotsError(ScreenshotUnavailableError):
    """The device takes no pictures at all (`workers.core.ports.Device`'s default)."""

    def __init__(self, message: str = "this device takes no screenshots") -> None:
        super().__init__(message)


class ScreenshotPort(Protocol):
    """What the camera asks of a device (`DevicePort.screenshot`): a picture of the screen its
    last snapshot described, or `ScreenshotUnavailableError` saying why not."""

    def screenshot(self) -> Screenshot: ...


class Pictures(Protocol):
    """The image seam: paint `mask` over, outline `mark`, and encode within `max_bytes`
    (downscaling if it must). Returns None when no encoding fits."""

    def finish(
        self, shot: Screenshot, *, mask: tuple[Rect, ...], mark: Rect | None, max_bytes: int
    ) -> bytes | None: ...


ArtifactKind = Literal["png", "webm"]
"""What an artifact is: a step picture or a run's video (the file's extension)."""


class ArtifactStore(Protocol):
    """Content-addressed bytes: `put` returns the sha256 hex of `data`; the same bytes put
    twice are stored once."""

    def put(self, data: bytes, kind: ArtifactKind = "png") -> str: ...

    def get(self, artifact_id: str, kind: ArtifactKind = "png") -> bytes | None: ...


def artifact_id(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class MemoryArtifacts:
    """The fake beside `ArtifactStore`: a dict."""

    blobs: dict[str, bytes] = field(default_factory=dict)
    puts: int = 0

    def put(self, data: bytes, kind: ArtifactKind = "png") -> str:  # noqa: ARG002 - one dict
        key = artifact_id(data)
        self.puts += 1
        self.blobs.setdefault(key, data)
        return key

    def get(self, artifact_id: str, kind: ArtifactKind = "png") -> bytes | None:  # noqa: ARG002
        return self.blobs.get(artifact_id)


def secret_fragments(secret: str) -> set[str]:
    if len(secret) <= FRAGMENT_CHARS:
        return {secret} if secret else set()
    return {secret[i : i + FRAGMENT_CHARS] for i in range(len(secret) - FRAGMENT_CHARS + 1)}


def field_key(node: Node) -> str:
    return f"id:{node.identifier}" if node.identifier else f"label:{node.type}|{node.label}"


def secret_refs(
    snap: Snapshot, inputs: Inputs, filled: Iterable[str] = (), *, fragments: set[str] | None = None
) -> tuple[str, ...]:
    """The refs of `snap` whose bounds a picture must mask: secure fields, fields showing a
    hidden value, fields this run typed a secret into (`filled`: `field_key`s), and every
    element whose label, value or identifier shows 4+ characters of a secret."""
    frags = (
        fragments
        if fragments is not None
        else set().union(*map(secret_fragments, inputs.secrets()))
    )
    held = set(filled)
    out: list[str] = []
    for n in snap.nodes:
        texts = (n.label, n.value, n.identifier)
        hidden = bool(n.value) and set(n.value) <= MASK_CHARS
        if (
            n.secure
            or hidden
            or field_key(n) in held
            or any(f in t for f in frags for t in texts if t)
        ):
            out.append(n.ref)
    return tuple(out)


@dataclass
class Camera:
    """How a run takes its step pictures (built at a composition root from Settings)."""

    store: ArtifactStore
    pictures: Pictures
    mode: ShotMode = "on"
    run_budget_bytes: int = 1_500_000
    """The most bytes of pictures one run may store (its last pictures are dropped, noted)."""
    picture_max_bytes: int = 150_000
    """The most bytes one picture may take (downscaled until it fits)."""
    mask: bool = True
    """Paint over secret bounds. Only a test turns this off, to prove the OCR test can fail."""

    def session(
        self, device: ScreenshotPort, inputs: Inputs, clock: Callable[[], float]
    ) -> ShotSession:
        return ShotSession(self, device, inputs, clock)


@dataclass
class ShotSession:
    """One run's pictures: `capture` after each snapshot, `keep` when its row is final."""

    camera: Camera
    device: ScreenshotPort
    inputs: Inputs
    clock: Callable[[], float] = time.perf_counter
    spent: int = 0
    filled: set[str] = field(default_factory=set)
    _pending: Screenshot | str | None = None
    _snap: Snapshot | None = None
    _ms: float = 0.0
    _fragments: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._fragments = set().union(*map(secret_fragments, self.inputs.secrets()))

    def capture(self, snap: Snapshot) -> None:
        """Take the picture of the screen `snap` describes (the one the decider sees)."""
        self._snap = snap
        if self.camera.mode == "off":
            self._pending = "screenshots are off"
            return
        t0 = self.clock()
        try:
            self._pending = self.device.screenshot()
        except NoScreenshotsError as exc:
            self._pending = str(exc)
        except ScreenshotUnavailableError as exc:
            self._pending = f"no screenshot: {exc}"
        self._ms = (self.clock() - t0) * 1000

    def filled_secret(self, snap: Snapshot, ref: str) -> None:
        """The run typed a secret into `ref` of `snap`: mask that field from now on."""
        for n in snap.nodes:
            if n.ref == ref:
                self.filled.add(field_key(n))

    def keep(self, row: StepRow) -> StepRow:
        """`row` with its picture's artifact id (or a note why it has none)."""
        pending, snap, ms = self._pending, self._snap, self._ms
        self._pending, self._snap, self._ms = None, None, 0.0
        if pending is None or snap is None:
            return row
        if isinstance(pending, str):
            return row.model_copy(update={"screenshot_note": pending})
        note = ""
        if self.camera.mode == "failure-only" and row.outcome in SUCCESS:
            note = "kept on failure only"
        else:
            ref = row.action.ref if row.action is not None else None
            artifact, note = self._store(pending, snap, ref)
            if artifact is not None:
                return row.model_copy(update={"screenshot": artifact, "screenshot_ms": ms})
        return row.model_copy(update={"screenshot_note": note, "screenshot_ms": ms})

    def final(self, snap: Snapshot) -> tuple[str | None, str]:
        """The picture of the screen a run ended on (`snap`, just taken), stored whatever the
        mode but off: its artifact id, or None and why."""
        self.capture(snap)
        pending, self._pending, self._snap = self._pending, None, None
        if pending is None:  # pragma: no cover - capture always leaves one
            return None, "no picture"
        if isinstance(pending, str):
            return None, pending
        return self._store(pending, snap, None)

    def _store(self, shot: Screenshot, snap: Snapshot, acted: str | None) -> tuple[str | None, str]:
        """`shot` masked, with `acted` (a ref) marked, stored within the budgets."""
        mask: list[Rect] = []
        if self.camera.mask:
            for ref in secret_refs(snap, self.inputs, self.filled, fragments=self._fragments):
                rect = shot.bounds.get(ref)
                if rect is None:
                    return None, f"withheld: {ref} shows a secret and the device gave no bounds"
                mask.append(rect)
        mark = shot.bounds.get(acted) if acted is not None else None
        left = self.camera.run_budget_bytes - self.spent
        cap = min(self.camera.picture_max_bytes, left)
        data = self.camera.pictures.finish(shot, mask=tuple(mask), mark=mark, max_bytes=cap)
        if data is None:
            if left < self.camera.picture_max_bytes:
                budget = self.camera.run_budget_bytes
                return None, f"the run's screenshot budget ({budget} B) is spent"
            return None, f"no encoding fits {cap} B"
        self.spent += len(data)
        return self.camera.store.put(data), ""
