"""A mistyped flag or command gets a suggestion, and a usage error names what is wrong first, in
the words of the subcommand typed (its own usage, not `goalfleet`'s), on every subcommand."""

from __future__ import annotations

import argparse

import pytest
from test_cli_help import _parsers

from scheduler.cli.main import build_parser, main

LEAVES = [
    (name, parser)
    for name, parser in _parsers(build_parser())
    if name != "goalfleet"
    and not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)
]


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> list[str]:
    """`goalfleet <argv>`'s stderr lines; it must exit 2 before doing anything."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    return err.splitlines()


def _swapped(flag: str) -> str:
    """`flag` with its last two different letters swapped (`--platform` -> `--platfomr`,
    `--app` -> `--pap`)."""
    i = next(i for i in range(len(flag) - 2, 1, -1) if flag[i] != flag[i + 1])
    return flag[:i] + flag[i + 1] + flag[i] + flag[i + 2 :]


def test_a_mistyped_submit_flag_is_named_with_its_suggestion(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The issue's case: `submit --platfrom` names the flag, suggests --platform, and shows
    submit's usage, not the top-level one."""
    lines = _refused(["submit", "--platfrom", "ios", "--goal", "Sign in"], capsys)
    assert lines[0] == (
        "goalfleet submit: unrecognized argument --platfrom: did you mean --platform?"
    )
    assert lines[1].startswith("usage: goalfleet submit ")
    assert not any(line.startswith("usage: goalfleet [-h] COMMAND") for line in lines)


@pytest.mark.parametrize(
    ("argv", "prog", "meant"),
    [(["sbumit"], "goalfleet", "submit"), (["memory", "shwo"], "goalfleet memory", "show")],
)
def test_a_mistyped_command_gets_a_suggestion(
    argv: list[str], prog: str, meant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _refused(argv, capsys)
    assert lines[0].startswith(f"{prog}: argument "), lines[0]
    assert f"invalid choice: '{argv[-1]}'" in lines[0]
    assert lines[0].endswith(f"did you mean {meant}?"), lines[0]
    assert lines[1].startswith(f"usage: {prog} ")


@pytest.mark.parametrize(("name", "parser"), LEAVES, ids=[name for name, _ in LEAVES])
def test_every_subcommand_suggests_its_own_flag(
    name: str, parser: argparse.ArgumentParser, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each of a subcommand's long flags, mistyped alone (before any required argument is
    checked), is named first with the flag meant, above that subcommand's usage."""
    flags = [
        s
        for a in parser._actions
        if not isinstance(a, argparse._HelpAction)
        for s in a.option_strings
        if s.startswith("--")
    ]
    if not flags:  # nothing to suggest: the flag is named alone
        lines = _refused([*name.split()[1:], "--jsno"], capsys)
        assert lines[0] == f"{name}: unrecognized argument --jsno"
        assert lines[1].startswith(f"usage: {name} "), lines
    for flag in flags:
        typo = _swapped(flag)
        lines = _refused([*name.split()[1:], typo], capsys)
        assert lines[0] == f"{name}: unrecognized argument {typo}: did you mean {flag}?"
        assert lines[1].startswith(f"usage: {name} "), lines


REQUIRED = [
    (name, parser)
    for name, parser in LEAVES
    if any(a.required for a in parser._actions if not isinstance(a, argparse._HelpAction))
]


@pytest.mark.parametrize(("name", "parser"), REQUIRED, ids=[name for name, _ in REQUIRED])
def test_every_subcommand_names_a_missing_argument_first(
    name: str, parser: argparse.ArgumentParser, capsys: pytest.CaptureFixture[str]
) -> None:
    """Given nothing, a subcommand that needs an argument names it on its first line (the
    usage below it), as `goalfleet <command>: ...` like every other error."""
    first = next(a for a in parser._actions if a.required)
    shown = first.option_strings[0] if first.option_strings else first.metavar or first.dest
    lines = _refused(name.split()[1:], capsys)
    assert lines[0].startswith(f"{name}: the following arguments are required: "), lines
    assert str(shown) in lines[0]
    assert lines[1].startswith(f"usage: {name} "), lines
