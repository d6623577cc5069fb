"""Run and batch ids as people type them: the tables show 8 characters, and any unique prefix
of 6 or more names its run (or batch), as in git.

The API resolves a prefix (so every client, not just the CLI, gets it) with one SCAN over
`{p}:run:<prefix>*`. That walks the keyspace once per short id; a whole id is looked up
directly and costs nothing extra, and the CLI resolves once per command, then uses the whole
id. An index kept beside the run records (a sorted set read with ZRANGEBYLEX) would make it
O(log n), but it would be written by the store's submit and pruned with retention — a change
to the store, left for when a fleet's keyspace makes the SCAN noticeable.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from scheduler.errors import AmbiguousIdError, NotFoundError

if TYPE_CHECKING:  # the CLI reads MIN_PREFIX from here without loading redis
    import redis

    from workers.fleet.keys import Keys

MIN_PREFIX = 6
RUN_ID_LENGTH = 32
_PREFIX = re.compile(r"[0-9a-f]{%d,%d}" % (MIN_PREFIX, RUN_ID_LENGTH - 1))  # noqa: UP031 - a regex's braces
_ID = re.compile(r"[0-9a-f]{%d}" % RUN_ID_LENGTH)  # noqa: UP031 - a regex's braces
_SHOWN_CHARS = 80
"""A malformed id is named in its error up to this many characters."""
_SHOWN = 10
"""At most this many matches are named in an ambiguous prefix's error."""


class RunIds:
    def __init__(self, client: redis.Redis, keys: Keys, *, kind: str = "run") -> None:
        """`kind`: "run" (`{p}:run:<id>`) or "batch" (`{p}:batch:<id>`)."""
        self.r = client
        self.k = keys
        self.kind = kind

    def resolve(self, given: str, *, owner: str | None = None) -> str:
        """The whole id of the one run whose id starts with `given`; a whole id comes back
        (lower-cased) for the caller to look up, and answer 404 if it is unknown. Anything
        that is neither is not found here, before any key is built from it (`checked`).
        With `owner`, only that owner's runs (or batches) are matched: a prefix never names,
        nor lists, another's."""
        prefix = checked(given, self.kind)
        if not _PREFIX.fullmatch(prefix):
            return prefix
        head = self.k.run("") if self.kind == "run" else self.k.batch("")
        found: list[str] = sorted(
            {
                key.removeprefix(head)
                for key in self.r.scan_iter(match=f"{head}{prefix}*", count=1000)
                if ":" not in key.removeprefix(head)  # not the `:steps` hash, the `:runs` list
            }
        )
        if owner is not None and found:
            with self.r.pipeline(transaction=False) as p:
                for ident in found:
                    p.hget(f"{head}{ident}", "owner")
                owners = p.execute()
            found = [i for i, o in zip(found, owners, strict=True) if o == owner]
        if not found:
            raise NotFoundError(
                f"no {self.kind} id starts with {given!r} (unknown, or past its retention)"
            )
        if len(found) > 1:
            shown = ", ".join(found[:_SHOWN]) + (" …" if len(found) > _SHOWN else "")
            many = {"run": "runs", "batch": "batches"}[self.kind]
            raise AmbiguousIdError(
                f"{self.kind} id {given!r} is ambiguous: {len(found)} {many} start with it: "
                f"{shown}",
                hint="give more characters",
            )
        return found[0]


def checked(given: str, kind: str) -> str:
    """`given`, lower-cased, when it may be an id (32 hex digits) or a prefix of one (6 or
    more); else a 404 saying what an id looks like. The one check an id from outside passes
    before a Redis key is built from it: `<id>:steps` names another key, a glob or a
    separator other keys, and an answer must not depend on which exist (a malformed id is
    unknown alike, whoever owns the id it starts with)."""
    ident = given.lower()
    if _PREFIX.fullmatch(ident) or _ID.fullmatch(ident):
        return ident
    shown = given[:_SHOWN_CHARS] + ("…" if len(given) > _SHOWN_CHARS else "")
    raise NotFoundError(
        f"no {kind} {shown!r} (not a {kind} id)",
        hint=f"give the {kind}'s id (32 hex characters) or a unique prefix of {MIN_PREFIX}+",
    )
