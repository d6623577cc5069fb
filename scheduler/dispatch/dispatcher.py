"""The dispatcher: give pending runs to idle devices, in priority then submit order.

Runs wait in our store (never in a busy device's queue), so a device's Celery queue holds at
most the one run reserved for it. The API calls `dispatch([run_id])` right after a submit
(fast path); the scheduler process runs `loop()` which wakes when a device frees (the worker
pushes to the wake list on finish) or every `interval_s`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import structlog

from scheduler.dispatch.device_view import DeviceView
from scheduler.dispatch.placement import Pending, Placement, class_of
from scheduler.dispatch.routing import IdleByClass
from scheduler.dispatch.shares import Shares, mine
from scheduler.store.enqueue import Enqueuer
from scheduler.store.runs import FleetStore
from workers.core.backoff import Backoff
from workers.core.model import RunStatus
from workers.core.records import DeviceState, RunRecord
from workers.fleet.keys import WAKE_KEPT
from workers.fleet.outages import describe, is_outage

log = structlog.stdlib.get_logger("goalfleet.scheduler")

OUTAGE_BACKOFF = Backoff(base_s=0.25, cap_s=5.0)
"""The dispatch loop's waits while Redis is unavailable."""
SWEEP_EVERY_S = 1.0
"""The loop sweeps (overdue runs, strays, unplaceable runs) at most this often: a pass runs
on every wake-up, and the sweep reads every busy device's run."""


