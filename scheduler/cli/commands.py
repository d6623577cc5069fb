"""The `goalfleet` subcommands: each one's module in `scheduler.cli` and its one-line help.

`goalfleet --help` lists them from here alone; a command's module (and what it imports:
pydantic, httpx, redis, rich, Celery) is imported only when that command runs or shows its
own help (`scheduler.cli.main.build_parser`). Nothing here imports anything.
"""

from __future__ import annotations

COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("run", "run one goal on one device and print its step table"),
    "demo": ("demo", "bring up a local fleet of sim devices and run a batch"),
    "submit": ("submit", "submit a goal run (or a batch) to the fleet"),
    "status": ("status", "show a run (or --batch ID)"),
    "runs": ("runs", "list runs, newest first"),
    "watch": ("watch", "follow a run (or --batch ID) live until it ends"),
    "steps": ("steps", "print a run's step rows"),
    "cancel": ("cancel", "cancel a run"),
    "devices": ("devices", "list the fleet's devices"),
    "eval": ("eval", "measure deciders on the decide-step eval corpus"),
    "history": ("history", "pass and flaky rates, step times, devices that stand out"),
    "db": ("history", "the history database: upgrade makes or updates its tables"),
    "memory": ("memory", "list, show or forget remembered decisions"),
    "questions": ("questions", "list runs waiting for a person"),
    "answer": ("questions", "answer a run's question"),
    "suite": ("suite", "validate or run a flows file"),
    "report": ("report", "JUnit and HTML reports of a batch"),
    "schedule": ("schedule", "run a flows file on a schedule"),
    "api": ("api", "serve the HTTP API"),
    "mcp": ("mcp", "serve the fleet to coding agents over MCP (stdio or HTTP)"),
    "worker": ("worker", "run the worker for one device"),
    "scheduler": ("scheduler", "run the dispatcher and recurring schedules"),
}
"""Command name → (its module under `scheduler.cli`, its help), in `--help`'s order; one
module may hold several commands (`questions` and `answer`)."""


def summary(command: str) -> str:
    """The command's one-line help, as `goalfleet --help` lists it."""
    return COMMANDS[command][1]
