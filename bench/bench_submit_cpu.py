"""What one run's submit costs the API, in-process, against a private redis-server: the parts
the dispatch benchmark (`bench/bench_dispatch.py`) can only show end to end.

- **Fleet.submit_run, message in the script**: the API's submit as it is — one script writes
  the run, reserves the idle device and pushes Celery's message onto its queue.
- **POST /v1/runs through the app**: the whole ASGI app (`create_app`: metrics, request id,
  edge, errors, routing, FastAPI's route) called in-process with an ordinary body.

Each submit reserves the one registered device (freed between submits, outside the timing).
Per path: the calling thread's CPU (`time.thread_time`) for the in-process submits, the
process's CPU (`time.process_time`: the app's submit runs on its executor thread) for the app
paths, and wall time; medians, paths interleaved in rounds.

    .venv/bin/python -m bench.bench_submit_cpu            # 3,000 submits a path
    .venv/bin/python -m bench.bench_submit_cpu --quick    # CI: 100
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from bench._fleet import SIGN_IN, TOKEN, machine, median
from scheduler.api.app import create_app
from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.local.redis import LocalRedis
from scheduler.service.fleet import Fleet
from scheduler.service.requests import RunSubmit
from scheduler.store.enqueue import CeleryEnqueuer, Enqueuer
from scheduler.store.runs import FleetStore
from workers.core.model import Platform
from workers.core.records import DeviceInfo
from workers.fleet.celery_app import make_celery
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys, lease_holder, worker_name
from workers.settings import Settings
from workers.telemetry.logs import configure_logging

DEVICE = "d1"
BODY = json.dumps({**SIGN_IN, "device": DEVICE}).encode()


def scope() -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/runs",
        "raw_path": b"/v1/runs",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"bench"),
            (b"authorization", f"Bearer {TOKEN}".encode()),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(BODY)).encode()),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 2),
    }


async def post(app: Any) -> None:  # noqa: ANN401 - an ASGI app
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": BODY, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope(), receive, send)
    if sent[0]["status"] != 201:
        raise RuntimeError(f"submit answered {sent[0]['status']}: {sent[-1].get('body')!r}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--samples", type=int, default=None)
    args = ap.parse_args()
    n = args.samples or (100 if args.quick else 3000)
    configure_logging(level="WARNING", fmt="json")
    with LocalRedis().start() as server:
        settings = Settings(redis_url=server.url, key_prefix="bsc", api_tokens=[TOKEN])
        r = redis_client(server.url)
        keys = Keys(settings.key_prefix)
        store = FleetStore(r, keys, retention_s=3600)
        info = DeviceInfo(id=DEVICE, platform=Platform.IOS, os_version="17.5")
        store.registry.register(info, lease_holder(worker_name(DEVICE)), lease_s=3600)
        celery = make_celery(settings)

        def fleet(enqueuer: Enqueuer) -> Fleet:
            return Fleet(store, Dispatcher(store, enqueuer, view_max_age_s=10), max_pending=0)

        sub = RunSubmit.model_validate({**SIGN_IN, "device": DEVICE})
        scripted = fleet(CeleryEnqueuer(celery))
        app = create_app(settings)
        loop = asyncio.new_event_loop()

        def free() -> None:
            r.hset(keys.device(DEVICE), "run", "")
            r.delete(keys.queue(DEVICE))

        paths: dict[str, tuple[Callable[[], object], Callable[[], float]]] = {
            "Fleet.submit_run, message in the script": (
                lambda: scripted.submit_run(sub),
                time.thread_time,
            ),
            "POST /v1/runs through the app": (
                lambda: loop.run_until_complete(post(app)),
                time.process_time,
            ),
        }
        cpu: dict[str, list[float]] = {k: [] for k in paths}
        wall: dict[str, list[float]] = {k: [] for k in paths}
        rounds, per_round = 10, max(1, n // 10)
        for rnd in range(rounds + 1):  # round 0 warms up
            for name, (call, clock) in paths.items():
                for _ in range(per_round):
                    free()
                    c0, w0 = clock(), time.perf_counter()
                    call()
                    c1, w1 = clock(), time.perf_counter()
                    if rnd:
                        cpu[name].append((c1 - c0) * 1e6)
                        wall[name].append((w1 - w0) * 1e6)
        loop.close()
        celery.close()
    print(f"# One run's submit, in-process ({n} submits a path, {machine()})\n")
    print("| path | CPU p50 | wall p50 |\n| --- | ---: | ---: |")
    for name in paths:
        print(f"| {name} | {median(cpu[name]):.0f} µs | {median(wall[name]):.0f} µs |")


if __name__ == "__main__":
    main()
