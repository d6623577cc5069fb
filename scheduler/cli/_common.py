"""What the fleet's subcommands share: settings (read once here, the composition root), the
API client, errors reported as one line with an exit code, and printing.

Exit codes (every command): 0 success; 1 the run (or eval) ended but not as hoped; 2 bad input
(a flag, a setting, or a 4xx from the API); 3 something needed is unavailable (the API, Redis,
a device's tools on this host); 130 interrupted (Ctrl-C).

A command's body is a function of what it needs, wrapped into the `func` argparse calls:

    def register(sub):
        p = add_client_command(sub, "cancel", main, help="cancel a run")
        p.add_argument("id")

    def main(client: FleetClient, args: argparse.Namespace) -> int: ...

    @with_settings("api")
    def main(settings: Settings, args: argparse.Namespace) -> int: ...
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from scheduler.client.api_client import ApiError, FleetClient
from scheduler.errors import UnavailableError
from scheduler.service.run_ids import MIN_PREFIX, RUN_ID_LENGTH
from workers.core.errors import ConfigError, GoalfleetError
from workers.core.text import visible
from workers.settings import Settings
from workers.urls import HTTP_SCHEMES, checked_url

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_UNAVAILABLE = 3
EXIT_INTERRUPTED = 130

Command = Callable[[argparse.Namespace], int]
"""What `register` sets as `func`: the parsed flags in, the exit code out."""
SettingsAction = Callable[[Settings, argparse.Namespace], int]
ClientAction = Callable[[FleetClient, argparse.Namespace], int]


def load_settings() -> Settings:
    try:
        return Settings()
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "settings"
        raise ConfigError(
            f"GOALFLEET_{field.upper()}: {first['msg'].removeprefix('Value error, ')}"
        ) from None


def add_api_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--api", default=None, help="API base URL (default: GOALFLEET_API_URL)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")


def add_goal_input_flags(p: argparse.ArgumentParser, *, ref_help: str) -> None:
    """`--input`, `--secret` and `--decider`, as `run` and `submit` take them (`ref_help`:
    where the command resolves a secret's `env:VAR` reference)."""
    p.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a plain input the run may type (repeatable)",
    )
    p.add_argument("--secret", action="append", default=[], metavar="NAME=env:VAR", help=ref_help)
    p.add_argument(
        "--plain-field",
        action="append",
        default=[],
        metavar="NAME",
        help="allow secret NAME into a plain text field (a one-time code); still redacted "
        "everywhere (repeatable)",
    )
    p.add_argument("--decider", default="rules", help="rules | <provider>/<model> (default: rules)")


def plain_fields(args: argparse.Namespace, secrets: Iterable[str]) -> frozenset[str]:
    """The `--plain-field` names, each one of the run's `--secret` names."""
    names = frozenset(args.plain_field)
    unknown = sorted(names - set(secrets))
    if unknown:
        raise ConfigError(
            f"--plain-field {unknown[0]}: no --secret of that name; give the secret first "
            f"(--secret {unknown[0]}=env:VAR --plain-field {unknown[0]})"
        )
    return names


def add_log_args(p: argparse.ArgumentParser) -> None:
    """`--loglevel` and `--log-format`, for the long-running processes (api, scheduler, worker)."""
    p.add_argument(
        "--loglevel",
        default="INFO",
        help="DEBUG, INFO, WARNING, ERROR or CRITICAL (default: INFO)",
    )
    p.add_argument(
        "--log-format",
        choices=["auto", "json", "console"],
        default=None,
        help="default: GOALFLEET_LOG_FORMAT",
    )


def client_token(settings: Settings) -> str | None:
    """The token the CLI sends the API: GOALFLEET_API_TOKEN, else the API's first own."""
    token = settings.api_token.get_secret_value() if settings.api_token else None
    if token is None and settings.api_tokens:
        token = settings.named_tokens()[0][1]
    return token


def make_client(settings: Settings, args: argparse.Namespace) -> FleetClient:
    token = client_token(settings)
    api = settings.api_url
    if args.api is not None:
        try:
            api = checked_url(args.api, HTTP_SCHEMES)
        except ValueError as exc:
            raise ConfigError(f"--api: {exc}") from None
    return FleetClient(api, token=token, connect_wait_s=settings.api_wait_s)


def version() -> str:
    import importlib.metadata  # noqa: PLC0415 - only the servers' start lines need it

    try:
        return importlib.metadata.version("goalfleet")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "unknown"


def start_line(command: str, message: str) -> None:
    """What a long-running process prints once as it starts (stderr, with the logs):
    `goalfleet <command> <version>: <message>`."""
    sys.stderr.write(f"goalfleet {command} {version()}: {message}\n")
    sys.stderr.flush()


def error_line(command: str, message: str) -> None:
    """`goalfleet <command>: <message>` on stderr, one line whatever the width (no wrapping),
    its control characters shown as escapes (a message may quote what a user typed)."""
    sys.stderr.write(f"goalfleet {command}: {visible(message)}\n")
    sys.stderr.flush()


def report(exc: GoalfleetError, command: str) -> int:
    """One line for `exc` (its message and hint; an API error's other problems, if any, one
    line each below it) and the exit code it means."""
    error_line(command, str(exc))
    if isinstance(exc, ApiError):
        for p in exc.body.get("problems", [])[1:]:  # the first is the message already
            line = f"{p.get('field')}: {p.get('problem')} — {p.get('fix')}"
            sys.stderr.write(f"  {visible(line)}\n")
        return EXIT_UNAVAILABLE if exc.status == 503 else EXIT_BAD_INPUT  # noqa: PLR2004
    if isinstance(exc, ConfigError):
        return EXIT_BAD_INPUT
    return EXIT_UNAVAILABLE


