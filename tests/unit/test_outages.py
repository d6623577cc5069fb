"""`is_outage`: the one classification of "Redis is unavailable, full or read-only", in every
shape a refusal takes (a command's, inside a script on Redis 7 and on 6.2, in a pipeline, an
EXEC's); and the worker's store client that waits an outage out (`OutageRetry`), against a
real Redis of each kind the fleet may run on."""

from __future__ import annotations

import random
import threading
import time

import pytest
import redis
import redis.exceptions as rex
from kombu.exceptions import OperationalError
from structlog.testing import capture_logs

from scheduler.local.redis import LocalRedis, free_port
from workers.core.backoff import Backoff
from workers.fleet.connections import redis_client
from workers.fleet.outages import is_outage, outage_reply, requeue_delay_s

SHA = "53922a716c44342a3ffa72c5a118facaba03e1f5"
OOM = "command not allowed when used memory > 'maxmemory'."
RO = "You can't write against a read only replica."
SCRIPT_6 = f"Error running script (call to f_{SHA}): @user_script:74: @user_script: 74: "
"""How Redis <= 6.2 begins the error of a script whose `redis.call` was refused."""


@pytest.mark.parametrize(
    "exc",
    [
        rex.ConnectionError("refused"),
        rex.TimeoutError("slow"),
        rex.BusyLoadingError("LOADING Redis is loading the dataset in memory"),
        rex.OutOfMemoryError("OOM command not allowed when used memory > 'maxmemory'"),
        rex.ReadOnlyError("READONLY You can't write against a read only replica"),
        rex.ExecAbortError("EXECABORT Transaction discarded because of previous errors"),
        rex.ResponseError("OOM command not allowed when used memory > 'maxmemory'"),
        OperationalError("Error 111 connecting to 127.0.0.1:1"),
    ],
)
def test_redis_trouble_is_an_outage(exc: Exception) -> None:
    assert is_outage(exc)


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        # Redis 7: redis-py parses the code and drops it from the text
        (rex.OutOfMemoryError(f"{OOM} script: {SHA}, on @user_script:74."), "OOM"),
        (rex.ReadOnlyError(f"{RO} script: {SHA}, on @user_script:74."), "READONLY"),
        # Redis <= 6.2: a plain ResponseError, the refused reply inside the script's error
        (rex.ResponseError(f"{SCRIPT_6}-OOM {OOM}"), "OOM"),
        (rex.ResponseError(f"{SCRIPT_6}-READONLY {RO}"), "READONLY"),
        (rex.ResponseError(f"ERR {SCRIPT_6}-LOADING Redis is loading the dataset"), "LOADING"),
        (rex.ResponseError(f"{SCRIPT_6}-MASTERDOWN Link with MASTER is down"), "MASTERDOWN"),
        (rex.ResponseError(f"{SCRIPT_6}-UNBLOCKED force unblock from blocking"), "UNBLOCKED"),
        (rex.ResponseError(f"@user_script: 3: -OOM {OOM}"), "OOM"),  # a redis.pcall's error
        # redis-py's note on a pipeline command's error
        (
            rex.ResponseError(
                f"Command # 1 (EVALSHA {SHA} 1 gf:run:1) of pipeline caused error: "
                f"{SCRIPT_6}-OOM {OOM}"
            ),
            "OOM",
        ),
        (rex.ResponseError(f"Command # 2 (HSET k f v) of pipeline caused error: OOM {OOM}"), "OOM"),
        # an EXEC refused: redis-py's ExecAbortError, or the reply as a plain error
        (rex.ExecAbortError(f"Transaction discarded because of: OOM {OOM}"), "OOM"),
        (
            rex.ResponseError(f"EXECABORT Transaction discarded because of: READONLY {RO}"),
            "READONLY",
        ),
    ],
)
def test_a_refusal_inside_a_script_or_a_transaction_is_an_outage(exc: Exception, code: str) -> None:
    assert is_outage(exc)
    assert outage_reply(exc) == code
    wrapped = RuntimeError("store write failed")
    wrapped.__cause__ = exc
    assert outage_reply(wrapped) == code


