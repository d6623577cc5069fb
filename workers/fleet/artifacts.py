"""The fleet's artifact store: step pictures and run videos as files named by their sha256,
under one directory (`GOALFLEET_ARTIFACT_DIR`, which several hosts can share, e.g. over NFS),
never in Redis. The same screen in 1,000 runs is one file; a write is atomic (temp file +
rename), so two hosts writing the same picture at once both leave the one complete file.

Retention: a file's modification time is when a step last referenced it (a `put` of a picture
already stored touches it), and a run's record is kept `retention_s` after it ends, so a file
not referenced for `retention_s` plus the longest a run can take (`RUN_MARGIN_S`) belongs to no
kept run; the scheduler prunes those once an hour (`prune`)."""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog

from workers.core.shot_mode import ShotMode
from workers.core.shots import ARTIFACT_ID, ArtifactKind, ArtifactStore, Camera, artifact_id
from workers.core.video import Videographer
from workers.settings import Settings

_log = structlog.stdlib.get_logger("goalfleet.artifacts")


@dataclass(frozen=True)
class FileArtifacts:
    """`ArtifactStore` on a directory: `<root>/<id[:2]>/<id>.<kind>` (png, webm)."""

    root: Path

    def path(self, key: str, kind: ArtifactKind = "png") -> Path:
        if not ARTIFACT_ID.fullmatch(key):
            raise ValueError(f"{key!r} is not an artifact id (64 lowercase hex digits)")
        return self.root / key[:2] / f"{key}.{kind}"

    def put(self, data: bytes, kind: ArtifactKind = "png") -> str:
        key = artifact_id(data)
        target = self.path(key, kind)
        if target.exists():  # content-addressed: already stored, by this run or any other
            with contextlib.suppress(FileNotFoundError):  # pruned a moment ago: written again
                os.utime(target)  # referenced now: kept for this run's retention
                return key
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".put-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            Path(tmp).replace(target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                Path(tmp).unlink()
            raise
        return key

    def get(self, artifact_id: str, kind: ArtifactKind = "png") -> bytes | None:
        try:
            return self.path(artifact_id, kind).read_bytes()
        except (FileNotFoundError, ValueError):
            return None

    def prune(self, before: float) -> Pruned:
        """Delete every picture and video last referenced before `before` (a Unix time) and the
        temporary files of writes that died; what went and what was kept."""
        gone = kept = freed = 0
        for path in [*self.root.glob("??/*.png"), *self.root.glob("??/*.webm")]:
            with contextlib.suppress(FileNotFoundError):
                st = path.stat()
                if st.st_mtime >= before:
                    kept += 1
                    continue
                path.unlink()
                gone, freed = gone + 1, freed + st.st_size
        for tmp in self.root.glob("??/.put-*"):
            with contextlib.suppress(FileNotFoundError):
                if tmp.stat().st_mtime < before:
                    tmp.unlink()
        return Pruned(files=gone, bytes=freed, kept=kept)


@dataclass(frozen=True)
class Pruned:
    files: int
    bytes: int
    kept: int


RUN_MARGIN_S = 86_400
"""How long after a step's picture its run can still end (and its retention start): a day,
far past any run's time limit; the batch records use the same margin."""


@dataclass
class Retention:
    """The scheduler's hourly prune of the artifact directory (`every_s`), by `retention_s`
    (0: runs are kept forever, and so are their pictures)."""

    store: FileArtifacts
    retention_s: int
    every_s: float = 3600.0
    clock: Callable[[], float] = time.time
    _last: float = float("-inf")

    def tick(self) -> Pruned | None:
        now = self.clock()
        if self.retention_s == 0 or now - self._last < self.every_s:
            return None
        if not self.store.root.is_dir():
            return None
        self._last = now
        pruned = self.store.prune(now - self.retention_s - RUN_MARGIN_S)
        if pruned.files:
            _log.info("artifacts_pruned", files=pruned.files, bytes=pruned.bytes, kept=pruned.kept)
        return pruned


def artifacts(settings: Settings) -> FileArtifacts:
    return FileArtifacts(settings.artifact_dir)


def make_camera(settings: Settings, store: ArtifactStore | None = None) -> Camera | None:
    """The worker's camera from Settings (pictures into `store`, default the fleet's
    `artifact_dir`); None when screenshots are off."""
    if settings.screenshots == "off":
        return None
    from workers.devices.pictures import PillowPictures  # noqa: PLC0415 - only workers draw

    return Camera(
        artifacts(settings) if store is None else store,
        PillowPictures(),
        mode=settings.screenshots,
        run_budget_bytes=settings.screenshot_run_budget_bytes,
        picture_max_bytes=settings.screenshot_max_bytes,
    )


def make_videographer(
    settings: Settings, store: ArtifactStore | None = None, *, mode: ShotMode | None = None
) -> Videographer | None:
    """The worker's video policy from Settings (videos into `store`, default the fleet's
    `artifact_dir`, within `video_max_bytes` each; `mode`: a run's own, else `video`); None
    only when videos are off fleet-wide and `mode` asks for none either."""
    from workers.devices.video import FfmpegFilms  # noqa: PLC0415 - only workers film

    if mode is None and settings.video == "off":
        return None
    into = artifacts(settings) if store is None else store
    return Videographer(into, FfmpegFilms(), mode or settings.video, settings.video_max_bytes)
