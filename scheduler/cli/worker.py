"""`goalfleet worker`: one Celery worker pinned to one device (`w@<id>` on `device.<id>`)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import redis
from pydantic import ValidationError

from scheduler.cli._common import (
    EXIT_OK,
    add_log_args,
    check_redis,
    pairs,
    shown_store,
    start_line,
    with_settings,
)
from scheduler.cli.commands import summary
from scheduler.errors import UnavailableError
from workers.core.app import AppConfig, ResetPolicy
from workers.core.errors import ConfigError
from workers.core.model import Platform
from workers.core.records import DeviceInfo
from workers.core.text import plain, visible
from workers.devices.factory import backend_names, check_device_spec, worker_device_spec
from workers.devices.sim.options import NO_FAULTS, Faults, SimOptions
from workers.fleet.runtime import WorkerSpec
from workers.fleet.setup_check import check_worker_setup
from workers.settings import Settings
from workers.telemetry.metrics import ensure_multiproc_env


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = sub.add_parser("worker", help=summary("worker"))
    p.add_argument("--device", required=True, help="the device id, e.g. ios-1 or emulator-5554")
    p.add_argument(
        "--backend",
        choices=backend_names(),
        default="sim",
        help="sim: a simulated device in the worker; agent-device: a real one (default: sim)",
    )
    p.add_argument(
        "--platform",
        choices=[p.value for p in Platform],
        required=True,
        help="what selectors match (--platform ios)",
    )
    p.add_argument("--os-version", default="", help="e.g. 17.5 (selectors match it)")
    p.add_argument("--model", default="", help="e.g. iPhone 15")
    p.add_argument("--label", action="append", default=[], metavar="K=V", help="repeatable")
    p.add_argument(
        "--app", default="signin", help="sim backend: the scripted app to run (default: signin)"
    )
    p.add_argument(
        "--app-id",
        default=None,
        help="agent-device backend: the app under test (a bundle id, a package, or a name for "
        "a Linux app); a run's app.id must match it",
    )
    p.add_argument(
        "--app-command",
        default=None,
        metavar="CMD",
        help="Linux target: the command that starts the app; the worker starts it on its "
        "display and resets it before each run (e.g. 'env LANG=C /usr/bin/gnome-calculator')",
    )
    p.add_argument("--app-version", default="", help="the app's version (runs may ask for one)")
    p.add_argument(
        "--app-path",
        default="",
        help="iOS/Android: the app's binary (.app, .ipa, .apk), for --reset reinstall",
    )
    p.add_argument(
        "--reset",
        choices=[r.value for r in ResetPolicy],
        default=None,
        help="how the app is reset before each run unless the run asks otherwise (default: "
        "relaunch when an app is given, else none)",
    )
    p.add_argument(
        "--target",
        default=None,
        help="agent-device backend: ios:<udid>, android:<serial> or agent-device:linux "
        "(default: derived from --platform and --device)",
    )
    p.add_argument(
        "--latency-scale",
        type=float,
        default=0.0,
        help="sim: simulated device latency, 1.0 = realistic as in the demo (default: 0, none: "
        "the step tables' ms columns read 0)",
    )
    p.add_argument("--session-log", type=Path, default=None, help="sim: overlap-check log")
    p.add_argument(
        "--faults",
        default="",
        metavar="JSON",
        help='sim: fault injection, e.g. {"disconnect_after": 0} or {"transient_rate": 0.1}',
    )
    p.add_argument(
        "--decider",
        action="append",
        default=[],
        metavar="SPEC",
        help="a decider runs here will ask for, e.g. openai/gpt-4o-mini: built at start, so a "
        "missing model key stops the worker, not its runs (repeatable; GOALFLEET_ESCALATE_TO's "
        "are always checked)",
    )
    p.add_argument(
        "--secret",
        action="append",
        default=[],
        metavar="NAME",
        help="a secret this worker holds: GOALFLEET_SECRET_<NAME> must be set at start "
        "(repeatable)",
    )
    add_log_args(p)
    p.add_argument(
        "--metrics-host", default="127.0.0.1", help="where /metrics listens (default: 127.0.0.1)"
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="serve this worker's /metrics on this port (0: any free port; default: off)",
    )
    p.set_defaults(func=main)


def spec_from(args: argparse.Namespace) -> WorkerSpec:
    labels = pairs(args.label, "--label")
    for name, value in labels.items():  # shown in every device list: plain text only
        try:
            plain(f"{name}={value}")
        except ValueError as exc:
            raise ConfigError(f"--label {visible(name)!r}: {exc}") from None
    try:
        info = DeviceInfo(
            id=args.device,
            platform=Platform(args.platform),
            os_version=args.os_version,
            model=args.model,
            labels=labels,
            backend=args.backend,
        )
    except ValidationError as exc:
        raise ConfigError(
            f"--device {args.device!r}: use letters, digits, '.', '_' or '-' (at most 64)"
        ) from exc
    device_spec = worker_device_spec(
        args.backend, info.platform, info.id, app=args.app, target=args.target or ""
    )
    check_device_spec(device_spec)
    if args.latency_scale < 0:
        raise ConfigError("--latency-scale must be 0 or more")
    return WorkerSpec(
        info=info,
        device_spec=device_spec,
        app=app_from(args),
        sim=SimOptions(
            latency_scale=args.latency_scale,
            session_log=args.session_log,
            faults=parse_faults(args.faults),
        ),
    )


def app_from(args: argparse.Namespace) -> AppConfig | None:
    """`--app-id`, `--app-command`, `--app-version`, `--app-path`, `--reset` → the app the
    worker's device serves; None when none is given (a run then attaches to what runs)."""
    if args.app_id is None and args.app_command is None:
        if args.reset not in {None, ResetPolicy.NONE.value}:
            raise ConfigError(f"--reset {args.reset} needs --app-id (and --app-command on Linux)")
        return None
    if args.backend == "sim":
        raise ConfigError("--app-id and --app-command are for --backend agent-device; use --app")
    if args.app_command is not None and args.platform != Platform.LINUX.value:
        raise ConfigError(
            "--app-command is for --platform linux; iOS and Android apps are opened by --app-id"
        )
    try:
        return AppConfig(
            id=args.app_id or "app",
            command=args.app_command or "",
            version=args.app_version,
            path=args.app_path,
            reset=ResetPolicy(args.reset or ResetPolicy.RELAUNCH),
        )
    except ValidationError as exc:
        field = str(exc.errors()[0]["loc"][0])
        raise ConfigError(
            f"--app-{field.replace('_', '-')}: {exc.errors()[0]['msg']} (an id is letters, "
            "digits, '.', '_' or '-')"
        ) from exc


