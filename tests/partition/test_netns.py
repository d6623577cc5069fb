"""The network lab itself (`testing.netns`): hosts reach each other only inside their
namespaces, a cut drops a host's traffic until healed, and nothing is left behind."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

import pytest

from testing.netns import PREFIX, NetLab, ip, namespaces, remove_leftovers
from workers.core.errors import ConfigError
from workers.processes import pid_alive

PORT = 7777


def _listen(address: str) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((address, PORT))
    s.listen()
    return s


def _connects(address: str, timeout_s: float) -> bool:
    try:
        socket.create_connection((address, PORT), timeout=timeout_s).close()
    except OSError:
        return False
    return True


def test_hosts_reach_each_other_and_a_cut_drops_traffic_until_healed(lab: NetLab):
    """A listener on `redis` is reached from `ctl`; with `ctl` cut off, a connection attempt
    fails; healed, it succeeds again. The machine's own namespace gains no address."""
    target = lab.address("redis")
    with lab.inside("redis") as srv, lab.inside("ctl") as ctl:
        listener = srv.call(_listen, target)
        try:
            assert ctl.call(_connects, target, 10.0)
            lab.cut("ctl")
            assert not ctl.call(_connects, target, 2.0)
            lab.heal("ctl")
            assert ctl.call(_connects, target, 10.0)
        finally:
            srv.call(listener.close)
    own = ip("-o", "addr", "show")
    assert all(address not in own for _, address in lab.hosts.values())
    assert all(ns in namespaces() for ns in lab.made)


def test_stop_removes_every_namespace_and_what_runs_there():
    """`stop` kills a process left running inside a host and deletes every namespace."""
    lab = NetLab(["host-a"], subnet="10.213.7.0/24").start()
    sleeper = subprocess.Popen(lab.argv("host-a", ["sleep", "300"]))
    try:
        made = list(lab.made)
        inside = lab.namespace("host-a")
        deadline = time.monotonic() + 30
        while str(sleeper.pid) not in ip("netns", "pids", inside).split():
            assert time.monotonic() < deadline, "sleep never started inside host-a"
            time.sleep(0.05)
    finally:
        lab.stop()
        try:
            status = sleeper.wait(timeout=10)
        finally:
            sleeper.kill()
    assert status == -signal.SIGKILL
    assert not set(made) & set(namespaces())


def test_leftovers_of_a_dead_owner_go_and_a_live_owners_stay():
    """A namespace named for an owner pid that is gone (a crashed test) is deleted; one of a
    live owner is left alone."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    dead = int(done.stdout)
    assert not pid_alive(dead)
    stale, live = f"{PREFIX}{dead}-host-a", f"{PREFIX}1-host-a"
    ip("netns", "add", stale)
    ip("netns", "add", live)
    try:
        assert stale in remove_leftovers()
        assert stale not in namespaces()
        assert live in namespaces()
    finally:
        ip("netns", "del", stale, check=False)
        ip("netns", "del", live, check=False)


@pytest.mark.parametrize(
    ("hosts", "subnet"),
    [
        (["host-a"], "192.168.5.0/24"),  # not inside 10.0.0.0/8
        (["host-a"], "10.213.0.0/16"),  # not a /24
        (["sw"], "10.213.0.0/24"),  # the switch's own name
        (["host-a", "host-a"], "10.213.0.0/24"),
        (["Host_A"], "10.213.0.0/24"),
        (["a-very-long-host-name"], "10.213.0.0/24"),  # its port name would pass 15 characters
        ([], "10.213.0.0/24"),
    ],
)
def test_bad_lab_is_refused_before_anything_is_made(hosts: list[str], subnet: str):
    before = namespaces()
    with pytest.raises(ConfigError):
        NetLab(hosts, subnet=subnet)
    assert namespaces() == before
