"""A private network of Linux network namespaces on one machine, for partition tests.

`NetLab(["redis", "ctl", "host-a"])` makes one namespace per host (`gfnet<pid>-<host>`) and a
switch namespace holding a bridge; each host has one veth (`eth0`, a private 10.x address on
a /24) whose peer is a port of that bridge. Nothing is added to the machine's own namespace:
no link, no address, no route. `cut(host)` takes the host's switch port down (its `eth0`
loses carrier: packets to and from it are dropped, its TCP connections stall as in a real
partition) and `heal(host)` brings it back.

- `argv(host, [...])` runs a program inside a host (`ip netns exec`); `inside(host)` is a
  thread of this process inside it (`setns`), for clients of the servers the lab runs.
- `stop()` kills whatever still runs in the namespaces and deletes them, also after a
  half-made start; `start()` first removes what a crashed earlier lab left (namespaces whose
  owner pid is gone), so a killed test leaves nothing behind for long.

Needs root and iproute2's `ip` (`scripts/setup-netns.sh` installs it).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import ipaddress
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Self, TypeVar

from workers.core.errors import ConfigError
from workers.processes import Stoppable, pid_alive

PREFIX = "gfnet"
NETNS_DIR = Path("/run/netns")
_OURS = re.compile(rf"^{PREFIX}(?P<pid>[0-9]+)-[a-z0-9-]+$")
_HOST = re.compile(r"^[a-z][a-z0-9-]{0,11}$")
"""A host's name: also its switch port's name (`p-<host>`, 15 characters at most)."""
_CLONE_NEWNET = 0x40000000
_IP_TIMEOUT_S = 30.0
_KILL_ROUNDS = 5
_PREFIXLEN = 24
"""One /24 per lab: up to 254 hosts."""
T = TypeVar("T")


def missing() -> str:
    """Why this machine cannot run a lab (empty when it can)."""
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed: bash scripts/setup-netns.sh"
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs as root)"
    return ""


def ip(*args: str, check: bool = True) -> str:
    """`ip ARGS`; a failure raises ConfigError with ip's own message."""
    try:
        done = subprocess.run(  # noqa: S603 - a fixed program, arguments from this module
            ["ip", *args],  # noqa: S607 - iproute2 is found on PATH like every admin tool
            capture_output=True,
            text=True,
            check=False,
            timeout=_IP_TIMEOUT_S,
        )
    except FileNotFoundError as exc:
        raise ConfigError("iproute2's `ip` is not installed: bash scripts/setup-netns.sh") from exc
    if check and done.returncode != 0:
        raise ConfigError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def namespaces() -> list[str]:
    """Every named network namespace (`ip netns list` prints `name (id: N)` or `name`)."""
    return [line.split()[0] for line in ip("netns", "list").splitlines() if line.strip()]


def remove_namespace(name: str) -> None:
    """SIGKILL what still runs in namespace `name` (only ever one of ours), then delete it."""
    for _ in range(_KILL_ROUNDS):  # again, for a process that was entering it meanwhile
        pids = [int(p) for p in ip("netns", "pids", name, check=False).split()]
        pids = [p for p in pids if p != os.getpid()]  # only a thread of this one may be inside
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    ip("netns", "del", name, check=False)


def remove_leftovers() -> list[str]:
    """Delete the namespaces of labs whose owner process is gone (a crashed or killed test);
    returns their names."""
    gone = []
    for name in namespaces():
        m = _OURS.fullmatch(name)
        if m is not None and not pid_alive(int(m.group("pid"))):
            remove_namespace(name)
            gone.append(name)
    return gone


class NetLab(Stoppable):
    """Hosts on one private switch. `address(host)` is where its servers listen."""

    def __init__(self, hosts: Sequence[str], *, subnet: str = "10.213.0.0/24") -> None:
        net = ipaddress.ip_network(subnet)
        private = ipaddress.IPv4Network("10.0.0.0/8")
        if not (
            isinstance(net, ipaddress.IPv4Network)
            and net.prefixlen == _PREFIXLEN
            and net.subnet_of(private)
        ):
            raise ConfigError(f"subnet {subnet!r}: give a /24 inside 10.0.0.0/8")
        if (
            not hosts
            or len(set(hosts)) != len(hosts)
            or any(h == "sw" or not _HOST.fullmatch(h) for h in hosts)
        ):
            raise ConfigError(f"hosts {list(hosts)!r}: distinct names like host-a, not 'sw'")
        self.owner = os.getpid()
        self.switch = self._ns("sw")
        first = net.network_address + 1
        self.hosts = {h: (self._ns(h), str(first + i)) for i, h in enumerate(hosts)}
        self.prefixlen = net.prefixlen
        self.made: list[str] = []
        """Namespaces made so far (what `stop` deletes)."""

    def _ns(self, host: str) -> str:
        return f"{PREFIX}{self.owner}-{host}"

    def start(self) -> Self:
        if why := missing():
            raise ConfigError(why)
        remove_leftovers()
        self._add(self.switch)
        ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        ip("-n", self.switch, "link", "set", "br0", "up")
        for host, (ns, address) in self.hosts.items():
            self._add(ns)
            port = f"p-{host}"
            ip("-n", self.switch, "link", "add", port, "type", "veth", "peer", "name", "eth0",
               "netns", ns)  # fmt: skip
            ip("-n", self.switch, "link", "set", port, "master", "br0", "up")
            ip("-n", ns, "addr", "add", f"{address}/{self.prefixlen}", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
        return self

    def _add(self, ns: str) -> None:
        ip("netns", "add", ns)
        self.made.append(ns)
        ip("-n", ns, "link", "set", "lo", "up")

    def stop(self) -> None:
        for ns in reversed(self.made):
            remove_namespace(ns)
        self.made.clear()

    # -- using it ---------------------------------------------------------------------------

    def namespace(self, host: str) -> str:
        return self.hosts[host][0]

    def address(self, host: str) -> str:
        return self.hosts[host][1]

    def argv(self, host: str, argv: Sequence[str]) -> list[str]:
        """`argv` run inside `host` (ip execs it: the pid is the program's own)."""
        return ["ip", "netns", "exec", self.namespace(host), *argv]

    def cut(self, host: str) -> None:
        """Partition `host` from every other host (its switch port goes down)."""
        ip("-n", self.switch, "link", "set", f"p-{host}", "down")

    def heal(self, host: str) -> None:
        ip("-n", self.switch, "link", "set", f"p-{host}", "up")

    def inside(self, host: str) -> Inside:
        return Inside(NETNS_DIR / self.namespace(host))


class Inside:
    """One thread of this process inside a network namespace: `call(fn, ...)` runs `fn` there,
    so every socket it opens (an HTTP client, a Redis client) is the namespace's. Use the
    clients only through `call`; `close()` (or `with`) ends the thread."""

    def __init__(self, netns_path: Path) -> None:
        # one worker thread, made on the first call and kept: it enters the namespace first
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="netns")
        try:
            self.call(_enter, netns_path)
        except BaseException:
            self.close()
            raise

    def call(self, fn: Callable[..., T], *args: object) -> T:
        return self._pool.submit(fn, *args).result()

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _enter(netns_path: Path) -> None:
    """setns(2) the calling thread into a network namespace (Python 3.11 has no os.setns)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    fd = os.open(netns_path, os.O_RDONLY)
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise ConfigError(f"setns {netns_path}: {os.strerror(err)}")
    finally:
        os.close(fd)
