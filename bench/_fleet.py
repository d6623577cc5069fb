"""A whole fleet as separate processes, for the fleet benchmarks (dispatch, scaling, memory).

Unlike `scheduler.local.fleet` (API and scheduler in threads of the caller), every part here is
its own process, as in production, so the benchmark's own Python does not share a GIL with
the API and every process has a pid whose memory can be read:

- `redis-server` on a random loopback port (`scheduler.local.redis.LocalRedis`; never the
  shared one on 6379),
- `python -m scheduler api` and `python -m scheduler scheduler`,
- one `python -m bench._worker worker ...` per sim device (a `SimWorker`, as the fleet tests
  have): exactly `goalfleet worker` plus the bench-only decider spec `bench/rules-<ms>` (see
  `bench/_worker.py`),
- optionally a bare Celery worker (`python -m bench._worker noop`): the same Celery settings
  and flags with a no-op task, the baseline the dispatch benchmark compares against.

Everything started is stopped in `stop()` (SIGTERM to each process group, SIGKILL after a
grace period), also when the benchmark fails half-way.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Self

import httpx
from pydantic import SecretStr

from scheduler.local.fleet import SimWorker
from scheduler.local.redis import LocalRedis, free_port
from scheduler.store.runs import FleetStore
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys
from workers.processes import Child, Stoppable, spawn, stop_all
from workers.settings import Settings
from workers.stats import median, percentile, tail, tail_q

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "bench-token"  # noqa: S105 - the throwaway fleet's API token
SECRET_NAME = "BENCH_PW"  # noqa: S105 - a variable name, not a secret
SECRET_VALUE = "bench-Secret-1"  # noqa: S105 - the throwaway fleet's sim password
NOOP_QUEUE = "bench.noop"
NOOP_TASK = "bench.noop"

__all__ = ["median", "percentile", "tail", "tail_q"]  # the one percentile function, for every bench

SIGN_IN: dict[str, object] = {
    "goal": "Sign in",
    "inputs": {"email": "ada@example.com"},
    "secrets": {"password": {"ref": f"env:{SECRET_NAME}"}},
    "done_when": "Welcome",
}
"""The sim sign-in app's run: fill email, fill password, press Sign in, see Welcome."""


def machine() -> str:
    """One line naming the machine the figures came from."""
    mem = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = f", {int(line.split()[1]) / 1024 / 1024:.0f} GiB"
    return (
        f"{os.cpu_count()} CPU {platform.machine()}{mem}, "
        f"{platform.python_implementation()} {platform.python_version()}"
    )


def pct(xs: Sequence[float], q: float) -> float:
    """`workers.stats.percentile` with q as a fraction (0..1): p99 needs >= 1,000 samples."""
    return percentile(xs, q * 100)


def bench_settings(redis_url: str, **overrides: object) -> Settings:
    """Production defaults except what a benchmark needs (its own Redis, a token)."""
    base: dict[str, object] = {
        "redis_url": redis_url,
        "key_prefix": "gfb",
        "api_tokens": [SecretStr(TOKEN)],
    }
    return Settings.model_validate({**base, **overrides})


