"""A replicated Redis for the failover tests and benchmarks: one master, its replicas and three
Redis Sentinels, each a real `redis-server` (sentinels with `--sentinel`) on a random loopback
port, nothing on disk but their own config files.

    with SentinelLab() as lab:
        settings = Settings(redis_sentinels=lab.sentinel_addresses, redis_sentinel_master=lab.name)
        lab.kill_master()              # SIGKILL
        lab.wait_promoted(old)         # a replica is master, as the sentinels see it
        lab.restart(old)               # the demoted master comes back, as a replica

The sentinels judge a master down after `down_after_ms` without an answer, agree with a quorum
of two, and promote the replica with the most of the master's stream.
"""

from __future__ import annotations

import contextlib
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import redis

from scheduler.local.redis import find_redis_server, free_port
from workers.core.errors import ConfigError
from workers.processes import Child, Stoppable, spawn


@dataclass
class Node:
    """One redis-server of the lab: a data node or a sentinel."""

    name: str
    port: int
    conf: Path
    child: Child | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def client(self, *, timeout_s: float = 1.0) -> redis.Redis:
        return redis.Redis(
            port=self.port, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
            decode_responses=True,
        )  # fmt: skip

    def alive(self) -> bool:
        return self.child is not None and self.child.alive()


FRESH_PING_MS = 1500


def _healthy(replica: dict[str, Any]) -> bool:
    """A replica as a sentinel reports it: flags exactly `slave`, its link to the master up,
    answering pings (sent every second) within the last 1.5 s. A sentinel refreshes what a
    replica says of its link every 10 s, so this can lag a node's return by that long."""
    return (
        replica.get("flags") == "slave"
        and replica.get("master-link-status") == "ok"
        and int(replica.get("last-ok-ping-reply") or 99999) < FRESH_PING_MS
    )


