"""The MCP tools: what each one takes, what it does through `FleetClient`, and its answer.

A tool's input schema is its model's JSON Schema. The submits and the answer take the API's
own request models (`RunSubmit`, `BatchSubmit`, `SuiteSubmit`, `Answer`) and hand their
arguments to the API as they came: the API validates them, so a refusal (a field, a secret
value where a reference belongs, a role the token lacks) is the API's message, word for word.
The other tools' arguments (ids, filters, a wait's bound) are checked here against their
models, each refusal naming its field. Every refusal is a tool error (`ToolRefusal`), for the
agent to read and correct.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import anyio
import anyio.to_thread
from mcp_types import CallToolResult, ContentBlock, ImageContent, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from scheduler.client.api_client import ApiError, ApiUnreachableError, FleetClient
from scheduler.service.requests import BatchSubmit, RunFilters, RunSubmit, SuiteSubmit
from scheduler.service.run_ids import MIN_PREFIX
from scheduler.suites.flows import MAX_FILE_BYTES, FlowsFileError, load, parse
from workers.core.model import StepRow
from workers.core.records import Answer, DeviceState, RunRecord, Selector

POLL_S = 0.5
"""How often a wait asks the API (a run's step takes about a second on a real device)."""
MAX_WAIT_S = 1800.0
"""A wait's longest bound: an agent's tool call should not outlive its session."""

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
Progress = Callable[[float, float | None, str], Awaitable[None]]
"""Report progress on the call (`progress`, `total`, a message); a no-op when the client
asked for none."""

_ID = r"^[0-9a-f]+$"
RunId = Annotated[
    str,
    Field(
        min_length=MIN_PREFIX,
        max_length=64,
        pattern=_ID,
        description="A run id, or a unique prefix of 6+ characters of one.",
    ),
]
BatchId = Annotated[
    str,
    Field(
        min_length=MIN_PREFIX,
        max_length=64,
        pattern=_ID,
        description="A batch id, or a unique prefix of 6+ characters of one.",
    ),
]


class ToolRefusal(Exception):  # noqa: N818 - it is what the agent is told: a refusal
    """The call is refused: its text goes back to the agent as a tool error."""


class _Args(BaseModel):
    """A tool's own arguments; each field's docstring is its description in the schema."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class RunRef(_Args):
    run_id: RunId


class BatchRef(_Args):
    batch_id: BatchId


class Step(_Args):
    run_id: RunId
    index: Annotated[int, Field(ge=1, le=10_000)]
    """The step's number, as `run_steps` lists it (from 1)."""


class Steps(_Args):
    run_id: RunId
    after: Annotated[int, Field(ge=0, le=10_000)] = 0
    """Only the steps after this one (0: all of them)."""


class Wait(_Args):
    timeout_s: Annotated[float, Field(gt=0, le=MAX_WAIT_S)] = 300.0
    """Wait at most this long; then the answer is the state so far (`finished: false`)."""


class WaitRun(Wait):
    run_id: RunId


class WaitBatch(Wait):
    batch_id: BatchId


class Devices(_Args):
    selector: Selector = Field(default_factory=Selector)
    """Only devices matching it (a run's selector: platform, os_version, labels)."""
    state: Literal["any", "alive", "idle", "busy", "quarantined"] = "any"


class FlowsFile(_Args):
    """A flows file (docs/suites.md) by its path on the server's machine, or its text."""

    path: Annotated[str, Field(min_length=1, max_length=4096)] | None = None
    text: Annotated[str, Field(min_length=1, max_length=MAX_FILE_BYTES)] | None = None
    only: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=64)]], Field(max_length=100)
    ] = []
    """Just these flows (by name)."""

    @model_validator(mode="after")
    def _one_source(self) -> FlowsFile:
        if (self.path is None) == (self.text is None):
            raise ValueError("give either path (a flows file) or text (its YAML), not both")
        return self


