"""A run's reset policy as agent-device commands, for iOS simulators and Android emulators:
what is sent before the session's `open`, and the flags added to it.

| policy | before `open <app>` | `open` flags |
| --- | --- | --- |
| `none` | nothing | none (a running app is reused) |
| `relaunch` | nothing | `relaunch: true` (`open --relaunch`: terminated, then launched) |
| `clear-state` | `settings clear-app-state <app>` | `relaunch: true` |
| `reinstall` | `reinstall <app> <binary>` | `relaunch: true` |

The commands before `open` carry the device selector (`platform`, `udid`/`serial`), as the
CLI's `--platform ios --udid …` would. Pinned by tests/unit/test_agent_device_reset.py against
agent-device 0.21.5's wire; not run against a simulator or an emulator here (no Mac, no KVM).
The Linux desktop has no app install to speak of: its worker starts the app command itself
(`linux_app`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from workers.core.app import AppUnderTest, ResetPolicy
from workers.core.errors import ConfigError

__all__ = ["NO_RESET", "DaemonCommand", "ResetPlan", "reset_plan"]

DaemonCommand = tuple[str, tuple[str, ...], Mapping[str, Any]]
"""A daemon request: command, positionals, flags (the selector is added when it is sent)."""


@dataclass(frozen=True)
class ResetPlan:
    before_open: tuple[DaemonCommand, ...] = ()
    open_flags: Mapping[str, Any] = field(default_factory=dict)


NO_RESET = ResetPlan()


def reset_plan(app: AppUnderTest | None, *, binary: str = "") -> ResetPlan:
    """The commands that give a run `app` in the state its reset asks for (see the table)."""
    if app is None or app.reset is ResetPolicy.NONE:
        return NO_RESET
    if not app.id:
        raise ConfigError(f"reset {app.reset} needs the app's id (app.id or --app-id)")
    relaunch = {"relaunch": True}
    if app.reset is ResetPolicy.RELAUNCH:
        return ResetPlan(open_flags=relaunch)
    if app.reset is ResetPolicy.CLEAR_STATE:
        return ResetPlan((("settings", ("clear-app-state", app.id), {}),), relaunch)
    if not binary:
        raise ConfigError(
            f"reset reinstall of {app.id} needs the app's binary",
            hint="start the worker with --app-path <.app, .ipa or .apk>",
        )
    return ResetPlan((("reinstall", (app.id, binary), {}),), relaunch)