class BenchFleet(Stoppable):
    """Start with `start()` or as a context manager; `stop()` ends everything it started."""

    def __init__(self, **settings_overrides: object) -> None:
        self.redis = LocalRedis()
        self.overrides = settings_overrides
        self.dir = Path(tempfile.mkdtemp(prefix="goalfleet-bench-"))
        self.procs: dict[str, Child] = {}
        self.settings: Settings | None = None
        self.api_url = ""
        self.env: dict[str, str] = {}

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        self.redis.start()
        self.settings = bench_settings(self.redis.url, **self.overrides)
        self.env = {
            **os.environ,
            **self.settings.to_env(),
            f"GOALFLEET_SECRET_{SECRET_NAME}": SECRET_VALUE,
            "GOALFLEET_LOG_FORMAT": "json",
        }
        self.env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        return self

    def stop(self) -> None:
        children = list(self.procs.values())
        self.procs.clear()
        stop_all(children, grace_s=15)
        self.redis.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- processes -------------------------------------------------------------------------

    def _spawn(self, name: str, argv: list[str]) -> Child:
        env = (
            self.env
            if name.startswith(("worker-", "noop"))
            else {  # a worker's secret only
                k: v for k, v in self.env.items() if not k.startswith("GOALFLEET_SECRET_")
            }
        )  # (the API and the scheduler refuse to start holding one)
        child = spawn(argv, env=env, log=self.dir / f"{name}.log", name=name, cwd=ROOT)
        self.procs[name] = child
        return child

    def start_api(
        self,
        *,
        timeout_s: float = 60.0,
        loglevel: str = "WARNING",
        name: str = "api",
        processes: int = 1,
    ) -> str:
        """`goalfleet api` on a free port (`loglevel` INFO, the command's default, logs a line
        per submit into `<name>.log`; `processes`: its `--processes`); its URL once /health
        answers. The first one started is `api_url`; another needs its own `name`."""
        port = free_port()
        argv = [sys.executable, "-m", "scheduler", "api", "--host", "127.0.0.1"]
        argv += ["--port", str(port), "--loglevel", loglevel, "--processes", str(processes)]
        self._spawn(name, argv)
        url = f"http://127.0.0.1:{port}"
        self.api_url = self.api_url or url
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    return url
            self._check_alive(name)
            time.sleep(0.1)
        raise RuntimeError(f"the API did not come up; see {self.dir}/{name}.log")

    def start_scheduler(self, *, profile: Path | None = None) -> None:
        """`goalfleet scheduler`; under cProfile if `profile` is given (wall time: its waits
        for a wake-up show as socket reads; the stats are written there when it stops)."""
        profiled = ["-m", "cProfile", "-o", str(profile)] if profile is not None else []
        argv = [sys.executable, *profiled, "-m", "scheduler", "scheduler", "--loglevel", "WARNING"]
        self._spawn("scheduler", argv)

    def start_workers(
        self,
        workers: Sequence[SimWorker],
        *,
        timeout_s: float = 240.0,
        session_logs: bool = True,
    ) -> None:
        """One `python -m bench._worker worker` per `workers`, each with its session log
        (unless not `session_logs`: the sim device then writes none, as in production)."""
        for w in workers:
            logged = replace(w, session_log=self.session_log(w.device)) if session_logs else w
            self._spawn(f"worker-{w.device}", logged.argv(module="bench._worker"))
        deadline = time.monotonic() + timeout_s
        want = {w.device for w in workers}
        while time.monotonic() < deadline:
            alive = {d.info.id for d in self.store().registry.devices() if d.alive}
            if want <= alive:
                return
            for w in workers:
                self._check_alive(f"worker-{w.device}")
            time.sleep(0.2)
        raise RuntimeError(f"workers did not come up in {timeout_s:g} s; see {self.dir}")

    def start_noop_worker(self, *, timeout_s: float = 60.0) -> None:
        """A bare Celery worker (same settings and flags) serving the no-op baseline tasks."""
        self._start_noops({"noop": []}, timeout_s)

    def start_noop_workers(
        self, devices: Sequence[str], queue: str, *, timeout_s: float = 240.0
    ) -> None:
        """One bare worker per `devices` (process `noop-<device>`, named for it), all
        consuming `queue`; started at once, then waited for."""
        self._start_noops({f"noop-{d}": [d, queue] for d in devices}, timeout_s)

    def _start_noops(self, named: dict[str, list[str]], timeout_s: float) -> None:
        ready = {name: self.dir / f"{name}.ready" for name in named}
        for name, extra in named.items():
            self._spawn(
                name, [sys.executable, "-m", "bench._worker", "noop", str(ready[name]), *extra]
            )
        deadline = time.monotonic() + timeout_s
        while not all(path.exists() for path in ready.values()):
            for name in named:
                self._check_alive(name)
            if time.monotonic() > deadline:
                raise RuntimeError(f"the no-op workers did not come up; see {self.dir}")
            time.sleep(0.1)

    def _check_alive(self, name: str) -> None:
        child = self.procs[name]
        if not child.alive():
            raise RuntimeError(f"{name} exited with {child.returncode}:\n{child.tail()}")

    # -- reading the fleet -----------------------------------------------------------------

    def session_log(self, device: str) -> Path:
        return self.dir / f"sessions-{device}.log"

    def store(self) -> FleetStore:
        s = self.require_settings()
        return FleetStore(redis_client(s.redis_url), Keys(s.key_prefix), retention_s=s.retention_s)

    def require_settings(self) -> Settings:
        if self.settings is None:
            raise RuntimeError("start() the fleet first")
        return self.settings

    def pid(self, name: str) -> int:
        return self.procs[name].pid

    def cpu_s(self) -> float:
        """CPU seconds used so far by every process of this fleet, redis-server included."""
        pids = [child.pid for child in self.procs.values()]
        if self.redis.child is not None:
            pids.append(self.redis.child.pid)
        return sum(process_cpu_s(pid) for pid in pids)


# -- memory, from /proc (Linux) ------------------------------------------------------------


def children(pid: int) -> list[int]:
    """Direct children of `pid` (a prefork worker's pool child)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            # pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return sorted(out)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def pss_kib(pid: int) -> int:
    """Proportional set size: shared (copy-on-write) pages split between their sharers."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


def process_cpu_s(pid: int) -> float:
    """CPU seconds used by `pid` and its children (live ones, and reaped ones via cutime)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for p in [pid, *children(pid)]:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            # after the comm: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14)
            total += sum(int(x) for x in fields[11:15]) / tick
    return total


def cpu_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine so far (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    total = sum(fields[:8])
    return total - idle, total
