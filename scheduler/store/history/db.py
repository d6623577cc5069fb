"""One connection to the history database, PostgreSQL (psycopg 3) or SQLite (the embedded
default), behind the same few calls; the schema's migrations (`migrations/NNNN_*.sql`, applied
in order, each once, recorded in `schema_migrations`).

SQL is written once with `?` placeholders (SQLite's); a PostgreSQL connection turns them into
psycopg's `%s`. Both dialects take the same DDL, `INSERT ... ON CONFLICT DO UPDATE` and window
functions; the one query that differs (percentiles) asks `Database.dialect`.

A database that cannot be reached, or drops the connection, raises `HistoryUnavailableError`;
the next call connects again.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import psycopg

from workers.core.errors import GoalfleetError
from workers.urls import checked_database_url

MIGRATIONS = Path(__file__).with_name("migrations")
SQLITE_BUSY_S = 15.0
"""How long an embedded-history connection waits for another's write lock (SQLite's busy
timeout): 4 processes upgrading one new file at once on 2 busy cores passed 3 s once."""
WORK_MEM = "32MB"
"""PostgreSQL's sort memory for this connection: the questions' window sorts (tens of thousands
of step-time counts) stay in memory instead of spilling to disk at the 4 MB default."""
MIGRATE_LOCK = 0x6766_6D69  # "gfmi"
"""The PostgreSQL advisory lock a migration holds (`Database.upgrade`)."""
Dialect = Literal["postgresql", "sqlite"]


class HistoryUnavailableError(GoalfleetError, code="HISTORY_UNAVAILABLE"):
    """The history database cannot be reached (or dropped the connection): retry later."""


class HistorySchemaError(HistoryUnavailableError, code="HISTORY_SCHEMA"):
    """The history database has no tables yet (or older ones): `goalfleet db upgrade`."""


def shown_database_url(url: str) -> str:
    """`url` without its password, for start lines and errors."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.password is None:
        return url
    netloc = parsed.netloc.replace(f":{parsed.password}@", ":***@")
    return urllib.parse.urlunsplit(parsed._replace(netloc=netloc))


def _wal(conn: sqlite3.Connection, busy_s: float) -> None:
    """WAL mode, asked again while another connection is switching a new file to it: SQLite
    answers that race "database is locked" at once, without its busy handler (6 of 40 trials
    of 4 threads opening one new file)."""
    deadline = time.monotonic() + busy_s
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)
        else:
            return


