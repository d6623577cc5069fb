"""The caller's inputs of a goal run: names a decider sees, values it never does, and the
scrubbing that keeps every value out of what a run records (`Inputs.scrub_row`) and what a
decider is told (`Inputs.scrub_state`). Importable from `workers.core.model` too.

The records are `workers.core.model`'s, which imports this module: here they are known by
their shape only (any pydantic record for a row, `ToldState` for a decider's state), so the
two modules form no cycle."""

from __future__ import annotations

import collections
import functools
import operator
import re
from collections.abc import Mapping
from typing import Any, Protocol, Self, TypeVar

from pydantic import BaseModel, ConfigDict, SecretStr, field_validator
from pydantic_core import PydanticSerializationError, to_json

from workers.core.screen import Candidate

INPUT_NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,39}$")

MIN_SCRUB_CHARS = 3
"""Shorter values are not scrubbed from screen texts: they occur by chance everywhere."""
_VALUE = operator.attrgetter("value")


class ToldState(Protocol):
    """What `Inputs.scrub_state` reads of a decider's state (`workers.core.model.DecideState`)."""

    @property
    def candidates(self) -> tuple[Candidate, ...]: ...
    @property
    def context(self) -> tuple[str, ...]: ...
    @property
    def history(self) -> tuple[str, ...]: ...
    @property
    def screen(self) -> str: ...
    def model_copy(
        self, *, update: Mapping[str, Any] | None = None, deep: bool = False
    ) -> Self: ...


Row = TypeVar("Row", bound=BaseModel)
State = TypeVar("State", bound=ToldState)


class InputValue(BaseModel):
    """One caller-supplied input: a name the decider sees and a value it never does."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    value: SecretStr
    sensitive: bool = False
    plain_field: bool = False
    """A secret the caller allows into a plain text field (a one-time code: OTP fields are
    almost never secure fields). Still redacted everywhere, as every secret is."""

    @field_validator("name")
    @classmethod
    def _name_shape(cls, v: str) -> str:
        if not INPUT_NAME_PATTERN.fullmatch(v):
            raise ValueError(
                "input name must start with a letter and hold only letters, digits and _ "
                "(at most 40 characters), e.g. 'email' or 'password'"
            )
        return v

    def reveal(self) -> str:
        """The literal value. Only device adapters call this, at the moment of typing."""
        return self.value.get_secret_value()

    def shown(self) -> str:
        """What logs and step rows may show of the value."""
        return "**********" if self.sensitive else self.value.get_secret_value()


class Inputs(BaseModel):
    """The caller's inputs by name. The decider sees `names()` only."""

    model_config = ConfigDict(frozen=True)

    values: tuple[InputValue, ...] = ()

    @classmethod
    def of(
        cls,
        plain: dict[str, str] | None = None,
        secret: dict[str, str] | None = None,
        *,
        plain_fields: frozenset[str] = frozenset(),
    ) -> Inputs:
        """`plain_fields`: the secrets the caller allows into a plain text field."""
        vals = [InputValue(name=k, value=SecretStr(v)) for k, v in (plain or {}).items()]
        vals += [
            InputValue(name=k, value=SecretStr(v), sensitive=True, plain_field=k in plain_fields)
            for k, v in (secret or {}).items()
        ]
        counts = collections.Counter(v.name for v in vals)  # linear: 100k names stay cheap
        dupes = sorted(name for name, n in counts.items() if n > 1)
        if dupes:
            raise ValueError(f"input {dupes[0]!r} is given twice; give each input name once")
        return cls(values=tuple(vals))

    def names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.values)

    @functools.cached_property
    def _replacements(self) -> list[tuple[str, str]]:
        """(value, "{name}") for every value worth scrubbing, longest first (once per run:
        the inputs never change)."""
        pairs = [(v.reveal(), "{" + v.name + "}") for v in self.values]
        return sorted(
            ((value, name) for value, name in pairs if len(value) >= MIN_SCRUB_CHARS),
            key=lambda pair: -len(pair[0]),
        )

    def scrub(self, text: str, replacements: list[tuple[str, str]] | None = None) -> str:
        """`text` with every supplied value of 3+ characters replaced by `{name}`: a screen
        that shows what was typed ("Hi ada@example.com") reaches no decider, prompt, step
        row or memory key with the value in it."""
        for value, name in self._replacements if replacements is None else replacements:
            if value in text:
                text = text.replace(value, name)
        return text

    @functools.cached_property
    def _in_json(self) -> tuple[str, ...] | None:
        """Each value worth scrubbing as it reads inside a JSON string: the row's JSON holds
        it there if any of the row's texts holds the value (escaping is per character).
        None when a value has no JSON form (a lone surrogate): every row is walked."""
        try:
            return tuple(to_json(value).decode()[1:-1] for value, _ in self._replacements)
        except PydanticSerializationError:
            return None

    def _may_show(self, row: BaseModel) -> bool:
        """Whether a text of `row` may hold a value (False: it surely holds none)."""
        forms = self._in_json
        if forms is None:
            return True
        try:
            dumped = row.model_dump_json()
        except PydanticSerializationError:  # a text with no JSON form: look at each
            return True
        return any(form in dumped for form in forms)

    def scrub_row(self, row: Row) -> Row:
        """`row` with every text field scrubbed (`scrub`): the screen's name, the reasons, the
        errors, a fill's shown value: a step row names an input, never holds its value.
        A row none of whose texts holds a value comes back as it is (no copy validated):
        told by one look at the row's JSON, so only a row that shows a value is walked."""
        if not self._replacements:
            return row
        if not self._may_show(row):
            return row
        pairs = self._replacements

        def walk(v: object) -> object:
            if isinstance(v, str):
                return self.scrub(v, pairs)
            if isinstance(v, dict):
                return {k: walk(x) for k, x in v.items()}
            if isinstance(v, list | tuple):
                return [walk(x) for x in v]
            return v

        return type(row).model_validate(walk(row.model_dump()))

    def scrub_state(self, state: State) -> State:
        """The state with candidate names and context texts scrubbed, and field values
        dropped (a switch's on/off state stays: it is the app's, not the caller's). Only
        what changes is copied: the loop does this every step."""
        pairs = self._replacements
        if not pairs and not any(map(_VALUE, state.candidates)):
            return state  # nothing to scrub, no value to drop
        candidates = []
        for c in state.candidates:
            name = self.scrub(c.name, pairs)
            value = self.scrub(c.value, pairs) if c.kind.stateful else ""
            changed = name != c.name or value != c.value
            candidates.append(c.model_copy(update={"name": name, "value": value}) if changed else c)
        context = tuple(self.scrub(text, pairs) for text in state.context)
        history = tuple(self.scrub(line, pairs) for line in state.history)  # a backstop
        screen = self.scrub(state.screen, pairs)
        if (
            screen == state.screen
            and context == state.context
            and history == state.history
            and all(a is b for a, b in zip(candidates, state.candidates, strict=True))
        ):
            return state
        return state.model_copy(
            update={
                "candidates": tuple(candidates),
                "context": context,
                "history": history,
                "screen": screen,
            }
        )

    def get(self, name: str) -> InputValue | None:
        for v in self.values:
            if v.name == name:
                return v
        return None

    def secrets(self) -> tuple[str, ...]:
        """The sensitive literals, for redaction processors and leak scans."""
        return tuple(v.reveal() for v in self.values if v.sensitive and v.reveal())
