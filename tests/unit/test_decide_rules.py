"""RulesDecider: the offline baseline on each screen type, and end to end on the sim."""

from __future__ import annotations

import pytest

from testing.samples import FLOWS, Screen
from workers.core.loop import run_goal
from workers.core.model import Candidate, DecideState, Inputs, Kind, RunStatus
from workers.decide.rules import RulesDecider
from workers.devices.sim.device import make_sim_device


def _c(ref: str, kind: Kind, name: str, value: str = "") -> Candidate:
    return Candidate(ref=ref, kind=kind, name=name, value=value)


def _state(
    candidates: tuple[Candidate, ...],
    *,
    goal: str = "Sign in",
    context: tuple[str, ...] = (),
    inputs: tuple[str, ...] = ("email", "password"),
    used: tuple[str, ...] = (),
    done_when: str | None = None,
) -> DecideState:
    return DecideState(
        goal=goal,
        step=1,
        candidates=candidates,
        context=context,
        input_names=inputs,
        used_inputs=used,
        done_when=done_when,
    )


SCREENS = [(f"{name}-{i}", s) for name, flow in FLOWS.items() for i, s in enumerate(flow())]


@pytest.mark.parametrize(("label", "screen"), SCREENS, ids=[label for label, _ in SCREENS])
def test_rules_choose_the_right_element_on_every_sign_in_screen(label: str, screen: Screen):
    """On each screen of the sign-in, code, consent and disabled flows, rules pick correctly."""
    d = RulesDecider().decide(screen.state)
    assert (d.target, d.input, d.done) == (screen.want_target, screen.want_input, screen.want_done)
    assert d.confidence >= 0.75, label


def test_welcome_back_above_a_form_is_not_success():
    """A sign-in screen titled "Welcome back" is filled, not reported done."""
    state = _state(
        (_c("e2", Kind.TEXT_FIELD, "Email"), _c("e3", Kind.BUTTON, "Log in")),
        context=("Welcome back",),
    )
    d = RulesDecider().decide(state)
    assert (d.done, d.target, d.input) == (False, "e2", "email")


def test_done_when_marker_wins_with_full_confidence():
    """A visible done_when marker is done with confidence 1."""
    state = _state((_c("e2", Kind.BUTTON, "Continue"),), context=("Inbox",), done_when="inbox")
    d = RulesDecider().decide(state)
    assert d.done
    assert d.confidence == 1.0


@pytest.mark.parametrize(
    "distractor",
    ["Forgot password?", "Create account", "Sign in with Apple", "Sign up", "Cancel"],
)
def test_distractors_are_never_pressed_unless_the_goal_names_them(distractor: str):
    """With every field typed, a distractor alone leaves the rules blocked, not pressing it."""
    state = _state((_c("e2", Kind.BUTTON, distractor),), used=("email", "password"))
    d = RulesDecider().decide(state)
    assert d.blocked
    assert d.target == "none"


def test_a_goal_that_names_an_alternate_route_may_take_it():
    """Goal "Sign in with Apple" presses "Sign in with Apple" over plain "Continue"."""
    state = _state(
        (_c("e2", Kind.BUTTON, "Continue"), _c("e3", Kind.BUTTON, "Sign in with Apple")),
        goal="Sign in with Apple",
        inputs=(),
    )
    assert RulesDecider().decide(state).target == "e3"


def test_goal_verb_beats_a_generic_forward_verb():
    """ "Log in" (a synonym of the goal "Sign in") beats "Next"."""
    state = _state(
        (_c("e2", Kind.BUTTON, "Next"), _c("e3", Kind.BUTTON, "Log in")), used=("email", "password")
    )
    d = RulesDecider().decide(state)
    assert d.target == "e3"
    assert d.confidence > 0.9


@pytest.mark.parametrize("order", ["deny-first", "allow-first"])
def test_a_notifications_alert_is_declined_whatever_the_order(order: str):
    """On a notifications alert during a sign-in, "Don't Allow" is pressed and "Allow" never
    is, in either order."""
    deny, allow = _c("e2", Kind.BUTTON, "Don\u2019t Allow"), _c("e3", Kind.BUTTON, "Allow")
    cands = (deny, allow) if order == "deny-first" else (allow, deny)
    state = _state(cands, context=("Allow “Acme” to send notifications?",), used=("email",))
    assert RulesDecider().decide(state).target == "e2"


