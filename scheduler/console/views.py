"""What the console's pages show, computed from the fleet's records: a device's state as a
person reads it, a step's "who decided", times. No markup here (the templates escape every
string they are given)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from workers.core.memory import Remembered
from workers.core.model import RunStatus, StepRow
from workers.core.records import DeviceState, RunRecord

DEVICE_STATES = ("idle", "reserved", "running", "quarantined", "down")


@dataclass(frozen=True)
class DeviceRow:
    id: str
    platform: str
    labels: str
    state: str
    """One of `DEVICE_STATES`."""
    run: str
    step: int | None
    lease_age_s: float | None
    runs_total: int
    reason: str


def device_row(
    dev: DeviceState, run: RunRecord | None, steps: int | None, lease_age_s: float | None
) -> DeviceRow:
    if not dev.alive:
        state = "down"
    elif dev.quarantined:
        state = "quarantined"
    elif dev.run is None:
        state = "idle"
    elif run is not None and run.status is RunStatus.RUNNING:
        state = "running"
    else:
        state = "reserved"
    labels = ", ".join(f"{k}={v}" for k, v in sorted(dev.info.labels.items()))
    return DeviceRow(
        id=dev.info.id,
        platform=dev.info.platform.value,
        labels=labels,
        state=state,
        run=dev.run or "",
        step=steps,
        lease_age_s=lease_age_s,
        runs_total=dev.runs_total,
        reason=dev.quarantine_reason,
    )


@dataclass(frozen=True)
class StepView:
    row: StepRow
    decided_by: str
    """rules, model, memory (and who taught it), a person (and which)."""
    action: str
    heading: str = ""
    """A journey's step heading, on the step's first row (`step_headings`)."""


def decided_by(row: StepRow, taught: dict[str, Remembered]) -> str:
    d = row.decision
    if d is None:
        return "done_when" if row.outcome.value == "done" else ""
    who = d.decided_by or ("done_when" if row.outcome.value == "done" else "")
    if who == "memory" and row.memory is not None:
        entry = taught.get(row.memory.entry)
        source = row.memory.source or (entry.source if entry else "")
        origin = entry.origin if entry is not None else ""
        if source == "human":
            return f"memory (taught by {origin or 'a person'})"
        return f"memory ({source})" if source else "memory"
    return who


def step_view(row: StepRow, taught: dict[str, Remembered], heading: str = "") -> StepView:
    a = row.action
    if a is None:
        return StepView(row=row, decided_by=decided_by(row, taught), action="", heading=heading)
    names = {c.ref: c.name for c in row.seen.candidates} if row.seen is not None else {}
    what = repr(names[a.ref]) if a.ref in names else a.ref
    action = f"{a.kind.value} {what}" + (f" with {a.input}" if a.input else "")
    return StepView(row=row, decided_by=decided_by(row, taught), action=action, heading=heading)


def ago(at: float | None, now: float | None = None) -> str:
    if at is None:
        return ""
    s = max(0.0, (now or time.time()) - at)
    minute, hour = 60, 3600
    if s < 1.5 * minute:
        return f"{s:.0f} s ago"
    if s < 1.5 * hour:
        return f"{s / minute:.0f} min ago"
    return f"{s / hour:.1f} h ago"