class SentinelLab(Stoppable):
    def __init__(
        self,
        *,
        replicas: int = 1,
        sentinels: int = 3,
        name: str = "goalfleet",
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 3000,
    ) -> None:
        self.binary = find_redis_server()
        self.name = name
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self.n_replicas = replicas
        self.n_sentinels = sentinels
        self.dir: tempfile.TemporaryDirectory[str] | None = None
        self.data: list[Node] = []
        self.sentinels: list[Node] = []

    @property
    def sentinel_addresses(self) -> list[str]:
        return [s.address for s in self.sentinels]

    def start(self) -> Self:
        self.dir = tempfile.TemporaryDirectory(prefix="goalfleet-sentinels-")
        root = Path(self.dir.name)
        master = self._node("redis-0", root)
        self._start(master, [])
        for i in range(1, self.n_replicas + 1):
            replica = self._node(f"redis-{i}", root)
            self._start(replica, ["--replicaof", "127.0.0.1", str(master.port)])
            self.data.append(replica)
        self.data.insert(0, master)
        self.wait_replicated(master, self.n_replicas)
        for i in range(self.n_sentinels):
            sentinel = self._node(f"sentinel-{i}", root)
            sentinel.conf.write_text(
                f"port {sentinel.port}\nbind 127.0.0.1\ndir {root}\n"
                f"sentinel monitor {self.name} 127.0.0.1 {master.port} 2\n"
                f"sentinel down-after-milliseconds {self.name} {self.down_after_ms}\n"
                f"sentinel failover-timeout {self.name} {self.failover_timeout_ms}\n"
                f"sentinel parallel-syncs {self.name} 1\n"
            )
            self._spawn(sentinel, [str(sentinel.conf), "--sentinel"])
            self.sentinels.append(sentinel)
        self.wait_sentinels_agree(master)
        return self

    def _node(self, name: str, root: Path) -> Node:
        return Node(name, free_port(), root / f"{name}.conf")

    def _spawn(self, node: Node, argv: list[str], *, timeout_s: float = 10.0) -> None:
        if self.dir is None:
            raise ConfigError("start the lab first")
        node.child = spawn(
            [self.binary, *argv],
            env={},
            log=Path(self.dir.name) / f"{node.name}.log",
            name=node.name,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and node.alive():
            with contextlib.suppress(redis.RedisError), node.client(timeout_s=0.2) as c:
                if c.ping():
                    return
            time.sleep(0.02)
        raise ConfigError(f"{node.name} did not start on port {node.port}: {node.child.tail()}")

    def _start(self, node: Node, extra: list[str]) -> None:
        if self.dir is None:
            raise ConfigError("start the lab first")
        node.conf.write_text("")  # redis-server rewrites its config (`CONFIG REWRITE`, sentinels)
        argv = [
            str(node.conf),
            "--port", str(node.port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", self.dir.name,
            "--maxmemory-policy", "noeviction", "--loglevel", "notice",
            "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
        ]  # fmt: skip
        self._spawn(node, argv + extra)

    # -- what the sentinels see ------------------------------------------------------------

    def master(self) -> Node:
        """The data node the sentinels name master (a majority of those alive agree)."""
        seen: dict[int, int] = {}
        for s in self.sentinels:
            if not s.alive():
                continue
            with contextlib.suppress(redis.RedisError), s.client() as c:
                _, port = c.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.name)
                seen[int(port)] = seen.get(int(port), 0) + 1
        if not seen:
            raise ConfigError("no sentinel answers")
        port = max(seen, key=lambda p: seen[p])
        return next(n for n in self.data if n.port == port)

    def role(self, node: Node) -> str:
        with node.client() as c:
            return str(c.execute_command("ROLE")[0])

    def wait_sentinels_agree(self, master: Node, *, timeout_s: float = 20.0) -> None:
        """Every live sentinel names `master`, knows the other live sentinels, and sees each
        replica healthy (`_healthy`)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ok = True
            others = sum(x.alive() for x in self.sentinels) - 1
            for s in self.sentinels:
                if not s.alive():
                    continue
                with s.client() as c:
                    state = c.sentinel_master(self.name)
                    replicas = c.execute_command("SENTINEL", "REPLICAS", self.name)  # dicts
                ok &= int(state["port"]) == master.port
                ok &= int(state["num-other-sentinels"]) >= others
                # each replica seen healthy by this sentinel just now: a link it has not
                # refreshed since the node came back marks a promoted replica down at once
                ok &= len(replicas) >= self.n_replicas and all(_healthy(r) for r in replicas)
            if ok:
                return
            time.sleep(0.1)
        raise ConfigError(f"the sentinels did not agree on {master.name} within {timeout_s} s")

    def wait_replicated(self, master: Node, replicas: int, *, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with master.client() as c:
                info = c.info("replication")
            online = sum(
                1 for k, v in info.items() if k.startswith("slave") and v.get("state") == "online"
            )
            if online >= replicas:
                return
            time.sleep(0.05)
        raise ConfigError(f"{master.name} has fewer than {replicas} replica(s) online")

    def wait_promoted(self, old: Node, *, timeout_s: float = 30.0) -> Node:
        """The node the sentinels promoted in place of `old`, once it answers as a master."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(ConfigError, redis.RedisError):
                new = self.master()
                if new is not old and new.alive() and self.role(new) == "master":
                    return new
            time.sleep(0.05)
        raise ConfigError(f"no replica was promoted within {timeout_s} s of losing {old.name}")

    def describe(self) -> str:
        """Each node's role as it answers and the last lines of its log (a test's failure
        message)."""
        lines = []
        for node in [*self.data, *self.sentinels]:
            state = "down"
            if node.alive():
                with contextlib.suppress(redis.RedisError), node.client() as c:
                    if node in self.data:
                        info = c.info("replication")
                        state = f"{info.get('role')} links={info.get('connected_slaves', '-')}"
                        state += f" master_link={info.get('master_link_status', '-')}"
                    else:
                        m = c.sentinel_master(self.name)
                        state = f"sentinel: master {m['port']} flags {m['flags']}"
            log = Path(self.dir.name) / f"{node.name}.log" if self.dir else None
            tail = log.read_text()[-1200:] if log is not None and log.exists() else ""
            lines.append(f"{node.name} :{node.port} {state}\n{tail}")
        return "\n".join(lines)

    # -- faults ------------------------------------------------------------------------------

    def kill(self, node: Node, sig: int = signal.SIGKILL) -> None:
        if node.child is not None:
            node.child.stop(grace_s=5, sig=sig)
        node.child = None

    def restart(self, node: Node) -> None:
        """Start a killed data node again on its port with the config it started with (a
        master's: no `replicaof`): it comes back empty (nothing on disk) and the sentinels
        make it a replica of the master they promoted."""
        self._start(node, [])

    def restart_sentinel(self, node: Node) -> None:
        self._spawn(node, [str(node.conf), "--sentinel"])

    def stop(self) -> None:
        for node in [*self.sentinels, *self.data]:
            self.kill(node, signal.SIGTERM)
        if self.dir is not None:
            with contextlib.suppress(OSError):
                self.dir.cleanup()
            self.dir = None
