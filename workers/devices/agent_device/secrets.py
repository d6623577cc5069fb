"""Typing a secret on the Linux desktop without it ever being on a command line.

agent-device 0.21.5 types a Linux `fill` as `xdotool type --clearmodifiers -- <TEXT>`
(`typeLinux` in dist/src/input-actions2.js): the text is in xdotool's argv, so in
`/proc/PID/cmdline`, which every local user can read, for as long as xdotool types (~12 ms a
character). Its variables (`AD_VAR_<NAME>`) change nothing: a replay expands them into the same
argv, and a live fill does not read them.

So a secret never goes to a Linux-desktop daemon at all:

- `start_daemon` puts `<state_dir>/bin` first on such a daemon's PATH; `bin/xdotool` is a small
  sh shim (`install_shim`) that passes every call through to the real xdotool, except
  `type ... -- goalfleet-secret:<nonce>`, which it turns into
  `<real xdotool> type ... --file <state_dir>/secret-input/<nonce>`;
- the adapter (`SecretChannel.handing`) makes that FIFO (mode 0600, in a 0700 dir), sends the
  fill with the placeholder `goalfleet-secret:<nonce>` instead of the value, and writes the value
  into the FIFO from a thread once xdotool opens it.

The value goes from the worker's memory through a pipe into xdotool's memory, and from there as
key events to the X server; it is in no argv, no environment, no file and no daemon request.
Everything else about the fill stays agent-device's: the pinned-ref checks, the click and
select-all, settle and its diff, `recordAs`. Should the shim be missing (a daemon we did not
start), the placeholder is what gets typed: the sign-in fails, the secret does not leak; the
adapter refuses a secret fill on a daemon without the channel before that (`of_daemon`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
import shutil
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from workers.core.errors import ConfigError
from workers.core.model import InputValue, Platform

__all__ = [
    "PLACEHOLDER_PREFIX",
    "SecretChannel",
    "channel_dir",
    "install_shim",
    "mark_daemon",
    "record_name",
    "typed_value",
]

PLACEHOLDER_PREFIX = "goalfleet-secret:"
SHIM_DIR = "bin"
CHANNEL_DIR = "secret-input"
DAEMON_MARK = "daemon.pid"
"""In the channel dir: the pid of the daemon started with the shim first on its PATH."""
_WRITER_JOIN_S = 5.0

_SHIM = """#!/bin/sh
# goalfleet's xdotool shim (workers/devices/agent_device/secrets.py). agent-device types a
# Linux fill as `xdotool type ... -- TEXT`; for a secret goalfleet sends
# {prefix}<nonce> as TEXT and hands the value over the FIFO {channel}/<nonce>,
# which xdotool reads with --file: the value is never on a command line.
# Every other call goes through unchanged.
real={real}
channel={channel}
if [ "$1" = type ]; then
  for last do :; done
  case $last in
  {prefix}*)
    nonce=${{last#{prefix}}}
    case $nonce in
    '' | *[!0-9a-f]*) echo "goalfleet xdotool shim: a malformed secret handle" >&2; exit 2 ;;
    esac
    n=$#
    i=0
    for arg do
      i=$((i + 1))
      if [ "$i" -lt $((n - 1)) ]; then
        set -- "$@" "$arg"
      elif [ "$i" -eq $((n - 1)) ] && [ "$arg" != -- ]; then
        echo "goalfleet xdotool shim: expected '-- {prefix}<nonce>' last" >&2
        exit 2
      fi
    done
    shift "$n"
    exec "$real" "$@" --file "$channel/$nonce"
    ;;
  esac
fi
exec "$real" "$@"
"""


def record_name(input_name: str) -> str:
    """The agent-device variable name for an input: `password` → `PASSWORD`.

    Names must be upper-case letters, digits and `_`, and `AD_*` is reserved."""
    name = "".join(ch if ch.isalnum() else "_" for ch in input_name).upper()
    if not name or not name[0].isalpha() or name.startswith("AD_"):
        name = f"GF_{name}"
    return name


def channel_dir(state_dir: Path) -> Path:
    return state_dir / CHANNEL_DIR


def install_shim(state_dir: Path, path: str) -> Path | None:
    """Write the xdotool shim into `<state_dir>/bin` and make the channel dir; return the dir to
    put first on the daemon's PATH, or None when `path` has no xdotool (agent-device then says
    TOOL_MISSING itself)."""
    shim_dir = state_dir / SHIM_DIR
    search = os.pathsep.join(p for p in path.split(os.pathsep) if p and Path(p) != shim_dir)
    real = shutil.which("xdotool", path=search)
    if real is None:
        return None
    shim_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    channel = channel_dir(state_dir)
    channel.mkdir(parents=True, exist_ok=True, mode=0o700)
    channel.chmod(0o700)
    (channel / DAEMON_MARK).unlink(missing_ok=True)
    text = _SHIM.format(
        real=shlex.quote(str(Path(real).resolve())),
        channel=shlex.quote(str(channel)),
        prefix=PLACEHOLDER_PREFIX,
    )
    shim = shim_dir / "xdotool"
    shim.write_text(text, encoding="utf-8")
    shim.chmod(0o700)
    return shim_dir


def mark_daemon(state_dir: Path, pid: int) -> None:
    """Record that the daemon `pid` runs with the shim (`SecretChannel.of_daemon` checks it)."""
    (channel_dir(state_dir) / DAEMON_MARK).write_text(str(pid), encoding="utf-8")


@dataclass(frozen=True)
class SecretChannel:
    """The FIFO dir of one Linux-desktop daemon started with the shim."""

    path: Path

    @classmethod
    def of_daemon(cls, state_dir: Path, daemon_pid: int) -> SecretChannel | None:
        """The channel of the daemon `daemon_pid` of `state_dir`, or None if that daemon was not
        started with the shim (by someone else, or before this existed)."""
        channel = channel_dir(state_dir)
        try:
            marked = int((channel / DAEMON_MARK).read_text(encoding="utf-8").strip())
        except (FileNotFoundError, ValueError):
            return None
        if marked != daemon_pid or not (state_dir / SHIM_DIR / "xdotool").is_file():
            return None
        return cls(channel)

    @contextlib.contextmanager
    def handing(self, value: str) -> Iterator[str]:
        """A placeholder to send in place of `value`, while `value` waits in a FIFO for the
        xdotool that types it. On the way out the FIFO is gone, and so is a value nobody read
        (the fill failed before it typed)."""
        nonce = secrets.token_hex(16)
        fifo = self.path / nonce
        os.mkfifo(fifo, 0o600)
        writer = _Writer(fifo, value.encode())
        writer.start()
        try:
            yield f"{PLACEHOLDER_PREFIX}{nonce}"
        finally:
            _finish(fifo, writer)


@contextlib.contextmanager
def typed_value(
    value: InputValue, platform: Platform, channel: SecretChannel | None
) -> Iterator[str]:
    """What a fill sends the daemon for `value`: the literal, except for a (non-empty) secret
    on the Linux desktop, where it is a placeholder while the value waits in `channel`'s FIFO.
    A Linux daemon without a channel (one goalfleet did not start) would put the secret on
    xdotool's command line: refused."""
    literal = value.reveal()
    if not (value.sensitive and literal and platform is Platform.LINUX):
        yield literal
        return
    if channel is None:
        raise ConfigError(
            f"input {value.name!r} is sensitive and this Linux daemon has no secret channel: "
            "agent-device would type it on xdotool's command line",
            hint="let goalfleet start the daemon (goalfleet run --device agent-device:linux, "
            "or goalfleet worker), which types secrets from a pipe",
        )
    with channel.handing(literal) as placeholder:
        yield placeholder


