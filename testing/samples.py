"""The decide states of the sign-in flows, as a decider sees them on `SimDevice`'s apps.

Shared by the token benchmark (`bench/bench_tokens.py`) and the decider tests, so both measure
and check the same screens: email → password → welcome with distractors, a 6-digit code screen,
a consent alert, and a form whose "Sign in" stays disabled (absent from the candidates) until
both fields are filled.
"""

from __future__ import annotations

from dataclasses import dataclass

from workers.core.model import Candidate, DecideState, Kind

GOAL = "Sign in"
INPUTS = ("email", "password")


def _c(ref: str, kind: Kind, name: str, value: str = "") -> Candidate:
    return Candidate(ref=ref, kind=kind, name=name, value=value)


EMAIL = (_c("e2", Kind.TEXT_FIELD, "Email"),)
EMAIL_DISTRACTORS = (
    _c("e4", Kind.LINK, "Forgot password?"),
    _c("e5", Kind.BUTTON, "Create account"),
)
CONTINUE = _c("e3", Kind.BUTTON, "Continue")
PASSWORD = _c("e2", Kind.SECURE_TEXT_FIELD, "Password")
SIGN_IN = _c("e3", Kind.BUTTON, "Sign in")
FORGOT = _c("e4", Kind.LINK, "Forgot password?")


@dataclass(frozen=True)
class Screen:
    """One screen of a flow and the decision a correct decider makes on it."""

    name: str
    state: DecideState
    want_target: str
    """The ref a correct decider picks ("none" when it should report done)."""
    want_input: str = "none"
    want_done: bool = False


def _state(
    screen: str,
    context: tuple[str, ...],
    candidates: tuple[Candidate, ...],
    *,
    step: int,
    used: tuple[str, ...] = (),
    history: tuple[str, ...] = (),
    inputs: tuple[str, ...] = INPUTS,
) -> DecideState:
    return DecideState(
        goal=GOAL,
        step=step,
        candidates=candidates,
        context=context,
        input_names=inputs,
        used_inputs=used,
        history=history,
        screen=screen,
    )


def signin_flow() -> list[Screen]:
    """Email → password → welcome (with "Forgot password?" and "Create account")."""
    email_ctx = ("Sign in to Acme",)
    pw_ctx = ("Enter your password",)
    h1 = ("1: filled email into Email; screen changed",)
    h2 = (*h1, "2: pressed Continue; screen changed")
    h3 = (*h2, "3: filled password into Password; screen changed")
    h4 = (*h3, "4: pressed Sign in; screen changed")
    return [
        Screen(
            "email",
            _state("email", email_ctx, (*EMAIL, CONTINUE, *EMAIL_DISTRACTORS), step=1),
            "e2",
            "email",
        ),
        Screen(
            "email",
            _state(
                "email",
                email_ctx,
                (*EMAIL, CONTINUE, *EMAIL_DISTRACTORS),
                step=2,
                used=("email",),
                history=h1,
            ),
            "e3",
        ),
        Screen(
            "password",
            _state(
                "password", pw_ctx, (PASSWORD, SIGN_IN, FORGOT), step=3, used=("email",), history=h2
            ),
            "e2",
            "password",
        ),
        Screen(
            "password",
            _state(
                "password", pw_ctx, (PASSWORD, SIGN_IN, FORGOT), step=4, used=INPUTS, history=h3
            ),
            "e3",
        ),
        Screen(
            "welcome",
            _state(
                "welcome",
                ("Welcome", "You are signed in."),
                (_c("e4", Kind.BUTTON, "Sign out"),),
                step=5,
                used=INPUTS,
                history=h4,
            ),
            "none",
            want_done=True,
        ),
    ]


def code_flow() -> list[Screen]:
    """The 6-digit code screen after the password (Verify is disabled until six digits)."""
    ctx = ("Enter the 6-digit code we sent you",)
    inputs = (*INPUTS, "code")
    used = INPUTS
    field = _c("e2", Kind.TEXT_FIELD, "Verification code")
    resend = _c("e4", Kind.LINK, "Resend code")
    verify = _c("e3", Kind.BUTTON, "Verify")
    history = (
        "2: pressed Continue; screen changed",
        "3: filled password into Password; screen changed",
        "4: pressed Sign in; screen changed",
    )
    return [
        Screen(
            "code",
            _state("code", ctx, (field, resend), step=5, used=used, history=history, inputs=inputs),
            "e2",
            "code",
        ),
        Screen(
            "code",
            _state(
                "code",
                ctx,
                (field, verify, resend),
                step=6,
                used=(*used, "code"),
                history=(*history[1:], "5: filled code into Verification code; screen changed"),
                inputs=inputs,
            ),
            "e3",
        ),
    ]


def consent_flow() -> list[Screen]:
    """A blocking notifications alert during a sign-in: decline it ("Don't Allow"; a sign-in
    needs no notifications)."""
    return [
        Screen(
            "consent",
            _state(
                "consent",
                ("“Acme” Would Like to Send You Notifications",),
                (_c("e2", Kind.BUTTON, "Don't Allow"), _c("e3", Kind.BUTTON, "Allow")),
                step=5,
                used=INPUTS,
                history=(
                    "3: filled password into Password; screen changed",
                    "4: pressed Sign in; screen changed",
                ),
            ),
            "e2",
        )
    ]


def disabled_flow() -> list[Screen]:
    """Both fields on one form; "Sign in" is not a candidate until both are filled."""
    ctx = ("Sign in to Acme",)
    email = _c("e2", Kind.TEXT_FIELD, "Email")
    password = _c("e3", Kind.SECURE_TEXT_FIELD, "Password")
    rest = (_c("e5", Kind.LINK, "Forgot password?"), _c("e6", Kind.BUTTON, "Create account"))
    sign_in = _c("e4", Kind.BUTTON, "Sign in")
    h1 = ("1: filled email into Email; screen changed",)
    return [
        Screen("form", _state("form", ctx, (email, password, *rest), step=1), "e2", "email"),
        Screen(
            "form",
            _state("form", ctx, (email, password, *rest), step=2, used=("email",), history=h1),
            "e3",
            "password",
        ),
        Screen(
            "form",
            _state(
                "form",
                ctx,
                (email, password, sign_in, *rest),
                step=3,
                used=INPUTS,
                history=(*h1, "2: filled password into Password; screen changed"),
            ),
            "e4",
        ),
    ]


FLOWS = {
    "signin": signin_flow,
    "code": code_flow,
    "consent": consent_flow,
    "disabled": disabled_flow,
}
