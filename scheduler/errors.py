"""The scheduler's errors, each with the HTTP status the API answers with.

GoalfleetError (workers.core.errors)
└── FleetError
    ├── AuthError             401  no bearer token, or a wrong one
    ├── ForbiddenError        403  the token's roles do not grant this (`workers.core.access`)
    ├── InvalidRequestError   422  bad input; names the field and the fix
    ├── NotFoundError         404  no such run / batch / schedule
    ├── ConflictError         409  the request contradicts the current state
    ├── AmbiguousIdError      409  a run id prefix names more than one run
    ├── TooManyPendingError   429  the pending backlog is full
    └── UnavailableError      503  Redis (store and broker) is not reachable
"""

from __future__ import annotations

from dataclasses import dataclass

from workers.core.errors import GoalfleetError


@dataclass(frozen=True)
class Problem:
    field: str
    problem: str
    fix: str = ""


class FleetError(GoalfleetError):
    """Each subclass names its code and HTTP status in its class line (both required)."""

    code = "FLEET"
    status = 500

    def __init_subclass__(cls, *, code: str, status: int, **kwargs: object) -> None:
        super().__init_subclass__(code=code, **kwargs)
        cls.status = status


class AuthError(FleetError, code="UNAUTHORIZED", status=401):
    def __init__(self, message: str) -> None:
        super().__init__(
            message,
            hint="set GOALFLEET_API_TOKEN to one of the API's GOALFLEET_API_TOKENS "
            "(over HTTP: Authorization: Bearer <token>)",
        )


class ForbiddenError(FleetError, code="FORBIDDEN", status=403):
    def __init__(self, who: str, what: str, roles: str) -> None:
        super().__init__(
            f"token {who} may not {what}",
            hint=f"use a token with the {roles} role (GOALFLEET_API_ROLES on the API)",
        )


class InvalidRequestError(FleetError, code="INVALID_REQUEST", status=422):
    def __init__(self, field: str, problem: str, fix: str = "") -> None:
        super().__init__(f"{field}: {problem}", hint=fix)
        self.problems = (Problem(field, problem, fix),)


class NotFoundError(FleetError, code="NOT_FOUND", status=404): ...


class ConflictError(FleetError, code="CONFLICT", status=409): ...


class AmbiguousIdError(FleetError, code="AMBIGUOUS_ID", status=409): ...


class TooManyPendingError(FleetError, code="TOO_MANY_PENDING", status=429): ...


class UnavailableError(FleetError, code="UNAVAILABLE", status=503): ...
