"""The README's fleet block, pasted into a shell as it is, works: Redis, the API, the
scheduler and a sim worker come up, the submitted run ends `done` with its step table and run
id printed.

The block names fixed ports (Redis 6379, the API 8787), so it runs in a network namespace of
its own (`unshare --net`, with only its own loopback): nothing it starts can meet another
test's processes or a Redis on this host."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from workers.processes import spawn

ROOT = Path(__file__).resolve().parents[2]
START = "<!-- fleet-block"
END = "<!-- /fleet-block -->"
RUN_ID = re.compile(r"[0-9a-f]{32}")


def fleet_block() -> str:
    """The shell block between the README's fleet-block markers, as a user would copy it."""
    text = (ROOT / "README.md").read_text()
    start = text.index(START)
    between = text[start : text.index(END, start)]
    found = re.search(r"```sh\n(.*?)```", between, re.DOTALL)
    assert found, "no ```sh block between the fleet-block markers"
    return found.group(1)


def _unshare() -> list[str]:
    """`unshare --net` as root; otherwise in a user namespace that maps us to root."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.fail("needs unshare (util-linux) and ip (iproute2)")
    return ["unshare", "--net"] + ([] if os.geteuid() == 0 else ["--map-root-user"])


def test_the_readme_fleet_block_works_pasted_as_is() -> None:
    assert (ROOT / ".venv/bin/goalfleet").exists(), "make install first (the block runs .venv)"
    script = (
        "ip link set lo up\n"  # the namespace's own loopback: 127.0.0.1, nobody else's
        "trap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n"  # what the README says stops them
        "set -e\n" + fleet_block()
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOALFLEET_", "REDIS_"))}
    env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
    if shutil.which("redis-server") is None:  # the block runs the one on PATH
        pytest.fail("needs redis-server on PATH (Debian's redis-server; make test installs it)")
    tmp = Path(tempfile.mkdtemp(prefix="gf-readme-"))
    (tmp / "block.sh").write_text(script)
    out = tmp / "out.log"
    child = spawn([*_unshare(), "bash", str(tmp / "block.sh")], env=env, log=out, cwd=ROOT)
    try:
        code = child.wait(timeout=240)
    finally:
        child.stop()  # the whole group, whatever the block left
    text = out.read_text()
    assert code == 0, text[-4000:]
    assert "Traceback" not in text, text[-4000:]
    lines = text.splitlines()
    assert any(re.match(r"done run [0-9a-f]{8} on ios-1 ", line) for line in lines), text[-4000:]
    assert RUN_ID.fullmatch(lines[-1].strip()) or any(RUN_ID.fullmatch(x) for x in lines), text
    assert any(re.match(r"ios-1\s+ios\s", line) for line in lines), text[-4000:]  # the devices
