"""Routing: which registered device a run may go to, and which idle one it goes to now.

Pure functions over `DeviceState` snapshots, so they are unit-tested without Redis.
"""

from __future__ import annotations

from collections.abc import Iterable

from workers.core.records import DeviceState, Selector

ANY = Selector()


def matching(
    devices: Iterable[DeviceState], target: str | None, selector: Selector | None
) -> list[DeviceState]:
    """Registered devices the run may ever go to (busy, down or quarantined included)."""
    if target is not None:
        return [d for d in devices if d.info.id == target]
    sel = selector or ANY
    return [d for d in devices if sel.matches(d.info)]


def choose(
    devices: Iterable[DeviceState], target: str | None, selector: Selector | None
) -> DeviceState | None:
    """An idle (alive, not busy, not quarantined) matching device, least loaded first
    (fewest runs so far, then id for a stable order); None keeps the run pending."""
    idle = [d for d in matching(devices, target, selector) if d.idle]
    if not idle:
        return None
    return min(idle, key=lambda d: (d.runs_total, d.info.id))