class _Writer(threading.Thread):
    """Writes the value once a reader opens the FIFO (`open` blocks until then), then closes
    it, which is the reader's end of file."""

    def __init__(self, fifo: Path, data: bytes) -> None:
        super().__init__(name="secret-fifo", daemon=True)
        self._fifo = fifo
        self._data = data

    def run(self) -> None:
        try:
            fd = os.open(self._fifo, os.O_WRONLY | os.O_CLOEXEC)
        except OSError:
            return
        try:
            view = memoryview(self._data)
            while view:
                view = view[os.write(fd, view) :]
        except OSError:
            pass  # the reader went away (BrokenPipeError): nothing more to hand over
        finally:
            os.close(fd)


def _finish(fifo: Path, writer: _Writer) -> None:
    """Unblock whichever side still waits, then remove the FIFO."""
    try:
        if writer.is_alive():
            # nobody opened it to read: open it ourselves so the writer's open returns, let it
            # write into the pipe, and drop what it wrote by closing the last reader
            reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                writer.join(_WRITER_JOIN_S)
            finally:
                os.close(reader)
        with contextlib.suppress(OSError):
            # a reader that opened after the value was handed over (the daemon typed twice)
            # would wait for a writer for ever: give it an end of file
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC))
    finally:
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISFIFO(fifo.lstat().st_mode):
                fifo.unlink()
