"""`goalfleet run`: one goal run on one device, here and now, without the fleet; or one flow of
a flows file (a journey or one goal), run as a worker runs it (`--flows`)."""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import redis
from pydantic import ValidationError
from rich.console import Console
from rich.text import Text

from scheduler.cli._common import (
    add_goal_input_flags,
    load_settings,
    pairs,
    plain_fields,
    report,
)
from scheduler.cli._params import add_run_param_flags, run_params_from
from scheduler.cli._render import plain_console, steps_table
from scheduler.cli.commands import summary
from scheduler.cli.suite import read
from scheduler.service.requests import SuiteSubmit
from scheduler.suites.failure import failure_lines
from scheduler.suites.flows import Flows
from scheduler.suites.one_run import keep_evidence
from workers.core.chain import Tier
from workers.core.errors import ConfigError, GoalfleetError
from workers.core.journey import run_request
from workers.core.model import Inputs, RunResult, RunStatus
from workers.core.records import RunRecord
from workers.core.request import GoalRunRequest
from workers.core.secrets import EnvSecrets, resolve_inputs
from workers.core.shots import MemoryArtifacts
from workers.core.text import visible
from workers.decide.factory import make_decider
from workers.devices.factory import check_device_spec, make_device
from workers.devices.probe import probe_device
from workers.devices.sim.options import SimOptions
from workers.fleet.artifacts import make_camera, make_videographer
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys
from workers.fleet.memory_store import RedisMemory
from workers.settings import Settings, state_dir
from workers.telemetry.logs import SECRETS, configure_logging
from workers.urls import REDIS_SCHEMES, checked_url


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = sub.add_parser("run", help=summary("run"))
    p.add_argument("--device", required=True, help="sim:signin-ios, agent-device:linux, ...")
    p.add_argument("--goal", help='what to achieve, e.g. "Sign in" (or --flows)')
    p.add_argument(
        "--flows",
        metavar="FILE",
        type=Path,
        help="run a flow of this flows file instead (a journey or one goal) as a worker runs "
        "it: its steps, inputs, params and secrets (env:NAME read from GOALFLEET_SECRET_NAME); "
        "--decider and the run flags below, when given, override its own",
    )
    p.add_argument("--only", metavar="NAME", help="--flows: the flow to run (when it has several)")
    add_goal_input_flags(
        p, ref_help="a sensitive input, read from environment variable VAR (repeatable)"
    )
    p.set_defaults(decider=None)  # given or not: --flows takes the flow's unless given
    add_run_param_flags(p, server_defaults=True)
    p.add_argument(
        "--latency-scale",
        type=float,
        default=0.0,
        help="sim devices: 1.0 for realistic latencies, 0 for none",
    )
    p.add_argument(
        "--memory",
        metavar="REDIS_URL",
        default=None,
        help="use the fleet's decision memory in this Redis (read, and write if done); "
        "default: none",
    )
    p.add_argument(
        "--evidence",
        metavar="DIR",
        type=Path,
        default=None,
        help="keep the step pictures and the result here (default: a folder per run under "
        "$XDG_STATE_HOME/goalfleet/runs, made private); its path is printed",
    )
    p.add_argument(
        "--html",
        metavar="FILE",
        type=Path,
        default=None,
        help="write the run's HTML report here (the suites' report, of one run)",
    )
    p.add_argument("--json", action="store_true", help="print the RunResult as JSON")
    p.add_argument(
        "--loglevel",
        default="WARNING",
        help="log level on stderr, DEBUG shows device commands (default: WARNING)",
    )
    p.set_defaults(func=main)


