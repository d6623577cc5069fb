"""`goalfleet mcp` as an agent uses it: the real command in its own process against a real
fleet (own Redis, the API, the scheduler, sim workers), driven by the MCP SDK's own client
over stdio and over streamable HTTP. An agent lists the tools, submits a run and a journey,
waits with progress, reads the steps, one picture (a PNG) and the run's report, answers a
parked question; a read-only token is refused on submit and a secret value as an input is
refused, each as a tool error with the API's own message."""

from __future__ import annotations

import base64
import contextlib
import io
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from fleetkit import quick_settings
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from PIL import Image

from scheduler.local.fleet import LocalFleet, SimWorker
from scheduler.local.redis import LocalRedis
from scheduler.service.requests import RunSubmit, SuiteSubmit
from workers.core.records import Answer

OPS = "mcp-ops-token-1"
READER = "mcp-read-token-2"
SECRET = "mcp-S3cret-value-77"
SIGNIN = {"labels": {"app": "signin"}}
RUN = {
    "goal": "Sign in",
    "inputs": {"email": "ada@example.com"},
    "secrets": {"password": {"ref": "env:MCP_PW"}},
    "done_when": "Welcome",
    "selector": SIGNIN,
}
TWINS_RUN = {**RUN, "selector": {"labels": {"app": "twins"}}}
"""The twins app's account chooser: the rules decider cannot choose, so the run asks."""
FLOWS = """\
suite: mcp-smoke
defaults:
  done_when: Welcome
  params: {ask_person: false, memory: false}
flows:
  - name: sign-in
    inputs: {email: ada@example.com}
    secrets: {password: env:MCP_PW}
    matrix: {platform: [ios, android], labels: {app: signin}}
    steps:
      - goal: Sign in
      - check: '"Welcome" is visible'
"""
"""A journey of a goal and a check: the flows-file tool takes journeys as the API does."""
WORKERS = [
    SimWorker("mcp-ios", "ios", "17.5", "iPhone 15", {"app": "signin"}),
    SimWorker("mcp-android", "android", "14", "Pixel 8", {"app": "signin"}),
    SimWorker("mcp-twins", "ios", "17.5", "iPhone 15", {"app": "twins"}, app="twins"),
]

Connect = Callable[[str], contextlib.AbstractAsyncContextManager[Client]]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalFleet]:
    pictures = tmp_path_factory.mktemp("mcp-pictures")
    with LocalRedis() as server:
        settings = quick_settings(
            server.url,
            key_prefix="gfm",
            token=f"ops:{OPS}",
            api_tokens=[f"ops:{OPS}", f"reader:{READER}"],
            api_roles="ops:admin,reader:read",
            artifact_dir=pictures,
        )
        with LocalFleet(
            settings,
            log_dir=tmp_path_factory.mktemp("mcp-logs"),
            extra_env={"GOALFLEET_SECRET_MCP_PW": SECRET},
        ) as f:
            yield f.start_all(WORKERS, timeout_s=90)