@pytest.mark.parametrize(
    "message",
    [
        f"{SCRIPT_6}Script attempted to access nonexistent global variable 'OOM'",
        f"{SCRIPT_6}the OOM guard tripped",  # the script's own error: no reply, no leading -
        f"{SCRIPT_6}-WRONGTYPE Operation against a key holding the wrong kind of value",
        "@user_script: 3: -NOSCRIPT No matching script",
        # the codes in the command's own text, a bad command's error after them
        "Command # 1 (HSET k OOM -READONLY) of pipeline caused error: WRONGTYPE Operation",
        "EXECABORT Transaction discarded because of previous errors.",
    ],
)
def test_a_script_error_that_names_no_refused_reply_has_no_code(message: str) -> None:
    exc = rex.ResponseError(message)
    assert outage_reply(exc) is None
    assert not is_outage(exc)


def test_a_dropped_connection_is_an_outage_without_a_code() -> None:
    assert is_outage(rex.ConnectionError("Connection reset by peer"))
    assert outage_reply(rex.ConnectionError("Connection reset by peer")) is None


def _refusal(client: redis.Redis) -> Exception:
    """What a script that reads, then writes, raises on `client`'s Redis now."""
    write = client.register_script(
        "redis.call('GET', KEYS[1]); return redis.call('HSET', KEYS[1], 'f', 'v')"
    )
    with pytest.raises(rex.RedisError) as refused:
        write(keys=["gf:run:1"])
    return refused.value


def test_each_server_s_refusal_inside_a_script_is_an_outage(each_redis_binary: str) -> None:
    """The shapes above are what the servers send: full (noeviction), then a replica."""
    with LocalRedis(binary=each_redis_binary) as server:
        admin = redis.Redis.from_url(server.url)
        client = redis_client(server.url)
        admin.config_set("maxmemory", 1)
        full = _refusal(client)
        assert (is_outage(full), outage_reply(full)) == (True, "OOM"), repr(full)
        admin.config_set("maxmemory", 0)
        admin.replicaof("127.0.0.1", free_port())  # a replica of nobody
        read_only = _refusal(client)
        assert (is_outage(read_only), outage_reply(read_only)) == (True, "READONLY"), repr(
            read_only
        )
        admin.replicaof("NO", "ONE")
        assert client.hget("gf:run:1", "f") is None  # neither script wrote
        client.close()
        admin.close()


def test_a_wrapped_outage_is_an_outage() -> None:
    outer = RuntimeError("store write failed")
    outer.__cause__ = rex.OutOfMemoryError("OOM command not allowed")
    assert is_outage(outer)


@pytest.mark.parametrize(
    "exc",
    [ValueError("bad"), rex.ResponseError("WRONGTYPE Operation against a key"), KeyError("x")],
)
def test_bugs_and_bad_commands_are_not_outages(exc: Exception) -> None:
    assert not is_outage(exc)


# -- waiting an outage out ------------------------------------------------------------------


def test_backoff_grows_to_its_cap_with_jitter() -> None:
    """Wait n is drawn from [d/2, d], d = min(cap, base * 2**n): bounded, and not in step."""
    backoff = Backoff(base_s=0.1, cap_s=2.0)
    rng = random.Random(7)
    for n, d in [(0, 0.1), (1, 0.2), (3, 0.8), (5, 2.0), (60, 2.0)]:
        waits = [backoff.delay(n, rng) for _ in range(200)]
        assert min(waits) >= d / 2
        assert max(waits) <= d
        assert len(set(waits)) > 100  # jittered, not one value


def test_requeue_delay_fits_between_the_soft_and_the_hard_limit() -> None:
    assert 0.25 <= requeue_delay_s(4, 5) <= 0.5
    assert 1.0 <= requeue_delay_s(300, 330) <= 2.0