def _secrets(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, ref in pairs(items, "--secret").items():
        if not ref.startswith("env:") or len(ref) == len("env:"):
            raise ConfigError(
                f"--secret {name}: give a reference like {name}=env:VARIABLE, never the value"
            )
        var = ref.removeprefix("env:")
        value = os.environ.get(var)
        if not value:
            raise ConfigError(f"--secret {name}: environment variable {var} is not set; export it")
        out[name] = value
    return out


def parse_inputs(args: argparse.Namespace) -> Inputs:
    plain = pairs(args.input, "--input")
    secret = _secrets(args.secret)
    try:
        return Inputs.of(plain, secret, plain_fields=plain_fields(args, secret))
    except ValidationError as exc:
        msg = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise ConfigError(f"--input/--secret: {msg}") from None
    except ValueError as exc:
        raise ConfigError(f"--input/--secret: {exc}") from None


def _check(args: argparse.Namespace) -> None:
    check_device_spec(args.device)
    if args.goal is not None and args.flows is not None:
        raise ConfigError("give --goal or --flows, not both: a flow's goal is its file's")
    if args.goal is None and args.flows is None:
        raise ConfigError("give --goal (one goal) or --flows FILE (a flow of a flows file)")
    if args.flows is None:
        if not args.goal.strip():
            raise ConfigError('--goal is blank; say what to achieve, e.g. --goal "Sign in"')
        if args.only is not None:
            raise ConfigError("--only names a flow of --flows FILE; give the file too")
    else:
        for flag, given, what in (
            ("--input", args.input, "inputs"),
            ("--secret", args.secret, "secrets"),
            ("--plain-field", args.plain_field, "secrets"),
        ):
            if given:
                raise ConfigError(
                    f"{flag}: a flow's {what} are its file's; give them there "
                    "(docs/suites.md), or run one goal with --goal"
                )
    run_params_from(args)
    if args.latency_scale < 0:
        raise ConfigError("--latency-scale must be 0 or more")
    if args.loglevel.upper() not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
        raise ConfigError("--loglevel must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL")


def _memory(args: argparse.Namespace, settings: Settings) -> RedisMemory | None:
    if args.memory is None:
        return None
    try:
        checked_url(args.memory, REDIS_SCHEMES)
    except ValueError as exc:
        raise ConfigError(f"--memory: {exc}") from None
    client = redis_client(args.memory, timeout_s=2.0)
    try:
        client.ping()
    except redis.RedisError as exc:
        raise ConfigError(f"--memory: cannot reach {args.memory}: {exc}") from None
    return RedisMemory(
        client, Keys(settings.key_prefix), decider=args.decider, ttl_s=settings.memory_ttl_s
    )


def _flow(args: argparse.Namespace) -> tuple[Flows, GoalRunRequest]:
    """The flows file and its one flow to run as a request, the flags given overriding the
    flow's params and decider (its suite's budget is this run's)."""
    flows = read(args.flows, [args.only] if args.only else None)
    names = [f["name"] for f in flows.body["flows"]]
    if len(names) > 1:
        raise ConfigError(f"--only: the file has {len(names)} flows ({', '.join(names)}); name one")
    flow = SuiteSubmit.model_validate(flows.body).flows[0]  # `read` validated it
    given = run_params_from(args).model_dump(exclude_unset=True)
    if args.decider is not None:
        given["decider"] = args.decider
    asked = flow.goal_request().model_dump(exclude_unset=True)
    budget = flows.body.get("budget")
    return flows, GoalRunRequest.model_validate({**asked, **given, "suite_budget": budget})


def _goal(args: argparse.Namespace) -> GoalRunRequest:
    """`--goal` and the flags as a request (its secrets stay the local `env:VAR` ones)."""
    try:
        return GoalRunRequest(
            goal=args.goal,
            inputs=pairs(args.input, "--input"),
            decider=args.decider or "rules",
            **run_params_from(args).model_dump(exclude_unset=True),
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(x) for x in first["loc"])
        msg = str(first["msg"]).removeprefix("Value error, ")
        raise ConfigError(f"--{field.replace('_', '-')}: {msg}") from None


def main(args: argparse.Namespace) -> int:
    try:
        _check(args)
        settings = load_settings()
        flows: Flows | None = None
        if args.flows is None:
            inputs = parse_inputs(args)
        else:  # a worker's resolution: the references' values in GOALFLEET_SECRET_*
            flows, request = _flow(args)
            inputs = resolve_inputs(request, EnvSecrets(os.environ))
        # Logs go to stderr (stdout is the table or the JSON), with this run's secret values
        # registered for redaction before anything can log them.
        SECRETS.add(inputs.secrets())
        configure_logging(level=args.loglevel.upper(), fmt=settings.log_format)
        # instructor logs its own record of an unknown provider before raising; the one line
        # below says it
        logging.getLogger("instructor").setLevel(logging.CRITICAL)
        spec = args.decider or ("rules" if flows is None else request.decider)
        decider = make_decider(spec, settings.model_settings())
        if flows is None:
            request = _goal(args)
        tiers = tuple(
            Tier(s, make_decider(s, settings.model_settings())) for s in request.escalate_to
        )
        memory = _memory(args, settings) if request.memory else None
        probe_device(args.device, os.environ)  # what this host lacks, in our words (exit 3)
        device = make_device(args.device, sim=SimOptions(latency_scale=args.latency_scale))
    except GoalfleetError as exc:  # bad input (2), or a device this host cannot open (3)
        return report(exc, "run")
    store = MemoryArtifacts()  # the run's pictures and video, until `_evidence` writes them
    camera = make_camera(settings, store)
    try:
        result = run_request(
            device,
            request,
            decider=decider,
            video=make_videographer(settings, store, mode=request.video),
            escalate_to=tiers,
            inputs=inputs,
            dangerous=tuple(settings.dangerous_controls),
            memory=memory,
            camera=camera,
            prices=settings.prices,
        )
    finally:
        device.close()
    if result.failure is not None:  # the command that runs it again, as given here
        again = result.failure.model_copy(update={"command": rerun_command(args)})
        result = result.model_copy(update={"failure": again})
    record = _record(args, request, result, flows)
    _keep(settings, args, record)
    _evidence(args, record, store)
    if args.json:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
    else:
        print_result(result, plain_console())
        if result.failure is not None:
            for line in failure_lines(result.failure, result.failure.command):
                sys.stdout.write(visible(line) + "\n")
    return 0 if result.status is RunStatus.DONE else 1


def rerun_command(args: argparse.Namespace) -> str:
    """This `goalfleet run` as a command line (secrets as their `env:` references)."""
    argv = ["goalfleet", "run", "--device", args.device]
    if args.flows is not None:
        argv += ["--flows", str(args.flows)] + (["--only", args.only] if args.only else [])
    else:
        argv += ["--goal", args.goal]
    argv += [x for i in args.input for x in ("--input", i)]
    argv += [x for s in args.secret for x in ("--secret", s)]
    argv += [x for f in args.plain_field for x in ("--plain-field", f)]
    if args.decider is not None or args.flows is None:
        argv += ["--decider", args.decider or "rules"]
    params = run_params_from(args).model_dump(exclude_defaults=True)
    argv += [x for k, v in params.items() for x in (f"--{k.replace('_', '-')}", str(v))]
    return shlex.join(argv)


def _record(
    args: argparse.Namespace, request: GoalRunRequest, result: RunResult, flows: Flows | None
) -> RunRecord:
    now = time.time()
    return RunRecord(
        id=uuid.uuid4().hex,
        request=request,
        suite=flows.suite if flows else None,
        flow=flows.body["flows"][0]["name"] if flows else None,
        status=result.status,
        device=args.device,
        attempt=1,
        submitted_at=now - result.duration_ms / 1000,
        started_at=now - result.duration_ms / 1000,
        finished_at=now,
        reason=result.reason,
        result=result,
    )


def _evidence(args: argparse.Namespace, record: RunRecord, store: MemoryArtifacts) -> None:
    """The run's pictures, video, result and (`--html`) report; where they are, on stderr. A
    folder that cannot be written is one line on stderr, never the run's failure."""
    directory: Path = args.evidence or state_dir() / "runs" / record.id
    try:
        report = keep_evidence(record, store, directory, html=args.html)
    except OSError as exc:
        sys.stderr.write(f"goalfleet run: the evidence is not kept: {exc}\n")
        return
    pictures = sum(len(a.pictures) for c in report.cases for a in c.attempts)
    video = " and its video" if any(a.video for c in report.cases for a in c.attempts) else ""
    sys.stderr.write(f"evidence: {directory} ({pictures} pictures{video})\n")
    if args.html is not None:
        sys.stderr.write(f"report: {args.html}\n")


def _keep(settings: Settings, args: argparse.Namespace, record: RunRecord) -> None:
    """The run in the history (`GOALFLEET_DATABASE_URL`, else the embedded SQLite file); a
    history that cannot be written is one line on stderr, never the run's failure."""
    from scheduler.store.history.db import HistoryUnavailableError  # noqa: PLC0415 - psycopg
    from scheduler.store.history.rows import history_of  # noqa: PLC0415
    from scheduler.store.history.store import SqlHistory  # noqa: PLC0415

    result = record.result
    if result is None:  # pragma: no cover - a local run's record always has its result
        return
    spec = args.device.split(":", 1)
    peers = f"local/{spec[0]}/{spec[1].rsplit('-', 1)[-1]}" if spec[0] == "sim" else spec[0]
    try:
        history = SqlHistory.open(settings.history_url(), upgrade=settings.database_url is None)
        try:
            history.write([history_of(record, result.steps, None, peers=peers)])
        finally:
            history.close()
    except HistoryUnavailableError as exc:
        sys.stderr.write(f"goalfleet run: the run is not in the history: {exc}\n")


def print_result(result: RunResult, console: Console) -> None:
    title = Text(f"{visible(result.goal)} → {result.status.value}")
    console.print(steps_table(list(result.steps), title, detail=True))
    console.print(f"status: {result.status.value} — {visible(result.reason)}", markup=False)
