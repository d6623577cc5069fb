"""Webhooks: a URL per suite (its flows file's `webhook`, also what its schedule fires) and one
fleet-wide (`GOALFLEET_WEBHOOK_URL`), called when a batch finishes, a run fails and a question
waits. Served by the scheduler, never by a worker: the state machine's scripts append an event
to the capped stream `{p}:events` (one XADD, `lua/lib/events.lua`) and this reads it through a
consumer group, so several schedulers share the work.

An event is acknowledged once its calls are over (delivered, or refused for good): one a
scheduler was killed in the middle of stays pending in the group, and any scheduler claims it
(`XAUTOCLAIM`) once it has been pending for longer than its calls could take (`claim_idle_s`),
and calls again. So a call is made at least once; a receiver de-duplicates on
`X-Goalfleet-Delivery`, the event's id, the same on every call of it.

Each call is a POST of JSON, signed: `X-Goalfleet-Signature: t=<unix seconds>,v1=<hex>` where
the hex is HMAC-SHA256 over `<t>.<body>` with `GOALFLEET_WEBHOOK_SECRET` (a receiver checks
the MAC and that `t` is recent). A 5xx, 408, 429 or no connection is tried again with backoff,
up to `webhook_attempts` tries, on a small pool of its own threads: a slow receiver delays
only its own calls. A body holds ids, statuses, reasons, names and counts: never an input's or
a secret's value, never a screen. A suite's own webhook, which any `submit` token names,
reaches public addresses only, unless `GOALFLEET_WEBHOOK_ALLOW` allows a network
(`scheduler.service.outbound`); the fleet-wide one is the operator's and goes anywhere.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import httpx
import redis
import structlog

from scheduler.service.guarded_transport import AddressRefusedError, GuardedTransport
from scheduler.service.outbound import Network
from scheduler.store.runs import FleetStore
from workers.core.backoff import Backoff
from workers.core.model import RunStatus
from workers.core.records import RunRecord
from workers.fleet.keys import Keys

log = structlog.stdlib.get_logger("goalfleet.webhooks")
GROUP = "webhooks"
SIGNATURE = "X-Goalfleet-Signature"
EVENT = "X-Goalfleet-Event"
DELIVERY = "X-Goalfleet-Delivery"
RETRY_BACKOFF = Backoff(base_s=0.5, cap_s=30.0, jitter=0.2)
RETRIED = frozenset({408, 429})
ALIVE_S = 60
"""How long `{p}:webhook` (the fleet-wide URL is served) outlives the scheduler's last beat."""
CLAIM_EVERY_S = 10.0
"""How often a serving scheduler looks for events another one left pending."""
CLAIM_MARGIN_S = 30.0
"""Beyond the longest its calls can take, how long an event waits before another scheduler
claims it."""
_DECISION = frozenset(
    {RunStatus.BLOCKED, RunStatus.ESCALATED, RunStatus.MAX_STEPS, RunStatus.OVER_BUDGET}
)
_OK = frozenset({RunStatus.DONE, RunStatus.CANCELLED})


