"""What the fleet's Redis stores share (`RunStore`, `DeviceRegistry`, `QuestionStore`,
`scheduler.store.runs.FleetStore`,
`scheduler.service.schedules.Schedules`): one client (`r`) and one key layout (`k`), and the
Lua scripts their all-or-nothing writes run, declared on the class and registered with the
store's client when first called:

    class RunStore(RedisStore):
        _claim = Script(_CLAIM)

        def claim(self, ...):
            return self._claim(keys=[...], args=[...])
"""

from __future__ import annotations

from typing import overload

import redis
from redis.commands.core import Script as RegisteredScript

from workers.fleet.keys import Keys


class RedisStore:
    """A store over `client` with the key layout `keys`. Thread-safe as redis-py is: a
    worker's heartbeat thread and its main process may share one."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.r = client
        self.k = keys
        self.scripts: dict[str, RegisteredScript] = {}
        """This store's registered scripts, by attribute name (see `Script`)."""


class Script:
    """A Lua script as a class attribute of a `RedisStore`; on a store, the script registered
    with that store's client (`EVALSHA`, falling back to `EVAL` once per connection)."""

    def __init__(self, source: str) -> None:
        self.source = source
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
