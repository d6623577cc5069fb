"""Tables and live views for the fleet's commands (rich).

On a terminal: colours, the terminal's width, live views (the final state printed once when
they end). In a pipe or a file: plain text, full width, one line per record, no box-drawing
lines; a live view prints only its final state, once, ending with a newline.

Every string that comes from a user, a device or a record (goals, device ids, screen names,
reasons, input names, labels, ...) reaches a console as a `Text` (`inert`, `Text.assemble`),
never as markup, with its control characters (ESC, CR, newlines, bidi overrides) shown as
escapes (`visible`): nothing a submitter or an app wrote can style, link or move the cursor in
an operator's terminal.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from scheduler.cli._line import STATUS_STYLE, run_tail
from scheduler.client.api_client import FleetClient
from workers.core.model import RunResult, StepRow
from workers.core.moves import chosen
from workers.core.records import BatchRecord, DeviceState, RunRecord
from workers.core.text import visible

T = TypeVar("T")

PIPE_WIDTH = 10_000
"""A console's width when it is not a terminal: wide enough that no cell is cut or wrapped."""


def inert(text: str) -> Text:
    """`text` as a table cell or a line prints it: a `Text` (never parsed as markup) of its
    `visible` form."""
    return Text(visible(text))


class _PlainConsole(Console):
    """A console for a pipe or a file: its tables print without box-drawing lines (header and
    rows only, one line each)."""

    def print(self, *objects: Any, **kwargs: Any) -> None:  # noqa: ANN401 - Console.print's
        super().print(*(_unboxed(o) for o in objects), **kwargs)


def _unboxed(obj: object) -> object:
    if isinstance(obj, Table):
        obj.box = None
        obj.show_edge = False
        obj.show_lines = False
        obj.pad_edge = False
    elif isinstance(obj, Group):
        for part in obj.renderables:
            _unboxed(part)
    return obj


def plain_console(*, stderr: bool = False) -> Console:
    """A console on stdout (or stderr): the terminal's own on a terminal; otherwise plain,
    `PIPE_WIDTH` wide, and without box lines."""
    console = Console(stderr=stderr)
    if console.is_terminal:
        return console
    return _PlainConsole(stderr=stderr, width=PIPE_WIDTH, no_color=True, highlight=False)


def live_console(*, json: bool) -> Console | None:
    """Where a command's live view goes: stdout, or with `--json` stderr (stdout carries the
    one JSON document), and only while stderr is a terminal (in a pipe nobody watches it)."""
    if not json:
        return plain_console()
    err = plain_console(stderr=True)
    return err if err.is_terminal else None


def _follow(
    console: Console | None,
    poll: Callable[[], tuple[bool, T, RenderableType]],
    poll_s: float,
) -> T:
    """Call `poll` (→ finished?, value, view) every `poll_s` until it says finished. On a
    terminal the view is live (cut to the terminal's height while it runs) and its final state
    is printed once, whole, when it ends; elsewhere only the final state is printed, once; with
    no console, nothing is shown."""
    if console is None or not console.is_terminal:
        while True:
            done, value, view = poll()
            if done:
                if console is not None:
                    console.print(view)
                return value
            time.sleep(poll_s)
    from rich.live import Live  # noqa: PLC0415 - only the live views load it (startup time)

    with Live(
        console=console, refresh_per_second=8, redirect_stdout=False, redirect_stderr=False
    ) as live:
        while True:
            done, value, view = poll()
            if done:
                # Rich redraws a live view whole when it stops; one taller than the terminal
                # would then show twice (the cut one above the whole one). Empty it first and
                # print the final view once, below.
                live.update(Text(""), refresh=True)
                break
            live.update(view)
            time.sleep(poll_s)
    console.print(view)
    return value


def step_cells(s: StepRow, *, detail: bool = False) -> list[str | Text]:
    """A step row's cells (its strings `inert`). `detail` (`goalfleet run`) adds the
    decision's confidence and tenths of a millisecond; the fleet's views stay compact."""
    d = s.decision
    decision = ""
    if d is not None:
        decision = "done" if d.done else "blocked" if d.blocked else d.target
        if (move := chosen(d)) is not None:
            decision += f" {move.name}"  # m1 scroll down: the device's move, not an element
        if d.input != "none":
            decision += f" ← {d.input}"
        if detail:
            decision += f" ({d.confidence:.2f})"
    ms = ".1f" if detail else ".0f"
    action = s.action.shown if s.action is not None else ""
    return [
        str(s.index),
        inert(s.screen),
        inert(decision),
        inert(action),
        s.outcome.value,
        f"{s.snapshot_ms:{ms}}",
        f"{s.decide_ms:{ms}}",
        f"{s.action_ms:{ms}}",
    ]