class Database:
    """A lazily opened, re-opened-after-failure connection to the history database."""

    def __init__(self, url: str, *, connect_timeout_s: float = 3.0) -> None:
        self.url = checked_database_url(url)
        scheme = urllib.parse.urlsplit(self.url).scheme
        self.dialect: Dialect = "sqlite" if scheme == "sqlite" else "postgresql"
        self.timeout_s = connect_timeout_s
        self._conn: Any = None

    def where(self) -> str:
        return shown_database_url(self.url)

    def _connect(self) -> Any:  # noqa: ANN401 - a psycopg or a sqlite3 connection
        if self._conn is not None:
            return self._conn
        try:
            if self.dialect == "sqlite":
                path = Path(urllib.parse.urlsplit(self.url).path)
                path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                # Made private (SQLite gives its -wal and -shm files the database's mode).
                os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
                # a local file is never unreachable, only busy: wait out another process's
                # write (a migration, switching to WAL) longer than a server's connect timeout
                busy_s = max(self.timeout_s, SQLITE_BUSY_S)
                conn: Any = sqlite3.connect(path, timeout=busy_s, check_same_thread=False)
                _wal(conn, busy_s)
            else:
                conn = psycopg.connect(
                    self.url,
                    connect_timeout=max(1, round(self.timeout_s)),
                    options=f"-c work_mem={WORK_MEM}",
                )
        except (psycopg.Error, sqlite3.Error, OSError) as exc:
            raise HistoryUnavailableError(
                f"history database {self.where()} unreachable: {type(exc).__name__}",
                hint="start it, or check GOALFLEET_DATABASE_URL",
            ) from None
        self._conn = conn
        return conn

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.dialect == "postgresql" else sql

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:
        """A cursor in one transaction: committed when the block ends, rolled back (and the
        connection dropped, so the next call reconnects) when the database fails."""
        conn = self._connect()
        try:
            cur = conn.cursor()
            yield _Cursor(cur, self)
            conn.commit()
        except (psycopg.Error, sqlite3.OperationalError) as exc:
            self.close()
            if _missing_table(exc):
                raise HistorySchemaError(
                    f"history database {self.where()} has no history tables",
                    hint="run goalfleet db upgrade",
                ) from None
            if _our_bug(exc):
                raise
            raise HistoryUnavailableError(
                f"history database {self.where()} failed: {type(exc).__name__}",
                hint="the write is retried; check the database",
            ) from None
        except BaseException:
            with contextlib.suppress(psycopg.Error, sqlite3.Error):
                conn.rollback()
            raise

    def query(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        with self.transaction() as cur:
            rows: list[tuple[Any, ...]] = cur.fetch(sql, params)
        return rows

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(psycopg.Error, sqlite3.Error):
                conn.close()

    # -- migrations ---------------------------------------------------------------------------

    def upgrade(self) -> list[str]:
        """Apply the migrations not yet applied, each in its own transaction; returns their
        names. Each transaction first takes the database's migration lock (PostgreSQL: an
        advisory lock; SQLite: the write lock), so processes that start at once (the API, the
        scheduler, a CLI command on the embedded database) apply each migration once."""
        done: list[str] = []
        for path in sorted(MIGRATIONS.glob("*.sql")):
            with self.transaction() as cur:
                if self.dialect == "sqlite":
                    cur.run("BEGIN IMMEDIATE")  # DDL opens no transaction of its own
                else:
                    cur.run("SELECT pg_advisory_xact_lock(?)", (MIGRATE_LOCK,))
                cur.run(
                    "CREATE TABLE IF NOT EXISTS schema_migrations "
                    "(name TEXT PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
                )
                if cur.fetch("SELECT 1 FROM schema_migrations WHERE name = ?", (path.stem,)):
                    continue
                for statement in _statements(path.read_text()):
                    cur.run(statement)
                cur.run(
                    "INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)",
                    (path.stem, time.time()),
                )
            done.append(path.stem)
        return done

    def pending_migrations(self) -> list[str]:
        names = [p.stem for p in sorted(MIGRATIONS.glob("*.sql"))]
        try:
            applied = {r[0] for r in self.query("SELECT name FROM schema_migrations")}
        except HistorySchemaError:
            return names
        return [n for n in names if n not in applied]


class _Cursor:
    def __init__(self, cur: Any, db: Database) -> None:  # noqa: ANN401 - either driver's cursor
        self.cur = cur
        self.db = db

    def run(self, sql: str, params: Sequence[object] = ()) -> None:
        self.cur.execute(self.db._sql(sql), params)  # noqa: SLF001 - the cursor is the db's

    def many(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        if rows:
            self.cur.executemany(self.db._sql(sql), rows)  # noqa: SLF001

    def fetch(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        self.cur.execute(self.db._sql(sql), params)  # noqa: SLF001
        return list(self.cur.fetchall())


def _missing_table(exc: Exception) -> bool:
    if isinstance(exc, sqlite3.OperationalError):
        return "no such table" in str(exc)
    return isinstance(exc, psycopg.errors.UndefinedTable)


def _our_bug(exc: Exception) -> bool:
    """A query or schema problem (a missing table, bad SQL, a bad value), not an outage."""
    if isinstance(exc, sqlite3.OperationalError):
        return "no such" in str(exc) or "syntax error" in str(exc)
    return isinstance(exc, psycopg.errors.ProgrammingError | psycopg.errors.DataError)


def _statements(text: str) -> list[str]:
    lines = [ln for ln in text.splitlines() if not ln.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
