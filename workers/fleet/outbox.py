"""`RowOutbox`: a run's step rows on their way to the store, each written at the latest before
the run's next device action, in a round trip the run makes anyway.

A row is made when a step ends, and the guarantee is that it is stored before the device is
acted on again (a worker that dies mid-action leaves every row before it). So a row waits in
the outbox until the first of:

- the next step's decision-memory read (`RedisMemory.recall`): the rows and the read are one
  script (`lua/step.lua`), one round trip instead of two;
- the next device action (`before`, on the device's chain of hooks after the fence): the
  rows are written alone;
- the run's end: the finish script writes them (`RunStore.finish`), or they are written
  before the run is parked for a person.

Every write reads the run's cancel flag in the same script. A cancel seen there refuses the
action about to be made (`RunCancelledError`), so no device action follows a cancel the
store has shown the worker; the loop also reads the flag before each step (`cancelled`).
The fence and the claim token are checked by every write, as each row's own write did.
"""

from __future__ import annotations

from collections.abc import Iterable

from workers.core.device_hooks import DeviceHook
from workers.core.errors import GoalfleetError
from workers.core.model import StepRow
from workers.fleet.fence import Fence
from workers.fleet.state.runs import RunStore

ACTIONS = frozenset({"press", "fill", "scroll", "back", "launch", "relaunch", "open", "submit"})
"""The device commands that act on the device (`HookedDevice`'s names); a snapshot, a
screenshot, a recording or a wait only looks."""


class RunCancelledError(GoalfleetError, code="CANCELLED"):
    """A cancel of the run was requested: the device action about to be made is refused."""


class RowOutbox(DeviceHook):
    def __init__(
        self, store: RunStore, run_id: str, token: str, fence: Fence | None, *, cancelled: bool
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.token = token
        self.fence = fence
        self.cancelled = cancelled
        """Whether a cancel was requested, as the claim or the last write read it."""
        self._rows: list[StepRow] = []

    def add(self, row: StepRow) -> None:
        self._rows.append(row)

    def take(self) -> list[StepRow]:
        """The rows not yet written, handed to a script that writes them (the finish)."""
        rows, self._rows = self._rows, []
        return rows

    def flush(self) -> None:
        """Write the rows not yet written (none: no round trip)."""
        if self._rows:
            self._write(self.take())

    def ride(self, entry: str, now: str, ttl_s: int) -> list[str] | None:
        """Read the memory `entry` with the rows not yet written, in one script: its hash
        flat (empty when there is none); None when no row waits (the caller reads it alone)."""
        if not self._rows:
            return None
        return self._write(self.take(), recall=(entry, now, ttl_s))

    def _write(
        self, rows: Iterable[StepRow], recall: tuple[str, str, int] | None = None
    ) -> list[str]:
        written = self.store.write_steps(
            self.run_id, self.token, list(rows), fence=self.fence, recall=recall
        )
        self.cancelled = self.cancelled or written.cancel
        return written.entry

    # -- the device's chain of hooks --------------------------------------------------------

    def before(self, command: str) -> None:
        if command not in ACTIONS:
            return
        self.flush()
        if self.cancelled:
            raise RunCancelledError(
                f"run {self.run_id}: {command} refused: a cancel was requested",
                hint="the run ends cancelled with the rows it wrote",
            )
