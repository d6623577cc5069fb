"""Maestro flows in (issue 43, item 5): a Maestro flow (its config, `---`, its commands) as a
goalfleet flows file with one journey (`goalfleet suite import FILE.yaml`).

- `launchApp` (it stops the app first, as Maestro does) → `relaunch`; `stopApp: false` →
  `launch`;
- `tapOn: text` / `{text}` / `{id}` → `press` (an id matches a control named so);
- `tapOn` a field, then `inputText: v` → `fill: {field, input}`: the value becomes an input,
  `${VAR}` a secret `env:VAR`, a sensitive-looking field's literal a secret to set; an
  `eraseText` between them is folded in (a fill replaces);
- `assertVisible` / `assertNotVisible: text` → `check: '"text" is visible'` / `is not visible`;
- `assertWithAI: {assertion}` → `check: <assertion>` (the decider, on cited evidence);
- `scroll` → `scroll` (a page down); `scrollUntilVisible: {element, direction}` →
  `scroll: {direction, until, max: 10}`;
- `back`, `pressKey: back` → `back`; `pressKey: enter` → `submit`;
- `openLink: url` / `{link}` → `open`;
- `extendedWaitUntil: {visible, timeout}` → `wait: {for, timeout_s}`;
- `waitForAnimationToEnd` → nothing to do, said in the notes: every goalfleet step settles;
- `runFlow: file` / `{file}` / `{commands}` → its commands, inline (`when:` is not mapped).

Every other command, and every option that would change what a mapped command does, is named
with its line (`Unmapped`); nothing is dropped silently. A file with any unmapped command is
still converted (the caller decides); the flows file is then validated as any other.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from scheduler.service.requests import looks_sensitive
from scheduler.suites import bounded_yaml

__all__ = ["Imported", "Unmapped", "import_flow"]

MAX_DEPTH = 8
"""`runFlow` inside `runFlow`: deeper is refused (a loop of files)."""
ENV = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]{0,100})\}$")
_DIRECTIONS = {"DOWN": "down", "UP": "up", "LEFT": "left", "RIGHT": "right"}


@dataclass(frozen=True)
class Unmapped:
    """A Maestro command (or an option of one) with no journey step."""

    file: str
    line: int
    command: str
    why: str

    def __str__(self) -> str:
        return f"{self.file}:line {self.line}: {self.command}: {self.why}"


@dataclass
class Imported:
    """The flows file, as data and as YAML, and what was not mapped (and what was folded)."""

    flows: dict[str, Any]
    unmapped: list[Unmapped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def yaml(self) -> str:
        """The flows file, headed by a comment line per unmapped command and per note."""
        head = [f"# not mapped: {u}" for u in self.unmapped] + [f"# note: {n}" for n in self.notes]
        body = yaml.safe_dump(self.flows, sort_keys=False, allow_unicode=True, width=100)
        return "".join(f"{line}\n" for line in head) + body


class MaestroError(ValueError):
    """A file that is not a Maestro flow at all (named with its line)."""


@dataclass(frozen=True)
class _At:
    """Where a command is: its file, line, runFlow depth and name."""

    path: Path
    line: int
    depth: int
    name: str

    @property
    def where(self) -> str:
        return str(self.path)


@dataclass
class _Reader:
    out: Imported
    steps: list[Any] = field(default_factory=list)
    inputs: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    focus: tuple[str, int] | None = None
    """The field the last `tapOn` named (and its step's index), for a following inputText."""

    def read(self, path: Path, depth: int = 0) -> None:
        if depth > MAX_DEPTH:
            raise MaestroError(f"{path}: runFlow nested deeper than {MAX_DEPTH} files")
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise MaestroError(f"{path}: cannot read it: {exc.strerror}") from None
        commands, offset = _commands(text, str(path))
        for node, command in commands:
            self.command(path, node.start_mark.line + 1 + offset, command, depth)

    def command(self, path: Path, line: int, command: object, depth: int) -> None:
        name, arg = _split(command)
        if name == "pressKey" and str(arg).casefold() in _KEYS:
            self._add(_KEYS[str(arg).casefold()])
            return
        handler = _HANDLERS.get(name)
        if handler is None:
            self._unmapped(str(path), line, name, "no journey step does this")
            return
        handler(self, _At(path, line, depth, name), arg)

    def _launch(self, at: _At, arg: object) -> None:
        opts = arg if isinstance(arg, dict) else {}
        self._options(at, opts, {"stopApp", "appId"})
        self._add("launch" if opts.get("stopApp") is False else "relaunch")

    def _tap(self, at: _At, arg: object) -> None:
        target = _target(arg)
        if target is None:
            self._unmapped(at.where, at.line, at.name, "only a text or an id is mapped")
            return
        self._add({"press": target})
        self.focus = (target, len(self.steps) - 1)

    def _erase(self, at: _At, _arg: object) -> None:
        self.out.notes.append(f"{at.where}:line {at.line}: eraseText folded into the fill after it")

    def _assert(self, at: _At, arg: object) -> None:
        target = _target(arg)
        if target is None:
            self._unmapped(at.where, at.line, at.name, "only a text or an id is mapped")
            return
        negated = " not" if at.name == "assertNotVisible" else ""
        self._add({"check": f'"{target}" is{negated} visible'})

    def _ai(self, _at: _At, arg: object) -> None:
        assertion = arg.get("assertion") if isinstance(arg, dict) else arg
        self._add({"check": str(assertion)})

    def _scroll(self, _at: _At, _arg: object) -> None:
        self._add({"scroll": {"direction": "down"}})

    def _back(self, _at: _At, _arg: object) -> None:
        self._add("back")

    def _open(self, _at: _At, arg: object) -> None:
        link = arg.get("link") if isinstance(arg, dict) else arg
        self._add({"open": str(link)})

    def _wait(self, at: _At, arg: object) -> None:
        target = _target(arg.get("visible")) if isinstance(arg, dict) else None
        if target is None or not isinstance(arg, dict):
            self._unmapped(at.where, at.line, at.name, "only `visible: <text>` is mapped")
            return
        timeout_s = min(120.0, float(arg.get("timeout", 10_000)) / 1000)
        self._add({"wait": {"for": target, "timeout_s": timeout_s}})

    def _settled(self, at: _At, _arg: object) -> None:
        self.out.notes.append(f"{at.where}:line {at.line}: {at.name}: every goalfleet step settles")

    def _add(self, step: Any) -> None:  # noqa: ANN401 - a step as the flows file writes it
        self.steps.append(step)
        self.focus = None

    def _input(self, at: _At, arg: object) -> None:
        where, line = at.where, at.line
        value = arg.get("text") if isinstance(arg, dict) else arg
        if self.focus is None:
            why = "no tapOn of a field before it: a fill needs the field's name"
            self._unmapped(where, line, "inputText", why)
            return
        field_name, index = self.focus
        secret = ENV.fullmatch(str(value))
        if secret is not None:
            name = _input_name(secret.group(1), self.inputs, self.secrets)
            self.secrets[name] = f"env:{secret.group(1)}"
        elif looks_sensitive(field_name):  # a literal password: kept out of the file
            name = _input_name(field_name, self.inputs, self.secrets)
            var = name.upper()
            self.secrets[name] = f"env:{var}"
            self.out.notes.append(
                f"{where}:line {line}: inputText into {field_name!r} looks sensitive: its value "
                f"is not copied; the flow reads secret env:{var} (set GOALFLEET_SECRET_{var})"
            )
        else:
            name = _input_name(field_name, self.inputs, self.secrets)
            self.inputs[name] = str(value)
        self.steps[index] = {"fill": {"field": field_name, "input": name}}  # the tap focused it
        self.focus = None

    def _scroll_until(self, at: _At, arg: object) -> None:
        opts = arg if isinstance(arg, dict) else {}
        target = _target(opts.get("element"))
        if target is None:
            self._unmapped(at.where, at.line, at.name, "only an element by text or id")
            return
        direction = _DIRECTIONS.get(str(opts.get("direction", "DOWN")).upper(), "down")
        self._options(at, opts, {"element", "direction", "timeout"})
        self._add({"scroll": {"direction": direction, "until": target, "max": 10}})

    def _run_flow(self, at: _At, arg: object) -> None:
        path, line, depth = at.path, at.line, at.depth
        if isinstance(arg, dict) and "when" in arg:
            self._unmapped(str(path), line, "runFlow", "a `when:` condition is not mapped")
            return
        if isinstance(arg, dict) and isinstance(arg.get("commands"), list):
            for command in arg["commands"]:
                self.command(path, line, command, depth)
            return
        file = arg.get("file") if isinstance(arg, dict) else arg
        if not isinstance(file, str):
            self._unmapped(str(path), line, "runFlow", "give a file or commands")
            return
        self.read(path.parent / file, depth + 1)

    def _options(self, at: _At, opts: dict[str, Any], known: set[str]) -> None:
        for option in sorted(set(opts) - known):
            self._unmapped(at.where, at.line, f"{at.name}.{option}", "this option is not mapped")

    def _unmapped(self, where: str, line: int, command: str, why: str) -> None:
        self.out.unmapped.append(Unmapped(where, line, command, why))


_HANDLERS: dict[str, Callable[[_Reader, _At, object], None]] = {
    "launchApp": _Reader._launch,  # noqa: SLF001 - the reader's own table
    "tapOn": _Reader._tap,  # noqa: SLF001
    "eraseText": _Reader._erase,  # noqa: SLF001
    "inputText": _Reader._input,  # noqa: SLF001
    "assertVisible": _Reader._assert,  # noqa: SLF001
    "assertNotVisible": _Reader._assert,  # noqa: SLF001
    "assertWithAI": _Reader._ai,  # noqa: SLF001
    "scroll": _Reader._scroll,  # noqa: SLF001
    "scrollUntilVisible": _Reader._scroll_until,  # noqa: SLF001
    "back": _Reader._back,  # noqa: SLF001
    "openLink": _Reader._open,  # noqa: SLF001
    "extendedWaitUntil": _Reader._wait,  # noqa: SLF001
    "waitForAnimationToEnd": _Reader._settled,  # noqa: SLF001
    "runFlow": _Reader._run_flow,  # noqa: SLF001
}
"""Each mapped Maestro command's handler; any other command is named as not mapped."""
_KEYS = {"back": "back", "enter": "submit"}
"""`pressKey` keys with a journey step."""


def _commands(text: str, source: str) -> tuple[list[tuple[yaml.Node, object]], int]:
    """The command list (each with its node, for its line) and the line offset of the part
    after the config's `---` (a flow without one is commands only)."""
    lines = text.splitlines(keepends=True)
    cut = next((i for i, line in enumerate(lines) if line.rstrip() == "---"), None)
    body, offset = (text, 0) if cut is None else ("".join(lines[cut + 1 :]), cut + 1)
    try:
        node, data = bounded_yaml.read(body)
    except bounded_yaml.YamlRefused as exc:
        raise MaestroError(f"{source}:line {exc.line + offset}: {exc.message}") from None
    except yaml.YAMLError as exc:
        raise MaestroError(f"{source}: not valid YAML: {exc}") from None
    if not isinstance(node, yaml.SequenceNode) or not isinstance(data, list):
        raise MaestroError(f"{source}: a Maestro flow's commands are a list after `---`")
    return list(zip(node.value, data, strict=True)), offset


def _split(command: object) -> tuple[str, object]:
    if isinstance(command, str):
        return command, None
    if isinstance(command, dict) and len(command) == 1:
        ((name, arg),) = command.items()
        return str(name), arg
    return str(command)[:40], None


def _target(arg: object) -> str | None:
    if isinstance(arg, str | int | float) and str(arg):
        return str(arg)
    if isinstance(arg, dict):
        for key in ("text", "id"):
            if isinstance(arg.get(key), str | int | float):
                return str(arg[key])
    return None


def _input_name(base: str, *taken: dict[str, str]) -> str:
    """An input name from a field's name or a variable's: letters, digits and _."""
    name = re.sub(r"[^A-Za-z0-9_]+", "_", base).strip("_").lower() or "input"
    name = name if name[0].isalpha() else f"input_{name}"
    name = name[:36]
    out, n = name, 2
    while any(out in t for t in taken):
        out, n = f"{name}_{n}", n + 1
    return out


def import_flow(path: Path, *, suite: str = "") -> Imported:
    """`path` (a Maestro flow) as a flows file with one journey flow named after it."""
    out = Imported({})
    reader = _Reader(out)
    reader.read(path)
    if reader.focus is not None:
        field_name, at = reader.focus  # a tapOn nothing was typed into: a press after all
        reader.steps[at] = {"press": field_name}
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", path.stem).strip("-.") or "flow"
    flow: dict[str, Any] = {"name": stem[:64], "steps": reader.steps}
    if reader.inputs:
        flow["inputs"] = reader.inputs
    if reader.secrets:
        flow["secrets"] = reader.secrets
    out.flows = {"suite": (suite or stem)[:64], "flows": [flow]}
    return out