def steps_table(rows: list[StepRow], title: str | Text = "", *, detail: bool = False) -> Table:
    """A `str` title is markup: a title with user strings in it is a `Text`."""
    table = Table(title=title or None, title_justify="left")
    journey = any(s.journey_step for s in rows)
    cols = ("#", "screen", "decision", "action", "outcome", "snap ms", "decide ms", "act ms")
    for col in (*cols[:1], *(("journey step",) if journey else ()), *cols[1:]):
        table.add_column(col, justify="right" if col.endswith("ms") or col == "#" else "left")
    for s in rows:
        cells = step_cells(s, detail=detail)
        if journey:  # which step of the journey, and who decided the row
            cells.insert(1, inert(f"{s.journey_name} · {s.source}" if s.journey_step else ""))
        table.add_row(*cells)
    return table


def run_line(run: RunRecord) -> Text:
    """A run's status line: its status in colour, the rest as plain text (`_line`)."""
    return Text.assemble(
        (run.status.value, STATUS_STYLE.get(run.status, "")),
        run_tail(run.id, run.device or run.target, run.attempt, run.reason),
    )


def result_table(result: RunResult, run: RunRecord) -> Table:
    where, goal = visible(run.device or "?"), visible(result.goal)
    title = Text(f"{run.id[:8]} on {where}: {goal} → {result.status.value}")
    return steps_table(list(result.steps), title)


def devices_table(devices: list[DeviceState]) -> Table:
    table = Table(title="devices", title_justify="left")
    for col in ("id", "platform", "os", "labels", "up", "busy", "quarantined", "runs", "infra"):
        table.add_column(col)
    for d in devices:
        table.add_row(
            inert(d.info.id),
            d.info.platform.value,
            inert(d.info.os_version),
            inert(",".join(f"{k}={v}" for k, v in sorted(d.info.labels.items()))),
            "yes" if d.alive else "[red]no[/]",
            d.run[:8] if d.run else "",
            inert(d.quarantine_reason or ("yes" if d.quarantined else "")),
            str(d.runs_total),
            str(d.infra_failures),
        )
    return table


def watch_run(
    client: FleetClient, run_id: str, console: Console | None, *, poll_s: float = 0.25
) -> RunRecord:
    """Follow a run until it ends: its status line and its step rows so far."""
    rows: list[StepRow] = []

    def poll() -> tuple[bool, RunRecord, RenderableType]:
        run = client.run(run_id)
        rows.extend(client.steps(run_id, after=rows[-1].index if rows else 0))
        return run.status.terminal, run, Group(run_line(run), steps_table(rows))

    return _follow(console, poll, poll_s)


def watch_batch(
    client: FleetClient, batch_id: str, console: Console | None, *, poll_s: float = 0.3
) -> tuple[BatchRecord, list[RunRecord]]:
    """A progress bar over the batch (a line in a pipe) and one line per run, live."""
    from rich.progress import (  # noqa: PLC0415 - only this view loads it (startup time)
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    progress = Progress(
        TextColumn("[bold]batch {task.fields[batch]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[counts]}"),
        TimeElapsedColumn(),
        console=console,
    )
    batch = client.batch(batch_id)
    task = progress.add_task("batch", total=batch.total, batch=batch_id[:8], counts="")
    t0 = time.monotonic()

    def poll() -> tuple[bool, tuple[BatchRecord, list[RunRecord]], RenderableType]:
        batch = client.batch(batch_id)
        runs = client.batch_runs(batch_id)
        counts = " ".join(f"{k}={v}" for k, v in sorted(batch.counts.items()))
        progress.update(task, completed=batch.finished, counts=counts)
        plain = console is None or not console.is_terminal
        head: RenderableType = progress
        if plain:
            head = Text(
                f"batch {batch_id[:8]}: {batch.finished}/{batch.total} {counts} "
                f"in {time.monotonic() - t0:.1f} s"
            )
        table = Table(show_header=True, box=None)
        for col in ("run", "device", "status", "attempt", "reason"):
            table.add_column(col)
        for r in runs:
            style = STATUS_STYLE.get(r.status, "")
            table.add_row(
                r.id[:8],
                inert(r.device or "-"),
                f"[{style}]{r.status.value}[/]",
                str(r.attempt),
                inert(r.reason if plain else r.reason[:60]),
            )
        return batch.complete, (batch, runs), Group(head, table)

    return _follow(console, poll, poll_s)
