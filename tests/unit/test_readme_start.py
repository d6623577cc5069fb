"""The README's first screen is the two commands a new machine needs, CI runs the README's test
command, and every `make` target the README names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text()


def _first_block() -> tuple[int, list[str]]:
    found = re.search(r"```sh\n(.*?)```", README, re.DOTALL)
    assert found, "the README has no sh block"
    line = README[: found.start()].count("\n") + 1
    return line, [c.split("#")[0].strip() for c in found.group(1).strip().splitlines()]


def test_the_readme_starts_with_the_two_commands() -> None:
    line, commands = _first_block()
    assert line <= 6, f"the two commands start on line {line}"
    assert commands == ["make demo", "make test"]


def test_ci_runs_the_readmes_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    makes = [c.strip() for c in ci if re.match(r"\s*make\b", c)]
    assert makes == ["make test"], makes


def test_every_make_target_the_readme_names_exists() -> None:
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, re.MULTILINE))
    named = set(re.findall(r"`make ([a-z][a-z-]*)", README))
    assert named, "the README names no make target"
    assert named <= targets, f"not in the Makefile: {sorted(named - targets)}"


def test_the_readme_has_a_troubleshooting_section() -> None:
    assert "\n## Troubleshooting\n" in README
