"""The secret channel of a Linux-desktop daemon: the xdotool shim (run for real by /bin/sh, in
front of a stand-in xdotool that prints what it was given) and the FIFO hand-over.

The argv shapes are agent-device 0.21.5's (`typeLinux` in dist/src/input-actions2.js):
`type [--delay N] --clearmodifiers -- TEXT`. The real stack is in
tests/agent_device/test_secret_argv.py.
"""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest
from pydantic import SecretStr

from workers.core.errors import ConfigError
from workers.core.model import InputValue, Platform
from workers.devices.agent_device.secrets import (
    PLACEHOLDER_PREFIX,
    SecretChannel,
    channel_dir,
    install_shim,
    mark_daemon,
    typed_value,
)

SECRET = "s3cret 'with' $pace\\s; `and` \"quotes\""

FAKE_XDOTOOL = """#!/bin/sh
for a do printf 'arg:%s\\n' "$a"; done
while [ $# -gt 0 ]; do
  if [ "$1" = --file ]; then printf 'read:%s\\n' "$(cat "$2")"; fi
  shift
done
"""


@pytest.fixture
def state(tmp_path: Path) -> tuple[Path, Path]:
    """A state dir with the shim installed in front of a stand-in xdotool; (state, shim)."""
    real = tmp_path / "real bin"
    real.mkdir()
    (real / "xdotool").write_text(FAKE_XDOTOOL)
    (real / "xdotool").chmod(0o755)
    state = tmp_path / "state"
    shim_dir = install_shim(state, f"{real}:/usr/bin:/bin")
    assert shim_dir == state / "bin"
    return state, shim_dir / "xdotool"


def run(shim: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(shim), *args], capture_output=True, text=True, timeout=10, check=False
    )


def args_of(out: str) -> list[str]:
    return [line.removeprefix("arg:") for line in out.splitlines() if line.startswith("arg:")]


def test_the_shim_types_a_secret_from_the_fifo(state):
    """`type --clearmodifiers -- goalfleet-secret:<nonce>` becomes `type --clearmodifiers
    --file <fifo>`; xdotool reads the value there, and the FIFO is gone afterwards."""
    state_dir, shim = state
    channel = SecretChannel(channel_dir(state_dir))
    with channel.handing(SECRET) as placeholder:
        assert placeholder.startswith(PLACEHOLDER_PREFIX)
        assert SECRET not in placeholder
        done = run(shim, "type", "--delay", "5", "--clearmodifiers", "--", placeholder)
    assert done.returncode == 0, done.stderr
    fifo = channel_dir(state_dir) / placeholder.removeprefix(PLACEHOLDER_PREFIX)
    assert args_of(done.stdout) == ["type", "--delay", "5", "--clearmodifiers", "--file", str(fifo)]
    assert f"read:{SECRET}" in done.stdout
    assert not fifo.exists()


@pytest.mark.parametrize(
    "args",
    [
        ("type", "--clearmodifiers", "--", "plain text"),
        ("type", "--clearmodifiers", "--", f"x{PLACEHOLDER_PREFIX}abc"),
        ("mousemove", "--sync", "10", "20"),
        ("getmouselocation", "--shell"),
        ("key", "--clearmodifiers", "ctrl+a"),
    ],
)
def test_every_other_call_goes_through_unchanged(state, args):
    _, shim = state
    done = run(shim, *args)
    assert done.returncode == 0, done.stderr
    assert args_of(done.stdout) == list(args)


@pytest.mark.parametrize(
    "args",
    [
        ("type", "--clearmodifiers", "--", f"{PLACEHOLDER_PREFIX}../../etc/passwd"),
        ("type", "--clearmodifiers", "--", PLACEHOLDER_PREFIX),
        ("type", "--clearmodifiers", f"{PLACEHOLDER_PREFIX}abc123"),
    ],
)
def test_a_malformed_handle_or_argv_shape_is_refused(state, args):
    """Only hex nonces, and only after `--` (agent-device's shape): anything else exits 2
    without running xdotool."""
    _, shim = state
    done = run(shim, *args)
    assert done.returncode == 2
    assert "goalfleet xdotool shim" in done.stderr
    assert done.stdout == ""


def test_the_shim_and_channel_are_private(state):
    state_dir, shim = state
    assert shim.stat().st_mode & 0o777 == 0o700
    assert channel_dir(state_dir).stat().st_mode & 0o777 == 0o700
    channel = SecretChannel(channel_dir(state_dir))
    with channel.handing(SECRET) as placeholder:
        fifo = channel_dir(state_dir) / placeholder.removeprefix(PLACEHOLDER_PREFIX)
        assert fifo.stat().st_mode & 0o777 == 0o600


def test_no_xdotool_no_shim(tmp_path):
    """Without a real xdotool there is nothing to wrap: agent-device says TOOL_MISSING."""
    assert install_shim(tmp_path / "state", str(tmp_path / "empty")) is None
    assert not (tmp_path / "state" / "bin").exists()


def test_an_unread_value_is_dropped_without_hanging(tmp_path):
    """The fill failed before it typed: leaving the hand-over neither blocks nor leaves the
    FIFO (or its value) behind."""
    channel = SecretChannel(tmp_path)
    with channel.handing(SECRET):
        pass
    assert list(tmp_path.iterdir()) == []
    assert not [t for t in threading.enumerate() if t.name == "secret-fifo"]


def test_the_channel_belongs_to_the_daemon_started_with_the_shim(state):
    """`of_daemon`: only for the daemon pid the shim was installed for."""
    state_dir, _ = state
    assert SecretChannel.of_daemon(state_dir, 4242) is None  # not marked yet
    mark_daemon(state_dir, 4242)
    assert SecretChannel.of_daemon(state_dir, 4242) == SecretChannel(channel_dir(state_dir))
    assert SecretChannel.of_daemon(state_dir, 4243) is None  # another daemon in that dir
    real = state_dir.parent / "real bin"
    install_shim(state_dir, str(real))  # a new daemon is being started: unmarked again
    assert SecretChannel.of_daemon(state_dir, 4242) is None


@pytest.mark.parametrize(
    ("value", "platform"),
    [
        (InputValue(name="email", value=SecretStr("a@b.c")), Platform.LINUX),
        (InputValue(name="password", value=SecretStr(""), sensitive=True), Platform.LINUX),
        (InputValue(name="password", value=SecretStr(SECRET), sensitive=True), Platform.ANDROID),
    ],
)
def test_what_is_sent_as_is(value: InputValue, platform: Platform):
    """A plain value, an empty secret (a fill that clears the field types nothing), and a
    secret off the Linux desktop go as they are, with or without a channel."""
    with typed_value(value, platform, None) as sent:
        assert sent == value.reveal()


def test_a_linux_secret_without_a_channel_is_refused():
    value = InputValue(name="password", value=SecretStr(SECRET), sensitive=True)
    with (
        pytest.raises(ConfigError, match="no secret channel") as info,
        typed_value(value, Platform.LINUX, None),
    ):
        pass
    assert SECRET not in str(info.value)
