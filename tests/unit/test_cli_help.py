"""Every option of every subcommand says what it is, and what it is when not given."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from scheduler.cli.main import build_parser


def _parsers(
    parser: argparse.ArgumentParser, name: str = "goalfleet"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


OPTIONS = [
    (f"{name} {action.option_strings[-1]}", action)
    for name, parser in _parsers(build_parser())
    for action in parser._actions
    if action.option_strings and not isinstance(action, argparse._HelpAction)
]


@pytest.mark.parametrize(("name", "action"), OPTIONS, ids=[name for name, _ in OPTIONS])
def test_every_option_has_help_and_names_its_default(name: str, action: argparse.Action) -> None:
    assert action.help, f"{name} has no help"
    unset = (None, False, [], "")
    if action.default not in unset and not isinstance(action, argparse._StoreTrueAction):
        assert "default" in action.help, f"{name}: help does not name its default"