def sign(secret: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def verify(secret: str, header: str, body: bytes, *, now: float, tolerance_s: float = 300) -> bool:
    """What a receiver does with `X-Goalfleet-Signature` (the tests use it too)."""
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    try:
        t = int(parts["t"])
    except (KeyError, ValueError):
        return False
    want = sign(secret, t, body).split("v1=", 1)[1]
    return abs(now - t) <= tolerance_s and hmac.compare_digest(want, parts.get("v1", ""))


def _run(run: RunRecord) -> dict[str, Any]:
    failure = "decision" if run.status in _DECISION else "infrastructure"
    return {
        "id": run.id,
        "status": run.status.value,
        "failure": "" if run.status in _OK or not run.status.terminal else failure,
        "reason": run.reason[:500],
        "goal": run.request.goal,
        "flow": run.flow,
        "batch": run.batch,
        "device": run.device or run.target,
        "attempt": run.retry + 1,
        "retrying": run.retries > 0 and run.status not in _OK,
        "schedule": run.schedule,
    }


class Webhooks:
    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        store: FleetStore,
        *,
        secret: str,
        fleet_url: str | None = None,
        attempts: int = 6,
        timeout_s: float = 5.0,
        backoff: Backoff = RETRY_BACKOFF,
        allow: tuple[Network, ...] = (),
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """`allow`: the networks a suite's own webhook may reach besides public addresses;
        `transport` (tests) replaces both the fleet URL's and the guarded one's."""
        self.r = client
        self.k = keys
        self.store = store
        self.secret = secret
        self.fleet_url = fleet_url
        self.attempts = attempts
        self.backoff = backoff
        self.http = httpx.Client(timeout=timeout_s, transport=transport, trust_env=False)
        """The fleet-wide URL's client: the operator's own URL, called wherever it points."""
        guarded = transport if transport is not None else GuardedTransport(allow)
        self.guarded = httpx.Client(timeout=timeout_s, transport=guarded, trust_env=False)
        """A suite's own URL's: public addresses and `allow`'s networks only."""
        self.pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="goalfleet-webhook")
        self.consumer = f"{socket.gethostname()}-{id(self):x}"
        self.claim_idle_s = (
            attempts * timeout_s + sum(backoff.longest(n) for n in range(attempts)) + CLAIM_MARGIN_S
        )
        """How long an event stays pending before any scheduler claims it: longer than all
        its calls' tries, timeouts and waits at their longest."""
        self._lock = threading.Lock()
        self._in_flight: set[str] = set()
        """Events this scheduler is calling now (a claim of its own does not call again)."""

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        self.http.close()
        self.guarded.close()

    # -- reading events --------------------------------------------------------------------

    def create_group(self) -> None:
        """The consumer group the schedulers share (made once; idempotent)."""
        try:
            self.r.xgroup_create(self.k.events, GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def serve(self, stop: threading.Event, *, block_ms: int = 500) -> None:
        """Deliver events until `stop` is set (the scheduler's thread), and every
        `CLAIM_EVERY_S` those left pending by a scheduler that stopped mid-call."""
        self.create_group()
        beat = claimed = 0.0
        while not stop.is_set():
            if self.fleet_url and time.monotonic() - beat > ALIVE_S / 3:
                self.r.set(self.k.webhook, "1", ex=ALIVE_S)
                beat = time.monotonic()
            try:
                if time.monotonic() - claimed > CLAIM_EVERY_S:
                    self.claim()
                    claimed = time.monotonic()
                self.pump(block_ms=block_ms)
            except redis.RedisError:
                log.warning("webhook_events_unreadable", hint="retrying; Redis is unreachable")
                stop.wait(1.0)

    def pump(self, *, block_ms: int = 0) -> int:
        """Read a page of new events and hand each one's calls to the pool; returns how many."""
        got = cast(
            "list[tuple[str, list[tuple[str, dict[str, str]]]]]",
            self.r.xreadgroup(
                GROUP, self.consumer, {self.k.events: ">"}, count=100, block=block_ms or None
            ),
        )
        n = 0
        for _, entries in got or []:
            for event_id, fields in entries:
                self._call(event_id, fields)
                n += 1
        return n

    def claim(self, *, idle_s: float | None = None) -> int:
        """Take over the events pending longer than `idle_s` (default `claim_idle_s`): their
        scheduler stopped before their calls were over. Returns how many are called again."""
        idle_ms = round((self.claim_idle_s if idle_s is None else idle_s) * 1000)
        start, n = "0-0", 0
        while True:
            reply = cast(
                "tuple[str, list[tuple[str, dict[str, str] | None]], list[str]]",
                self.r.xautoclaim(
                    self.k.events, GROUP, self.consumer, idle_ms, start_id=start, count=100
                ),
            )
            start, entries = reply[0], reply[1]
            gone = list(reply[2]) if len(reply) > 2 else []  # noqa: PLR2004 - Redis 7's third part
            gone += [event_id for event_id, fields in entries if event_id and fields is None]
            if gone:  # trimmed from the capped stream meanwhile: nothing left to call
                self.r.xack(self.k.events, GROUP, *gone)
            for event_id, fields in entries:
                if event_id is None or fields is None:
                    continue
                with self._lock:
                    mine = event_id in self._in_flight
                if not mine:
                    log.info("webhook_event_claimed", delivery=event_id)
                    self._call(event_id, fields)
                    n += 1
            if start == "0-0":
                return n

    def _call(self, event_id: str, fields: dict[str, str]) -> None:
        """Hand the event's calls to the pool; acknowledge it once the last is over."""
        calls = self.calls(event_id, fields)
        if not calls:
            self.r.xack(self.k.events, GROUP, event_id)
            return
        with self._lock:
            self._in_flight.add(event_id)
        left = [len(calls)]

        def over(_: object) -> None:
            with self._lock:
                left[0] -= 1
                if left[0]:
                    return
                self._in_flight.discard(event_id)
            try:
                self.r.xack(self.k.events, GROUP, event_id)
            except redis.RedisError:  # left pending: claimed and called again later
                log.warning("webhook_ack_failed", delivery=event_id)

        for url, kind, body in calls:
            self.pool.submit(self.deliver, url, kind, event_id, body).add_done_callback(over)

    # -- what an event means ---------------------------------------------------------------

    def _urls(self, batch_id: str | None) -> list[str]:
        urls = [self.fleet_url] if self.fleet_url else []
        if batch_id:
            own = cast("str | None", self.r.hget(self.k.batch(batch_id), "webhook"))
            if own and own not in urls:
                urls.append(own)
        return urls

    def calls(self, event_id: str, fields: dict[str, str]) -> list[tuple[str, str, bytes]]:
        """(url, event name, body) for each call one stream entry makes (none for a run that
        ended well: only failures, finished batches and questions are called)."""
        kind = fields.get("kind", "")
        payload: dict[str, Any]
        batch_id: str | None
        if kind == "batch_finished":
            batch = self.store.batch(fields.get("batch", ""))
            if batch is None:
                return []
            event, batch_id = "batch.finished", batch.id
            failed = sum(n for s, n in batch.counts.items() if s not in {"done", "cancelled"})
            payload = {
                "batch": {
                    "id": batch.id,
                    "suite": batch.suite,
                    "goal": batch.goal,
                    "total": batch.total,
                    "finished": batch.finished,
                    "counts": batch.counts,
                    "failed_runs": failed,
                }
            }
        elif kind in {"run_ended", "question"}:
            run = self.store.load(fields.get("run", ""))
            if run is None or (kind == "run_ended" and run.status in _OK):
                return []
            event = "run.failed" if kind == "run_ended" else "question.waiting"
            batch_id = run.batch
            payload = {"run": _run(run)}
            if kind == "question":
                raw = cast("str | None", self.r.get(self.k.question(run.id)))
                q = json.loads(raw) if raw else {}
                payload["question"] = {
                    "step": q.get("step"),
                    "reason": str(q.get("reason", ""))[:500],
                    "deadline": q.get("deadline"),
                }
        else:
            return []
        body = json.dumps(
            {"event": event, "delivery": event_id, **payload}, separators=(",", ":")
        ).encode()
        return [(url, event, body) for url in self._urls(batch_id)]

    # -- calling ---------------------------------------------------------------------------

    def deliver(self, url: str, event: str, delivery: str, body: bytes) -> bool:
        """POST `body` to `url`, signed, tried again on a 5xx, 408, 429 or no connection; a
        suite's own URL through the guarded client, and never again once it reached an
        address it may not."""
        http = self.http if url == self.fleet_url else self.guarded
        for attempt in range(self.attempts):
            now = int(time.time())
            headers = {
                "Content-Type": "application/json",
                SIGNATURE: sign(self.secret, now, body),
                EVENT: event,
                DELIVERY: delivery,
                "User-Agent": "goalfleet-webhooks",
            }
            status = 0
            try:
                status = http.post(url, content=body, headers=headers).status_code
            except AddressRefusedError as exc:
                log.warning("webhook_refused", webhook_event=event, delivery=delivery,
                            why=str(exc))  # fmt: skip
                return False
            except httpx.HTTPError as exc:
                why = type(exc).__name__
            else:
                if status < 300:  # noqa: PLR2004 - a success
                    return True
                why = f"HTTP {status}"
                if status < 500 and status not in RETRIED:  # noqa: PLR2004 - the receiver refused
                    break
            log.info("webhook_retry", webhook_event=event, delivery=delivery, attempt=attempt + 1,
                     why=why)  # fmt: skip
            if attempt + 1 < self.attempts:
                time.sleep(self.backoff.delay(attempt))
        log.warning("webhook_failed", webhook_event=event, delivery=delivery, tries=self.attempts)
        return False
