"""How long a `goalfleet` command takes to start and answer, against `python -c pass` measured
in the same run (the interpreter's own start, `site` and the editable install's path hook
included: the floor any command sits on).

- `python -c pass`
- `goalfleet --help`
- `goalfleet status ID`: one run's status from a live API (`goalfleet api` on its own
  redis-server, `bench/_fleet.py`), the run submitted to a registered device that no worker
  serves, so it stays queued and its record does not change between samples.
- `goalfleet status ID --json`
- `pydantic + http.client alone`: one pydantic model built, `http.client` and `json`
  imported, and the collector's objects frozen for the exit as the program does (`FLOOR`):
  what `status` cannot go below while its settings are a pydantic model and its client is on
  the standard library's HTTP client (`http.client` imports `ssl` itself, whatever the
  scheme; the client makes no TLS context for http).
- `pydantic + httpx alone`: the same with httpx in place of `http.client` (its command line
  left out and one `httpx.Client` made for an http:// URL, as a client on httpx would:
  `FLOOR_HTTPX`). The difference between the two rows is what an httpx client would add to
  every client command's start: the figure that keeps the client on `http.client`
  (`scheduler/client/stdlib_transport.py`, docs/benchmarks.md §15).

Each sample is one whole process, started and waited for (wall time, `time.perf_counter`);
the commands are interleaved round by round so machine noise hits each alike; medians. The
console script beside the interpreter (`.venv/bin/goalfleet`) when there is one, else
`python -m scheduler`. (hyperfine is not a Debian package on every release; a Python loop
measures the same thing.) What each command imports: `python -X importtime`.

    .venv/bin/python -m bench.bench_cli_start            # 10 rounds
    .venv/bin/python -m bench.bench_cli_start --quick    # CI: 3

`--vs DIR` adds `goalfleet status ID` from another checkout's source (`DIR` first on
`PYTHONPATH`, this one's first for the other rows; same interpreter and packages), in the
same rounds, and prints the two `status` times' ratio pair by pair: an A/B of two commits in
one run, e.g. the client on httpx (docs/benchmarks.md §15):

    mkdir /tmp/gf-httpx && git archive 7431c6b | tar -x -C /tmp/gf-httpx
    .venv/bin/python -m bench.bench_cli_start --rounds 40 --vs /tmp/gf-httpx
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from bench._fleet import SIGN_IN, TOKEN, BenchFleet, machine, median
from workers.core.model import Platform
from workers.core.records import DeviceInfo
from workers.fleet.keys import lease_holder, worker_name

DEVICE = "cli-1"
ROOT = Path(__file__).resolve().parents[1]
FLOOR = (
    "from pydantic import BaseModel\n"
    "class M(BaseModel):\n    x: int = 1\n"
    "M()\n"
    "import http.client, json\n"  # the client's stack (scheduler/client/stdlib_transport.py)
    "import gc; gc.freeze()\n"  # before the exit, as `scheduler.cli.main.console_main` does
)
FLOOR_HTTPX = (
    "import sys; sys.modules['httpx._main'] = None\n"  # as `scheduler.cli.main.main` does
    "from pydantic import BaseModel\n"
    "class M(BaseModel):\n    x: int = 1\n"
    "M()\n"
    "import json, ssl, httpx\n"  # an http:// URL's context: no CA store loaded
    "tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)\n"
    "httpx.Client(transport=httpx.HTTPTransport(verify=tls, trust_env=False), trust_env=False)\n"
    "import gc; gc.freeze()\n"
)


def goalfleet() -> list[str]:
    script = Path(sys.executable).with_name("goalfleet")
    return [str(script)] if script.exists() else [sys.executable, "-m", "scheduler"]


def timed(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, check=False, timeout=60)
    ms = (time.perf_counter() - t0) * 1000
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} exited {proc.returncode}: {proc.stderr.decode()[-500:]}")
    return ms


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--vs", type=Path, default=None, help="another checkout's root: its status")
    args = ap.parse_args()
    rounds = args.rounds or (3 if args.quick else 10)
    with BenchFleet() as fleet:
        url = fleet.start_api()
        info = DeviceInfo(id=DEVICE, platform=Platform.IOS, os_version="17.5")
        holder = lease_holder(worker_name(DEVICE))
        fleet.store().registry.register(info, holder, lease_s=3600)
        answer = httpx.post(
            f"{url}/v1/runs",
            json={**SIGN_IN, "device": DEVICE},
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=30,
        )
        answer.raise_for_status()
        run_id = answer.json()["id"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("GOALFLEET_")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: bytecode cached after the warm-up
        env |= {"GOALFLEET_API_URL": url, "GOALFLEET_API_TOKEN": TOKEN}
        other = env
        if args.vs is not None:  # each tree's source first on the path, alike
            env = env | {"PYTHONPATH": str(ROOT)}
            other = env | {"PYTHONPATH": str(args.vs.resolve())}
        cases = {
            "python -c pass": ([sys.executable, "-c", "pass"], env),
            "goalfleet --help": ([*goalfleet(), "--help"], env),
            "goalfleet status ID": ([*goalfleet(), "status", run_id], env),
            "goalfleet status ID --json": ([*goalfleet(), "status", run_id, "--json"], env),
            "pydantic + http.client alone": ([sys.executable, "-c", FLOOR], env),
            "pydantic + httpx alone": ([sys.executable, "-c", FLOOR_HTTPX], env),
        }
        if args.vs is not None:
            cases[vs_row(args.vs)] = ([*goalfleet(), "status", run_id], other)
        for argv, given in cases.values():  # warm the page cache and .pyc files
            timed(argv, given)
        ms: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(rounds):
            for name, (argv, given) in cases.items():
                ms[name].append(timed(argv, given))
    floor = median(ms["python -c pass"])
    print(f"# CLI start ({rounds} rounds, medians, {machine()})\n")
    print("| command | median | min | ratio to `python -c pass` |\n| --- | ---: | ---: | ---: |")
    for name, xs in ms.items():
        print(f"| `{name}` | {median(xs):.0f} ms | {min(xs):.0f} ms | {median(xs) / floor:.1f}x |")
    if args.vs is not None:
        pairs = [b / a for a, b in zip(ms["goalfleet status ID"], ms[vs_row(args.vs)], strict=True)]
        print(
            f"\n`status ID` {args.vs} / this tree, pair by pair: median {median(pairs):.2f}, "
            f"{min(pairs):.2f}-{max(pairs):.2f}; load average {os.getloadavg()[0]:.1f}"
        )


def vs_row(tree: Path) -> str:
    """The row of `--vs`'s tree: its `status ID`."""
    return f"goalfleet status ID ({tree})"


if __name__ == "__main__":
    main()