class AnswerArgs(Answer):
    """The API's answer (exactly one of target, ref, done, blocked) to the run's question."""

    run_id: RunId


class Memory(_Args):
    goal: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    """Only the entries of this goal."""


class Forget(_Args):
    """One entry by its key, every entry of a goal, or (`everything`) all of them."""

    key: Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")] | None = None
    goal: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    everything: bool = False

    @model_validator(mode="after")
    def _one(self) -> Forget:
        if (self.key is not None) + (self.goal is not None) + self.everything != 1:
            raise ValueError("give exactly one of key, goal or everything: true")
        return self


class Call:
    """One tool call's means: the client (with the caller's token), its progress, and whether
    the caller may name files on the server's machine (stdio: the caller started the server
    as its user; HTTP: the caller is whoever reached the port, and its files are not here)."""

    def __init__(self, fleet: FleetClient, progress: Progress, *, local_files: bool) -> None:
        self.fleet = fleet
        self.progress = progress
        self.local_files = local_files

    async def api(self, fn: Callable[..., T], *args: Any) -> T:  # noqa: ANN401 - the call's own
        """`fn(*args)` (a blocking client call) on a worker thread; a cancelled tool call
        stops waiting for it at once (the call itself ends within the client's timeout)."""
        try:
            return await anyio.to_thread.run_sync(fn, *args, abandon_on_cancel=True)
        except (ApiError, ApiUnreachableError) as exc:
            raise ToolRefusal(refusal(exc)) from None


def refusal(exc: ApiError | ApiUnreachableError) -> str:
    """What the API said (its message and fix), and each further problem on its own line."""
    lines = [str(exc)]
    if isinstance(exc, ApiError):  # the first problem is the message already
        problems = exc.body.get("problems", [])[1:]
        lines.extend(f"{p.get('field')}: {p.get('problem')} ({p.get('fix')})" for p in problems)
    return "\n".join(lines)


Handler = Callable[[Call, dict[str, Any]], Awaitable[CallToolResult]]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    model: type[BaseModel]
    """Its JSON Schema is the tool's input schema."""
    handler: Handler
    read_only: bool = True

    def schema(self) -> dict[str, Any]:
        return self.model.model_json_schema()

    def annotations(self) -> ToolAnnotations:
        return ToolAnnotations(read_only_hint=self.read_only, open_world_hint=False)


def answer(obj: dict[str, Any], text: str | None = None) -> CallToolResult:
    """A tool's JSON answer: as text (for any client) and as structured content."""
    shown = json.dumps(obj, indent=1, default=str)
    content: list[ContentBlock] = [TextContent(text=shown if text is None else f"{text}\n{shown}")]
    return CallToolResult(content=content, structured_content=obj)


