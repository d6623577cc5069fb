"""`RedisMemory` against a real redis-server: hits renew the TTL and count, concurrent
writers of one entry keep one, expired entries leave the index, forget by key / goal / all,
and no typed or secret value anywhere in Redis after runs (every key read by its type)."""

from __future__ import annotations

import threading

import pytest
import redis

from scheduler.local.redis import LocalRedis
from workers.core.loop import run_goal
from workers.core.memory import Remembered, Target
from workers.core.model import Inputs, Kind, RunStatus
from workers.decide.rules import RulesDecider
from workers.devices.sim.device import make_sim_device
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys
from workers.fleet.memory_store import RedisMemory

SECRET = "s3cret-Value!"
EMAIL = "ada.lovelace@example.com"


def entry(key: str, name: str = "Continue", goal: str = "sign in") -> Remembered:
    return Remembered(
        key=key, target=Target(kind=Kind.BUTTON, name=name), source="rules", goal=goal
    )


def test_recall_counts_hits_and_renews_the_ttl(client: redis.Redis) -> None:
    now = [1000.0]
    mem = RedisMemory(client, Keys("m"), decider="rules", ttl_s=600, clock=lambda: now[0])
    assert mem.recall("k1") is None
    assert not client.exists("m:mem:k1")  # a miss never creates a husk
    assert mem.remember([entry("k1")]) == 1
    client.expire("m:mem:k1", 5)
    now[0] = 2000.0
    got = mem.recall("k1")
    assert got is not None
    assert (got.hits, got.created_at, got.last_used_at) == (1, 1000.0, 2000.0)
    assert 590 <= client.ttl("m:mem:k1") <= 600
    assert mem.recall("k1").hits == 2  # type: ignore[union-attr]


def test_two_writers_of_one_entry_keep_one(redis_server: LocalRedis, client: redis.Redis) -> None:
    """Two workers that learned the same entry at once: both succeed, one entry is kept
    (the first), and it is never half-written."""
    wins: list[int] = []
    barrier = threading.Barrier(8)

    def write(name: str) -> None:
        own = redis_client(redis_server.url)
        mem = RedisMemory(own, Keys("m"), decider="rules", ttl_s=600)
        barrier.wait()
        wins.append(mem.remember([entry("same", name=name)]))
        own.close()

    threads = [threading.Thread(target=write, args=(f"Button {i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == [0] * 7 + [1]
    mem = RedisMemory(client, Keys("m"), decider="rules", ttl_s=600)
    [kept] = mem.entries()
    assert kept.target is not None
    assert kept.target.name.startswith("Button ")
    assert set(client.hkeys("m:mem:same")) == {"entry", "created_at", "hits", "last_used_at"}


def test_listing_prunes_expired_and_forget_works(client: redis.Redis) -> None:
    mem = RedisMemory(client, Keys("m"), decider="rules", ttl_s=600)
    mem.remember([entry("a"), entry("b", goal="log in"), entry("c")])
    client.delete("m:mem:c")  # as if it expired
    assert [e.key for e in mem.entries()] == ["a", "b"]
    assert client.smembers("m:mem:index") == {"a", "b"}
    assert [e.key for e in mem.entries(goal="Log  In")] == ["b"]
    assert mem.forget("a") is True
    assert mem.forget("a") is False
    assert mem.forget_many() == 1
    assert mem.entries() == []
    assert client.keys("m:mem*") == []


def test_a_blocked_run_writes_nothing_and_done_runs_leak_nothing(client: redis.Redis) -> None:
    keys = Keys("leak")
    inputs = Inputs.of({"email": EMAIL, "code": "987654"}, {"password": SECRET})
    for spec, goal in [
        ("sim:signin-ios", "Delete account"),
        ("sim:signin-ios", "Sign in"),
        ("sim:code-android", "Sign in"),
        ("sim:signin-ios", "Sign in"),
    ]:
        mem = RedisMemory(client, keys, decider="rules", ttl_s=600)
        before = len(mem.entries())
        result = run_goal(
            make_sim_device(spec),
            goal,
            decider=RulesDecider(),
            inputs=inputs,
            memory=mem,
            sleep=lambda _: None,
        )
        if result.status is not RunStatus.DONE:
            assert len(mem.entries()) == before  # blocked: nothing written
    assert RedisMemory(client, keys, decider="rules", ttl_s=600).entries()
    for key in client.scan_iter("leak:*"):
        kind = client.type(key)
        if kind == "hash":
            values = [*client.hkeys(key), *client.hvals(key)]
        elif kind == "set":
            values = list(client.smembers(key))
        else:
            values = [client.get(key) or ""]
        blob = "".join([key, *values])
        for secret in (SECRET, EMAIL, "987654"):
            assert secret not in blob, (key, kind)


def test_goalfleet_run_uses_the_memory_it_is_given(
    redis_server: LocalRedis, client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    """`goalfleet run --memory URL`: the first run teaches, the second decides from memory;
    an unreachable URL is a one-line error (exit 2)."""
    import json  # noqa: PLC0415

    from scheduler.cli.main import main  # noqa: PLC0415

    argv = ["run", "--device", "sim:signin-android", "--goal", "Sign in", "--json"]
    argv += ["--input", "email=ada@example.com", "--input", "password=pw-1234"]
    argv += ["--memory", redis_server.url]
    seen = []
    for _ in range(2):
        assert main(argv) == 0
        result = json.loads(capsys.readouterr().out)
        seen.append({s["decision"]["decided_by"] for s in result["steps"]})
    assert seen == [{"rules"}, {"memory"}]
    assert main([*argv[:-2], "--memory", "redis://127.0.0.1:1/0"]) == 2
    err = capsys.readouterr().err
    assert "--memory: cannot reach" in err
    assert "Traceback" not in err
