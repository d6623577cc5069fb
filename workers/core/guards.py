"""The guards every decision passes before it is acted on, whoever made it (a decider, the
decision memory, a person): a target on this screen, an input the caller supplied for a text
field, secrets only into secure fields, and no dangerous control without a person. A move
(`workers.core.moves`: scroll, back) is the device's, and passes."""

from __future__ import annotations

import re
from dataclasses import dataclass

from workers.core.model import NONE, Candidate, Decision, Inputs, Kind, Snapshot
from workers.core.moves import move_of


@dataclass(frozen=True)
class Guards:
    inputs: Inputs
    dangerous: re.Pattern[str] | None

    def unsafe(  # noqa: PLR0911 - one return per case
        self, d: Decision, snap: Snapshot, *, by_caller: bool = False
    ) -> str | None:
        """Why this decision cannot be acted on safely, or None when it can. `by_caller`: the
        caller named this control itself (a journey's plain press or fill): a dangerous one
        is theirs to press, a secret still goes into secure fields only."""
        if move_of(d.target) is not None:  # the device's scroll or back: safe, types nothing
            return None
        target = snap.candidate(d.target)
        if d.target == NONE:
            return "the decider chose no target but reported neither done nor blocked"
        if target is None:
            return f"the decider chose {d.target!r}, which is not on this screen"
        if target.kind.fillable and d.input != NONE and self.inputs.get(d.input) is None:
            return f"the decider chose input {d.input!r}, which the caller did not supply"
        if target.kind.fillable and d.input == NONE:
            return f"the decider chose text field {target.name!r} but no input to type"
        if self._secret_into_plain_field(d, target):
            return (
                f"the decider chose secret input {d.input!r} for {target.name!r}, which is not a "
                "secure field; secrets are typed only into secure fields (a caller allows one "
                "into a plain field with plain_field: true, e.g. a one-time code)"
            )
        if not by_caller and self._is_dangerous(target):
            return f"{target.name!r} matches the dangerous-controls guard; a person must decide"
        return None

    def _secret_into_plain_field(self, d: Decision, target: Candidate) -> bool:
        value = self.inputs.get(d.input)
        return (
            value is not None
            and value.sensitive
            and not value.plain_field
            and target.kind.fillable
            and target.kind is not Kind.SECURE_TEXT_FIELD
        )

    def _is_dangerous(self, c: Candidate) -> bool:
        return self.dangerous is not None and self.dangerous.search(c.name) is not None