def checked(model: type[M], raw: dict[str, Any]) -> M:
    """`raw` as `model`, or a refusal naming each field that is wrong and why."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            field = ".".join(str(p) for p in err["loc"]) or "arguments"
            lines.append(f"{field}: {str(err['msg']).removeprefix('Value error, ')}")
        raise ToolRefusal("\n".join(lines)) from None


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json")


# -- the fleet ----------------------------------------------------------------------------


async def list_devices(call: Call, raw: dict[str, Any]) -> CallToolResult:
    args = checked(Devices, raw)
    every = await call.api(call.fleet.devices)
    states: dict[str, Callable[[DeviceState], bool]] = {
        "any": lambda _: True,
        "alive": lambda d: d.alive,
        "idle": lambda d: d.idle,
        "busy": lambda d: d.busy,
        "quarantined": lambda d: d.quarantined,
    }
    keep = states[args.state]
    shown = [_dump(d) for d in every if args.selector.matches(d.info) and keep(d)]
    return answer({"devices": shown})


# -- submits: the API validates -----------------------------------------------------------


async def submit_run(call: Call, raw: dict[str, Any]) -> CallToolResult:
    run = await call.api(call.fleet.submit_run, raw)
    return answer(_dump(run), f"run {run.id} {run.status.value}")


async def submit_batch(call: Call, raw: dict[str, Any]) -> CallToolResult:
    batch = await call.api(call.fleet.submit_batch, raw)
    return answer(_dump(batch), f"batch {batch.id}: {batch.total} runs")


async def submit_flows_file(call: Call, raw: dict[str, Any]) -> CallToolResult:
    """The flows file, read and checked as `goalfleet suite run` does, then the same batch
    submit (`POST /v1/batches`): whatever the file format holds goes through as it does."""
    args = checked(FlowsFile, raw)
    if args.path is not None and not call.local_files:
        raise ToolRefusal(
            "path: a file on the server's machine is read only over stdio; give the flows "
            "file's YAML as text"
        )
    try:
        if args.path is not None:
            path = args.path
            flows = await anyio.to_thread.run_sync(lambda: load(Path(path).expanduser()))
        else:
            flows = parse(args.text or "", source="<text>")
        if args.only:
            flows = flows.only(args.only)
    except FlowsFileError as exc:
        raise ToolRefusal("\n".join(f"{exc.source}:{p}" for p in exc.problems)) from None
    except (ValueError, OSError) as exc:  # `only` naming no flow; a file that cannot be read
        raise ToolRefusal(str(exc)) from None
    batch = await call.api(call.fleet.submit_batch, flows.body)
    return answer(_dump(batch), f"batch {batch.id}: suite {flows.suite}, {batch.total} runs")


# -- runs and batches ---------------------------------------------------------------------


async def get_run(call: Call, raw: dict[str, Any]) -> CallToolResult:
    args = checked(RunRef, raw)
    return answer(await call.api(call.fleet.run_json, args.run_id))


async def get_batch(call: Call, raw: dict[str, Any]) -> CallToolResult:
    args = checked(BatchRef, raw)
    batch = await call.api(call.fleet.batch, args.batch_id)
    runs = await call.api(call.fleet.batch_runs, batch.id)
    return answer({**_dump(batch), "run_states": [_brief(r) for r in runs]})


def _brief(run: RunRecord) -> dict[str, Any]:
    return {
        "id": run.id,
        "status": run.status.value,
        "device": run.device,
        "flow": run.flow,
        "reason": run.reason,
    }


async def list_runs(call: Call, raw: dict[str, Any]) -> CallToolResult:
    args = checked(RunFilters, raw)
    filters = args.model_dump(mode="json", exclude_none=True)
    runs, cursor = await call.api(lambda: call.fleet.runs(**filters))
    return answer({"runs": [_brief(r) for r in runs], "next": cursor})


async def wait_run(call: Call, raw: dict[str, Any]) -> CallToolResult:
    """Poll the run until it ends or the bound passes, reporting each new step as progress
    (of the run's `max_steps`). A cancelled call stops at its next await."""
    args = checked(WaitRun, raw)
    deadline = time.monotonic() + args.timeout_s
    seen = -1
    while True:
        run = await call.api(call.fleet.run, args.run_id)
        steps = len(await call.api(call.fleet.steps, run.id))
        if steps != seen:
            seen = steps
            total = float(run.request.max_steps)
            await call.progress(float(steps), total, f"{run.status.value}, {steps} steps")
        if run.status.terminal or time.monotonic() >= deadline:
            break
        await anyio.sleep(POLL_S)
    done = run.status.terminal
    text = f"run {run.id} {run.status.value}" + ("" if done else f" after {args.timeout_s:g} s")
    return answer({"finished": done, "run": _dump(run)}, text)


async def wait_batch(call: Call, raw: dict[str, Any]) -> CallToolResult:
    """Poll the batch until every run has ended or the bound passes, reporting the runs
    finished (of its total) as progress."""
    args = checked(WaitBatch, raw)
    deadline = time.monotonic() + args.timeout_s
    seen = -1
    while True:
        batch = await call.api(call.fleet.batch, args.batch_id)
        if batch.finished != seen:
            seen = batch.finished
            note = f"{batch.finished} of {batch.total} runs finished"
            await call.progress(float(batch.finished), float(batch.total), note)
        if batch.complete or time.monotonic() >= deadline:
            break
        await anyio.sleep(POLL_S)
    runs = await call.api(call.fleet.batch_runs, batch.id)
    text = f"batch {batch.id}: {batch.finished} of {batch.total} runs finished"
    shown = {**_dump(batch), "run_states": [_brief(r) for r in runs]}
    return answer({"finished": batch.complete, "batch": shown}, text)


async def cancel_run(call: Call, raw: dict[str, Any]) -> CallToolResult:
    args = checked(RunRef, raw)
    run = await call.api(call.fleet.cancel, args.run_id)
    return answer(_dump(run), f"run {run.id} {run.status.value}")


# -- steps, pictures, the report ----------------------------------------------------------


async def run_steps(call: Call, raw: dict[str, Any]) -> CallToolResult:
    args = checked(Steps, raw)
    rows = await call.api(lambda: call.fleet.steps(args.run_id, after=args.after))
    return answer({"steps": [_dump(r) for r in rows]})


async def step_picture(call: Call, raw: dict[str, Any]) -> CallToolResult:
    """The step's picture (PNG) as image content: the screen the decider saw, secrets
    masked, the element it acted on marked."""
    args = checked(Step, raw)
    png = await call.api(call.fleet.screenshot, args.run_id, args.index)
    shown = base64.b64encode(png).decode()
    return CallToolResult(
        content=[
            TextContent(text=f"step {args.index} of run {args.run_id}"),
            ImageContent(data=shown, mime_type="image/png"),
        ]
    )


async def run_report(call: Call, raw: dict[str, Any]) -> CallToolResult:
    args = checked(RunRef, raw)
    text = await report_text(call, args.run_id)
    return CallToolResult(content=[TextContent(text=text)])


async def report_text(call: Call, run_id: str) -> str:
    """A run's report (Markdown): its outcome and why, then its steps (the resource
    `goalfleet://runs/{id}/report` and the `run_report` tool)."""
    run = await call.api(call.fleet.run, run_id)
    rows = await call.api(call.fleet.steps, run.id)
    return render_report(run, rows)


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_report(run: RunRecord, rows: list[StepRow]) -> str:
    lines = [
        f"# Run {run.id}: {run.status.value}",
        "",
        f"- goal: {_cell(run.request.goal)}",
        f"- device: {run.device or run.target or '(not yet)'}",
    ]
    if run.suite:
        lines.append(f"- suite: {run.suite}, flow {run.flow}, attempt {run.retry + 1}")
    if run.reason:
        lines.append(f"- reason: {_cell(run.reason)}")
    failed = [r for r in rows if r.error]
    if failed:
        last = failed[-1]
        lines.append(f"- failed at step {last.index} on {_cell(last.screen)}: {_cell(last.error)}")
    lines += ["", "| # | screen | action | outcome | picture |", "|---|---|---|---|---|"]
    for r in rows:
        action = r.action.shown if r.action is not None else ""
        picture = "yes" if r.screenshot else _cell(r.screenshot_note or "no")
        lines.append(
            f"| {r.index} | {_cell(r.screen)} | {_cell(action)} | {r.outcome.value} | {picture} |"
        )
    return "\n".join(lines) + "\n"


# -- questions and memory -----------------------------------------------------------------


async def list_questions(call: Call, raw: dict[str, Any]) -> CallToolResult:
    checked(_Args, raw)
    questions = await call.api(call.fleet.questions)
    return answer({"questions": [_dump(q) for q in questions]})


async def answer_question(call: Call, raw: dict[str, Any]) -> CallToolResult:
    body = dict(raw)
    run_id = checked(RunRef, {"run_id": body.pop("run_id", None)}).run_id
    run = await call.api(call.fleet.answer, run_id, body)
    return answer(_dump(run), f"run {run.id} {run.status.value}")


async def list_memory(call: Call, raw: dict[str, Any]) -> CallToolResult:
    args = checked(Memory, raw)
    entries = await call.api(lambda: call.fleet.memory(goal=args.goal))
    return answer({"entries": [_dump(e) for e in entries]})


async def forget_memory(call: Call, raw: dict[str, Any]) -> CallToolResult:
    args = checked(Forget, raw)
    if args.key is not None:
        await call.api(call.fleet.forget, args.key)
        return answer({"forgotten": 1})
    n = await call.api(lambda: call.fleet.forget_many(goal=args.goal))
    return answer({"forgotten": n})


TOOLS: tuple[Tool, ...] = (
    Tool(
        "list_devices",
        "The fleet's devices (platform, OS, model, labels; alive, idle, busy, quarantined), "
        "those matching `selector` and `state`.",
        Devices,
        list_devices,
    ),
    Tool(
        "submit_run",
        "Submit one goal run: to an exact `device`, or to any idle device matching "
        '`selector`. Secrets are references (`{"ref": "env:NAME"}`), never values.',
        RunSubmit,
        submit_run,
        read_only=False,
    ),
    Tool(
        "submit_batch",
        "One goal on every device matching `selector` (or `count` runs on any of them), as "
        "one batch.",
        BatchSubmit,
        submit_batch,
        read_only=False,
    ),
    Tool(
        "submit_suite",
        "A suite: its flows over their device matrices, as one batch (a flows file's JSON).",
        SuiteSubmit,
        submit_batch,
        read_only=False,
    ),
    Tool(
        "submit_flows_file",
        "A flows file (docs/suites.md), by `path` on the server's machine or as `text`, "
        "checked as `goalfleet suite run` checks it, then submitted as one batch.",
        FlowsFile,
        submit_flows_file,
        read_only=False,
    ),
    Tool("get_run", "A run: its status, device, reason and result.", RunRef, get_run),
    Tool("get_batch", "A batch: its counts and each run's status.", BatchRef, get_batch),
    Tool(
        "wait_run",
        "Wait (at most `timeout_s`) for a run to end, reporting its steps as progress.",
        WaitRun,
        wait_run,
    ),
    Tool(
        "wait_batch",
        "Wait (at most `timeout_s`) for a batch to finish, reporting its finished runs as "
        "progress.",
        WaitBatch,
        wait_batch,
    ),
    Tool(
        "list_runs", "Runs, newest first, filtered; page on with `cursor`.", RunFilters, list_runs
    ),
    Tool("cancel_run", "Cancel a run.", RunRef, cancel_run, read_only=False),
    Tool(
        "run_steps",
        "A run's steps: each screen, decision, action and outcome.",
        Steps,
        run_steps,
    ),
    Tool(
        "step_picture",
        "A step's picture (PNG): the screen as the decider saw it, secrets masked.",
        Step,
        step_picture,
    ),
    Tool(
        "run_report",
        "A run's report (Markdown): its outcome, where it failed and why, its steps.",
        RunRef,
        run_report,
    ),
    Tool(
        "list_questions",
        "Runs waiting for a person: each question's screen, candidates and deadline.",
        _Args,
        list_questions,
    ),
    Tool(
        "answer_question",
        "Answer a parked run's question with exactly one of target (a candidate's name), ref, "
        "done or blocked; the answer is remembered for the whole fleet.",
        AnswerArgs,
        answer_question,
        read_only=False,
    ),
    Tool("list_memory", "Remembered decisions (of one goal).", Memory, list_memory),
    Tool(
        "forget_memory",
        "Forget remembered decisions: one by `key`, a goal's, or `everything` (admin).",
        Forget,
        forget_memory,
        read_only=False,
    ),
)
BY_NAME = {t.name: t for t in TOOLS}
