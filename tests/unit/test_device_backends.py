"""One registry of device backends, keyed by the scheme of a device spec: the factory and
`goalfleet worker --backend` ask it, and a spec of no backend names every form."""

from __future__ import annotations

import pytest

from workers.core.errors import ConfigError
from workers.core.model import Platform
from workers.devices.backend import BACKENDS, backend_for
from workers.devices.factory import backend_names, release_device, worker_device_spec


@pytest.mark.parametrize(
    ("spec", "name"),
    [
        ("sim:signin-ios", "sim"),
        ("sim:signin-android", "sim"),
        ("agent-device:linux", "agent-device"),
        ("ios:00008030-001A2B3C", "agent-device"),
        ("android:emulator-5554", "agent-device"),
    ],
)
def test_a_spec_finds_its_backend_by_its_scheme(spec: str, name: str):
    assert backend_for(spec).name == name


@pytest.mark.parametrize("spec", ["usb:1", "sim", "agent-device:mac", "sim:signin-linux", ""])
def test_a_spec_of_no_backend_names_every_form(spec: str):
    with pytest.raises(ConfigError) as err:
        backend_for(spec)
    assert str(err.value) == (
        f"--device {spec!r} is not a device spec; use sim:<app>-<ios|android> (e.g. "
        "sim:signin-ios), agent-device:linux, ios:<udid> or android:<serial>"
    )


def test_an_unknown_sim_app_is_named_with_the_known_ones():
    with pytest.raises(ConfigError, match=r"unknown sim app in --device 'sim:nope-ios'; known: "):
        backend_for("sim:nope-ios")


def test_the_worker_backends_and_their_specs_come_from_the_registry():
    """`--backend` choices are the registry's names, each backend derives its worker's spec."""
    assert backend_names() == [b.name for b in BACKENDS] == ["sim", "agent-device"]
    assert len({s for b in BACKENDS for s in b.schemes}) == sum(len(b.schemes) for b in BACKENDS)
    spec = worker_device_spec
    assert spec("sim", Platform.ANDROID, "a-1", app="privacy", target="") == "sim:privacy-android"
    assert spec("agent-device", Platform.LINUX, "lx", app="signin", target="") == (
        "agent-device:linux"
    )
    assert spec("agent-device", Platform.ANDROID, "emulator-5554", app="", target="") == (
        "android:emulator-5554"
    )
    assert spec("agent-device", Platform.IOS, "i", app="", target="ios:ABC-1") == "ios:ABC-1"
    with pytest.raises(ConfigError, match="--backend sim has iOS and Android apps only"):
        spec("sim", Platform.LINUX, "lx", app="signin", target="")
    with pytest.raises(ConfigError, match="--backend 'usb' is not a backend; use one of sim, "):
        spec("usb", Platform.IOS, "i", app="", target="")


def test_a_sim_spec_holds_nothing_to_release():
    assert release_device("sim:signin-ios") is False
