"""A process that opens `agent-device:linux` the way goalfleet does (its environment, the state
root in argv[1]) from a thread (argv[2] `thread`, the default) or its main thread (`main`), says
`opened <daemon pid>`, and waits to be killed.

A daemon started from a thread does not get the owner's death signal (PR_SET_PDEATHSIG follows
the spawning thread), as with the quarantine probe in a worker's heartbeat thread; so killing
this process leaves the daemon running with its `goalfleet` session open: the state the tests of
test_daemon_ownership.py start from. One started from the main thread gets SIGTERM when this
process dies, and shuts down over a second or two, still holding its state dir's lock."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from workers.devices.agent_device.daemon import read_daemon_info
from workers.devices.agent_device.device import AgentDeviceDevice
from workers.devices.agent_device.host import open_device
from workers.devices.agent_device.launch import state_dir_for


def main() -> None:
    root = Path(sys.argv[1])
    opened: list[AgentDeviceDevice] = []

    def open_it() -> None:
        opened.append(open_device("agent-device:linux", state_root=root))

    if sys.argv[2:3] == ["main"]:
        open_it()
    else:
        thread = threading.Thread(target=open_it)
        thread.start()
        thread.join()
    info = read_daemon_info(state_dir_for("agent-device:linux", state_root=root))
    sys.stdout.write(f"opened {info.pid if info and opened else 0}\n")
    sys.stdout.flush()
    time.sleep(600)


if __name__ == "__main__":
    main()
