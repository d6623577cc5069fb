"""The one loader of the fleet's Lua: every all-or-nothing write of the fleet's Redis stores
is a script in `lua/` beside this module, declared on its store's class by name and
registered with the store's client when first called:

    class RunStore(RedisStore):
        _claim = Script("claim")

        def claim(self, ...):
            return self._claim(keys=[...], args=[...])

A script's first line may name the fragments of `lua/lib/` it calls (`--! uses lease places`);
the loader puts them before it. Every script starts with two tables made here from the
Python enums, so no status name is written twice: `S` (each `RunStatus`, and `RESERVED`, the
state of a queued run that holds a device: `workers.fleet.state`) and `F` (each `Failure`);
`PRIORITY_SPAN`, the pending index's priority step (`states.PRIORITY_SPAN`); and `K`, the key
layouts of `Keys` as Lua functions of a prefix and an id (`K.run(prefix, id)`), with
`run_key_parts(key)` reading a run key back: a script builds a key only from one it was given,
and only through `K`, so the layout lives in `Keys` alone.

Every script is a write the fleet answers for (a submit, an answer, a claim, a step row, a
finish, a lease renew), so on a store with replicas (`connections.Replication`) a script is
acknowledged only once it has reached them: the script and a `WAIT` go in one pipeline, on one
connection (`WAIT` counts the writes of its own connection) and one round trip; when redis-py
re-sends the pipeline after a lost connection, it re-sends both, so the `WAIT` always covers
the write it answers for. Fewer replicas than asked within the timeout: `NotReplicatedError`,
an outage (the write may or may not survive a failover; it is not acknowledged).
"""

from __future__ import annotations

import hashlib
import re
from functools import cache
from pathlib import Path
from typing import Any, Protocol, overload

import redis
from redis.exceptions import NoScriptError

from workers.core.model import RunStatus
from workers.core.records import RunRecord
from workers.fleet.connections import Replication, StoreClient
from workers.fleet.keys import WAKE_KEPT, Keys
from workers.fleet.state.states import PRIORITY_SPAN, RESERVED, Failure

LUA = Path(__file__).with_name("lua")


def _table(name: str, values: dict[str, str]) -> str:
    fields = ", ".join(f"{k} = '{v}'" for k, v in values.items())
    return f"local {name} = {{{fields}}}\n"


def _lua_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


_PREFIX, _ARG = "\x01", "\x02"
"""Placeholders a `Keys` method is called with, to read its layout back."""


def _key_function(layout: str) -> str:
    """A Lua function `(p, a)` building the key `layout` (a `Keys` method's output on the
    placeholders) from a prefix `p` and an argument `a`."""
    parts = [x for x in re.split(f"([{_PREFIX}{_ARG}])", layout) if x]
    names = {_PREFIX: "p", _ARG: "a"}
    return f"function(p, a) return {' .. '.join(names.get(x) or _lua_string(x) for x in parts)} end"


def _keys_prelude() -> str:
    """`K`: the key layouts a script builds from a key it was given (the fleet's prefix, a run
    id), generated from `Keys`, so no script spells a layout of its own; and `run_key_parts`,
    a run key's prefix and run id, read back by the pattern `K.run` builds."""
    k = Keys(_PREFIX)
    layouts = {
        "run": k.run(_ARG),
        "pictures": k.pictures(_ARG),
        "lease": k.lease(_ARG),
        "device": k.device(_ARG),
        "pending": k.pending,
        "runs": k.runs,
        "ended": k.ended(_ARG),
        "batch": k.batch(_ARG),
        "batch_runs": k.batch_runs(_ARG),
        "history_on": k.history_on,
        "history_outbox": k.history_outbox,
        "events": k.events,
        "webhook": k.webhook,
    }
    fields = ", ".join(f"{name} = {_key_function(t)}" for name, t in layouts.items())
    run = layouts["run"].removeprefix(_PREFIX)
    head, tail = run.split(_ARG)
    magic = re.compile(r"([\^$()%.\[\]*+\-?])")
    pattern = "^(.*)" + magic.sub(r"%\1", head) + "([^:]+)" + magic.sub(r"%\1", tail) + "$"
    return (
        f"local K = {{{fields}}}\n"
        f"local function run_key_parts(key) return string.match(key, {_lua_string(pattern)}) end\n"
    )


PRELUDE = (
    _table("S", {s.name: s.value for s in RunStatus} | {"RESERVED": RESERVED})
    + _table("F", {f.name: f.value for f in Failure})
    + f"local PRIORITY_SPAN = {PRIORITY_SPAN}\n"
    + f"local WAKE_KEPT = {WAKE_KEPT}\n"
    + f"local ASKED = {{{', '.join(map(_lua_string, RunRecord.ASKED))}}}\n"
    + _keys_prelude()
)


