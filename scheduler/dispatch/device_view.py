"""The dispatcher's view of the registered devices, so a dispatch does not read every device.

Reading all N device records costs two Redis commands per device; at farm scale (thousands of
devices) doing that on every submit and every scheduler pass made both grow with N. The view
keeps the last states in memory and:

- re-reads everything when it is older than `max_age_s` (new registrations, lapsed leases
  and quarantines are seen within that; 0, the default, re-reads on every use: exact, O(N),
  what tests of single calls want; the scheduler and the API run with
  `Settings.device_view_max_age_s`), and at once when a lookup misses (a submit naming a
  device registered a moment ago is never refused because of the cache);
- re-reads single devices when told they changed: the scheduler's wake list names the run
  that ended or the device that recovered (`touch`), and a reservation that failed re-reads
  its device;
- keeps the idle devices in a set, and in load order (fewest runs, then id: `load_order`), so
  the least loaded idle device matching a selector is the first match in that order: O(1)
  when most idle devices match, O(idle) at worst, never O(N) and never a sort.

The view is only a hint: `FleetStore.reserve` checks, atomically in Redis, that the device is
registered, alive, idle and not quarantined, so a stale entry can cost a retry, never a wrong
placement.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Iterable
from typing import cast

from scheduler.dispatch.routing import ANY, load_order, matching
from workers.core.records import DeviceState, Selector
from workers.fleet.state.devices import DeviceRegistry


class DeviceView:
    def __init__(
        self,
        registry: DeviceRegistry,
        *,
        max_age_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = registry
        self.max_age_s = max_age_s
        self.clock = clock
        self._states: dict[str, DeviceState] = {}
        self._idle: dict[str, DeviceState] = {}
        self._order: list[tuple[int, str]] = []
        """The idle devices' `load_order` keys, sorted."""
        self._read_at = float("-inf")
        self._raw: dict[str, tuple[dict[str, str], bool]] = {}
        """What the last full read saw per device (its hash and whether its lease was held)."""
        self._matches: dict[str, bool] = {}
        """Placement class -> whether some registered device matches it (cleared whenever a
        device joins or leaves the view)."""
        self._lock = threading.RLock()
        """The API calls in from several threads (sync routes run in a thread pool)."""

    # -- reads -------------------------------------------------------------------------------

    def all(self) -> list[DeviceState]:
        """Every registered device (re-read when the view is older than `max_age_s`)."""
        with self._lock:
            self._fresh()
            return list(self._states.values())

    def idle(self) -> list[DeviceState]:
        """Devices that were idle (alive, free, not quarantined) when last read."""
        with self._lock:
            self._fresh()
            return list(self._idle.values())

    def pick_idle(self, selector: Selector | None) -> DeviceState | None:
        """The least loaded idle device `selector` matches (fewest runs, then id), or None:
        the first match in load order."""
        sel = selector or ANY
        with self._lock:
            self._fresh()
            for _, did in self._order:
                device = self._idle[did]
                if sel.matches(device.info):
                    return device
            return None

    def has_match(self, device_id: str | None, selector: Selector | None) -> bool:
        """Whether a registered device is `device_id` / matches `selector` (cached per class
        until the set of devices changes: O(1) per submit at any fleet size)."""
        with self._lock:
            self._fresh()
            if device_id is not None:
                return device_id in self._states
            key = selector.model_dump_json() if selector is not None else "{}"
            if key not in self._matches:
                self._matches[key] = bool(matching(self._states.values(), None, selector))
            return self._matches[key]

    def get(self, device_id: str) -> DeviceState | None:
        with self._lock:
            self._fresh()
            return self._states.get(device_id)

    def __len__(self) -> int:
        return len(self._states)

    # -- updates -----------------------------------------------------------------------------

    def reload(self) -> None:
        """Re-read every registered device now (one pipelined round trip; a device whose
        record and lease are unchanged keeps its parsed state, so only changes are parsed)."""
        with self._lock:
            r, k = self.registry.r, self.registry.k
            ids = sorted(cast("set[str]", r.smembers(k.devices)))
            with r.pipeline(transaction=False) as p:
                for did in ids:
                    p.hgetall(k.device(did))
                    p.exists(k.lease(did))
                out = p.execute()
            raws: dict[str, tuple[dict[str, str], bool]] = {}
            states: dict[str, DeviceState] = {}
            for i, did in enumerate(ids):
                raw, alive = cast("dict[str, str]", out[2 * i]), bool(out[2 * i + 1])
                if not raw.get("info"):
                    continue
                raws[did] = (raw, alive)
                known = self._raw.get(did)
                if known is not None and known == (raw, alive) and did in self._states:
                    states[did] = self._states[did]
                else:
                    states[did] = DeviceState.from_hash(raw, alive=alive)
            if states.keys() != self._states.keys():
                self._matches.clear()
            self._raw = raws
            self._states = states
            self._idle = {did: d for did, d in states.items() if d.idle}
            self._order = sorted(load_order(d) for d in self._idle.values())
            self._read_at = self.clock()

    def refresh(self, device_ids: Iterable[str]) -> None:
        """Re-read these devices (a device no longer registered leaves the view)."""
        with self._lock:
            ids = sorted(set(device_ids))
            if not ids:
                return
            r, k = self.registry.r, self.registry.k
            with r.pipeline(transaction=False) as p:
                for did in ids:
                    p.hgetall(k.device(did))
                    p.exists(k.lease(did))
                    p.sismember(k.devices, did)
                out = p.execute()
            for i, did in enumerate(ids):
                raw = cast("dict[str, str]", out[3 * i])
                if raw.get("info") and out[3 * i + 2]:
                    self.put(DeviceState.from_hash(raw, alive=bool(out[3 * i + 1])))
                elif self._states.pop(did, None) is not None:
                    self._not_idle(did)
                    self._matches.clear()

    def touch(self, items: Iterable[str]) -> None:
        """Re-read what a wake-up names: device ids (a device recovered or registered), or ids
        of runs that ended (their device is read from the run); other items are ignored."""
        with self._lock:
            devices: set[str] = set()
            runs: list[str] = []
            for item in items:
                if item in self._states:
                    devices.add(item)
                else:
                    runs.append(item)
            if runs:  # a run that ended names its device; a device that just registered is new
                r, k = self.registry.r, self.registry.k
                with r.pipeline(transaction=False) as p:
                    for item in runs:
                        p.hget(k.run(item), "device")
                        p.sismember(k.devices, item)
                    found = p.execute()
                for i, item in enumerate(runs):
                    if found[2 * i + 1]:
                        devices.add(item)
                    elif found[2 * i]:
                        devices.add(cast("str", found[2 * i]))
            self.refresh(devices)

    def put(self, state: DeviceState) -> None:
        """Record a device's state as the dispatcher changed it (or read it)."""
        with self._lock:
            did = state.info.id
            if did not in self._states:
                self._matches.clear()
            self._raw.pop(did, None)  # no longer what the last full read parsed
            self._states[did] = state
            self._not_idle(did)
            if state.idle:
                self._idle[did] = state
                bisect.insort(self._order, load_order(state))

    def _not_idle(self, did: str) -> None:
        """Take `did` out of the idle set and the load order (if it is in them)."""
        old = self._idle.pop(did, None)
        if old is not None:
            key = load_order(old)
            i = bisect.bisect_left(self._order, key)
            if i < len(self._order) and self._order[i] == key:
                del self._order[i]

    def _fresh(self) -> None:
        if self.clock() - self._read_at >= self.max_age_s:
            self.reload()
