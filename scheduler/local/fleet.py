"""A whole fleet on this machine: the API and the scheduler in threads of this process, one
worker subprocess per sim device. The demo and the fleet tests run on it; everything it
started stops in `stop()` (each worker's process group gets SIGTERM, then SIGKILL after a
grace period), also on the way out of `with LocalFleet(...) as fleet`."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

import uvicorn

from scheduler.api.app import create_app
from scheduler.client.api_client import FleetClient
from scheduler.local.redis import free_port
from scheduler.service.graph import run_scheduler
from workers.core.errors import ConfigError
from workers.processes import Child, Stoppable, spawn, stop_all
from workers.settings import Settings
from workers.telemetry.metrics import MULTIPROC_ENV


@dataclass(frozen=True)
class SimWorker:
    device: str
    platform: str = "ios"
    os_version: str = ""
    model: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    app: str = "signin"
    latency_scale: float = 0.0
    session_log: Path | None = None
    faults: str = ""
    """`--faults` JSON for the sim device."""
    metrics_port: int | None = None
    """Serve the worker's /metrics here (the worker gets its own multiprocess directory)."""
    loglevel: str = "WARNING"

    def argv(self, module: str = "scheduler") -> list[str]:
        """`python -m <module> worker ...` for this device (`bench._worker` adds the
        benchmarks' decider spec to `goalfleet worker`)."""
        argv = [
            sys.executable, "-m", module, "worker",
            "--device", self.device,
            "--backend", "sim",
            "--platform", self.platform,
            "--app", self.app,
            "--latency-scale", str(self.latency_scale),
            "--loglevel", self.loglevel,
        ]  # fmt: skip
        if self.os_version:
            argv += ["--os-version", self.os_version]
        if self.model:
            argv += ["--model", self.model]
        for k, v in self.labels.items():
            argv += ["--label", f"{k}={v}"]
        if self.session_log is not None:
            argv += ["--session-log", str(self.session_log)]
        if self.faults:
            argv += ["--faults", self.faults]
        if self.metrics_port is not None:
            argv += ["--metrics-port", str(self.metrics_port)]
        return argv


class LocalFleet(Stoppable):
    def __init__(self, settings: Settings, *, log_dir: Path, extra_env: dict[str, str]) -> None:
        self.settings = settings
        self.log_dir = log_dir
        self.env = {**os.environ, **settings.to_env(), **extra_env}
        self.workers: dict[str, Child] = {}
        self._server: uvicorn.Server | None = None
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self.api_url = ""

    @property
    def token(self) -> str:
        return self.settings.named_tokens()[0][1] if self.settings.api_tokens else ""

    def client(self) -> FleetClient:
        return FleetClient(self.api_url, token=self.token)

    def start_api(self, *, timeout_s: float = 15.0) -> str:
        port = free_port()
        config = uvicorn.Config(
            create_app(self.settings),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            forwarded_allow_ips=self.settings.api_forwarded_allow_ips,
        )
        self._server = uvicorn.Server(config)
        t = threading.Thread(target=self._server.run, name="goalfleet-api", daemon=True)
        t.start()
        self._threads.append(t)
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if time.monotonic() > deadline or not t.is_alive():
                raise ConfigError(f"the API did not start on 127.0.0.1:{port}")
            time.sleep(0.02)
        self.api_url = f"http://127.0.0.1:{port}"
        return self.api_url

    def start_scheduler(self) -> None:
        t = threading.Thread(
            target=run_scheduler, args=(self.settings, self._stop), name="goalfleet-scheduler"
        )
        t.daemon = True
        t.start()
        self._threads.append(t)

    def start_worker(self, w: SimWorker) -> Child:
        env = self.env
        if w.metrics_port is not None:  # its multiprocess metrics beside its log, not in /tmp
            env = {**env, MULTIPROC_ENV: str(self.log_dir / f"metrics-{w.device}")}
        child = spawn(w.argv(), env=env, log=self.log_dir / f"worker-{w.device}.log")
        self.workers[w.device] = child
        return child

    def wait_devices(self, ids: list[str], *, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        with self.client() as c:
            while True:
                alive = {d.info.id for d in c.devices() if d.alive}
                if set(ids) <= alive:
                    return
                dead = [i for i in ids if i in self.workers and not self.workers[i].alive()]
                if dead or time.monotonic() > deadline:
                    raise ConfigError(
                        f"workers did not come up: {sorted(set(ids) - alive)}; "
                        f"see {self.log_dir}/worker-*.log"
                    )
                time.sleep(0.1)

    def start_all(self, workers: Sequence[SimWorker], *, timeout_s: float = 60.0) -> Self:
        """The API, the scheduler and one worker per `workers`: back once every device is
        alive (`wait_devices`)."""
        self.start_api()
        self.start_scheduler()
        for w in workers:
            self.start_worker(w)
        self.wait_devices([w.device for w in workers], timeout_s=timeout_s)
        return self

    def stop_worker(self, device: str, *, sig: int = signal.SIGTERM, grace_s: float = 10.0) -> None:
        child = self.workers.pop(device, None)
        if child is not None:
            child.stop(grace_s, sig=sig)

    def stop(self) -> None:
        children = list(self.workers.values())
        self.workers.clear()
        stop_all(children)
        self._stop.set()
        if self._server is not None:
            self._server.should_exit = True
        for t in self._threads:
            t.join(timeout=10)
