"""A worker's set-up, checked before it registers (`goalfleet worker`): its device backend
(`workers.devices.probe`), the deciders it is to serve (each built once: a model key, a provider
SDK), and the secrets it is to hold (`GOALFLEET_SECRET_<NAME>` set). The first thing missing
is one `SetupError` (exit 3) naming it and the fix; a malformed flag is a `ConfigError` (exit 2).
Nothing here touches Redis.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from workers.core.errors import ConfigError, SetupError
from workers.core.request import check_decider_spec
from workers.core.secrets import SECRET_ENV_PREFIX
from workers.devices.probe import probe_device
from workers.settings import Settings

__all__ = ["check_worker_setup", "secret_names"]

_SECRET_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,100}")


def secret_names(given: Iterable[str]) -> list[str]:
    """`--secret NAME` (or `env:NAME`, as a request refers to it) → the names."""
    names = []
    for item in given:
        name = item.removeprefix("env:")
        if not _SECRET_NAME.fullmatch(name):
            raise ConfigError(
                f"--secret {item!r}: give the NAME of GOALFLEET_SECRET_<NAME> (letters, digits, "
                "'_'), never the value"
            )
        names.append(name)
    return names


def check_worker_setup(
    device_spec: str,
    settings: Settings,
    environ: Mapping[str, str],
    *,
    deciders: Iterable[str] = (),
    secrets: Iterable[str] = (),
) -> None:
    """Raise the first `SetupError` of: the device backend, the deciders (`deciders` and the
    fleet's `escalate_to` chain), the secrets."""
    probe_device(device_spec, environ)
    wanted = list(dict.fromkeys([*deciders, *settings.escalate_to]))
    for spec in wanted:
        try:
            check_decider_spec(spec)
        except ValueError as exc:
            raise ConfigError(f"--decider: {exc}") from None
    from workers.decide.factory import make_decider  # noqa: PLC0415 - model SDKs load only here

    for spec in wanted:
        try:
            make_decider(spec, settings.model_settings())
        except ConfigError as exc:
            raise SetupError(
                f"this worker is to serve decider {spec} but cannot build it: {exc.message}",
                hint=exc.hint or "see docs/goal-loop.md for the decider settings",
            ) from None
    for name in secret_names(secrets):
        if not environ.get(SECRET_ENV_PREFIX + name):
            raise SetupError(
                f"this worker is to hold secret {name}, but {SECRET_ENV_PREFIX}{name} is not set "
                "in its environment",
                hint=f"export {SECRET_ENV_PREFIX}{name} before goalfleet worker",
            )
