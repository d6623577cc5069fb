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

Every write reads the run's cancel flag in the same script, and so does every memory read (a
run's first step has no rows to write yet); an action nothing read the flag for since the
last action reads it alone. A cancel seen there refuses the action about to be made
(`RunCancelledError`): the flag is read before every device action, and no action follows a
cancel requested before that read. The loop also checks the flag before each step
(`cancelled`: the last read).
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
        self._read = False
        """Whether the flag was read since the device's last action (the claim's read is
        older than the app's preparation and the device's opening)."""

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
        """Read the memory `entry` with the rows not yet written (none, at a run's first
        step), in one script that reads the cancel flag too: its hash flat (empty when there
        is none)."""
        return self._write(self.take(), recall=(entry, now, ttl_s))

    def _write(
        self, rows: Iterable[StepRow], recall: tuple[str, str, int] | None = None
    ) -> list[str]:
        written = self.store.write_steps(
            self.run_id, self.token, list(rows), fence=self.fence, recall=recall
        )
        self.cancelled = self.cancelled or written.cancel
        self._read = True
        return written.entry

    # -- the device's chain of hooks --------------------------------------------------------

    def before(self, command: str) -> None:
        """Before an action: the rows written (reading the cancel flag), or the flag read
        alone when no row waits and nothing read it since the last action (a run's first
        action without the memory, or a second action in one step)."""
        if command not in ACTIONS:
            return
        self.flush()
        if not self._read:
            self.cancelled = self.cancelled or self.store.cancel_requested(self.run_id)
        if self.cancelled:
            raise RunCancelledError(
                f"run {self.run_id}: {command} refused: a cancel was requested",
                hint="the run ends cancelled with the rows it wrote",
            )
        self._read = False  # the action goes ahead: the next one reads the flag again
