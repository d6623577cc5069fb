"""The seam between the scheduler and the broker: send the message that puts one run id on one
device's queue.

Delivery is the fleet's (docs/design.md, "One delivery protocol"): a reservation is written
first (a Lua script: `workers.fleet.state.queue`), its message sent after it through Celery's
documented message API (`workers.fleet.delivery.send_run`), and the broker delivers at most once
(the worker takes it off the list on receipt). A message that never left (the sender died or
Redis refused it after the reservation) or was lost (its worker died holding it) is sent
again by the scheduler's sweep (`Dispatcher._orphans` → `RunQueue.resend`); a duplicate is
skipped by the worker's claim.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

import redis

from workers.fleet.connections import store_client
from workers.fleet.delivery import send_run
from workers.fleet.keys import Keys
from workers.fleet.outages import is_outage
from workers.settings import Settings


class Enqueuer(Protocol):
    """The one way a run reaches a device's worker: the broker message for (run, device),
    sent after the script that reserved the device for it (submit, reserve, resend)."""

    def send_all(self, pairs: Sequence[tuple[str, str]]) -> Unsent:
        """Send each (run id, device id) pair's message, carrying the run's id and nothing
        else, to the device's queue, in order. A broker outage stops the sends: the pairs
        from the one it refused on are returned unsent with its error (their reservations
        stand; the sweep sends them again later). Anything else is raised."""
        ...


@dataclass(frozen=True)
class Unsent:
    """What `Enqueuer.send_all` could not send: the pairs from the first refused one on, and
    the outage that refused it (none: all were sent)."""

    pairs: Sequence[tuple[str, str]] = ()
    error: Exception | None = None


def send_each(send: Callable[[str, str], object], pairs: Sequence[tuple[str, str]]) -> Unsent:
    """`send(run_id, device_id)` for each pair until an outage refuses one (`Enqueuer.send_all`)."""
    for i, (run_id, device_id) in enumerate(pairs):
        try:
            send(run_id, device_id)
        except Exception as exc:
            if not is_outage(exc):
                raise
            return Unsent(pairs[i:], exc)
    return Unsent()


class CeleryEnqueuer:
    """`send_run` on the app the scheduler side built (`workers.fleet.celery_app`), one
    producer (Celery's `producer_or_acquire`: a broker connection from its pool) held for a
    call's sends: acquiring one for each message was an eighth of a send's CPU
    (docs/benchmarks.md §24)."""

    def __init__(self, app: Any) -> None:  # noqa: ANN401 - Celery ships no type hints
        self.app = app

    def send_all(self, pairs: Sequence[tuple[str, str]]) -> Unsent:
        if not pairs:
            return Unsent()
        with self.app.producer_or_acquire() as producer:
            return send_each(lambda r, d: send_run(self.app, r, d, producer=producer), pairs)


class RecordingEnqueuer:
    """The fake beside the seam: its sends go onto one list of its own under `keys` instead of
    a device's Celery queue, so no worker consumes them; `sent` reads that list: what was
    really sent, in order, (run id, device id) each; `take` removes the oldest message for a
    device, as a worker's receipt does (at most once)."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.key = keys.queue("recorded-by-the-fake")

    @classmethod
    def of(cls, settings: Settings) -> RecordingEnqueuer:
        """One on `settings`' Redis and key prefix, the store `build(settings)` makes."""
        return cls(store_client(settings), Keys(settings.key_prefix))

    def send_all(self, pairs: Sequence[tuple[str, str]]) -> Unsent:
        return send_each(lambda r, d: self.client.lpush(self.key, json.dumps([r, d])), pairs)

    @property
    def sent(self) -> list[tuple[str, str]]:
        raw = self.client.lrange(self.key, 0, -1)
        return [(run, device) for run, device in map(json.loads, reversed(raw))]

    def take(self, device_id: str) -> str | None:
        """The run id of the oldest message still queued for `device_id`, removed; None when
        none is."""
        for raw in reversed(cast("list[str]", self.client.lrange(self.key, 0, -1))):
            run, device = json.loads(raw)
            if device == device_id and self.client.lrem(self.key, -1, raw):
                return str(run)
        return None
