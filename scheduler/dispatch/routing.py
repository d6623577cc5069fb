"""Routing: which registered device a run may go to, and which idle one it goes to now.

Pure functions over `DeviceState` snapshots, so they are unit-tested without Redis.
"""

from __future__ import annotations

from collections.abc import Iterable

from workers.core.records import DeviceState, Selector

ANY = Selector()
MAX_NAMED = 3
"""How many devices `waiting_for` names (a pool of 1,000 down devices is one line)."""


def matching(
    devices: Iterable[DeviceState], target: str | None, selector: Selector | None
) -> list[DeviceState]:
    """Registered devices the run may ever go to (busy, down or quarantined included)."""
    if target is not None:
        return [d for d in devices if d.info.id == target]
    sel = selector or ANY
    return [d for d in devices if sel.matches(d.info)]


def waiting_for(
    devices: Iterable[DeviceState], target: str | None, selector: Selector | None
) -> str:
    """Why a pending run waits, in one line: "" when an idle device can take it (it is about
    to be placed), else each matching device's state (quarantined with its reason, down,
    busy with its run)."""
    matches = sorted(matching(devices, target, selector), key=lambda d: d.info.id)
    if not matches:
        return "no registered device matches"
    if any(d.idle for d in matches):
        return ""
    states = "; ".join(f"{d.info.id}: {device_state(d)}" for d in matches[:MAX_NAMED])
    more = f"; and {len(matches) - MAX_NAMED} more" if len(matches) > MAX_NAMED else ""
    if target is not None:
        return f"device {states}"
    return f"{len(matches)} matching devices, none free: {states}{more}"


def device_state(device: DeviceState) -> str:
    """A device that cannot take a run now: why (quarantine first: it outlasts the rest)."""
    if device.quarantined:
        reason = device.quarantine_reason
        return f"quarantined, {reason}" if reason else "quarantined"
    if not device.alive:
        return "down (its worker's lease lapsed)"
    return f"busy with run {(device.run or '')[:8]}"


def usable(device: DeviceState) -> bool:
    """Up: alive and not quarantined (busy or not); a run waits for a usable device."""
    return device.alive and not device.quarantined


def choose(
    devices: Iterable[DeviceState], target: str | None, selector: Selector | None
) -> DeviceState | None:
    """An idle (alive, not busy, not quarantined) matching device, least loaded first
    (fewest runs so far, then id for a stable order); None keeps the run pending."""
    idle = [d for d in matching(devices, target, selector) if d.idle]
    if not idle:
        return None
    return min(idle, key=load_order)


def load_order(device: DeviceState) -> tuple[int, str]:
    """Which idle device goes first: fewest runs so far, then id (a stable order)."""
    return (device.runs_total, device.info.id)


class IdleByClass:
    """`choose` for many runs in one dispatch pass: each placement class's idle matching
    devices are listed once, in `load_order`, and handed out in that order, so placing k runs
    on a farm with n idle devices costs O(n log n + k) per class, not O(k x n).

    `idle` is the pass's own dict of idle devices; the dispatcher deletes a device from it once
    used (or refused), and `pick` skips such devices."""

    def __init__(self, idle: dict[str, DeviceState]) -> None:
        self.idle = idle
        self._lists: dict[str, list[DeviceState]] = {}

    def pick(self, klass: str, target: str | None, selector: Selector | None) -> DeviceState | None:
        if target is not None:  # one device: a lookup, not a walk over every idle one
            device = self.idle.get(target)
            return device if device is not None and device.idle else None
        cands = self._lists.get(klass)
        if cands is None:
            found = matching(self.idle.values(), None, selector)
            cands = sorted((d for d in found if d.idle), key=load_order, reverse=True)
            self._lists[klass] = cands
        while cands:
            if cands[-1].info.id in self.idle:
                return cands[-1]
            cands.pop()
        return None