def run_id_arg(given: str) -> str:
    """A run id as typed: the whole id or a prefix of `MIN_PREFIX`+ characters (the API
    resolves a prefix, and lists the matches of an ambiguous one)."""
    if len(given) < MIN_PREFIX:
        raise ConfigError(
            f"run id {given!r}: give at least {MIN_PREFIX} characters of it "
            f"(tables show 8, the whole id has {RUN_ID_LENGTH})"
        )
    return given


def shown_url(url: str) -> str:
    """A Redis (or any) URL fit to print: its password replaced by `***`, and no empty
    password shown at all."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    auth = f"{user}:***" if parts.password else user
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{auth}@{host}" if auth else host))


def shown_store(settings: Settings) -> str:
    """Where the fleet's store is, as a log line may show it (no password)."""
    if settings.redis_sentinels:
        where = ",".join(settings.redis_sentinels)
        return f"the master {settings.redis_sentinel_master!r} of sentinels {where}"
    return f"Redis {shown_url(settings.redis_url)}"


def check_redis(settings: Settings, *, timeout_s: float = 2.0) -> None:
    """Raise `UnavailableError` (one line, exit 3) unless the fleet's store answers a PING
    (through its sentinels, when it has them): the long-running processes check once at
    start rather than fail deep inside."""
    import redis  # noqa: PLC0415 - only the servers load it, not the API's clients

    from workers.fleet.connections import store_client  # noqa: PLC0415 - as redis

    if settings.redis_sentinels:
        named, where = "GOALFLEET_REDIS_SENTINELS", shown_store(settings)
    else:
        named, where = "GOALFLEET_REDIS_URL", f"Redis at {shown_url(settings.redis_url)}"
    try:
        client = store_client(settings, timeout_s=timeout_s)
    except ValueError as exc:  # a URL redis-py cannot parse
        raise ConfigError(f"GOALFLEET_REDIS_URL: {exc}") from None
    try:
        client.ping()
    except (redis.ConnectionError, redis.TimeoutError, redis.AuthenticationError) as exc:
        raise UnavailableError(f"cannot reach {where} ({exc}); start it, or set {named}") from None
    except ValueError as exc:
        raise ConfigError(f"GOALFLEET_REDIS_URL: {exc}") from None
    finally:
        client.close()


def check_stores(settings: Settings, *, timeout_s: float = 2.0) -> None:
    """`check_redis`, then the history database when one is set (`GOALFLEET_DATABASE_URL`):
    `UnavailableError` (one line, exit 3) unless it accepts a connection. What a server needs
    is checked here, before its start line, never inside its start-up (a traceback)."""
    check_redis(settings, timeout_s=timeout_s)
    if settings.database_url is None:
        return
    from scheduler.store.history.db import (  # noqa: PLC0415 - psycopg: only with a database
        Database,
        HistoryUnavailableError,
    )

    db = Database(settings.database_url.get_secret_value(), connect_timeout_s=timeout_s)
    try:
        db.query("SELECT 1")
    except HistoryUnavailableError as exc:
        raise UnavailableError(str(exc)) from None
    finally:
        db.close()


NO_SECRETS = frozenset({"api", "scheduler"})
"""The commands that refuse to start holding a secret (`refuse_secrets`)."""


def refuse_secrets(command: str, environ: Mapping[str, str] = os.environ) -> None:
    """`workers.core.secrets.refuse_secrets` (loaded only here: it loads the request models)."""
    from workers.core.secrets import refuse_secrets as refuse  # noqa: PLC0415

    refuse(f"goalfleet {command}", environ)


def with_settings(command: str) -> Callable[[SettingsAction], Command]:
    """The command `action(settings, args)`, with the settings loaded here and any
    `GoalfleetError` it raises reported as one line (`goalfleet <command>: ...`) and its exit
    code. The commands of `NO_SECRETS` first refuse a secret in their environment."""

    def wrap(action: SettingsAction) -> Command:
        def main(args: argparse.Namespace) -> int:
            try:
                if command in NO_SECRETS:
                    refuse_secrets(command)
                return action(load_settings(), args)
            except GoalfleetError as exc:
                return report(exc, command)

        return main

    return wrap


def with_client(command: str) -> Callable[[ClientAction], Command]:
    """`with_settings`, for a command that talks to the API: `action(client, args)` gets the
    client for `--api` (or the settings' URL) and its token, closed when it returns."""

    def wrap(action: ClientAction) -> Command:
        def main(settings: Settings, args: argparse.Namespace) -> int:
            with make_client(settings, args) as client:
                return action(client, args)

        return with_settings(command)(main)

    return wrap


def add_client_command(
    sub: Any,  # noqa: ANN401 - argparse's subparsers type is private
    name: str,
    action: ClientAction,
    *,
    help: str,  # noqa: A002 - argparse's own name for it
) -> argparse.ArgumentParser:
    """Add the parser of a command that talks to the API (`--api`, `--json`); argparse then
    calls `action(client, args)` through `with_client`. Returns the parser for its own flags."""
    p: argparse.ArgumentParser = sub.add_parser(name, help=help)
    add_api_args(p)
    p.set_defaults(func=with_client(name)(action))
    return p


def print_json(obj: object) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


def pairs(items: list[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ConfigError(f"{flag} {item!r} must look like NAME=VALUE")
        if name in out:
            raise ConfigError(f"{flag} {name!r} is given twice; give each name once")
        out[name] = value
    return out
