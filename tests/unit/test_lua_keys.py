"""Keys are built in Python only: the Lua scripts receive the key layouts of `Keys` (the
prelude's `K`, generated from it) and spell none of their own."""

from __future__ import annotations

import re
from pathlib import Path

import redis

from workers.fleet.keys import Keys
from workers.fleet.state.scripts import LUA, PRELUDE

FRAGMENTS = (
    ":run:",
    ":device:",
    ":pending",
    ":runs",
    ":batch:",
    ":history:",
    ":events",
    ":webhook",
)
"""The pieces of the fleet's key layout a script could spell by hand."""


def code(path: Path) -> str:
    """A script's code without its comments."""
    return "\n".join(line.split("--", 1)[0] for line in path.read_text().splitlines())


def test_no_script_spells_a_key_layout() -> None:
    """No script or fragment of `lua/` holds a piece of the key layout in a string literal."""
    spelled = {
        str(path.relative_to(LUA)): hits
        for path in sorted(LUA.rglob("*.lua"))
        if (hits := [f for f in FRAGMENTS if re.search(rf"['\"][^'\"\n]*{f}", code(path))])
    }
    assert spelled == {}


def test_the_prelude_builds_what_keys_builds(client: redis.Redis) -> None:
    """`K`'s functions and `run_key_parts`, run by Redis, give the keys `Keys` gives (and read
    a run key back), for a prefix with a colon and pattern characters in it."""
    k = Keys("fleet:a-1.%")
    script = (
        PRELUDE
        + """
local p, id = run_key_parts(K.run(ARGV[1], ARGV[2]))
return {K.run(ARGV[1], ARGV[2]), K.lease(ARGV[1], ARGV[3]), K.ended(ARGV[1], 'done'),
        K.batch_runs(ARGV[1], ARGV[2]), K.history_outbox(ARGV[1]), K.events(ARGV[1]), p, id}
"""
    )
    got = client.eval(script, 0, k.prefix, "r1", "d1")
    assert got == [
        k.run("r1"),
        k.lease("d1"),
        k.ended("done"),
        k.batch_runs("r1"),
        k.history_outbox,
        k.events,
        k.prefix,
        "r1",
    ]