def _env(fleet: LocalFleet, token: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOALFLEET_")}
    return env | {"GOALFLEET_API_URL": fleet.api_url, "GOALFLEET_API_TOKEN": token}


@pytest.fixture(scope="module")
def http_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the HTTP server's stderr goes."""
    return tmp_path_factory.mktemp("mcp-http") / "stderr.log"


@pytest.fixture(scope="module")
def http_server(fleet: LocalFleet, http_log: Path) -> Iterator[str]:
    """`goalfleet mcp --http --port 0` (its start line names the port); holds no token."""
    log = http_log
    env = {k: v for k, v in _env(fleet, "").items() if k != "GOALFLEET_API_TOKEN"}
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "scheduler", "mcp", "--http", "--port", "0"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + 30
        url = None
        while url is None:
            found = re.search(r"serving MCP on (http://\S+/mcp)", log.read_text())
            url = found.group(1) if found else None
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(params=["stdio", "http"])
def connect(request: pytest.FixtureRequest, fleet: LocalFleet) -> Connect:
    """A session of the SDK's client with `goalfleet mcp`, as the holder of a token: over
    stdio the command started with it (the CLI's token); over HTTP as the bearer."""
    if request.param == "stdio":

        @contextlib.asynccontextmanager
        async def over_stdio(token: str) -> AsyncIterator[Client]:
            params = StdioServerParameters(
                command=sys.executable, args=["-m", "scheduler", "mcp"], env=_env(fleet, token)
            )
            async with Client(params, read_timeout_seconds=120) as client:
                yield client

        return over_stdio
    url = request.getfixturevalue("http_server")
    return lambda token: over_http(url, token)


@contextlib.asynccontextmanager
async def over_http(url: str, token: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"}
    timeout = httpx2.Timeout(30, read=300)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, read_timeout_seconds=120) as client:
            yield client


async def call(client: Client, tool: str, args: dict[str, Any], **kw: Any) -> Any:
    """The tool's structured answer; fails on a tool error, showing its text."""
    result = await client.call_tool(tool, args, **kw)
    assert not result.is_error, result.content
    return result.structured_content


async def refused(client: Client, tool: str, args: dict[str, Any]) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error, result.structured_content
    return "\n".join(b.text for b in result.content if b.type == "text")


def steps_asked(api_url: str) -> float:
    """How many times the API was asked for a run's steps (its request counter)."""
    text = httpx.get(f"{api_url}/metrics", headers={"Authorization": f"Bearer {OPS}"}).text
    route = 'route="/v1/runs/{run_id}/steps"'
    lines = [ln for ln in text.splitlines() if ln.startswith("goalfleet_api_requests_total{")]
    return sum(float(ln.rsplit(" ", 1)[1]) for ln in lines if route in ln)


def api_refusal(fleet: LocalFleet, token: str, body: dict[str, Any]) -> tuple[int, str]:
    """What the API itself answers `POST /v1/runs` with `body`: its status and message."""
    headers = {"Authorization": f"Bearer {token}"}
    resp = httpx.post(f"{fleet.api_url}/v1/runs", json=body, headers=headers, timeout=10)
    return resp.status_code, resp.json()["message"]


def test_an_agent_drives_the_fleet(
    connect: Connect, fleet: LocalFleet, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Tools listed with the API's schemas; a run submitted, waited for with progress, its
    steps, a picture and its report read; a flows file run as one batch (by its path over
    stdio, its text over HTTP); a parked question answered."""
    flows = tmp_path / "flows.yaml"
    flows.write_text(FLOWS)
    given = {"path": str(flows)} if request.node.callspec.params["connect"] == "stdio" else {}

    async def scenario() -> None:
        async with connect(OPS) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert tools["submit_run"].input_schema == RunSubmit.model_json_schema()
            assert tools["submit_suite"].input_schema == SuiteSubmit.model_json_schema()
            answers = tools["answer_question"].input_schema["properties"]
            assert set(Answer.model_fields) | {"run_id"} == set(answers)
            devices = await call(client, "list_devices", {"selector": SIGNIN, "state": "alive"})
            assert {d["info"]["id"] for d in devices["devices"]} == {"mcp-ios", "mcp-android"}
            await _run_and_read(client)
            await _flows_file(client, given or {"text": FLOWS})
            await _answer_a_question(client, fleet.api_url)

    anyio.run(scenario)


async def _run_and_read(client: Client) -> None:
    run = await call(client, "submit_run", RUN)
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))

    waited = await call(
        client, "wait_run", {"run_id": run["id"], "timeout_s": 60}, progress_callback=progress
    )
    assert waited["finished"], waited
    assert waited["run"]["status"] == "done", waited["run"]["reason"]
    assert seen, "no progress notification"
    assert [d for d, _, _ in seen] == sorted(d for d, _, _ in seen)
    assert seen[-1][0] >= 1
    assert seen[-1][1] == waited["run"]["request"]["max_steps"]

    steps = (await call(client, "run_steps", {"run_id": run["id"]}))["steps"]
    assert steps[-1]["outcome"] == "done"
    shot = next(s for s in steps if s["screenshot"])
    picture = await client.call_tool("step_picture", {"run_id": run["id"], "index": shot["index"]})
    assert not picture.is_error, picture.content
    [image] = [b for b in picture.content if b.type == "image"]
    assert image.mime_type == "image/png"
    with Image.open(io.BytesIO(base64.b64decode(image.data))) as png:
        assert png.format == "PNG"
        png.load()
        assert png.width > 50
        assert png.height > 50

    report = await client.read_resource(f"goalfleet://runs/{run['id']}/report")
    [text] = report.contents
    assert text.text.startswith(f"# Run {run['id']}: done")
    assert "Welcome" in text.text


async def _flows_file(client: Client, flows: dict[str, str]) -> None:
    batch = await call(client, "submit_flows_file", flows)
    assert batch["total"] == 2
    progressed: list[float] = []

    async def progress(done: float, total: float | None, _message: str | None) -> None:
        assert total == 2
        progressed.append(done)

    args = {"batch_id": batch["id"], "timeout_s": 120}
    done = await call(client, "wait_batch", args, progress_callback=progress)
    assert done["finished"]
    assert done["batch"]["counts"] == {"done": 2}, done["batch"]
    assert progressed[-1] == 2
    runs = (await call(client, "get_batch", {"batch_id": batch["id"]}))["run_states"]
    rows = (await call(client, "run_steps", {"run_id": runs[0]["id"]}))["steps"]
    assert {r["journey_step"] for r in rows} == {1, 2}, rows  # the goal's rows, then the check


async def _answer_a_question(client: Client, api_url: str) -> None:
    """A run that asks a person (the twins app's account chooser); a wait for it given up (the
    call cancelled) stops the server asking the API; the answer sets the run going."""
    await call(client, "forget_memory", {"everything": True})
    asking = await call(client, "submit_run", TWINS_RUN)
    question = await _question(client, asking["id"])
    with anyio.move_on_after(1.5):
        await client.call_tool("wait_run", {"run_id": asking["id"], "timeout_s": 600})
    await anyio.sleep(0.3)  # a poll in flight lands
    asked = steps_asked(api_url)
    assert asked > 0  # the counter is there, and the wait did poll
    await anyio.sleep(1.6)  # three polls' time
    assert steps_asked(api_url) == asked
    assert "Continue as ada" in {c["name"] for c in question["screen"]["candidates"]}
    args = {"run_id": asking["id"], "target": "Continue as ada"}
    answered = await call(client, "answer_question", args)
    # the answer set it going: queued, or already claimed (or ended) by the device's worker
    # by the time the answer's reply reads it back
    assert answered["status"] in {"queued", "running", "done"}, answered
    final = await call(client, "wait_run", {"run_id": asking["id"], "timeout_s": 60})
    assert final["run"]["status"] == "done", final["run"]["reason"]


async def _question(client: Client, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        questions = (await call(client, "list_questions", {}))["questions"]
        mine = [q for q in questions if q["run_id"] == run_id]
        if mine:
            return mine[0]
        run = await call(client, "get_run", {"run_id": run_id})
        # awaiting_answer: parked between the two reads; its question is listed next time
        assert run["status"] in {"queued", "pending", "dispatched", "running", "awaiting_answer"}, (
            run
        )
        assert time.monotonic() < deadline, run
        await anyio.sleep(0.3)


def test_refusals_are_the_apis_own(connect: Connect, fleet: LocalFleet) -> None:
    """A read-only token's submit, a secret value where a reference belongs and a field out of
    bounds are tool errors carrying the API's message; nothing is submitted."""

    async def scenario() -> None:
        async with connect(READER) as client:
            text = await refused(client, "submit_run", RUN)
            status, message = api_refusal(fleet, READER, RUN)
            assert status == 403
            assert message in text
            assert "submit" in text
            listed = await call(client, "list_runs", {"limit": 5})  # reading is allowed
            assert isinstance(listed["runs"], list)
        async with connect(OPS) as client:
            before = len((await call(client, "list_runs", {"limit": 200}))["runs"])
            plain = {**RUN, "secrets": {"password": SECRET}}
            text = await refused(client, "submit_run", plain)
            status, message = api_refusal(fleet, OPS, plain)
            assert status == 422
            assert message in text
            assert "secrets.password is a plaintext value" in text
            assert SECRET not in text
            sensitive = {**RUN, "inputs": {"password": SECRET}}
            text = await refused(client, "submit_run", sensitive)
            assert api_refusal(fleet, OPS, sensitive)[1] in text
            assert "inputs.password looks sensitive" in text
            text = await refused(client, "submit_run", {**RUN, "priority": 99})
            assert "priority" in text
            text = await refused(client, "wait_run", {"run_id": "zz", "timeout_s": 1})
            assert text.startswith("run_id:")
            after = len((await call(client, "list_runs", {"limit": 200}))["runs"])
            assert after == before

    anyio.run(scenario)


def test_http_without_a_bearer_is_refused(http_server: str) -> None:
    """The HTTP server holds no token: a request without one never reaches a tool."""
    resp = httpx.post(http_server, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert resp.status_code == 401
    assert resp.headers["www-authenticate"].startswith("Bearer")


def test_http_reads_no_file_of_the_servers_and_logs_no_secret(
    http_server: str, http_log: Path, tmp_path: Path
) -> None:
    """Over HTTP the caller is whoever reached the port: a flows file is given as text, never
    read from the server's disk by a path the caller names (its problems would quote it). The
    server's log holds no secret value a caller sent."""
    flows = tmp_path / "flows.yaml"
    flows.write_text(FLOWS)

    async def scenario() -> None:
        async with over_http(http_server, OPS) as client:
            text = await refused(client, "submit_flows_file", {"path": str(flows)})
            assert text.startswith("path: a file on the server's machine is read only over stdio")
            await refused(client, "submit_run", {**RUN, "secrets": {"password": SECRET}})
            batch = await call(client, "submit_flows_file", {"text": FLOWS})
            assert batch["total"] == 2
            await call(client, "wait_batch", {"batch_id": batch["id"], "timeout_s": 120})

    anyio.run(scenario)
    assert SECRET not in http_log.read_text()
