"""Placement: which pending runs a dispatch pass looks at, without head-of-line blocking.

Pending runs fall into *placement classes*: the exact device a run names, or its selector.
All runs of a class can go to the same devices, so a pass decides once per class whether an
idle device can take one, and walks past every run of a class that cannot (a device that died,
a selector nothing matches) without loading it. A flood of unplaceable runs therefore never
delays a placeable one behind it: the pass reads the pending index in pages to the end and
loads only runs it has not seen before (a run's class never changes, so it is remembered).

Runs whose class matches no *registered* device expire after `unplaceable_after_s` with the
typed status `unplaceable` (see `FleetStore.expire_unplaceable`), instead of waiting for ever;
so does a run past its own `device_wait_s` while every device it can go to is down or
quarantined, its reason saying which and why.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from scheduler.dispatch.routing import matching, usable, waiting_for
from scheduler.store.runs import FleetStore
from workers.core.records import DeviceState, RunRecord

PAGE = 1000
"""How many pending ids one read of the index returns at most."""
FIRST_PAGE = 50
"""A pass's first read: most passes place a run from the head of the index (a device
freed) and stop there, so they read no more of a long backlog than this; the reads after it
grow 4x a time up to `PAGE`."""


@dataclass(frozen=True)
class Pending:
    """What placement needs of a pending run (its class and age), remembered across passes."""

    run_id: str
    klass: str
    submitted_at: float
    device_wait_s: float | None = None
    """How long it may wait while every device it can go to is down (`GoalRunRequest`)."""


def class_of(run: RunRecord) -> str:
    """The placement class: every run of one class can go to exactly the same devices."""
    return class_named(run.target, run.selector.model_dump_json() if run.selector else None)


def class_named(target: str | None, selector: str | None) -> str:
    """The placement class of a run's `target` and its selector's JSON as the record stores it
    (`RunRecord.to_hash`), so a run's class is known without loading its record."""
    if target:
        return f"device:{target}"
    return f"selector:{selector or '{}'}"


class Placement:
    """The dispatcher's memory of pending runs' classes (bounded by the pending index)."""

    def __init__(self, store: FleetStore) -> None:
        self.store = store
        self._known: dict[str, Pending] = {}
        self._example: dict[str, RunRecord] = {}
        """One record per class, to match devices against (all of a class match alike)."""

    def pending(self) -> Iterator[Pending]:
        """Every pending run in dispatch order (priority, then submit time), page by page.

        Runs seen before are not loaded again; entries of runs no longer pending are
        forgotten at the end of a full walk."""
        seen: set[str] = set()
        after: tuple[str, float] | None = None
        page = FIRST_PAGE
        while True:
            got = self.store.pending_page(page, after=after)
            if not got:
                break
            after = got[-1]
            ids = [rid for rid, _ in got]
            self._learn([i for i in ids if i not in self._known])
            for rid in ids:
                p = self._known.get(rid)
                if p is not None:
                    seen.add(rid)
                    yield p
            if len(ids) < page:
                break
            page = min(PAGE, page * 4)
        for rid in [r for r in self._known if r not in seen]:
            del self._known[rid]
        live = {p.klass for p in self._known.values()}
        for k in [k for k in self._example if k not in live]:
            del self._example[k]

    def _learn(self, run_ids: list[str]) -> None:
        """Remember runs seen for the first time: their classes from what placement needs of
        them. A class with no example yet has one of them loaded whole as its example (the
        next of them when that one is gone by then)."""
        untried: dict[str, list[str]] = {}
        for f in self.store.pending_facts(run_ids):
            k = class_named(f.target, f.selector)
            self._known[f.run_id] = Pending(f.run_id, k, f.submitted_at, f.device_wait_s)
            if k not in self._example:
                untried.setdefault(k, []).append(f.run_id)
        while untried:
            tried = {ids[0]: k for k, ids in untried.items()}
            for run in self.store.load_many(list(tried)):
                self._example.setdefault(tried[run.id], run)
            untried = {k: ids[1:] for k, ids in untried.items() if k not in self._example}
            untried = {k: ids for k, ids in untried.items() if ids}

    def candidates(self, klass: str, devices: Iterable[DeviceState]) -> list[DeviceState]:
        """Registered devices (busy, down or quarantined included) a class may go to."""
        run = self._example.get(klass)
        if run is None:
            return []
        return matching(devices, run.target, run.selector)

    def example(self, klass: str) -> RunRecord | None:
        """A pending run of the class (all of a class match the same devices)."""
        return self._example.get(klass)

    def unplaceable(self, devices: list[DeviceState], *, before: float) -> list[str]:
        """Pending runs submitted before `before` whose class no registered device matches."""
        out: list[str] = []
        verdict: dict[str, bool] = {}
        for p in self.pending():
            if p.submitted_at >= before:
                continue
            if p.klass not in verdict:
                verdict[p.klass] = not self.candidates(p.klass, devices)
            if verdict[p.klass]:
                out.append(p.run_id)
        return out

    def outwaited(self, devices: list[DeviceState], *, now: float) -> list[tuple[Pending, str]]:
        """Pending runs past their `device_wait_s` while no device they can go to is up (each
        registered match down or quarantined), with why they waited (`waiting_for`)."""
        out: list[tuple[Pending, str]] = []
        verdict: dict[str, str] = {}
        for p in self.pending():
            if p.device_wait_s is None or p.submitted_at + p.device_wait_s > now:
                continue
            if p.klass not in verdict:
                found = self.candidates(p.klass, devices)
                run = self._example[p.klass]
                down = bool(found) and not any(usable(d) for d in found)
                verdict[p.klass] = waiting_for(found, run.target, run.selector) if down else ""
            if verdict[p.klass]:
                out.append((p, verdict[p.klass]))
        return out
