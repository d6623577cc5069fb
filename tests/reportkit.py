"""Where the chaos, partition and failover tests write their numbers (docs/reliability.md
quotes them)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def report_path(name: str) -> Path:
    """`<GOALFLEET_CHAOS_REPORT_DIR, default a temp directory>/<name>.json`."""
    base = Path(
        os.environ.get("GOALFLEET_CHAOS_REPORT_DIR", "")
        or Path(tempfile.gettempdir()) / "goalfleet-chaos"
    )
    base.mkdir(parents=True, exist_ok=True)
    return base / f"{name}.json"