@pytest.mark.slow  # waits out a real outage: make test, not make unit
def test_a_store_write_waits_for_a_full_redis_then_goes_through(redis_binary: str) -> None:
    """A client with `outage_wait_s` sends a write Redis refuses (OOM under noeviction) again
    with backoff; once memory is raised the write lands, once. One warning, one line after."""
    with LocalRedis(binary=redis_binary) as server:
        admin = redis.Redis.from_url(server.url)
        client = redis_client(server.url, outage_wait_s=30)
        admin.config_set("maxmemory", 1)
        freed = threading.Timer(1.0, lambda: admin.config_set("maxmemory", 0))
        freed.start()
        started = time.monotonic()
        with capture_logs() as logs:
            client.hset("gf:run:1", "status", "running")
            client.hset("gf:run:1", "attempt", "1")  # Redis answers at once now
        waited = time.monotonic() - started
        freed.join()
        assert client.hgetall("gf:run:1") == {"status": "running", "attempt": "1"}
        assert waited >= 0.9  # it waited for the memory, it did not fail
        events = [e["event"] for e in logs]
        assert events == ["redis_outage_waiting", "redis_outage_over"], logs
        client.close()
        admin.close()


@pytest.mark.slow  # waits out a real outage: make test, not make unit
def test_a_script_waits_for_a_full_redis_then_goes_through(each_redis_binary: str) -> None:
    """The worker's run store runs the state machine's scripts: one refused inside (on Redis
    6.2 a plain `Error running script ... -OOM` error) is sent again until memory frees, then
    runs once."""
    with LocalRedis(binary=each_redis_binary) as server:
        admin = redis.Redis.from_url(server.url)
        client = redis_client(server.url, outage_wait_s=30)
        step = client.register_script("return redis.call('HINCRBY', KEYS[1], 'steps', 1)")
        admin.config_set("maxmemory", 1)
        freed = threading.Timer(1.0, lambda: admin.config_set("maxmemory", 0))
        freed.start()
        started = time.monotonic()
        with capture_logs() as logs:
            assert step(keys=["gf:run:1"]) == 1
        waited = time.monotonic() - started
        freed.join()
        assert client.hget("gf:run:1", "steps") == "1"  # once
        assert waited >= 0.9
        assert [e["event"] for e in logs] == ["redis_outage_waiting", "redis_outage_over"], logs
        client.close()
        admin.close()


@pytest.mark.slow  # waits out its bound: make test, not make unit
def test_the_wait_is_bounded_then_the_outage_is_raised(redis_binary: str) -> None:
    with LocalRedis(binary=redis_binary) as server:
        admin = redis.Redis.from_url(server.url)
        client = redis_client(server.url, outage_wait_s=0.8)
        admin.config_set("maxmemory", 1)
        started = time.monotonic()
        with pytest.raises(rex.OutOfMemoryError):
            client.set("k", "v")
        waited = time.monotonic() - started
        assert 0.8 <= waited < 5.0
        admin.config_set("maxmemory", 0)
        assert client.set("k", "v")
        client.close()
        admin.close()


def test_a_bad_command_is_raised_at_once_not_retried(redis_binary: str) -> None:
    with LocalRedis(binary=redis_binary) as server:
        client = redis_client(server.url, outage_wait_s=30)
        client.set("k", "v")
        started = time.monotonic()
        with pytest.raises(rex.ResponseError, match="WRONGTYPE"):
            client.hset("k", "f", "v")
        assert time.monotonic() - started < 1.0
        client.close()


def test_one_backoff_for_every_retry_exact_or_jittered() -> None:
    """The one formula: jitter 0 gives exactly d (a device's own command retries), a jitter
    j draws from [d * (1 - j), d] (heartbeats: j = 0.2)."""
    assert [Backoff(base_s=0.05, cap_s=1.0, jitter=0).delay(n) for n in range(6)] == [
        0.05, 0.1, 0.2, 0.4, 0.8, 1.0,
    ]  # fmt: skip
    rng = random.Random(3)
    waits = [Backoff(base_s=0.5, cap_s=1.5, jitter=0.2).delay(1, rng) for _ in range(200)]
    assert min(waits) >= 0.8
    assert max(waits) <= 1.0
