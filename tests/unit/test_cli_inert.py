"""What the CLI prints of user- and device-supplied strings is inert: Rich markup in a goal, a
typed value or a device id prints as typed (no style, no hyperlink, no crash on a stray
`[/bold]`), and control characters print as their escapes (no ESC, CR or bidi override reaches
the terminal). In a pipe, tables are plain: no box-drawing lines, one line per row."""

from __future__ import annotations

import io
import time

from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from rich.text import Text

from scheduler.cli._render import (
    PIPE_WIDTH,
    _PlainConsole,
    devices_table,
    inert,
    result_table,
    run_line,
    steps_table,
)
from workers.core.model import (
    Action,
    ActionKind,
    Decision,
    Outcome,
    Platform,
    RunResult,
    RunStatus,
    StepRow,
)
from workers.core.records import DeviceInfo, DeviceState, RunRecord
from workers.core.request import GoalRunRequest
from workers.core.text import visible

MARKUP = "[bold red]PWNED[/bold red] [link=http://evil.example]click[/link]"
ESCAPE = "\x1b[31mred\x1b[0m\r\x1b]8;;http://evil.example\x1b\\x\u202e"
HOSTILE = f"{MARKUP} {ESCAPE} [/bold]"


def test_visible_shows_control_characters_as_escapes() -> None:
    assert visible("a\x1b[31mb\nc\rd\u202ee\x9bf") == "a\\x1b[31mb\\nc\\rd\\u202ee\\x9bf"
    assert visible("ada@example.com → Welcome ● é") == "ada@example.com → Welcome ● é"


@given(st.text())
def test_inert_text_prints_exactly_the_visible_string(text: str) -> None:
    """Whatever the string (markup, a stray `[/bold]`, a trailing backslash), a console prints
    it as itself with its control characters escaped."""
    console = Console(file=io.StringIO(), width=PIPE_WIDTH, color_system=None)
    console.print(inert(text), end="", soft_wrap=True)
    file = console.file
    assert isinstance(file, io.StringIO)
    shown = file.getvalue()
    assert shown == visible(text)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in shown)


def _row(index: int, value: str) -> StepRow:
    return StepRow(
        index=index,
        screen=f"Sign in {HOSTILE}",
        refs_generation="s1",
        candidates=3,
        decision=Decision(target="e2", input=HOSTILE, confidence=0.9, reason=HOSTILE),
        action=Action(kind=ActionKind.FILL, ref="e2", pinned="@e2~s1", shown_value=value),
        outcome=Outcome.ACTED,
    )


def _record() -> RunRecord:
    rows = (_row(1, HOSTILE), _row(2, "ada@example.com"))
    result = RunResult(goal=HOSTILE, status=RunStatus.DONE, reason=HOSTILE, steps=rows)
    return RunRecord(
        id="0123456789abcdef0123456789abcdef",
        request=GoalRunRequest(goal=HOSTILE),
        status=RunStatus.DONE,
        device=f"ios-1{ESCAPE}",
        submitted_at=time.time(),
        reason=HOSTILE,
        result=result,
    )


def _device() -> DeviceState:
    info = DeviceInfo(id="ios-1", platform=Platform.IOS, os_version="17.5", labels={"k": HOSTILE})
    return DeviceState(info=info, alive=True, quarantined=True, quarantine_reason=HOSTILE)


def _render(console: Console) -> str:
    run = _record()
    assert run.result is not None
    console.print(run_line(run))
    console.print(result_table(run.result, run))
    console.print(steps_table(list(run.result.steps), "steps"))
    console.print(devices_table([_device()]))
    file = console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue()


def test_a_terminal_gets_no_link_and_no_escape_from_user_strings() -> None:
    out = _render(Console(file=io.StringIO(), force_terminal=True, width=400, color_system=None))
    assert "\x1b" not in out  # no colours asked for: every ESC would be a user's
    assert "\u202e" not in out
    assert MARKUP in out
    assert "\\x1b[31mred" in out
    styled = _render(
        Console(file=io.StringIO(), force_terminal=True, width=400, color_system="truecolor")
    )
    assert "\x1b]8;" not in styled  # no hyperlink (OSC 8)
    assert "evil.example" in styled
    assert MARKUP in Text.from_ansi(styled).plain


def test_a_pipe_gets_plain_tables_one_line_per_row() -> None:
    out = _render(_PlainConsole(file=io.StringIO(), width=PIPE_WIDTH, no_color=True))
    assert "\x1b" not in out
    assert not any(0x2500 <= ord(c) <= 0x257F for c in out), out  # no box-drawing
    lines = out.splitlines()
    # each step row is one line, starting with its index and the whole screen
    assert sum(line.startswith(f"1  Sign in {MARKUP}") for line in lines) == 2, out
    assert any(line.startswith("ios-1  ios") for line in lines), out
