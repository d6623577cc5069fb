"""The goalfleet error tree.

    GoalfleetError
    ├── ConfigError                 bad settings or bad caller input, found before anything runs
    ├── SetupError                  this host lacks what a device or a worker needs (a tool, the
    │                               device, a model key, a secret): found at start, exit 3
    ├── DeviceError                 what the device side reports (translated at the adapter edge)
    │   ├── StaleRefError           the pinned ref is stale: re-snapshot and decide again
    │   ├── TransientDeviceError    worth a bounded retry (device busy, timeout, dropped connection)
    │   └── FatalDeviceError        retrying will not help; the run ends `errored`
    │       ├── EmptySnapshotError  the device returned an empty tree as "success"
    │       │   └── AppClosedError  … right after the run's action: the app closed its window
    │       ├── DeviceNotFoundError
    │       ├── ToolMissingError
    │       ├── AppNotInstalledError
    │       ├── UnauthorizedError
    │       └── ProtocolError       the daemon speaks a protocol we do not
    ├── DecideError                 the decider could not produce a decision
    │   ├── DecisionInvalidError    the model answered, but not validly (after its re-ask)
    │   ├── ModelUnavailableError   the model transport failed (infrastructure, not a decision)
    │   └── BudgetExceededError     the next model call would cross the run's token or cost
    │                               budget: the run ends `over-budget` before it is made
    ├── ClaimLostError              (workers.fleet.state.runs) another delivery took this run over
    ├── DeviceTakenError            (workers.fleet.state.devices) the device is registered elsewhere
    ├── LeaseLostError              (workers.fleet.fence) this worker's device lease is gone:
    │                               its run goes back to pending, the worker stands down
    ├── FleetError                  (scheduler.errors) API errors, each with its HTTP status:
    │                               Auth 401, Forbidden 403, InvalidRequest 422, NotFound 404,
    │                               Conflict 409, AmbiguousId 409,
    │                               TooManyPending 429, Unavailable 503
    └── ApiError, ApiUnreachableError  (scheduler.client.api_client) what the Python client raises

"Retry", "expected failure" and "bug" stay apart: the loop retries `TransientDeviceError`
with backoff, re-snapshots on `StaleRefError`, ends `errored` on `FatalDeviceError` and
`ModelUnavailableError` (infrastructure), and `escalated` on `DecisionInvalidError`
(a decision failure). Anything else is a bug and propagates.

Messages never carry input values: adapters redact before raising.
"""

from __future__ import annotations

from typing import Literal

StaleReason = Literal[
    "ref_frame_expired",
    "ref_generation_mismatch",
    "plain_ref_requires_complete_frame",
    "ref_not_issued",
    "ref_not_found",
]
STALE_REASONS: frozenset[str] = frozenset(
    {
        "ref_frame_expired",
        "ref_generation_mismatch",
        "plain_ref_requires_complete_frame",
        "ref_not_issued",
        "ref_not_found",  # agent-device 0.21.5: unknown ref on a full snapshot, no reason given
    }
)
STALE_HINTS: dict[str, str] = {
    "plain_ref_requires_complete_frame": "pin refs as @eN~sGEN from the snapshot they came from",
    "ref_generation_mismatch": "take a new snapshot",
    "ref_frame_expired": "take a new snapshot",
    "ref_not_issued": "use a ref from the snapshot",
}
"""What the caller should do about each stale-ref reason (a `StaleRefError`'s default hint)."""


class GoalfleetError(Exception):
    """Base of every error goalfleet raises on purpose."""

    code: str = "GOALFLEET_ERROR"
    """Stable and machine-readable; a subclass names its own in its class line:
    `class ToolMissingError(FatalDeviceError, code="TOOL_MISSING")`."""
    device_fault: bool = False
    """True when this failure counts against the device's health (quarantine)."""

    def __init_subclass__(cls, *, code: str | None = None, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if code is not None:
            cls.code = code

    def __init__(self, message: str, *, code: str | None = None, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class ConfigError(GoalfleetError, code="CONFIG"): ...


class SetupError(GoalfleetError, code="SETUP"):
    """What is missing on this host, and (its hint) the fix, in goalfleet's own terms: a worker
    refuses to start with it, before it registers."""


class DeviceError(GoalfleetError, code="DEVICE"):
    device_fault = True


class StaleRefError(DeviceError, code="STALE_REF"):
    def __init__(self, message: str, *, reason: str, hint: str = "") -> None:
        super().__init__(message, hint=hint or STALE_HINTS.get(reason, ""))
        self.reason = reason


class TransientDeviceError(DeviceError, code="DEVICE_TRANSIENT"): ...


class FatalDeviceError(DeviceError, code="DEVICE_FATAL"): ...


class EmptySnapshotError(FatalDeviceError, code="EMPTY_SNAPSHOT"): ...


class AppClosedError(EmptySnapshotError, code="APP_CLOSED"):
    """The tree went empty right after an action of the run: the app closed its window (it
    exited, or it was a dialog that ends on a submit), not a broken accessibility stack."""


class DeviceNotFoundError(FatalDeviceError, code="DEVICE_NOT_FOUND"): ...


class ToolMissingError(FatalDeviceError, code="TOOL_MISSING"): ...


class AppNotInstalledError(FatalDeviceError, code="APP_NOT_INSTALLED"): ...


class UnauthorizedError(FatalDeviceError, code="UNAUTHORIZED"): ...


class ProtocolError(FatalDeviceError, code="PROTOCOL"): ...


class DecideError(GoalfleetError, code="DECIDE"): ...


class DecisionInvalidError(DecideError, code="DECISION_INVALID"): ...


class ModelUnavailableError(DecideError, code="MODEL_UNAVAILABLE"): ...


class BudgetExceededError(DecideError, code="BUDGET_EXCEEDED"):
    """The next decider call would cross the run's budget (`workers.core.cost`): not made."""
