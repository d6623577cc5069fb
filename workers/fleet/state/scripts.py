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
state of a queued run that holds a device: `workers.fleet.state`) and `F` (each `Failure`).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import overload

import redis
from redis.commands.core import Script as RegisteredScript

from workers.core.model import RunStatus
from workers.fleet.keys import Keys
from workers.fleet.state.states import RESERVED, Failure

LUA = Path(__file__).with_name("lua")


def _table(name: str, values: dict[str, str]) -> str:
    fields = ", ".join(f"{k} = '{v}'" for k, v in values.items())
    return f"local {name} = {{{fields}}}\n"


PRELUDE = _table("S", {s.name: s.value for s in RunStatus} | {"RESERVED": RESERVED}) + _table(
    "F", {f.name: f.value for f in Failure}
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


class RedisStore:
    """A store over `client` with the key layout `keys`. Thread-safe as redis-py is: a
    worker's heartbeat thread and its main process may share one."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.r = client
        self.k = keys
        self.scripts: dict[str, RegisteredScript] = {}
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
    def __get__(self, store: RedisStore, owner: type) -> RegisteredScript: ...
    def __get__(self, store: RedisStore | None, owner: type) -> Script | RegisteredScript:
        if store is None:
            return self
        registered = store.scripts.get(self.name)
        if registered is None:
            registered = store.scripts[self.name] = store.r.register_script(self.source)
        return registered
