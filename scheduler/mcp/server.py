"""The MCP server: the SDK's low-level `Server` around `scheduler.mcp.tools`, over stdio or
streamable HTTP.

Whose token a call carries:

- stdio: the token the CLI sends (`GOALFLEET_API_TOKEN`), one client for the session: the
  agent that started `goalfleet mcp` acts as its user.
- HTTP: each request's own `Authorization: Bearer <token>` (a goalfleet API token), sent on
  to the API as it came; a request without one is refused (401) before any tool runs. The
  server holds no token of its own, so whoever reaches the port has only the rights of the
  token they present, and the API's roles decide each call as they decide the CLI's.

The low-level server (not `MCPServer`) because a tool's arguments go to the API as they came
(`tools`): `MCPServer` would validate them against a function's signature first and answer
in its own words.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    TextContent,
    TextResourceContents,
)
from mcp_types import Tool as McpTool
from starlette.types import ASGIApp, Receive, Scope, Send

from scheduler.client.api_client import FleetClient
from scheduler.mcp.tools import BY_NAME, TOOLS, Call, Progress, ToolRefusal, report_text

NAME = "goalfleet"
REPORT = "goalfleet://runs/{run_id}/report"
_REPORT = re.compile(r"^goalfleet://runs/([0-9a-f]{6,64})/report$")
RECENT = 20
"""How many of the newest runs' reports `resources/list` names."""
_BEARER = re.compile(r"^[Bb]earer ([\x21-\x7e]{1,512})$")

Clients = Callable[[ServerRequestContext[Any, Any]], "Lent"]


async def _no_progress(_done: float, _total: float | None, _message: str) -> None:
    return None


@dataclass(frozen=True)
class Lent:
    """A client for one call; whether the call closes it (HTTP: each call its own), and
    whether the caller may name files on this machine (stdio only: `tools.Call`)."""

    fleet: FleetClient
    owned: bool
    local_files: bool

    def call(self, progress: Progress = _no_progress) -> Call:
        return Call(self.fleet, progress, local_files=self.local_files)

    def close(self) -> None:
        if self.owned:
            self.fleet.close()


def bearer(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The request's bearer token (HTTP), or None (stdio, or none sent)."""
    request = ctx.request
    headers = getattr(request, "headers", None)
    if headers is None:
        return None
    match = _BEARER.match(headers.get("authorization", ""))
    return match.group(1) if match else None


def stdio_clients(fleet: FleetClient) -> Clients:
    return lambda _ctx: Lent(fleet, owned=False, local_files=True)


def http_clients(api_url: str, *, connect_wait_s: float) -> Clients:
    def lend(ctx: ServerRequestContext[Any, Any]) -> Lent:
        token = bearer(ctx)
        if token is None:  # `RequireBearer` refused it already; this is the second lock
            raise ToolRefusal("send Authorization: Bearer <a goalfleet API token>")
        fleet = FleetClient(api_url, token=token, connect_wait_s=connect_wait_s)
        return Lent(fleet, owned=True, local_files=False)

    return lend


class Face:
    """The server's handlers: the tools of `scheduler.mcp.tools`, and each run's report as a
    resource, each call with the client `clients` lends it."""

    def __init__(self, clients: Clients) -> None:
        self.clients = clients

    async def list_tools(
        self, _ctx: ServerRequestContext[Any, Any], _params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(
            tools=[
                McpTool(
                    name=t.name,
                    description=t.description,
                    input_schema=t.schema(),
                    annotations=t.annotations(),
                )
                for t in TOOLS
            ]
        )

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> CallToolResult:
        tool = BY_NAME.get(params.name)
        if tool is None:
            return refused(f"no tool {params.name!r}; the tools are {', '.join(BY_NAME)}")

        async def progress(done: float, total: float | None, message: str) -> None:
            await ctx.session.report_progress(done, total, message)

        try:
            lent = self.clients(ctx)
        except ToolRefusal as exc:
            return refused(str(exc))
        try:
            return await tool.handler(lent.call(progress), dict(params.arguments or {}))
        except ToolRefusal as exc:
            return refused(str(exc))
        finally:
            lent.close()

    async def list_resources(
        self, ctx: ServerRequestContext[Any, Any], _params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        lent = self.clients(ctx)
        try:
            runs, _ = await lent.call().api(lambda: lent.fleet.runs(limit=RECENT))
        except ToolRefusal as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from None
        finally:
            lent.close()
        return ListResourcesResult(
            resources=[
                Resource(
                    uri=REPORT.format(run_id=r.id),
                    name=f"run {r.id[:8]} {r.status.value}",
                    description=r.request.goal,
                    mime_type="text/markdown",
                )
                for r in runs
            ]
        )

    async def list_templates(
        self, _ctx: ServerRequestContext[Any, Any], _params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        template = ResourceTemplate(
            uri_template=REPORT,
            name="run report",
            description="A run's report: its outcome, where it failed and why, its steps.",
            mime_type="text/markdown",
        )
        return ListResourceTemplatesResult(resource_templates=[template])

    async def read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: ReadResourceRequestParams
    ) -> ReadResourceResult:
        uri = str(params.uri)
        match = _REPORT.match(uri)
        if match is None:
            raise MCPError(INVALID_PARAMS, f"{uri}: no such resource; a report is {REPORT}")
        lent = self.clients(ctx)
        try:
            text = await report_text(lent.call(), match.group(1))
        except ToolRefusal as exc:  # no such run, or not the token's to read
            raise MCPError(INVALID_PARAMS, str(exc)) from None
        finally:
            lent.close()
        return ReadResourceResult(
            contents=[TextResourceContents(uri=uri, mime_type="text/markdown", text=text)]
        )


def build(clients: Clients, version: str) -> Server[Any]:
    face = Face(clients)
    return Server(
        NAME,
        version=version,
        instructions="Drive goalfleet's device fleet: submit goal runs and suites, wait for "
        "them, read their steps and pictures, answer the questions of runs waiting for a person.",
        on_list_tools=face.list_tools,
        on_call_tool=face.call_tool,
        on_list_resources=face.list_resources,
        on_list_resource_templates=face.list_templates,
        on_read_resource=face.read_resource,
    )


def refused(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=text)], is_error=True)


async def serve_stdio(fleet: FleetClient, version: str) -> None:
    server = build(stdio_clients(fleet), version)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


class RequireBearer:
    """Refuse (401) an HTTP request that carries no bearer token, before the MCP app sees it;
    the API judges the token itself."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw = dict(scope["headers"]).get(b"authorization", b"")
            if not _BEARER.match(raw.decode("latin-1")):
                await _unauthorized(send)
                return
        await self.app(scope, receive, send)


async def _unauthorized(send: Send) -> None:
    body = (
        b'{"error": "AUTH", "message": "no bearer token", "fix": "send Authorization: '
        b'Bearer <a goalfleet API token>"}'
    )
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b'Bearer realm="goalfleet"'),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def http_app(api_url: str, *, host: str, path: str, version: str, connect_wait_s: float) -> ASGIApp:
    """The streamable HTTP app (the SDK's; its DNS-rebinding guard on for a loopback host),
    behind `RequireBearer`."""
    server = build(http_clients(api_url, connect_wait_s=connect_wait_s), version)
    return RequireBearer(server.streamable_http_app(streamable_http_path=path, host=host))
