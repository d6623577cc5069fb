"""What the fleet's subcommands share: settings (read once here, the composition root), the
API client, and printing."""

from __future__ import annotations

import argparse
import json
import sys

from pydantic import ValidationError
from rich.console import Console

from scheduler.client import ApiError, FleetClient
from workers.core.errors import ConfigError, GoalfleetError
from workers.core.params import RunParams
from workers.settings import Settings

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_UNAVAILABLE = 3


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


def make_client(settings: Settings, args: argparse.Namespace) -> FleetClient:
    token = settings.api_token.get_secret_value() if settings.api_token else None
    if token is None and settings.api_tokens:
        token = settings.api_tokens[0].get_secret_value()
    return FleetClient(args.api or settings.api_url, token=token)


def report(exc: GoalfleetError, command: str) -> int:
    err = Console(stderr=True)
    err.print(f"goalfleet {command}: {exc}", markup=False, highlight=False)
    if isinstance(exc, ApiError):
        for p in exc.body.get("problems", []):
            err.print(
                f"  {p.get('field')}: {p.get('problem')} — {p.get('fix')}",
                markup=False,
                highlight=False,
            )
        return EXIT_UNAVAILABLE if exc.status == 503 else EXIT_BAD_INPUT  # noqa: PLR2004
    if isinstance(exc, ConfigError):
        return EXIT_BAD_INPUT
    return EXIT_UNAVAILABLE


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


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_run_param_flags(p: argparse.ArgumentParser, *, server_defaults: bool = False) -> None:
    """`--max-steps`, `--min-confidence`, … from `RunParams`: type, default and help from
    the one definition. With `server_defaults`, unset flags stay None (the API applies the
    default), and the help still shows it."""
    for name, info in RunParams.model_fields.items():
        kind: type = info.annotation if info.annotation in {int, float} else str  # type: ignore[assignment]
        default = info.default
        shown = "none" if default is None else default
        p.add_argument(
            _flag(name),
            type=kind,
            default=None if server_defaults else default,
            metavar=name.upper().split("_")[-1],
            help=f"{info.description} (default: {shown})",
        )


def run_params_from(args: argparse.Namespace) -> RunParams:
    """The flags as `RunParams`; a bad value is a ConfigError naming the flag and its bounds."""
    values = {
        name: getattr(args, name)
        for name in RunParams.model_fields
        if getattr(args, name, None) is not None
    }
    try:
        return RunParams(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = str(first["loc"][0])
        info = RunParams.model_fields[name]
        bounds = {
            key: getattr(m, key.lower())
            for m in info.metadata
            for key in ("Ge", "Le")
            if hasattr(m, key.lower())
        }
        if "Ge" in bounds and "Le" in bounds:
            why = f"must be between {bounds['Ge']} and {bounds['Le']}"
        elif "Ge" in bounds:
            why = f"must be {bounds['Ge']} or more"
        else:
            why = first["msg"].removeprefix("Value error, ")
        raise ConfigError(f"{_flag(name)} {why}") from None
