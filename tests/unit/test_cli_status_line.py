"""`goalfleet status` prints a run from its JSON without rich (`scheduler.cli._line`): the same
line rich prints of the same record (`_render.run_line`), in a pipe and on a terminal, its
user strings inert; `--json` prints what the API answered, which is the record's own JSON."""

from __future__ import annotations

import io
import time

import pytest
from rich.console import Console
from test_cli_inert import ESCAPE, HOSTILE, _record

from scheduler.cli._line import STATUS_STYLE, colours, status_line
from scheduler.cli._render import PIPE_WIDTH, run_line
from scheduler.client.api_client import FleetClient
from scheduler.client.function_transport import FunctionTransport
from scheduler.client.transport import Request, Response
from workers.core.model import RunStatus
from workers.core.records import RunRecord
from workers.core.request import GoalRunRequest


def _rich(run: RunRecord, *, terminal: bool) -> str:
    """What rich prints of `run_line(run)`: on a terminal in colour, else plain."""
    console = Console(
        file=io.StringIO(),
        width=PIPE_WIDTH,
        force_terminal=terminal,
        color_system="standard" if terminal else None,
        highlight=False,
    )
    console.print(run_line(run))
    file = console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue()


def _runs() -> list[RunRecord]:
    ended = _record()  # hostile device, reason and goal; a result
    queued = RunRecord(
        id="fedcba9876543210fedcba9876543210",
        request=GoalRunRequest(goal="Sign in"),
        target=f"ios-2{ESCAPE}",
        submitted_at=time.time(),
    )
    pending = queued.model_copy(update={"target": None, "status": RunStatus.RUNNING})
    return [ended, queued, pending]


@pytest.mark.parametrize("index", [0, 1, 2])
@pytest.mark.parametrize("where", ["pipe", "terminal"])
def test_the_line_from_json_is_the_line_rich_prints(index: int, where: str) -> None:
    run, terminal = _runs()[index], where == "terminal"
    line = status_line(run.model_dump(mode="json"), colour=terminal)
    assert line + "\n" == _rich(run, terminal=terminal)


def test_user_strings_in_the_line_print_as_their_escapes() -> None:
    line = status_line(_record().model_dump(mode="json"), colour=False)
    assert "\x1b" not in line
    assert "\u202e" not in line
    assert "\\x1b[31mred" in line
    assert HOSTILE.split()[0] in line  # markup as typed: nothing here parses it


def test_the_colours_name_statuses_there_are() -> None:
    assert set(STATUS_STYLE) <= {s.value for s in RunStatus}
    assert STATUS_STYLE[RunStatus.MAX_STEPS] == "magenta"


def test_colour_only_on_a_terminal_and_never_with_no_color(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    for name in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    assert colours(Tty())
    assert not colours(io.StringIO())
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert colours(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not colours(Tty())
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("TERM", "dumb")
    assert not colours(Tty())


def test_run_json_is_the_answer_as_sent_and_the_records_own_json() -> None:
    """What `status --json` prints (the API's answer) is what it printed when it built the
    record first: `RunRecord`'s JSON round-trips through the model unchanged."""
    sent = _record().model_dump(mode="json")

    def handler(request: Request) -> Response:
        assert request.target == "/v1/runs/0123456789ab"
        return Response.of_json(200, sent)

    with FleetClient("http://api.test", transport=FunctionTransport(handler)) as client:
        got = client.run_json("0123456789ab")
        record = client.run("0123456789ab")
    assert got == sent
    assert record.model_dump(mode="json") == got


@pytest.mark.parametrize("status", list(RunStatus))
def test_each_status_is_coloured_as_rich_colours_it(status: RunStatus) -> None:
    run = _runs()[1].model_copy(update={"status": status})
    assert status_line(run.model_dump(mode="json"), colour=True) + "\n" == _rich(run, terminal=True)
