"""The Redis key layout, in one place (the worker and the scheduler share it).

{p}:run:{id}            hash   one run record (see `workers.core.records.RunRecord`)
{p}:run:{id}:steps      hash   step index -> StepRow JSON (upserted, so redelivery is safe)
{p}:run:{id}:pictures   set    every picture id a step row of the run ever named (rows are
                               written anew when a run is claimed again; their pictures
                               stay the run's own), expiring with the run
{p}:runs                zset   every run, by submit time (the run list; an entry of a run past
                               its retention is dropped when a read meets it)
{p}:runs:{status}       zset   the runs that ended with `status`, by submit time
{p}:devices             set    ids of registered devices
{p}:device:{id}         hash   capabilities, current run, failure counters, quarantine
{p}:device:{id}:lease   string the worker's heartbeat lease (expires when it dies)
{p}:pending             zset   runs waiting for a device, scored by priority then time
{p}:reserved            zset   runs reserved for a device but not yet claimed, by reserve time
                               (the sweep finds a reservation whose device vanished)
{p}:running             zset   runs claimed, by claim time (the sweep finds overdue runs; an
                               entry of a run no longer running is dropped when it falls due)
{p}:wake                list   pushed when a device frees; the scheduler's loop blocks on it
{p}:batch:{id}          hash   batch totals and per-status counts
{p}:batch:{id}:runs     list   the batch's run ids
{p}:idem:{key}          string idempotency key -> "run:<id>" or "batch:<id>" + body hash
{p}:epoch               string the API's start marker (SET NX); gone: Redis lost its data
{p}:schedules           zset   schedule ids by next due time
{p}:schedulers          zset   live scheduler processes by when their membership lapses
                               (`scheduler.dispatch.shares`: how they split placement)
{p}:schedule:{id}       hash   one recurring schedule
{p}:mem:{key}           hash   one decision-memory entry (entry JSON, hits, created/last used)
{p}:mem:index           set    keys of memory entries (expired ones are pruned on listing)
{p}:question:{id}       string a parked run's question (JSON), while it awaits an answer
{p}:questions           zset   parked run ids by the time their question expires
{p}:history:on          string set (with a TTL) while a history writer runs: ended runs join
                               the outbox and their keys wait for it (`lua/lib/run_ended.lua`)
{p}:history:outbox      zset   ended runs not yet in the history database, by end time (ms)
{p}:console:tokens      hash   the console's token bindings: name -> "<fingerprint>:<generation>"
                               (a token removed, rotated or restored starts a new generation)
{p}:console:session:{h} hash   one console session (name, generation), expiring with it; `h`
                               is the SHA-256 of its id, which only the cookie holds
{p}:authfail:{c}        set    keyed hashes of the wrong tokens client `c` (a keyed hash of its
                               address) gave in the current window, expiring with it
{p}:authfail            string wrong tokens from every client in the current window
{p}:celery:*            -      Celery's and kombu's own keys, under the fleet's prefix too
                               (`global_keyprefix`): the device queues `{p}:celery:device.{id}`,
                               the default queue, the queue bindings and the results
                               `{p}:celery:celery-task-meta-{id}`
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass


@dataclass(frozen=True)
class Keys:
    prefix: str = "gf"

    def question(self, run_id: str) -> str:
        return f"{self.prefix}:question:{run_id}"

    @property
    def questions(self) -> str:
        return f"{self.prefix}:questions"

    def memory(self, key: str) -> str:
        return f"{self.prefix}:mem:{key}"

    def memory_index(self) -> str:
        return f"{self.prefix}:mem:index"

    def run(self, run_id: str) -> str:
        return f"{self.prefix}:run:{run_id}"

    def steps(self, run_id: str) -> str:
        return f"{self.prefix}:run:{run_id}:steps"

    def pictures(self, run_id: str) -> str:
        """Every picture id a step row of the run ever named (`lua/step.lua`)."""
        return f"{self.prefix}:run:{run_id}:pictures"

    @property
    def runs(self) -> str:
        return f"{self.prefix}:runs"

    def ended(self, status: str) -> str:
        """The index of runs that ended `status` (written by `lua/lib/run_ended.lua`)."""
        return f"{self.prefix}:runs:{status}"

    def run_and_steps(self, run_id: str) -> list[str]:
        """The run's record and its step rows: the first two KEYS of every script that claims,
        writes the steps of or ends a run (they expire together)."""
        return [self.run(run_id), self.steps(run_id)]

    @property
    def devices(self) -> str:
        return f"{self.prefix}:devices"

    def device(self, device_id: str) -> str:
        return f"{self.prefix}:device:{device_id}"

    def lease(self, device_id: str) -> str:
        return f"{self.prefix}:device:{device_id}:lease"

    @property
    def pending(self) -> str:
        return f"{self.prefix}:pending"

    @property
    def schedulers(self) -> str:
        return f"{self.prefix}:schedulers"

    @property
    def reserved(self) -> str:
        return f"{self.prefix}:reserved"

    @property
    def running(self) -> str:
        return f"{self.prefix}:running"

    @property
    def wake(self) -> str:
        return f"{self.prefix}:wake"

    def batch(self, batch_id: str) -> str:
        return f"{self.prefix}:batch:{batch_id}"

    def batch_spend(self, batch_id: str) -> str:
        """A suite's spending across its runs (`workers.fleet.spend`): tokens, cost."""
        return f"{self.prefix}:batch:{batch_id}:spend"

    def batch_of(self, batch_id: str | None) -> str:
        """The batch key of a run, or '' for a run in no batch (the scripts skip '')."""
        return self.batch(batch_id) if batch_id else ""

    def batch_runs(self, batch_id: str) -> str:
        return f"{self.prefix}:batch:{batch_id}:runs"

    def idem(self, key: str) -> str:
        return f"{self.prefix}:idem:{key}"

    @property
    def schedules(self) -> str:
        return f"{self.prefix}:schedules"

    def schedule(self, schedule_id: str) -> str:
        return f"{self.prefix}:schedule:{schedule_id}"

    @property
    def epoch(self) -> str:
        return f"{self.prefix}:epoch"

    def pattern(self) -> str:
        """A SCAN pattern matching every key of this fleet (tests count keys with it)."""
        return f"{self.prefix}:*"

    @property
    def history_on(self) -> str:
        return f"{self.prefix}:history:on"

    @property
    def history_outbox(self) -> str:
        return f"{self.prefix}:history:outbox"

    @property
    def events(self) -> str:
        """The fleet's events for webhooks (a capped stream; `lua/lib/events.lua`)."""
        return f"{self.prefix}:events"

    @property
    def webhook(self) -> str:
        """Set while a scheduler serves a fleet-wide webhook: every run's events are kept."""
        return f"{self.prefix}:webhook"

    @property
    def console_tokens(self) -> str:
        return f"{self.prefix}:console:tokens"

    def console_session(self, digest: str) -> str:
        return f"{self.prefix}:console:session:{digest}"

    def auth_failures(self, client: str) -> str:
        return f"{self.prefix}:authfail:{client}"

    @property
    def auth_failures_all(self) -> str:
        return f"{self.prefix}:authfail"

    @property
    def celery(self) -> str:
        """kombu's and Celery's `global_keyprefix`: every key the broker and the result backend
        write starts with it, so fleets with other prefixes share one Redis DB untouched."""
        return f"{self.prefix}:celery:"

    def queue(self, device_id: str) -> str:
        """The Redis list behind a device's Celery queue (what LLEN counts)."""
        return f"{self.celery}{device_queue(device_id)}"

    @property
    def default_queue(self) -> str:
        """The Redis list behind Celery's default queue."""
        return f"{self.celery}{DEFAULT_QUEUE}"

    def is_store_key(self, key: str) -> bool:
        """A key of the fleet's own store (not one of Celery's or kombu's)."""
        return key.startswith(f"{self.prefix}:") and not key.startswith(self.celery)


DEFAULT_QUEUE = "goalfleet"
"""Celery's default queue (nothing is sent to it: every run goes to its device's queue)."""

WAKE_KEPT = 100
"""The most entries a finish leaves on the wake list (`lua/finish.lua` trims it from the
front): a list that no scheduler drains stays small. A scheduler that drains this many may
have lost some to the trim, and re-reads every device (`Dispatcher.learn`)."""

RUN_TASK = "goalfleet.run"
"""The one task's name: senders (API, scheduler) use it without importing the task code."""


def device_queue(device_id: str) -> str:
    """The Celery queue one device's worker consumes."""
    return f"device.{device_id}"


def worker_name(device_id: str) -> str:
    """The Celery node name of a device's worker; exporters keep the part after `@`."""
    return f"w@{device_id}"


def lease_holder(worker: str) -> str:
    """A token naming one worker main process, held in its device's lease. Made once per
    process: every worker of a device has the same `worker_name`, so the name alone cannot tell
    a second worker (another host) from the holder, nor stop its deregister from dropping the
    holder's lease."""
    return f"{worker}:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