def test_secure_field_takes_the_password_like_input_never_the_email():
    """A secure field with an unhelpful name gets `pin`, never `email`."""
    state = _state(
        (_c("e2", Kind.SECURE_TEXT_FIELD, "Secret"),), inputs=("email", "pin"), used=("email",)
    )
    d = RulesDecider().decide(state)
    assert (d.target, d.input) == ("e2", "pin")
    only_email = _state((_c("e2", Kind.SECURE_TEXT_FIELD, "Secret"),), inputs=("email",))
    assert RulesDecider().decide(only_email).blocked


@pytest.mark.parametrize("input_name", ["code", "otp"])
def test_six_digit_code_field_takes_code_or_otp(input_name: str):
    """A "6-digit code" field takes an input named code or otp."""
    state = _state(
        (_c("e2", Kind.TEXT_FIELD, "6-digit code"), _c("e3", Kind.LINK, "Resend code")),
        inputs=("email", input_name),
        used=("email",),
    )
    d = RulesDecider().decide(state)
    assert (d.target, d.input) == ("e2", input_name)


def test_synonym_field_names_match_inputs():
    """ "Mobile number" takes `phone` and "Your e-mail" takes `email`, with less confidence
    than an exact name."""
    fields = (_c("e2", Kind.TEXT_FIELD, "Mobile number"), _c("e3", Kind.TEXT_FIELD, "Your e-mail"))
    first = RulesDecider().decide(_state(fields, inputs=("email", "phone")))
    assert (first.target, first.input) == ("e2", "phone")
    second = RulesDecider().decide(_state(fields, inputs=("email", "phone"), used=("phone",)))
    assert (second.target, second.input) == ("e3", "email")
    assert 0.8 < second.confidence < 0.95


def test_fields_are_filled_before_anything_is_pressed():
    """With a field left to fill and no enabled Sign in (disabled nodes are not candidates),
    the rules fill; once every input is typed and no control matches, they report blocked."""
    fields = (_c("e2", Kind.TEXT_FIELD, "Email"), _c("e3", Kind.SECURE_TEXT_FIELD, "Password"))
    assert RulesDecider().decide(_state(fields)).input == "email"
    stuck = RulesDecider().decide(_state(fields, used=("email", "password")))
    assert stuck.blocked
    assert "no control matches" in stuck.reason


def test_consent_checkbox_is_switched_on_once():
    """An off "I agree to the terms" checkbox is switched on before pressing Continue."""
    box = _c("e2", Kind.CHECKBOX, "I agree to the terms", value="0")
    go = _c("e3", Kind.BUTTON, "Continue")
    assert RulesDecider().decide(_state((box, go), inputs=())).target == "e2"
    ticked = _c("e2", Kind.CHECKBOX, "I agree to the terms", value="1")
    assert RulesDecider().decide(_state((ticked, go), inputs=())).target == "e3"


APPS = ["signin", "code", "disabled", "consent", "slow", "inject"]


@pytest.mark.parametrize("platform", ["ios", "android"])
@pytest.mark.parametrize("app", APPS)
def test_rules_reach_done_on_every_sim_app(app: str, platform: str):
    """`goalfleet run` with the rules decider reaches done on each sim app, both flavours."""
    result = run_goal(
        make_sim_device(f"sim:{app}-{platform}"),
        "Sign in",
        decider=RulesDecider(),
        inputs=Inputs.of({"email": "ada@example.com", "code": "123456"}, {"password": "pw-1"}),
    )
    assert result.status is RunStatus.DONE, result.reason
    pressed = [s.action.ref for s in result.steps if s.action]
    assert pressed, "some action was taken"


# -- permission prompts, by meaning (issue 42) -------------------------------------------------

