"""The run task's body alone: `execute_run` as a worker composes it (its logs and metrics
observers and device wrappers, its lease fence, the fleet's decision memory), in this one
process, against its own redis-server: CPU per run with nothing else on the machine's cores.

Each run is submitted to the one device (`Fleet.submit_run`, which reserves it at once: the
device is idle), then run by `execute_run` under `time.process_time`: the claim, five steps of
the sim sign-in app at zero latency (fill email, fill password, press Sign in, Welcome; every
step decided from memory after the warm-up's first run) and the finish. What the throughput
benchmark's pool children spend (`bench_throughput`, "pool children") is this and the same
code run among many busy processes on few cores (cold caches, a context switch a round trip).

    .venv/bin/python -m bench.bench_run_cpu            # 10 batches of 200 runs, medians
    .venv/bin/python -m bench.bench_run_cpu --quick    # CI: 2 batches of 50
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from bench._fleet import SECRET_NAME, SECRET_VALUE, machine, median
from scheduler.local.redis import LocalRedis
from scheduler.service.graph import build
from scheduler.service.requests import RunSubmit
from scheduler.store.enqueue import RecordingEnqueuer
from workers.core.model import Platform
from workers.core.records import DeviceInfo
from workers.core.request import SecretRef
from workers.core.secrets import DictSecrets
from workers.devices.sim.device import SimOptions
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys
from workers.fleet.presence import Presence
from workers.fleet.runtime import WorkerRuntime, WorkerSpec, build_runtime, default_device_host
from workers.fleet.state.devices import DeviceRegistry
from workers.fleet.tasks import execute_run
from workers.settings import Settings
from workers.telemetry.setup import setup_worker_telemetry

WARM_UP = 20


def runtime(settings: Settings, keys: Keys, device: str = "d1") -> WorkerRuntime:
    """`device`'s runtime as `start_worker` builds it, its lease registered (held for an
    hour: no heartbeat renews it here)."""
    client = redis_client(settings.redis_url)
    info = DeviceInfo(id=device, platform=Platform.IOS, os_version="17.5")
    spec = WorkerSpec(info=info, device_spec="sim:signin-ios", sim=SimOptions())
    telemetry = setup_worker_telemetry(
        info,
        spec.name,
        {f"GOALFLEET_SECRET_{SECRET_NAME}": SECRET_VALUE},
        log_level="WARNING",
        log_format="json",
    )
    presence = Presence(DeviceRegistry(client, keys), spec, settings)
    presence.register()
    host = default_device_host(spec)
    return build_runtime(
        settings,
        spec,
        telemetry.wrap_secrets(DictSecrets({SECRET_NAME: SECRET_VALUE})),
        observers=telemetry.observers,
        open_device=telemetry.wrap_opener(host.open),
        fence=presence.fence,
        host=host,
    )


def driver(
    settings: Settings, *, memory: bool = True, device: str = "d1"
) -> Callable[[], tuple[float, float]]:
    """One run a call, on `device` of `settings`' Redis: submitted (`Fleet.submit_run` of
    the API's object graph, `scheduler.service.graph.build`, with its cached device view;
    the device is idle, so the submit reserves it at once), then run by `execute_run`; returns the
    CPU seconds of each, (submit, run). `memory`: the request's own."""
    keys = Keys(settings.key_prefix)
    client = redis_client(settings.redis_url)
    fleet = build(settings, client=client, enqueuer=RecordingEnqueuer(client, keys)).fleet
    rt = runtime(settings, keys, device)
    request = RunSubmit(
        goal="Sign in",
        device=device,
        inputs={"email": "ada@example.com"},
        secrets={"password": SecretRef(ref=f"env:{SECRET_NAME}")},
        done_when="Welcome",
        memory=memory,
    )

    def one() -> tuple[float, float]:
        t0 = time.process_time()
        run, _ = fleet.submit_run(request)
        t1 = time.process_time()
        status = execute_run(rt, run.id)
        t2 = time.process_time()
        if status != "done":
            raise RuntimeError(f"run {run.id} ended {status}")
        return t1 - t0, t2 - t1

    return one


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--batches", type=int, default=None)
    ap.add_argument("--runs", type=int, default=None, help="runs a batch")
    args = ap.parse_args()
    batches = args.batches or (2 if args.quick else 10)
    size = args.runs or (50 if args.quick else 200)
    with LocalRedis() as server:
        settings = Settings(redis_url=server.url, key_prefix="cpu", screenshots="off", lease_s=3600)
        one = driver(settings)

        for _ in range(WARM_UP):  # scripts loaded, the memory learned, caches warm
            one()
        per_run = [sum(one()[1] for _ in range(size)) * 1000 / size for _ in range(batches)]
    print(f"# The run task's body in one process ({batches} batches of {size}, {machine()})\n")
    print("| `execute_run`, 5-step sign-in run | median | min | max |")
    print("| --- | ---: | ---: | ---: |")
    print(
        f"| CPU per run | {median(per_run):.3f} ms | {min(per_run):.3f} ms "
        f"| {max(per_run):.3f} ms |"
    )


if __name__ == "__main__":
    main()
