"""The broker transport: kombu's Redis transport, made to ride out a Redis outage.

kombu emulates acks with an `unacked` hash and index in Redis. Three of its writes used to end a
Celery worker ("Unrecoverable error: OutOfMemoryError") when Redis was full (`maxmemory` under
`noeviction`) or read-only, because the `ResponseError` they raise is a channel error, which
Celery does not retry:

- the ack removes the message from the hash and the index inside one MULTI, and Redis refuses a
  whole MULTI when it is out of memory (ZREM and HDEL alone are allowed);
- the periodic restore of unacked messages takes a lock with `SET NX` (refused under OOM) and
  puts messages back with `LPUSH` (refused too), as does a reject that requeues;
- taking a message records it (ZADD + HSET) before Celery sees it.

Here the ack is HDEL then ZREM without MULTI (a death between the two leaves a tag whose
message is gone, which the next restore drops harmlessly); a restore that meets an outage
leaves the message unacked, so a sweep after Redis is back restores it (a reject that requeues
therefore waits at most the visibility timeout); recording a taken message waits for Redis
with backoff, because until then the message exists only in this process. Celery's consumer
itself restarts instead of exiting on anything else Redis refuses (`celery_app`:
`broker_channel_error_retry`).

`broker_transport = "workers.fleet.transport:Transport"` selects it (`celery_app`), and
`SentinelTransport`, the same over kombu's Sentinel channel, when the fleet's Redis is behind
sentinels: a lost master is an outage like any other, and the reconnection asks the sentinels
for the new one.
"""

from __future__ import annotations

import time
from typing import Any

import structlog
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual

from workers.core.backoff import Backoff
from workers.fleet.outages import describe, is_outage

log = structlog.stdlib.get_logger("goalfleet.worker")

ACK_WAIT_S = 10.0
"""How long an ack waits through an outage before it leaves the message unacked (it is then
redelivered after the visibility timeout and skipped by the claim: the run already ended)."""

_BACKOFF = Backoff(base_s=0.1, cap_s=2.0)


def _shutting_down() -> bool:
    """A warm or cold shutdown was asked for (SIGTERM/SIGINT/SIGQUIT) in this worker."""
    from celery.worker import state  # noqa: PLC0415 - only a consuming worker gets here

    return state.should_stop is not None or state.should_terminate is not None


class OutageQoS(kombu_redis.QoS):
    """kombu's ack emulation, minus the writes an outage turns into a crash."""

    def append(self, message: Any, delivery_tag: str) -> None:  # noqa: ANN401 - kombu's Message
        """Record the taken message as unacked, waiting for Redis as long as it takes (or
        until the worker is asked to stop: then it is handed over unrecorded, and the
        scheduler's sweep re-sends the run if this worker dies before finishing it)."""
        first: float | None = None
        n = 0
        while True:
            try:
                super().append(message, delivery_tag)  # type: ignore[no-untyped-call]  # kombu is untyped
            except Exception as exc:
                if not is_outage(exc):
                    raise
                if first is None:
                    first = time.monotonic()
                    log.warning(
                        "broker_outage_waiting",
                        what="record a taken message as unacked",
                        error=describe(exc),
                        hint="the worker waits for Redis before it starts the run",
                    )
                if _shutting_down():
                    log.warning("broker_outage_message_unrecorded", delivery_tag=delivery_tag)
                    virtual.QoS.append(self, message, delivery_tag)  # type: ignore[no-untyped-call]  # kombu is untyped
                    return
                time.sleep(_BACKOFF.delay(n))
                n += 1
            else:
                if first is not None:
                    log.info("broker_outage_over", waited_s=round(time.monotonic() - first, 1))
                return

    def ack(self, delivery_tag: str) -> None:
        self._drop(delivery_tag)
        virtual.QoS.ack(self, delivery_tag)  # type: ignore[no-untyped-call]  # kombu is untyped

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:  # noqa: FBT001, FBT002 - kombu's signature
        if requeue:
            self.restore_by_tag(delivery_tag, leftmost=True)
        else:
            self._drop(delivery_tag)
        virtual.QoS.ack(self, delivery_tag)  # type: ignore[no-untyped-call]  # kombu is untyped

    def restore_by_tag(
        self,
        tag: str,
        client: Any = None,  # noqa: ANN401 - a redis client, as kombu passes it
        leftmost: bool = False,  # noqa: FBT001, FBT002 - kombu's signature
    ) -> None:
        """Put an unacked message back on its queue; on an outage leave it unacked (all or
        nothing: kombu restores in one transaction), for a later sweep."""
        try:
            super().restore_by_tag(tag, client=client, leftmost=leftmost)  # type: ignore[no-untyped-call]  # kombu is untyped
        except Exception as exc:
            if not is_outage(exc):
                raise
            log.warning(
                "broker_outage_restore_deferred",
                delivery_tag=tag,
                error=describe(exc),
                hint="left unacked; restored by the visibility-timeout sweep once Redis is back",
            )

    def restore_visible(self, *args: Any, **kwargs: Any) -> None:  # noqa: ANN401 - kombu's signature
        """The periodic sweep of messages unacked past the visibility timeout: skipped (one
        line) while Redis refuses it."""
        try:
            super().restore_visible(*args, **kwargs)  # type: ignore[no-untyped-call]  # kombu is untyped
        except Exception as exc:
            if not is_outage(exc):
                raise
            log.warning("broker_outage_restore_skipped", error=describe(exc))

    def _drop(self, delivery_tag: str) -> None:
        """Forget an acked message: HDEL, then ZREM, not in MULTI (both are allowed when Redis
        is out of memory; a MULTI is not)."""
        deadline = time.monotonic() + ACK_WAIT_S
        n = 0
        while True:
            try:
                with self.channel.conn_or_acquire() as client:
                    pipe = client.pipeline(transaction=False)
                    pipe.hdel(self.unacked_key, delivery_tag)
                    pipe.zrem(self.unacked_index_key, delivery_tag)
                    pipe.execute()
            except Exception as exc:
                if not is_outage(exc):
                    raise
                if time.monotonic() >= deadline or _shutting_down():
                    log.warning(
                        "broker_outage_ack_deferred",
                        delivery_tag=delivery_tag,
                        error=describe(exc),
                        hint="left unacked: redelivered after the visibility timeout and "
                        "skipped by the claim",
                    )
                    return
                time.sleep(_BACKOFF.delay(n))
                n += 1
            else:
                return


class Channel(kombu_redis.Channel):
    QoS = OutageQoS


class Transport(kombu_redis.Transport):
    """kombu's Redis transport with `OutageQoS`."""

    Channel = Channel
    # Which errors a publish retries after reconnecting. kombu's fallback, for a transport
    # that does not say, is every channel error too: a write Redis refused (OOM, READONLY)
    # then closed the connection and came back as an AttributeError from the closed channel.
    # Only a lost connection is worth a reconnect; a refused write is raised as it is (an
    # outage, `is_outage`).
    recoverable_connection_errors = kombu_redis.Transport.connection_errors
    recoverable_channel_errors = ()


class SentinelChannel(Channel, kombu_redis.SentinelChannel):
    """`Channel` over kombu's Sentinel channel: `OutageQoS`, the master found by asking."""


class SentinelTransport(Transport, kombu_redis.SentinelTransport):
    """`Transport` (its `OutageQoS` and its recoverable errors) over kombu's Sentinel
    transport."""

    Channel = SentinelChannel