PROMPTS = [
    # (the prompt's text, its buttons, the one to press)
    ("Allow Acme to send notifications?", ("Yes", "No"), "No"),
    ("Allow Acme to send notifications?", ("No", "Yes"), "No"),
    (
        "“Acme” Would Like to Send You Notifications",
        ("Don\u2019t Allow", "Allow"),
        "Don\u2019t Allow",
    ),
    ("Turn on notifications?", ("Turn on", "Not now"), "Not now"),
    ("We\u2019d like to send you notifications", ("Sure", "Not now"), "Not now"),
    ("Acme wants to send you alerts and notifications", ("OK", "Deny"), "Deny"),
    (
        "Allow “Acme” to track your activity across other companies\u2019 apps and websites?",
        ("Ask App Not to Track", "Allow"),
        "Ask App Not to Track",
    ),
    (
        "Allow Acme to access this device\u2019s location?",
        ("While using the app", "Only this time", "Don\u2019t allow"),
        "Only this time",
    ),
    (
        "Allow “Acme” to use your location?",
        ("Allow While Using App", "Don't Allow", "Allow Once"),
        "Allow Once",
    ),
    (
        "Acme would like to access the camera",
        ("Allow while using the app", "Deny"),
        "Allow while using the app",
    ),
    ("Acme would like to access your contacts", ("OK", "Don't Allow"), "Don't Allow"),
]


@pytest.mark.parametrize(("text", "buttons", "want"), PROMPTS, ids=[p[0][:30] for p in PROMPTS])
def test_a_permission_prompt_gets_the_narrowest_choice_that_keeps_the_sign_in_going(
    text: str, buttons: tuple[str, ...], want: str
):
    """A permission prompt is recognised by what it asks (allowing notifications, tracking,
    location, camera, contacts), whatever its buttons say: notifications and tracking are
    declined (a sign-in needs neither); an access prompt gets its narrowest time-bound grant
    ("Allow once", "Only this time", then "While using"), and without one it is declined."""
    cands = tuple(_c(f"e{i}", Kind.BUTTON, b) for i, b in enumerate(buttons, start=2))
    d = RulesDecider().decide(_state(cands, context=(text,), used=("email", "password")))
    pressed = next(c.name for c in cands if c.ref == d.target)
    assert pressed == want, d.reason
    assert d.confidence >= 0.8


def test_a_permission_prompt_with_no_narrower_choice_escalates():
    """A notifications prompt that offers only a grant: granting more than a sign-in needs is a
    person's call, so the press comes with a confidence that escalates."""
    cands = (_c("e2", Kind.BUTTON, "OK"),)
    d = RulesDecider().decide(
        _state(cands, context=("Acme would like to send you notifications",), used=("email",))
    )
    assert d.target == "e2"
    assert d.confidence < 0.5


@pytest.mark.parametrize("platform", ["ios", "android"])
def test_a_yes_no_notifications_question_is_answered_no_on_the_sim(platform: str):
    """After the sign-in, "Allow Acme to send notifications?" with Yes / No: the run presses
    No (never Yes) and ends done."""
    result = run_goal(
        make_sim_device(f"sim:notify-{platform}"),
        "Sign in",
        decider=RulesDecider(),
        inputs=Inputs.of({"email": "ada@example.com"}, {"password": "pw-of-ada-1"}),
        sleep=lambda _: None,
    )
    assert result.status is RunStatus.DONE, result.reason
    on_prompt = [s for s in result.steps if s.screen == "Allow Acme to send notifications?"]
    assert [s.decision.reason.split(":")[0] for s in on_prompt] == [
        "a permission dialog (notifications) is in the way"
    ]
    assert on_prompt[0].decision.reason.endswith("press 'No'")


def test_a_form_that_mentions_access_is_filled_not_answered_as_a_prompt():
    """ "Sign in to allow Acme to access your files" above an email field and Continue asks
    no question: the field is filled (a permission prompt has no field to fill)."""
    cands = (_c("e2", Kind.TEXT_FIELD, "Email"), _c("e3", Kind.BUTTON, "Continue"))
    state = _state(cands, context=("Sign in to allow Acme to access your files",))
    d = RulesDecider().decide(state)
    assert (d.target, d.input) == ("e2", "email"), d.reason
