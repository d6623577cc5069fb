"""The effect check of a remembered action, without agent-device's settle window.

A press or fill the loop repeats from its decision memory (the remembered-action hint,
`DevicePort.expect_known_screen`) was made on this very screen in a `done` run before, so the
screen it leads to is known to come. agent-device's settle waits its quiet window
(`settleQuietMs`, plus a capture or two: ~450-800 ms a fill on the GTK app) whatever the
screen does; here the action goes without settle and its effect is read from the snapshots
that follow, stopping as soon as the screen has changed and holds still for one more capture
(~70 ms each). The last snapshot is the next step's, so it is not taken twice. If nothing
changes within `QUICK_WINDOW_S`, the action changed nothing, as a settle diff would have said,
and the loop invalidates the memory entry.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from workers.core.model import ActionResult, Node, Snapshot

__all__ = ["QUICK_WINDOW_S", "Look", "quick_effect", "screen_look"]

QUICK_WINDOW_S = 1.5
"""How long a remembered action's effect may take to show before it counts as no change."""
Look = tuple[tuple[str, str, str, str, bool | None], ...]


def screen_look(pairs: Sequence[tuple[Node | None, Mapping[str, Any]]]) -> Look:
    """What a screen shows, refs and generations aside, from each node as read and as the
    daemon sent it: a secure field counts by the length of what it holds (its value is never
    read, but typing a password into it is a change)."""
    return tuple(
        (
            n.type,
            n.role,
            n.label,
            str(len(str(raw.get("value") or ""))) if n.secure else n.value,
            n.enabled,
        )
        for n, raw in pairs
        if n is not None
    )


def quick_effect(
    snapshot: Callable[[], Snapshot],
    before: Snapshot | None,
    *,
    look: Callable[[Snapshot | None], object],
    window_s: float = QUICK_WINDOW_S,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[ActionResult, Snapshot]:
    """After an unsettled action: whether the screen changed from `before` (by `look`), and
    the snapshot it came to rest on (the next step's). `settled` is False when it was still
    changing at the end of the window."""
    deadline = clock() + window_s
    seen = look(before)
    last = snapshot()
    changed = look(last) != seen
    while clock() < deadline:
        nxt = snapshot()
        if changed and look(nxt) == look(last):
            return _result(changed=True, settled=True, snap=nxt), nxt
        changed = changed or look(nxt) != seen
        last = nxt
    return _result(changed=changed, settled=not changed, snap=last), last


def _result(*, changed: bool, settled: bool, snap: Snapshot) -> ActionResult:
    return ActionResult(
        changed=changed,
        settled=settled,
        settle_skipped=True,
        refs_generation=snap.refs_generation,
    )