class Dispatcher:
    def __init__(
        self,
        store: FleetStore,
        enqueuer: Enqueuer,
        *,
        overdue_after_s: float | None = None,
        orphan_after_s: float | None = None,
        unplaceable_after_s: float | None = None,
        view_max_age_s: float = 0.0,
        lapsed_every_s: float | None = None,
        shares: Shares | None = None,
    ) -> None:
        self.store = store
        self.shares = shares
        """This scheduler's share of placement among the live schedulers (None: all of it;
        `scheduler.dispatch.shares`)."""
        self.placement = Placement(store)
        self.view = DeviceView(store.registry, max_age_s=view_max_age_s)
        self.unplaceable_after_s = unplaceable_after_s
        """A pending run that no registered device can ever take (its device is not
        registered, its selector matches none) ends `unplaceable` after this long."""
        self._expired_at = 0.0
        self.enqueuer = enqueuer
        self.overdue_after_s = overdue_after_s
        """A run still `running` this long after it started is ended `errored`, freeing its
        device: its worker holds the lease but runs it no more (a pool child killed at the
        hard time limit is sent again at once by its worker; a dead worker's run is re-pended
        by the lapsed sweep), so nothing else will end it."""
        self.orphan_after_s = orphan_after_s
        """A reservation never claimed this long is sent again while its device is alive (its
        message never left, or was lost with a worker that died holding it); a selector run's
        goes back to pending when its device is down (a stale message is skipped by the
        claim if the device ever returns)."""
        self.lapsed_every_s = lapsed_every_s
        """How often the sweep re-pends running runs whose worker lost its device's lease
        (died, or stopped longer than the lease), so any matching device runs them within
        a lease and this of the lapse (None: never; the overdue sweep ends them)."""
        self._lapsed_at = float("-inf")

    def sweep(self, *, now: float | None = None) -> int:
        """Free devices held by overdue runs and re-pend runs stuck on dead devices. Reads
        only what is due (the `running` and `reserved` indexes by time), never every busy
        device's run."""
        now = time.time() if now is None else now
        fixed = 0
        if self.lapsed_every_s is not None and now - self._lapsed_at >= self.lapsed_every_s:
            self._lapsed_at = now
            fixed += self._lapsed()
        if self.orphan_after_s is not None:
            fixed += self._orphans(now - self.orphan_after_s)
        if self.unplaceable_after_s is not None and now - self._expired_at >= 1.0:
            self._expired_at = now
            fixed += self.expire_unplaceable(now=now)
        if self.overdue_after_s is not None:
            fixed += self._overdue(now - self.overdue_after_s)
        return fixed

    def _overdue(self, before: float) -> int:
        """End runs claimed before `before` and still running (their worker was killed at
        its hard time limit or lost them); drop index entries of runs that ended another way
        or went back to pending."""
        due = self.store.running_since(before=before)
        if not due:
            return 0
        runs = {r.id: r for r in self.store.load_many([rid for rid, _ in due])}
        fixed = 0
        for rid, claimed_at in due:
            run = runs.get(rid)
            if (
                run is not None
                and run.status is RunStatus.RUNNING
                and run.started_at is not None
                and run.started_at <= before
                and self.store.end_overdue(run, f"still running after {self.overdue_after_s:g} s")
            ):
                fixed += 1
            else:
                self.store.forget_running(rid, claimed_at)
        return fixed

    def _lapsed(self) -> int:
        """Re-pend running runs whose worker lost its device's lease; their devices are
        re-read (freed, and down or held by a new worker); one whose cancel was requested
        while it ran is cancelled now instead of waiting for a device."""
        released = self.store.release_lapsed()
        for run_id, device_id in released:
            log.warning(
                "run_moved_off_lost_lease",
                run_id=run_id,
                device_id=device_id,
                hint="its worker lost the device's lease mid-run (died, or stopped longer than "
                "the lease); pending again for any matching device",
            )
        self.view.refresh([device_id for _, device_id in released])
        for run in self.store.load_many([run_id for run_id, _ in released]):
            if run.cancel_requested:  # asked to stop while running: it ends here, pending
                self.store.cancel(run.id)
        return len(released)

    def _orphans(self, before: float) -> int:
        """Runs reserved before `before` and never claimed: one no registered device holds
        goes back to pending; one whose live device holds it is sent again (the message was
        lost: a crash between reserve and send; a duplicate is skipped by the claim); one
        whose device is down goes back to pending unless it names that device."""
        ids = self.store.reservations(before=before)
        if not ids:
            return 0
        runs = {r.id: r for r in self.store.load_many(ids)}
        fixed = 0
        for rid in ids:
            run = runs.get(rid)
            if run is None:
                self.store.forget_reservation(rid)
            elif self.store.release_stray(run):
                log.warning(
                    "stray_reservation_released",
                    run_id=rid,
                    device_id=run.device,
                    hint="reserved for a device that is gone; pending again",
                )
                fixed += 1
            elif run.status is RunStatus.QUEUED and run.device is not None:
                fixed += self._resend_or_release(run, run.device)
        return fixed

    def _resend_or_release(self, run: RunRecord, device_id: str) -> int:
        """A reservation its device still holds, never claimed: sent again while the device
        is alive, else back to pending (unless the run names that device)."""
        self.view.refresh([device_id])
        dev = self.view.get(device_id)
        if dev is None or dev.run != run.id:
            return 0
        if dev.alive:
            if not self.store.resend(run.id, device_id):
                return 0
            log.warning(
                "reservation_sent_again",
                run_id=run.id,
                device_id=device_id,
                hint="its message never left or was lost with its worker; a duplicate is "
                "skipped by the claim",
            )
            self.deliver(run.id, device_id)
            return 1
        if run.target is None:
            return int(self.store.unreserve(run, device_id))
        return 0

    def dispatch(self, run_ids: list[str] | None = None) -> int:
        """Dispatch what can go now; return how many runs were sent.

        With `run_ids` (the API's fast path) only those runs are tried; without, every pending
        run in order, skipping whole placement classes no idle device can take (see
        `scheduler.dispatch.placement`), so unplaceable runs never hold back placeable ones. Devices
        come from the cached `DeviceView` and are handed out per class by `IdleByClass`."""
        idle = {d.info.id: d for d in self.view.idle()}
        if run_ids is not None:
            return self._dispatch_ids(run_ids, idle)
        # every pass keeps the membership (renewed when due), idle devices or not: one that
        # lapsed while every device was busy would make the next free device everyone's
        share = self.shares.current() if self.shares is not None else (0, 1)
        if not idle:
            return 0
        if share[1] > 1:
            return self._dispatch_share(idle, share)
        chosen = Chosen(self, idle)
        picker = IdleByClass(idle)
        full: set[str] = set()  # classes no idle device can take for the rest of this pass
        for p in self.placement.pending():
            if p.klass in full:
                continue
            run = self.placement.example(p.klass)
            device = picker.pick(p.klass, run.target, run.selector) if run is not None else None
            if device is None:
                full.add(p.klass)
                continue
            chosen.take(p.run_id, device)
            if not idle:
                break
        return chosen.sent()

    def _dispatch_share(self, idle: dict[str, DeviceState], share: tuple[int, int]) -> int:
        """A pass of one of several schedulers: its own runs (`mine`: by run id) on its own
        idle devices first, then others' runs on its devices left idle; other schedulers'
        devices are theirs until their membership lapses. The walk reads others' runs up to
        `n` times its idle devices, a bound set at the start: bound by the devices still
        idle, it stopped early as they filled and took others' runs their schedulers were
        placing at that moment (refused reservations, half of every burst's)."""
        n = share[1]
        own = {did: d for did, d in idle.items() if mine(did, share)}
        picker = IdleByClass(own)
        chosen = Chosen(self, own)
        later: list[Pending] = []
        walk = len(own) * n  # a long backlog is not read to its end
        for p in self.placement.pending():
            if not mine(p.run_id, share):
                later.append(p)
            else:
                self._place(p, picker, chosen)
            if not own or len(later) >= walk:
                break
        for p in later:
            if not own:
                break
            self._place(p, picker, chosen)
        return chosen.sent()

    def _place(self, p: Pending, picker: IdleByClass, chosen: Chosen) -> None:
        """An idle device of `picker`'s for the pending run, if one matches, chosen for it."""
        run = self.placement.example(p.klass)
        device = picker.pick(p.klass, run.target, run.selector) if run is not None else None
        if device is not None:
            chosen.take(p.run_id, device)

    def learn(self, woke: list[str]) -> None:
        """What a wake-up tells the view: the devices it names, or those of the runs it names,
        are re-read. A wake list drained at its cap (`WAKE_KEPT`: a finish trims it) may have
        lost entries to the trim, so every device is re-read then: past ~100 finishes between
        two passes, the freed devices the trim dropped stayed busy in the view until its
        periodic re-read (`view_max_age_s`)."""
        if len(woke) >= WAKE_KEPT:
            self.view.reload()
        else:
            self.view.touch(woke)

    def fast_pick(self, run: RunRecord) -> DeviceState | None:
        """The device the submit's fast path tries for a run it is about to write, from the
        cached view with no read: an exact device even when the view thinks it busy (the
        API's view learns of finishes only at its periodic re-read; the submit script
        refuses a busy, down or quarantined device), else the least loaded idle match."""
        if run.target is not None:
            return self.view.get(run.target)
        return self.view.pick_idle(run.selector)

    def deliver(self, run_id: str, device_id: str) -> bool:
        """Send a reserved run's message (after its reservation's script); whether it left."""
        return not self._deliver_all([(run_id, device_id)])

    def _deliver_all(self, pairs: list[tuple[str, str]]) -> set[str]:
        """Send reserved runs' messages (after their reservations' script); the run ids an
        outage left unsent. A Redis that refuses one (an outage) stops the rest, with one
        warning: their reservations stand, and the sweep sends them again once they are
        `orphan_after_s` old; anything else is a bug and raised."""
        unsent = self.enqueuer.send_all(pairs)
        if unsent.error is None:
            return set()
        log.warning(
            "run_message_not_sent",
            run_id=unsent.pairs[0][0],
            device_id=unsent.pairs[0][1],
            unsent=len(unsent.pairs),
            error=describe(unsent.error),
            hint="the reservations stand; the sweep sends them again",
        )
        return {run_id for run_id, _ in unsent.pairs}

    def sent_reserved(self, run: RunRecord, device: DeviceState, at: float) -> RunRecord:
        """A run the submit script has just reserved for `device`: its message is sent, the
        view learns it; the run as the reservation left it."""
        self.deliver(run.id, device.info.id)
        self._took(run.id, device)
        return run.model_copy(update={"device": device.info.id, "dispatched_at": at})

    def refused(self, device: DeviceState) -> None:
        """The submit script found `device` not free: a device the view had idle was stale,
        and is re-read (one the view had busy changes nothing)."""
        if device.idle:
            self.view.refresh([device.info.id])

    def _dispatch_ids(self, run_ids: list[str], idle: dict[str, DeviceState]) -> int:
        return self._dispatch_runs(self.store.load_many(run_ids), idle)

    def _dispatch_runs(self, runs: list[RunRecord], idle: dict[str, DeviceState]) -> int:
        """Place `runs` on `idle` devices; a run for an exact device the view thinks busy
        re-reads that device first (the view may be older than a finish)."""
        chosen = Chosen(self, idle)
        picker = IdleByClass(idle)
        for run in runs:
            if run.device is not None or run.status.terminal:
                continue
            if run.target is not None and run.target not in idle:
                self._recheck(run.target, idle)
            device = picker.pick(class_of(run), run.target, run.selector)
            if device is not None:
                chosen.take(run.id, device)
        return chosen.sent()

    def _recheck(self, device_id: str, idle: dict[str, DeviceState]) -> None:
        """Re-read one device the view thinks busy (3 commands); idle now: it joins `idle`."""
        self.view.refresh([device_id])
        state = self.view.get(device_id)
        if state is not None and state.idle:
            idle[device_id] = state

    def reserve_and_send(self, pairs: list[tuple[str, DeviceState]]) -> int:
        """Reserve each chosen (run, device) pair, all in one script (each pair on its own),
        then send the reserved runs' messages on one held producer; how many were reserved
        (a message an outage refused is the sweep's to send). A refused pair (the view
        was stale: the device is busy, down or quarantined) re-reads its device."""
        if not pairs:
            return 0
        done = self.store.reserve_many([(run_id, d.info.id) for run_id, d in pairs])
        refused = [d.info.id for (_, d), ok in zip(pairs, done, strict=True) if not ok]
        if refused:
            self.view.refresh(refused)
        reserved = [(run_id, d) for (run_id, d), ok in zip(pairs, done, strict=True) if ok]
        self._deliver_all([(run_id, d.info.id) for run_id, d in reserved])
        for run_id, device in reserved:
            self._took(run_id, device)
        return len(reserved)

    def _took(self, run_id: str, device: DeviceState) -> None:
        """The view learns that `device` has `run_id` on its way."""
        self.view.put(
            device.model_copy(update={"run": run_id, "runs_total": device.runs_total + 1})
        )

    def expire_unplaceable(self, *, now: float | None = None) -> int:
        """End `unplaceable` every pending run older than `unplaceable_after_s` whose device
        (or selector) matches no registered device, and every run past its `device_wait_s`
        whose devices are all down or quarantined (its reason says why)."""
        if self.unplaceable_after_s is None:
            return 0
        now = time.time() if now is None else now
        devices = self.view.all()
        ended = 0
        for rid in self.placement.unplaceable(devices, before=now - self.unplaceable_after_s):
            if self.store.expire_unplaceable(rid, after_s=self.unplaceable_after_s):
                log.warning(
                    "run_unplaceable",
                    run_id=rid,
                    waited_s=self.unplaceable_after_s,
                    hint="no registered device matches its device or selector",
                )
                ended += 1
        late = self.placement.outwaited(devices, now=now)
        if late:  # the view may be `view_max_age_s` old: judge, and say why, on a fresh read
            self.view.refresh(
                {d.info.id for p, _ in late for d in self.placement.candidates(p.klass, devices)}
            )
            late = self.placement.outwaited(self.view.all(), now=now)
        for p, why in late:
            wait = p.device_wait_s or 0.0
            reason = f"waited {wait:g} s (device_wait_s) for {why}"
            if self.store.expire_unplaceable(p.run_id, after_s=wait, reason=reason):
                log.warning("run_outwaited_its_device", run_id=p.run_id, reason=reason)
                ended += 1
        return ended

    def loop(
        self, stop: threading.Event, *, interval_s: float, tick: Callable[[], object] | None = None
    ) -> None:
        """Until `stop` is set: dispatch, then wait for a wake-up or `interval_s`. `tick`
        (schedules, question deadlines) runs after a pass at most once an `interval_s`, as
        often as an idle loop runs it, however often finishes wake the loop.

        A Redis outage of any kind (unreachable, full, read-only, loading: `is_outage`) is
        one warning when it starts and one line when Redis answers again, with passes backing
        off (jittered, up to `OUTAGE_BACKOFF.cap_s`) in between; anything else is a bug,
        logged with its traceback, and the loop goes on."""
        down_since: float | None = None
        failed_passes = 0
        swept_at = ticked_at = float("-inf")
        while not stop.is_set():
            try:
                if time.monotonic() - swept_at >= max(interval_s, SWEEP_EVERY_S):
                    self.sweep()  # its bounds are seconds to minutes: not on every wake-up
                    swept_at = time.monotonic()
                self.dispatch()
                if tick is not None and time.monotonic() - ticked_at >= interval_s:
                    tick()
                    ticked_at = time.monotonic()
                if down_since is not None:
                    log.info("redis_available_again", down_s=round(time.time() - down_since, 1))
                    down_since, failed_passes = None, 0
                self.learn(self.store.wait_wake(interval_s))
            except Exception as exc:  # an outage or a bug: neither ends the loop
                if stop.is_set():
                    return
                if not is_outage(exc):
                    log.exception("dispatch_pass_failed", hint="retrying")
                    stop.wait(interval_s)
                    continue
                if down_since is None:
                    down_since = time.time()
                    log.warning(
                        "redis_unavailable",
                        error=describe(exc),
                        hint="waiting with backoff; dispatch resumes when Redis answers",
                    )
                stop.wait(max(interval_s, OUTAGE_BACKOFF.delay(failed_passes)))
                failed_passes += 1


RESERVE_BATCH = 100
"""The most (run, device) pairs one reservation script takes: a pass placing more reserves
them 100 at a time, so no script holds Redis for long."""


class Chosen:
    """A dispatch pass's choices: each device taken from the pass's `idle` devices when
    chosen (whatever its reservation's fate), the pairs reserved in batches of
    `RESERVE_BATCH` (`Dispatcher.reserve_and_send`: one round trip a batch, not one a run)."""

    def __init__(self, dispatcher: Dispatcher, idle: dict[str, DeviceState]) -> None:
        self.dispatcher = dispatcher
        self.idle = idle
        self._pairs: list[tuple[str, DeviceState]] = []
        self._sent = 0

    def take(self, run_id: str, device: DeviceState) -> None:
        del self.idle[device.info.id]
        self._pairs.append((run_id, device))
        if len(self._pairs) >= RESERVE_BATCH:
            self._flush()

    def sent(self) -> int:
        """How many of the pass's runs were sent, the last batch reserved first."""
        self._flush()
        return self._sent

    def _flush(self) -> None:
        pairs, self._pairs = self._pairs, []
        self._sent += self.dispatcher.reserve_and_send(pairs)
