"""Resolving sensitive inputs on the worker.

The API accepts a sensitive input only as a reference (`SecretRef`, e.g. `env:PASSWORD`); the
worker resolves it here, from its own environment (`GOALFLEET_SECRET_PASSWORD`). The value never
travels in a task message, a run record or a step row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from workers.core.errors import ConfigError
from workers.core.model import Inputs
from workers.core.request import GoalRunRequest, SecretRef

SECRET_ENV_PREFIX = "GOALFLEET_SECRET_"  # noqa: S105 - a variable-name prefix, not a secret


def refuse_secrets(program: str, environ: Mapping[str, str]) -> None:
    """`ConfigError` (exit 2) when a `GOALFLEET_SECRET_*` variable is in the environment of a
    process that never uses one (the API, the scheduler): a secret there is a deployment
    mistake that leaks it into a network-facing process (its `/proc/<pid>/environ`, a core
    dump, every child), and a warning in a log fixes nothing. Names the variables, never a
    value."""
    held = sorted(k for k in environ if k.startswith(SECRET_ENV_PREFIX))
    if held:
        more = f" (and {len(held) - 1} more)" if len(held) > 1 else ""
        raise ConfigError(
            f"{held[0]}{more} is set in this process's environment, and only workers use "
            f"secrets: unset it for {program} (env -u {held[0]} ...) and give it to "
            "the workers that hold it"
        )


class SecretResolver(Protocol):
    def resolve(self, name: str, ref: SecretRef) -> str:
        """The literal value of `ref`, or `ConfigError` naming what to set."""
        ...


class EnvSecrets:
    """`env:NAME` → the worker's `GOALFLEET_SECRET_NAME`. Built by the composition root with
    the process environment, so nothing else reads it."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._values = {
            k.removeprefix(SECRET_ENV_PREFIX): v
            for k, v in environ.items()
            if k.startswith(SECRET_ENV_PREFIX)
        }

    def resolve(self, name: str, ref: SecretRef) -> str:
        scheme, _, var = ref.ref.partition(":")
        if scheme != "env":  # the model's pattern allows only env: today
            raise ConfigError(f"secret {name!r}: unsupported reference scheme {scheme!r}")
        value = self._values.get(var)
        if not value:
            raise ConfigError(
                f"secret {name!r} refers to env:{var}, which this worker does not have",
                hint=f"set {SECRET_ENV_PREFIX}{var} in the worker's environment",
            )
        return value


class DictSecrets(EnvSecrets):
    """The fake beside `EnvSecrets`: values given directly, keyed by the reference's NAME."""

    def __init__(self, values: Mapping[str, str]) -> None:
        super().__init__({SECRET_ENV_PREFIX + k: v for k, v in values.items()})


def resolve_inputs(request: GoalRunRequest, secrets: SecretResolver) -> Inputs:
    """The run's `Inputs`: plain inputs as given, secrets resolved (marked sensitive)."""
    plain, refs = request.every_input()  # a journey's goal steps' own too
    resolved = {name: secrets.resolve(name, ref) for name, ref in refs.items()}
    try:
        plain_fields = frozenset(n for n, ref in refs.items() if ref.plain_field)
        return Inputs.of(plain=plain, secret=resolved, plain_fields=plain_fields)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
