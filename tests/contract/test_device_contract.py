"""The DevicePort contract, run against SimDevice and the real agent-device daemon, so the
simulation cannot drift from the real thing. Only what both must share is checked here."""

from __future__ import annotations

import re

import pytest
from pydantic import SecretStr

from workers.core.errors import STALE_REASONS, ConfigError, StaleRefError
from workers.core.model import InputValue, Kind
from workers.core.ports import DevicePort

PINNED = re.compile(r"^@e[0-9]+~s[0-9]+$")
SECRET = "contract-S3cret!"


def test_is_a_device_port(contract_device):
    """Both implement the Protocol."""
    assert isinstance(contract_device, DevicePort)


def test_snapshot_has_refs_a_generation_and_candidates(contract_device):
    """Refs are eN, the generation is digits, a text field and a button are candidates."""
    snap = contract_device.snapshot()
    assert snap.refs_generation.isdigit()
    assert all(re.fullmatch(r"e[0-9]+", n.ref) for n in snap.nodes)
    kinds = {c.kind for c in snap.candidates}
    assert Kind.TEXT_FIELD in kinds
    assert Kind.BUTTON in kinds
    assert PINNED.match(snap.pin(snap.candidates[0].ref))


def test_every_snapshot_advances_the_generation(contract_device):
    """Two snapshots, two generations, the second newer."""
    a = contract_device.snapshot()
    b = contract_device.snapshot()
    assert int(b.refs_generation) > int(a.refs_generation)


def test_press_settles_into_a_newer_generation(contract_device):
    """A pinned press reports the settle diff and a generation newer than its snapshot."""
    snap = contract_device.snapshot()
    button = next(c for c in snap.candidates if c.kind is Kind.BUTTON)
    result = contract_device.press(snap.pin(button.ref))
    assert int(result.refs_generation) > int(snap.refs_generation)
    assert result.changed == (result.additions + result.removals > 0)


def test_a_pinned_ref_is_stale_after_a_mutation(contract_device):
    """Re-using a ref pinned before a mutation is a StaleRefError with a documented reason."""
    snap = contract_device.snapshot()
    button = next(c for c in snap.candidates if c.kind is Kind.BUTTON)
    contract_device.press(snap.pin(button.ref))
    with pytest.raises(StaleRefError) as info:
        contract_device.press(snap.pin(button.ref))
    assert info.value.reason in STALE_REASONS


def test_an_unknown_ref_is_stale(contract_device):
    """A ref the current screen does not have is a StaleRefError, not an action."""
    snap = contract_device.snapshot()
    with pytest.raises(StaleRefError):
        contract_device.press(f"@e999~s{snap.refs_generation}")


def test_an_unpinned_ref_is_refused(contract_device):
    """Mutations take pinned refs only (the sim says stale, the adapter refuses earlier)."""
    snap = contract_device.snapshot()
    with pytest.raises((StaleRefError, ConfigError)):
        contract_device.press(f"@{snap.candidates[0].ref}")


def test_a_secret_never_shows_in_later_snapshots(contract_device):
    """Type a secret into a text field; no later snapshot carries it.

    A real plain entry reports its text as its label (GTK/AT-SPI), so the adapter masks secrets
    it typed; SimDevice shows them as dots (a drift this contract found, now fixed)."""
    snap = contract_device.snapshot()
    field = next(c for c in snap.candidates if c.kind.fillable)
    value = InputValue(name="password", value=SecretStr(SECRET), sensitive=True)
    result = contract_device.fill(snap.pin(field.ref), value)
    assert SECRET not in repr(result)
    assert SECRET not in contract_device.snapshot().model_dump_json()
