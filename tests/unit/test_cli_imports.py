"""A command imports what it uses and nothing more: `goalfleet --help` lists every command
without importing any command's dependencies, and a client command (`goalfleet status ID`)
does not load Redis, Celery, structlog, httpx or the API server's stack. Checked in a fresh
interpreter, by the modules it has loaded once the command returned: behaviour, not a timing
(bench/bench_cli_start.py measures the time). The client is on the standard library's
`http.client`: httpx and what it brings load for no client command."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # the whole command as a process: make test, not make unit

HEAVY = ("pydantic", "httpx", "redis", "rich", "structlog", "celery", "kombu", "fastapi", "mcp")
SERVER_SIDE = ("redis", "structlog", "celery", "kombu", "fastapi", "starlette", "uvicorn", "mcp")
HTTPX = ("httpx", "httpcore", "h11", "anyio", "certifi", "idna")

LOADED = """
import json, sys
from scheduler.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:  # argparse's --help
    code = exc.code
loaded = sorted(name for name, module in sys.modules.items() if module is not None)
sys.stderr.write(json.dumps({"code": code, "modules": loaded}) + "\\n")
"""


def _loaded(*argv: str, whole: bool = False) -> tuple[int, set[str]]:
    """The exit code and the packages loaded (with `whole`, every module's full name)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOALFLEET_")}
    env |= {
        "GOALFLEET_API_URL": "http://127.0.0.1:9",  # the discard port: nothing answers
        "GOALFLEET_API_TOKEN": "t",
        "GOALFLEET_API_WAIT_S": "0",
    }
    proc = subprocess.run(
        [sys.executable, "-c", LOADED, *argv],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )
    seen = json.loads(proc.stderr.strip().splitlines()[-1])
    names = set(seen["modules"])
    return seen["code"], names if whole else {name.split(".")[0] for name in names}


def test_help_lists_every_command_and_imports_none_of_their_dependencies() -> None:
    code, loaded = _loaded("--help")
    assert code == 0
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    assert "scheduler" in loaded  # the check looks at the right interpreter


def test_a_client_command_loads_no_server_side_library() -> None:
    """`goalfleet status ID` against no API: exit 3, having loaded the client's stack only:
    the standard library's `http.client`, not httpx (nor httpcore, h11 or anyio under it)."""
    code, loaded = _loaded("status", "0123456789abcdef", whole=True)
    assert code == 3  # the API is unavailable
    assert {"http.client", "pydantic", "scheduler.client.http_transport"} <= loaded  # it got as
    # far as the client
    packages = {name.split(".")[0] for name in loaded}
    assert not packages & set(SERVER_SIDE), sorted(packages & set(SERVER_SIDE))
    assert not packages & set(HTTPX), sorted(packages & set(HTTPX))


def test_status_loads_neither_rich_nor_the_run_models() -> None:
    """`goalfleet status ID` reads the run's JSON and prints its line (`_line`): rich, the
    records and the step models load only for an ended run's step table, and the settings come
    without pydantic-settings."""
    code, loaded = _loaded("status", "0123456789abcdef", whole=True)
    assert code == 3
    unwanted = {"rich", "pydantic_settings", "workers.core.records", "workers.core.model"}
    assert not loaded & unwanted, sorted(loaded & unwanted)
    assert {"scheduler.cli._line", "workers.settings"} <= loaded
