"""The run parameters as flags (`goalfleet run`, `goalfleet submit`): `--max-steps`,
`--min-confidence`, … from `RunParams`, the one definition of their types, defaults, bounds
and help; apart from `_common` so the other commands do not load the request models."""

from __future__ import annotations

import argparse

from pydantic import ValidationError

from workers.core.errors import ConfigError
from workers.core.params import RunParams


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
