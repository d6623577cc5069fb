"""A worker's right to drive its device: the fence every device action and every fenced
store write passes first.

The heartbeat thread (in the worker's main process, `workers.fleet.presence`) holds and renews
it; the run task (in the pool child, forked after the fence was made) checks it before every
device action (`FenceHook`, on the device's chain of hooks) and passes its lease token to every
claim, step write and finish, whose scripts refuse a token that is not the device's lease
holder (`workers.fleet.state.runs`).

The fence is lost, for good, when

- the lease was last renewed longer ago than its validity (`lease_s` less a tenth for clock
  drift), measured from before the renew was sent: a stopped process, a long pause, a
  partition or a Redis outage. A replacement may legitimately hold the device by then, since
  Redis lets the lease expire `lease_s` after the renew arrived, never earlier than this;
- the heartbeat found another holder of the lease, or a fenced script told the run task so.

The two processes share the fence's state in an anonymous shared memory mapping (inherited
across `fork`): the validity deadline in `CLOCK_MONOTONIC` nanoseconds (one clock for every
process on the host, and it keeps running while a process is stopped) and a lost flag. Reads
and writes are single aligned 8-byte words, with no lock: a stopped or killed process can
never hold something the other waits for.
"""

from __future__ import annotations

import mmap
import struct
import time
from collections.abc import Callable

from workers.core.device_hooks import DeviceHook, with_hooks
from workers.core.errors import GoalfleetError
from workers.core.ports import DevicePort

DRIFT_MARGIN = 0.1
"""The share of `lease_s` the fence gives up to clock drift between this host and Redis."""

_WORD = struct.Struct("q")
_DEADLINE, _LOST = 0, 8

Clock = Callable[[], int]
"""Monotonic nanoseconds (`time.monotonic_ns`)."""


class LeaseLostError(GoalfleetError, code="LEASE_LOST"):
    """This worker no longer holds its device's lease: the run in flight is handed back to
    pending and the worker stands down (exit status 3)."""

    def __init__(self, message: str, *, taken: bool = True, hint: str = "") -> None:
        super().__init__(message, hint=hint)
        self.taken = taken
        """Another worker holds the lease (False: the lease lapsed or vanished)."""


class Fence:
    """The lease token `holder` of one worker process on `device_id`, and whether it still
    may act on the device. Made before the pool forks; shared by the heartbeat thread and the
    run task."""

    def __init__(
        self, device_id: str, holder: str, *, lease_s: float, clock: Clock = time.monotonic_ns
    ) -> None:
        self.device_id = device_id
        self.holder = holder
        """The lease token (`workers.fleet.keys.lease_holder`)."""
        self.validity_ns = int(lease_s * (1 - DRIFT_MARGIN) * 1e9)
        self.clock = clock
        self._mem = mmap.mmap(-1, 16)  # MAP_SHARED | MAP_ANONYMOUS: the forked child sees it
        self._set(_DEADLINE, 0)
        self._set(_LOST, 0)

    # -- the heartbeat's side ----------------------------------------------------------------

    def granted(self, sent_ns: int) -> None:
        """The lease was taken (registered) by a request sent at `sent_ns` (never reopens a
        fence closed on purpose)."""
        if not self.taken:
            self._set(_DEADLINE, sent_ns + self.validity_ns)

    def renewed(self, sent_ns: int) -> bool:
        """The lease was renewed by a request sent at `sent_ns`. False (and the fence is lost)
        when the fence had already expired: the worker was without a lease meanwhile."""
        if self.lost:
            self.lose()
            return False
        self._set(_DEADLINE, sent_ns + self.validity_ns)
        return True

    def lose(self) -> None:
        """Close the fence for good (another holder, or standing down)."""
        self._set(_LOST, 1)

    # -- everyone's ---------------------------------------------------------------------------

    @property
    def taken(self) -> bool:
        """Closed on purpose (another holder; standing down), not only expired."""
        return self._get(_LOST) == 1

    @property
    def lost(self) -> bool:
        return self.taken or self.clock() > self._get(_DEADLINE)

    def remaining_s(self) -> float:
        """Seconds of validity left (0 once lost)."""
        if self.taken:
            return 0.0
        return max(0.0, (self._get(_DEADLINE) - self.clock()) / 1e9)

    def check(self, action: str) -> None:
        """Raise `LeaseLostError` unless this worker may still act on its device."""
        if not self.lost:
            return
        if self.taken:
            why = "another worker holds its lease, or this worker is standing down"
        else:
            why = "its lease was not renewed in time (a pause, a partition or a Redis outage)"
        raise LeaseLostError(
            f"device {self.device_id!r}: {action} refused: {why}",
            taken=self.taken,
            hint="the run goes back to pending; the worker stands down",
        )

    def _set(self, offset: int, value: int) -> None:
        _WORD.pack_into(self._mem, offset, value)

    def _get(self, offset: int) -> int:
        value: int = _WORD.unpack_from(self._mem, offset)[0]
        return value


class FenceHook(DeviceHook):
    """Checks the fence before every device command, so a worker that lost its lease never
    drives the device again. `close` passes: it ends this worker's own session."""

    def __init__(self, fence: Fence) -> None:
        self.fence = fence

    def before(self, command: str) -> None:
        if command != "close":
            self.fence.check(command)


def open_fenced(
    open_device: Callable[[str], DevicePort], run_id: str, fence: Fence | None
) -> DevicePort:
    """Open the run's device (opening is a device action too) behind `fence`; unfenced
    when `fence` is None."""
    if fence is None:
        return open_device(run_id)
    fence.check("open the device")
    return with_hooks(open_device(run_id), FenceHook(fence))
