"""The names the state machine's scripts share with Python (`workers.fleet.state.scripts`
injects them into every script as the Lua tables `S` and `F`, and `PRIORITY_SPAN`)."""

from __future__ import annotations

from enum import StrEnum

PRIORITY_SPAN = 10**13
"""Pending score = priority * PRIORITY_SPAN + submit time in ms: priority first (0 highest),
then first come, first served (`workers.fleet.state.runs.pending_score`; the scripts read
the same number)."""
RESERVED = "reserved"
"""Not a `RunStatus` (a reserved run reads `queued` from outside): the state of a queued run
that holds a device, in the reserved index and the device's `run` field."""


class Failure(StrEnum):
    """How a finished run counts towards its device's health."""

    NONE = "none"  # done: resets both counters
    INFRA = "infra"  # errored on the device: its error, a soft time limit, a worker lost on it
    DECISION = "decision"  # blocked, escalated, max-steps: the device worked
    NEUTRAL = "neutral"  # cancelled, or a configuration error: counts for nothing
