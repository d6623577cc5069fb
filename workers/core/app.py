"""The app under test and how it is reset before a run: in the run request (what the caller
asks for), in the worker's configuration (what its device serves), and in the step rows and the
result (what the run actually drove).

A run request names the app by id (a bundle id, an Android package, or the name a Linux worker
gives its app) and version; it never carries a command: a Linux worker's app command is its
own configuration (`goalfleet worker --app-command`), so no request can start a program on a
worker host. The result and every step row carry the `AppUnderTest` the worker drove, command
included.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from workers.core.errors import ConfigError

APP_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$"
MAX_COMMAND_CHARS = 1000


class ResetPolicy(StrEnum):
    """What is done to the app before a run, so every run starts from its first screen."""

    RELAUNCH = "relaunch"  # stop the app and start it again (agent-device `open --relaunch`)
    CLEAR_STATE = "clear-state"  # clear its data, then relaunch (`settings clear-app-state`)
    REINSTALL = "reinstall"  # install it again from its binary, then relaunch (`reinstall`)
    NONE = "none"  # leave it as the last run left it


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AppRequest(_Frozen):
    """The app a run asks for (`"app": {"id": "com.example.app", "version": "2.1"}`)."""

    id: Annotated[str, Field(pattern=APP_ID_PATTERN)]
    version: Annotated[str, Field(max_length=100)] = ""
    """When given, the worker's app must be this version, else the run ends `errored`."""


class AppConfig(_Frozen):
    """The app a worker's device serves: its id, the command that starts it (Linux), its
    version, the binary a reinstall installs (iOS/Android), and the reset a run gets when its
    request names none."""

    id: Annotated[str, Field(pattern=APP_ID_PATTERN)] = "app"
    command: Annotated[str, Field(max_length=MAX_COMMAND_CHARS)] = ""
    version: Annotated[str, Field(max_length=100)] = ""
    path: Annotated[str, Field(max_length=MAX_COMMAND_CHARS)] = ""
    reset: ResetPolicy = ResetPolicy.RELAUNCH


class AppUnderTest(_Frozen):
    """What a run drove: in its result and in each of its step rows."""

    id: str = ""
    command: str = ""
    version: str = ""
    reset: ResetPolicy = ResetPolicy.NONE


def app_for_run(
    served: AppConfig | None, asked: AppRequest | None, reset: ResetPolicy | None
) -> AppUnderTest | None:
    """The app a run drives and the reset it gets: the request's app checked against the one
    the worker serves (its id and, when asked, its version), the request's reset or else the
    worker's. `ConfigError` names the field and the fix; None: no app to speak of (the worker
    attaches to whatever runs and nothing is reset)."""
    if served is None:
        if asked is None:
            if reset not in {None, ResetPolicy.NONE}:
                raise ConfigError(
                    f"reset {reset} needs an app, and this worker serves none",
                    hint="name it in the request (app.id) or start the worker with --app-id "
                    "(and --app-command on Linux)",
                )
            return None
        return AppUnderTest(id=asked.id, version=asked.version, reset=reset or ResetPolicy.RELAUNCH)
    if asked is not None and asked.id != served.id:
        raise ConfigError(
            f"app.id {asked.id!r} is not the app this worker serves ({served.id!r})",
            hint="send the run to a device that serves it, or leave app out",
        )
    if asked is not None and asked.version and asked.version != served.version:
        raise ConfigError(
            f"app.version {asked.version!r}: this worker serves {served.id} "
            f"{served.version or '(no version given)'}",
            hint="send the run to a device with that version, or leave app.version out",
        )
    return AppUnderTest(
        id=served.id, command=served.command, version=served.version, reset=reset or served.reset
    )
