"""Roles as settings declare them, and the principal's checks (`workers.core.access`)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from workers.core.access import Action, Principal, Role, parse_roles
from workers.settings import Settings


def test_roles_are_declared_per_named_token() -> None:
    """`name:role+role`; a token may hold several; to_env gives the same back."""
    s = Settings(
        api_tokens="alice:a-1,ops:o-2,token9",
        api_roles="alice:submit+answer,ops:admin,token-3:read",
    )
    got = {who.name: who.roles for who, _ in s.principals()}
    assert got == {
        "alice": {Role.SUBMIT, Role.ANSWER},
        "ops": {Role.ADMIN},
        "token-3": {Role.READ},
    }
    again = Settings(api_tokens=s.api_tokens, api_roles=s.to_env()["GOALFLEET_API_ROLES"])
    assert again.api_roles == s.api_roles


def test_without_roles_every_token_is_admin() -> None:
    """A deployment from before roles (one token, unnamed tokens) keeps every right."""
    s = Settings(api_tokens="dev-token,ci:c-1")
    assert [(w.name, w.roles) for w, _ in s.principals()] == [
        ("token-1", frozenset({Role.ADMIN})),
        ("ci", frozenset({Role.ADMIN})),
    ]


@pytest.mark.parametrize(
    ("roles", "says"),
    [
        ("alice:submit", "token 'bob' has no roles; add bob:<roles>"),
        ("alice:submit,bob:sudo", "'sudo' is not a role; use read, submit, answer, admin"),
        ("alice:submit,bob:read,carol:read", "'carol' names no token"),
        ("alice=submit", "is not name:roles"),
    ],
)
def test_bad_roles_are_refused_naming_the_fix(roles: str, says: str) -> None:
    """A token left out, an unknown role, an entry for no token, a malformed entry: refused
    when the settings are read, naming what is wrong and the fix."""
    with pytest.raises(ValidationError, match=says):
        Settings(api_tokens="alice:a-1,bob:b-2", api_roles=roles)


def test_ownership_checks() -> None:
    """submit: its own only; read: all, no inputs; admin: everything; answer: no runs."""
    alice = Principal("alice", frozenset({Role.SUBMIT}))
    reader = Principal("r", frozenset({Role.READ}))
    answerer = Principal("q", frozenset({Role.ANSWER}))
    admin = Principal("ops", frozenset({Role.ADMIN}))
    assert (alice.may_read("alice"), alice.may_read("bob"), alice.may_read(None)) == (
        True,
        False,
        False,
    )
    assert (alice.may_cancel("alice"), alice.may_cancel("bob")) == (True, False)
    assert (alice.may(Action.ANSWER), alice.may(Action.MEMORY_FORGET)) == (False, False)
    assert (reader.may_read("bob"), reader.may_see_inputs("bob"), reader.may_cancel("bob")) == (
        True,
        False,
        False,
    )
    assert (answerer.may(Action.ANSWER), answerer.may_read("bob")) == (True, False)
    assert all(admin.may(a) for a in Action)
    assert admin.may_see_inputs(None)
    assert admin.may_cancel("anyone")
    assert parse_roles("read+submit") == {Role.READ, Role.SUBMIT}
