"""Which steps get a picture (`ShotMode`): what `Settings.screenshots` holds and the camera
(`workers.core.shots.Camera`) follows, without the step models."""

from __future__ import annotations

from typing import Literal

ShotMode = Literal["on", "off", "failure-only"]
"""`on`: every step's picture; `off`: none; `failure-only`: only the pictures of steps that
did not move the run forward (outcome other than acted/done)."""
