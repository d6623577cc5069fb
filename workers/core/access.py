"""Who may do what: roles, the actions they grant, and a principal's checks, in one place.

A *principal* is an API token's name and its roles (`GOALFLEET_API_TOKENS` names the tokens,
`GOALFLEET_API_ROLES` gives them roles; `workers.settings.Settings.principals`). Every route
of the API asks its principal one question before it acts — `may(action)` for what a role
grants outright, `may_read(owner)` / `may_cancel(owner)` / `may_see_inputs(owner)` for what
depends on who submitted the thing — so a later console asks the same questions of the same
object.

    role     grants
    read     see every run, batch, schedule, step, screenshot, question, memory entry; metrics
    submit   submit runs, batches, schedules; see, cancel and delete its own
    answer   see every open question and answer it (which teaches the whole fleet)
    admin    everything: every role's actions, every run's inputs, cancel and delete anyone's,
             forget memory entries

Not `submit` rights, on purpose: answering a question (the answer becomes a fleet-wide memory
entry) and forgetting memory. Inputs (the plain values a run types) are shown only to the run's
owner and to `admin`, whoever else may read the run. Anything without an owner (recorded before
owners were) is nobody's own: `read` and `admin` see it, a `submit` token does not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property

from pydantic import SecretStr


class Role(StrEnum):
    READ = "read"
    """Read everything but inputs; change nothing."""
    SUBMIT = "submit"
    """Submit work; see and cancel its own."""
    ANSWER = "answer"
    """Answer the questions of parked runs (teaches the fleet's memory)."""
    ADMIN = "admin"
    """Everything."""


class Action(StrEnum):
    SUBMIT = "submit"
    """Submit a run, a batch or a schedule."""
    READ_OWN = "read_own"
    """See one's own runs, batches, schedules, their steps and questions."""
    READ_ANY = "read_any"
    """See anyone's runs, batches, schedules, steps and screenshots (not their inputs)."""
    CANCEL_OWN = "cancel_own"
    """Cancel one's own runs, delete one's own schedules."""
    CANCEL_ANY = "cancel_any"
    """Cancel anyone's runs, delete anyone's schedules."""
    INPUTS_ANY = "inputs_any"
    """See the inputs of anyone's runs and schedules."""
    DEVICES = "devices"
    """List the devices (a busy device's run id only where the run may be read)."""
    QUESTIONS_ANY = "questions_any"
    """List every open question (without it: those of runs one may read)."""
    ANSWER = "answer"
    """Answer a question."""
    MEMORY_READ = "memory_read"
    """List and show decision-memory entries."""
    MEMORY_FORGET = "memory_forget"
    """Forget decision-memory entries."""
    METRICS = "metrics"
    """Scrape `/metrics`."""


GRANTS: dict[Role, frozenset[Action]] = {
    Role.READ: frozenset(
        {
            Action.READ_ANY,
            Action.DEVICES,
            Action.QUESTIONS_ANY,
            Action.MEMORY_READ,
            Action.METRICS,
        }
    ),
    Role.SUBMIT: frozenset({Action.SUBMIT, Action.READ_OWN, Action.CANCEL_OWN, Action.DEVICES}),
    Role.ANSWER: frozenset({Action.QUESTIONS_ANY, Action.ANSWER, Action.DEVICES}),
    Role.ADMIN: frozenset(Action),
}
"""What each role grants. A principal holds the union of its roles' grants."""


def parse_roles(text: str) -> frozenset[Role]:
    """`submit+answer` → the roles; ValueError naming an unknown one and the known ones."""
    out: set[Role] = set()
    for word in (w.strip() for w in text.split("+")):
        try:
            out.add(Role(word))
        except ValueError:
            known = ", ".join(r.value for r in Role)
            raise ValueError(f"{word!r} is not a role; use {known} (join several with +)") from None
    return frozenset(out)


@dataclass(frozen=True)
class Principal:
    """Who a request comes from: its token's name and roles."""

    name: str
    roles: frozenset[Role]

    @cached_property
    def actions(self) -> frozenset[Action]:
        """What the roles grant together (worked out once: a principal lives as long as the
        API's token list)."""
        return frozenset().union(*(GRANTS[r] for r in self.roles))

    def may(self, action: Action) -> bool:
        """Whether the roles grant `action` outright."""
        return action in self.actions

    def owns(self, owner: str | None) -> bool:
        """Whether a thing recorded as submitted by `owner` is this principal's own."""
        return owner is not None and owner == self.name

    def may_read(self, owner: str | None) -> bool:
        """See a run, batch or schedule submitted by `owner` (None: nobody recorded)."""
        return self.may(Action.READ_ANY) or (self.may(Action.READ_OWN) and self.owns(owner))

    def may_cancel(self, owner: str | None) -> bool:
        """Cancel a run, delete a schedule, submitted by `owner`."""
        return self.may(Action.CANCEL_ANY) or (self.may(Action.CANCEL_OWN) and self.owns(owner))

    def may_see_inputs(self, owner: str | None) -> bool:
        """See the plain inputs of a run or schedule submitted by `owner`."""
        return self.may(Action.INPUTS_ANY) or (self.may(Action.READ_OWN) and self.owns(owner))

    def may_see_pictures(self, owner: str | None, *, waiting: bool) -> bool:
        """See the step pictures of a run submitted by `owner`: a picture shows what the run
        typed, so its inputs' viewers do; and while the run `waiting`s for an answer, whoever
        may answer it (its picture is what they answer about)."""
        return self.may_see_inputs(owner) or (waiting and self.may(Action.ANSWER))

    @property
    def sees_all(self) -> bool:
        """Whether every run is readable (no owner filter on lists)."""
        return self.may(Action.READ_ANY)

    def describe(self) -> str:
        """`alice (submit+answer)`, for refusals."""
        roles = "+".join(sorted(r.value for r in self.roles)) or "no roles"
        return f"{self.name} ({roles})"


def granting(*actions: Action) -> str:
    """The roles that grant any of `actions`, as a refusal names them (`read or admin`)."""
    return " or ".join(r.value for r in Role if GRANTS[r] & set(actions))


TOKEN_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
"""A token's name (`name:token` in `GOALFLEET_API_TOKENS`)."""


def token_names(tokens: list[SecretStr]) -> list[tuple[str, str]]:
    """(name, token) for each API token: `name:token`, or `token-N` for an unnamed one."""
    out = []
    for i, secret in enumerate(tokens, 1):
        raw = secret.get_secret_value()
        name, sep, token = raw.partition(":")
        if sep and TOKEN_NAME.fullmatch(name) and token:
            out.append((name, token))
        else:
            out.append((f"token-{i}", raw))
    return out
