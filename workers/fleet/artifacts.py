"""The fleet's artifact store: step pictures as files named by their sha256, under one
directory (`GOALFLEET_ARTIFACT_DIR`, which several hosts can share, e.g. over NFS), never in
Redis. The same screen in 1,000 runs is one file; a write is atomic (temp file + rename), so
two hosts writing the same picture at once both leave the one complete file."""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from workers.core.shots import ARTIFACT_ID, Camera, artifact_id
from workers.settings import Settings


@dataclass(frozen=True)
class FileArtifacts:
    """`ArtifactStore` on a directory: `<root>/<id[:2]>/<id>.png`."""

    root: Path

    def path(self, key: str) -> Path:
        if not ARTIFACT_ID.fullmatch(key):
            raise ValueError(f"{key!r} is not an artifact id (64 lowercase hex digits)")
        return self.root / key[:2] / f"{key}.png"

    def put(self, data: bytes) -> str:
        key = artifact_id(data)
        target = self.path(key)
        if target.exists():
            return key  # content-addressed: already stored, by this run or any other
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

    def get(self, artifact_id: str) -> bytes | None:
        try:
            return self.path(artifact_id).read_bytes()
        except (FileNotFoundError, ValueError):
            return None


def artifacts(settings: Settings) -> FileArtifacts:
    return FileArtifacts(settings.artifact_dir)


def make_camera(settings: Settings) -> Camera | None:
    """The worker's camera from Settings; None when screenshots are off."""
    if settings.screenshots == "off":
        return None
    from workers.devices.pictures import PillowPictures  # noqa: PLC0415 - only workers draw

    return Camera(
        artifacts(settings),
        PillowPictures(),
        mode=settings.screenshots,
        run_budget_bytes=settings.screenshot_run_budget_bytes,
        picture_max_bytes=settings.screenshot_max_bytes,
    )
