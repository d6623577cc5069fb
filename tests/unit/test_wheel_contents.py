"""The wheel ships the product, not its test harness: the packages pyproject.toml hands to
setuptools are `workers` and `scheduler` with no harness module in them, and the harness the
tests and benchmarks share (`testing`: the Linux desktop, network namespaces, sentinels, the
sample screens, the /proc watcher) still imports from the repository."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

import setuptools

ROOT = Path(__file__).parents[2]
FIND = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]


def test_the_wheel_holds_no_test_harness() -> None:
    """What setuptools packs for the wheel: no `testing` package at any depth."""
    shipped = setuptools.find_packages(where=str(ROOT), include=FIND["find"]["include"])
    assert "workers.core" in shipped
    assert "scheduler.store.history" in shipped
    harness = [p for p in shipped if "testing" in p.split(".") or p.startswith("tests")]
    assert harness == []


def test_the_harness_imports_outside_the_wheel() -> None:
    """Each harness module imports as `testing.<name>` from the repository root."""
    for name in ("linux_desktop", "netns", "proc_watch", "samples", "sentinels"):
        module = importlib.import_module(f"testing.{name}")
        assert Path(module.__file__ or "").parent == ROOT / "testing"
