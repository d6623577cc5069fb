"""The MCP server's own behaviour, in process: the SDK's client on the server `goalfleet mcp`
builds, whose `FleetClient` talks to a function playing the API (`FunctionTransport`, the
client's seam). A wait reports progress, keeps to its bound, and stops asking the API once
its call is cancelled; arguments out of their model are refused naming the field, before the
API is asked."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
from mcp import Client

from scheduler.client.api_client import FleetClient
from scheduler.client.function_transport import FunctionTransport
from scheduler.client.transport import Request, Response
from scheduler.mcp.server import build, stdio_clients

RUN_ID = "0123456789abcdef0123456789abcdef"
RUNNING = {
    "id": RUN_ID,
    "request": {"goal": "Sign in", "max_steps": 20},
    "status": "running",
    "device": "ios-1",
    "submitted_at": 1.0,
}


class FakeApi:
    """A run that never ends, and every request the client made."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, request: Request) -> Response:
        self.seen.append(f"{request.method} {request.target}")
        if request.target == f"/v1/runs/{RUN_ID}":
            return Response.of_json(200, RUNNING)
        if request.target.startswith(f"/v1/runs/{RUN_ID}/steps"):
            return Response.of_json(200, [])
        return Response.of_json(404, {"error": "NOT_FOUND", "message": "no such thing"})


@pytest.fixture
def api() -> FakeApi:
    return FakeApi()


@asynccontextmanager
async def session(api: FakeApi) -> AsyncIterator[Client]:
    with FleetClient("http://api.test", token="t", transport=FunctionTransport(api)) as fleet:
        async with Client(build(stdio_clients(fleet), "test")) as client:
            yield client


def test_a_wait_keeps_to_its_bound_and_reports_progress(api: FakeApi) -> None:
    """A run that does not end within `timeout_s`: the answer is its state, `finished: false`,
    after about the bound; progress was reported against the run's `max_steps`."""

    async def scenario() -> None:
        seen: list[tuple[float, float | None]] = []

        async def progress(done: float, total: float | None, _message: str | None) -> None:
            seen.append((done, total))

        async with session(api) as client:
            start = time.monotonic()
            result = await client.call_tool(
                "wait_run", {"run_id": RUN_ID, "timeout_s": 1}, progress_callback=progress
            )
            took = time.monotonic() - start
        assert not result.is_error, result.content
        assert result.structured_content["finished"] is False
        assert result.structured_content["run"]["status"] == "running"
        assert 1 <= took < 3
        assert seen == [(0.0, 20.0)]  # reported once: nothing changed after

    anyio.run(scenario)


def test_a_cancelled_wait_stops_asking_the_api(api: FakeApi) -> None:
    """Cancelling the call (the client gives up) ends the server's wait: no request after."""

    async def scenario() -> None:
        async with session(api) as client:
            with anyio.move_on_after(1.2):
                await client.call_tool("wait_run", {"run_id": RUN_ID, "timeout_s": 600})
            await anyio.sleep(0.1)  # a poll in flight lands
            asked = len(api.seen)
            assert asked >= 2  # it was polling
            await anyio.sleep(1.5)  # three polls' time
            assert len(api.seen) == asked, api.seen[asked:]
            # the session is still there
            assert (await client.list_tools()).tools

    anyio.run(scenario)


@pytest.mark.parametrize(
    ("tool", "args", "says"),
    [
        ("wait_run", {"run_id": RUN_ID, "timeout_s": 3600}, "timeout_s: Input should be less"),
        ("get_run", {"run_id": "xyz"}, "run_id: String should"),
        ("get_run", {"run_id": RUN_ID, "extra": 1}, "extra: Extra inputs are not permitted"),
        ("forget_memory", {}, "give exactly one of key, goal or everything"),
        ("submit_flows_file", {}, "give either path (a flows file) or text"),
        ("step_picture", {"run_id": RUN_ID, "index": 0}, "index: Input should be greater"),
        ("list_devices", {"selector": {"platform": "nokia"}}, "selector.platform: Input should"),
        ("answer_question", {"target": "x"}, "run_id: Input should be a valid string"),
    ],
)
def test_arguments_out_of_their_model_are_refused_naming_the_field(
    api: FakeApi, tool: str, args: dict[str, object], says: str
) -> None:
    async def scenario() -> None:
        async with session(api) as client:
            result = await client.call_tool(tool, args)
        assert result.is_error
        assert says in result.content[0].text  # type: ignore[union-attr]
        assert api.seen == []  # the API was not asked

    anyio.run(scenario)


def test_a_flows_file_with_problems_names_each_line(api: FakeApi) -> None:
    """A flows file given as text is checked as `goalfleet suite validate` checks it: each
    problem with its line, nothing submitted."""
    text = "suite: smoke\nflows:\n  - name: one\n    goal: 7\n    colour: blue\n"

    async def scenario() -> None:
        async with session(api) as client:
            result = await client.call_tool("submit_flows_file", {"text": text})
        assert result.is_error
        said = result.content[0].text  # type: ignore[union-attr]
        assert "<text>:line 4: flows[0].goal: 7 is not of type 'string'" in said, said
        assert "<text>:line 3: flows[0]: unknown field colour" in said, said
        assert api.seen == []

    anyio.run(scenario)


def test_an_api_refusal_is_the_tool_error(api: FakeApi) -> None:
    async def scenario() -> None:
        async with session(api) as client:
            result = await client.call_tool("get_batch", {"batch_id": "abcdef12"})
        assert result.is_error
        assert result.content[0].text == "no such thing"  # type: ignore[union-attr]

    anyio.run(scenario)


def test_the_server_has_no_path_to_redis() -> None:
    """`goalfleet mcp` loads the API's client and request models, never Redis, Celery or the
    API server's stack: its one way to the fleet is `FleetClient`."""
    code = (
        "import sys, scheduler.cli.mcp, scheduler.mcp.server\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    assert "mcp" in out
    assert "scheduler" in out
    assert not {"redis", "celery", "kombu", "fastapi", "psycopg"} & set(out)
