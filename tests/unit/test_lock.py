"""Installs are reproducible: `make` installs from requirements.lock, which pins every package
that pyproject.toml's dependencies and its dev and model extras need, each at a version
pyproject.toml allows; and each runtime dependency has a ceiling."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
DIRECT = [
    Requirement(line)
    for line in [*PROJECT["dependencies"], *PROJECT["optional-dependencies"]["dev"],
                 *PROJECT["optional-dependencies"]["model"]]
]  # fmt: skip


def _pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        found = re.fullmatch(r"([A-Za-z0-9._-]+)==([^\s;]+)(\s*;.*)?", line.strip())
        assert found, f"requirements.lock: not a pin: {line!r}"
        pins[canonicalize_name(found.group(1))] = found.group(2)
    return pins


@pytest.mark.parametrize("req", DIRECT, ids=[r.name for r in DIRECT])
def test_every_dependency_is_pinned_where_pyproject_allows(req: Requirement) -> None:
    """A dependency added to pyproject.toml, or a bound moved past the pin, fails here until
    the lock is made again (`make lock`)."""
    pins = _pins()
    name = canonicalize_name(req.name)
    assert name in pins, f"{req.name} is not in requirements.lock: run make lock"
    assert req.specifier.contains(pins[name], prereleases=True), (
        f"requirements.lock pins {req.name}=={pins[name]}, outside {req.specifier}: make lock"
    )


def test_the_lock_says_how_it_was_made() -> None:
    head = (ROOT / "requirements.lock").read_text().splitlines()[:3]
    assert any("make lock" in line for line in head), head


@pytest.mark.parametrize(
    "req", [Requirement(r) for r in PROJECT["dependencies"]], ids=lambda r: r.name
)
def test_every_runtime_dependency_has_a_ceiling(req: Requirement) -> None:
    """An install without the lock (`pip install goalfleet`) never takes a new major release."""
    assert any(s.operator in {"<", "==", "~="} for s in req.specifier), f"{req} has no upper bound"
