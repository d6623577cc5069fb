"""PostgreSQL for the history tests (imported by name, as `pgkit`):

- `scratch_database(url)`: a database of the test's own on a running server (the machine's,
  127.0.0.1:5432, trust auth), dropped afterwards;
- `LocalPostgres`: a server of the test's own (initdb + pg_ctl from Debian's
  /usr/lib/postgresql/<v>/bin, or PATH) on a random loopback port, that a test may stop and
  start again. As root it runs as the `postgres` user (initdb refuses root), through runuser.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Self

import psycopg

MACHINE_URL = os.environ.get("GOALFLEET_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/")


def _with_db(url: str, name: str) -> str:
    return urllib.parse.urlunsplit(urllib.parse.urlsplit(url)._replace(path="/" + name))


@contextlib.contextmanager
def scratch_database(server_url: str = MACHINE_URL) -> Iterator[str]:
    """The URL of a fresh, empty database on `server_url`'s server; dropped at the end."""
    name = f"gf_test_{uuid.uuid4().hex[:12]}"
    admin = _with_db(server_url, "postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _with_db(server_url, name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def pg_bin(tool: str) -> str:
    """`tool` (initdb, pg_ctl) from the newest /usr/lib/postgresql/<v>/bin, else PATH."""
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: p.parent.name)
    for d in reversed(versions):
        if (d / tool).exists():
            return str(d / tool)
    found = shutil.which(tool)
    if found is None:
        msg = f"{tool} not found: install postgresql (Debian: apt-get install postgresql)"
        raise RuntimeError(msg)
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalPostgres:
    """A PostgreSQL server of our own in a temporary directory; `stop()` / `start()` it at
    will; `close()` stops it and removes the directory."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="gf-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            self.as_user = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.root, user="postgres")
        self._run(pg_bin("initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust")
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv: str) -> None:
        subprocess.run(
            [*self.as_user, *argv], check=True, capture_output=True, cwd=self.root, timeout=60
        )

    def start(self) -> None:
        opts = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} -c fsync=off"
        log = str(self.root / "postgres.log")  # not a pipe: the server outlives pg_ctl
        self._run(pg_bin("pg_ctl"), "-D", str(self.data), "-l", log, "-o", opts, "-w", "start")

    def stop(self) -> None:
        self._run(pg_bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def close(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
