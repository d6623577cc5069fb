"""Many devices on one host: every agent-device device gets a state dir of its own (and so its
own daemon lock and daemon), keyed by the device, and by its display and bus on Linux."""

from __future__ import annotations

from pathlib import Path

from workers.devices.agent_device.launch import resolve_spec, state_dir_for

LINUX = "agent-device:linux"


def desk(display: str, bus: str = "unix:path=/tmp/bus-a") -> dict[str, str]:
    return {"HOME": "/home/farm", "DISPLAY": display, "DBUS_SESSION_BUS_ADDRESS": bus}


def test_linux_workers_on_three_displays_under_one_home_get_three_state_dirs():
    """Three displays, one HOME: three state dirs under the same root; the same display and bus
    is the same device, so the same dir (one device, one driver)."""
    dirs = {state_dir_for(LINUX, env=desk(d)) for d in (":101", ":102", ":103")}
    assert len(dirs) == 3
    assert {d.parent for d in dirs} == {Path("/home/farm/.cache/goalfleet/agent-device")}
    assert state_dir_for(LINUX, env=desk(":101")) == state_dir_for(LINUX, env=desk(":101"))


def test_another_session_bus_on_the_same_display_is_another_state_dir():
    """A daemon serves one session bus: another bus on the same display is kept apart."""
    a = state_dir_for(LINUX, env=desk(":101", "unix:path=/tmp/bus-a"))
    b = state_dir_for(LINUX, env=desk(":101", "unix:path=/tmp/bus-b"))
    assert a != b
    assert a.name.startswith("agent-device_linux@_101-")


def test_simulators_and_emulators_are_keyed_by_their_udid_or_serial():
    """`ios:<udid>` and `android:<serial>` already name one device each."""
    env = {"HOME": "/home/farm"}
    assert state_dir_for("ios:AAAA-1", env=env).name == "ios_AAAA-1"
    assert state_dir_for("android:emulator-5556", env=env).name == "android_emulator-5556"
    assert state_dir_for("ios:AAAA-1", env=env) != state_dir_for("ios:AAAA-2", env=env)


def test_a_role_keeps_a_second_daemon_of_the_same_device_apart():
    """The quarantine probe's daemon never shares the state dir of the pool child's."""
    run = state_dir_for(LINUX, env=desk(":101"))
    probe = state_dir_for(LINUX, env=desk(":101"), role="probe")
    assert probe != run
    assert probe.name == f"{run.name}+probe"


def test_resolve_spec_uses_the_keyed_state_dir_and_its_own_claims_dir(tmp_path: Path):
    """The daemon of a Linux display keeps its claims beside its state, never host-wide."""
    target = resolve_spec(LINUX, env=desk(":102"), state_root=tmp_path)
    assert target.state_dir == state_dir_for(LINUX, env=desk(":102"), state_root=tmp_path)
    assert target.claims_dir == target.state_dir / "claims"