def parse_faults(text: str) -> Faults:
    """`--faults` JSON → `Faults` (lists become sets of command numbers)."""
    if not text:
        return NO_FAULTS
    try:
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise TypeError
        fields: dict[str, Any] = {
            k: frozenset(v) if isinstance(v, list) else v for k, v in raw.items()
        }
        return Faults(**fields)
    except (ValueError, TypeError) as exc:
        known = ", ".join(f.name for f in dataclasses.fields(Faults))
        raise ConfigError(f"--faults {text!r} is not a JSON object of: {known}") from exc


def _describe(spec: WorkerSpec, settings: Settings) -> str:
    where = f"device {spec.info.id} ({spec.info.platform.value}, {spec.device_spec})"
    if spec.device_spec.startswith("sim:"):
        scale = spec.sim.latency_scale
        where += f", latency scale {scale:g}" + (
            " (no simulated latency: ms columns read 0; --latency-scale 1.0 for realistic)"
            if scale == 0
            else ""
        )
    if spec.app is not None:
        version = f" {spec.app.version}" if spec.app.version else ""
        where += f", app {spec.app.id}{version} (reset {spec.app.reset} before each run)"
    return f"{where}, on {shown_store(settings)} (key prefix {settings.key_prefix})"


def _root_warning_in_one_line() -> None:
    """Celery's eight-line SecurityWarning for a worker run as root, as one line instead
    (in a container root is usual; elsewhere the advice stands)."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        warnings.filterwarnings("ignore", message=r"You're running the worker with superuser")
        sys.stderr.write(
            "goalfleet worker: running as root; outside a container, run workers as an "
            "unprivileged user\n"
        )


def _reexec_with_metrics_dir(args: argparse.Namespace) -> None:
    """Metrics recorded in the pool child are only exported in prometheus-client's
    multiprocess mode, which must be on before Python imports it: with `--metrics-port` and no
    PROMETHEUS_MULTIPROC_DIR, re-execute this command with a per-device directory."""
    if args.metrics_port is None:
        return
    path = Path(tempfile.gettempdir()) / f"goalfleet-metrics-{args.device}-{args.metrics_port}"
    ensure_multiproc_env(os.environ, path, ["-m", "scheduler", *sys.argv[1:]])


@with_settings("worker")
def main(settings: Settings, args: argparse.Namespace) -> int:
    spec = spec_from(args)
    # the device's tools and the device itself, the deciders, the secrets: one line and exit 3
    # before anything is registered or written to Redis
    check_worker_setup(
        spec.device_spec, settings, os.environ, deciders=args.decider, secrets=args.secret
    )
    check_redis(settings)
    _reexec_with_metrics_dir(args)
    from workers.fleet.worker import start_worker  # noqa: PLC0415 - Celery loads only here

    start_line("worker", _describe(spec, settings))
    _root_warning_in_one_line()
    # the start line says which Redis; Celery's "Connected to …://:**@…" would show a password
    # mask where there is no password
    logging.getLogger("celery.worker.consumer.connection").setLevel(logging.WARNING)
    try:
        start_worker(
            settings,
            spec,
            os.environ,
            loglevel=args.loglevel,
            log_format=args.log_format or settings.log_format,
            metrics_host=args.metrics_host,
            metrics_port=args.metrics_port,
        )
    except (redis.ConnectionError, redis.TimeoutError) as exc:  # Redis went away as it started
        raise UnavailableError(f"lost Redis while starting: {exc}") from None
    return EXIT_OK