@cache
def source(name: str) -> str:
    """The script `lua/<name>.lua` as Redis runs it: the prelude, the fragments its
    `--! uses` line names, then its body."""
    body = (LUA / f"{name}.lua").read_text()
    first = body.split("\n", 1)[0]
    uses = first.removeprefix("--! uses").split() if first.startswith("--! uses") else []
    fragments = [(LUA / "lib" / f"{frag}.lua").read_text() for frag in uses]
    return "".join([PRELUDE, *fragments, body])


class NotReplicatedError(redis.exceptions.ConnectionError):
    """A write reached fewer replicas than the fleet asks for (`Settings.redis_wait_replicas`)
    within `redis_wait_timeout_ms`: it is not acknowledged, and may be lost in a failover.
    A `ConnectionError`, so every edge treats it as the outage it is (`outages.is_outage`)."""


class ScriptCall(Protocol):
    """A store's script, called as redis-py calls a registered one."""

    def __call__(self, keys: list[Any] | None = None, args: list[Any] | None = None) -> Any: ...  # noqa: ANN401 - what the script returns


class Registered:
    """A script called by its SHA (`EVALSHA`), loaded once more when the server does not know
    it (a restarted or newly promoted Redis). What redis-py's registered `Script` does, less
    its per-call checks for pipelines and clusters, which a store's client never is."""

    def __init__(self, source: str, client: redis.Redis) -> None:
        self.source = source
        self.client = client
        self.sha = hashlib.sha1(source.encode()).hexdigest()  # noqa: S324 - Redis names scripts by SHA-1

    def __call__(self, keys: list[Any] | None = None, args: list[Any] | None = None) -> Any:  # noqa: ANN401 - what the script returns
        keys, args = keys or [], args or []
        try:
            return self.client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            self.client.script_load(self.source)
            return self.client.evalsha(self.sha, len(keys), *keys, *args)


class Acknowledged:
    """A registered script whose every call waits for `replication.replicas` replicas."""

    def __init__(self, script: Registered, client: redis.Redis, replication: Replication) -> None:
        self.script = script
        self.client = client
        self.replication = replication

    def __call__(self, keys: list[Any] | None = None, args: list[Any] | None = None) -> Any:  # noqa: ANN401 - what the script returns
        keys, args = keys or [], args or []
        need, timeout_ms = self.replication.replicas, self.replication.timeout_ms
        for _ in range(2):  # a second time only after loading the script (a new master)
            with self.client.pipeline(transaction=False) as p:
                p.evalsha(self.script.sha, len(keys), *keys, *args)
                p.execute_command("WAIT", need, timeout_ms)  # type: ignore[no-untyped-call]  # redis-py
                out, got = p.execute(raise_on_error=False)
            if not isinstance(out, NoScriptError):
                break
            self.client.script_load(self.script.source)
        for reply in (out, got):
            if isinstance(reply, Exception):
                raise reply
        if int(got) < need:
            raise NotReplicatedError(
                f"the write reached {got} of {need} replica(s) within {timeout_ms} ms; it is "
                "not acknowledged (see docs/reliability.md)"
            )
        return out


class RedisStore:
    """A store over `client` with the key layout `keys`. Thread-safe as redis-py is: a
    worker's heartbeat thread and its main process may share one."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.r = client
        self.k = keys
        self.replication = client.replication if isinstance(client, StoreClient) else Replication()
        self.scripts: dict[str, ScriptCall] = {}
        """This store's registered scripts, by attribute name (see `Script`)."""


class Script:
    """The script `lua/<name>.lua` as a class attribute of a `RedisStore`; on a store, the
    script registered with that store's client (`EVALSHA`, falling back to `EVAL` once per
    connection)."""

    def __init__(self, name: str) -> None:
        self.source = source(name)
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, store: None, owner: type) -> Script: ...
    @overload
    def __get__(self, store: RedisStore, owner: type) -> ScriptCall: ...
    def __get__(self, store: RedisStore | None, owner: type) -> Script | ScriptCall:
        if store is None:
            return self
        bound = store.scripts.get(self.name)
        if bound is None:
            registered = Registered(self.source, store.r)
            acknowledged = store.replication.replicas > 0
            bound = (
                Acknowledged(registered, store.r, store.replication) if acknowledged else registered
            )
            store.scripts[self.name] = bound
        return bound
