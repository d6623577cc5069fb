"""ScriptedDecider: the fake beside the Decider seam."""

from __future__ import annotations

import pytest

from testing.samples import signin_flow
from workers.core.loop import run_goal
from workers.core.model import Decision, Inputs, RunStatus
from workers.decide.scripted import ScriptedDecider, ScriptError, blocked, done, fill, press
from workers.devices.sim.device import make_sim_device

SECRET = "hunter2-very-secret"
EMAIL = "ada@example.com"


def test_function_script_answers_every_step_and_records_states():
    """A function script is called for every state, and every state is recorded in order."""
    decider = ScriptedDecider(lambda s: Decision(target=s.candidates[0].ref, confidence=0.7))
    states = [screen.state for screen in signin_flow()]
    answers = [decider.decide(s) for s in states]
    assert [a.target for a in answers] == [s.candidates[0].ref for s in states]
    assert decider.seen == states


def test_list_script_is_consumed_in_order_and_resolves_names():
    """List entries are used one per call; fill/press resolve candidates by name."""
    flow = signin_flow()
    decider = ScriptedDecider([fill("Email", "email"), press("continue"), done()])
    first = decider.decide(flow[0].state)
    second = decider.decide(flow[1].state)
    third = decider.decide(flow[4].state)
    assert (first.target, first.input) == ("e2", "email")
    assert (second.target, second.input) == ("e3", "none")
    assert third.done
    assert decider.remaining == 0


def test_exhausted_script_raises_unless_then_is_given():
    """Asking past the end of a list is a test bug (ScriptError); `then` answers instead."""
    state = signin_flow()[0].state
    strict = ScriptedDecider([done()])
    strict.decide(state)
    with pytest.raises(ScriptError, match="ran out"):
        strict.decide(state)
    lenient = ScriptedDecider([], then=blocked("nothing scripted"))
    assert lenient.decide(state).blocked


def test_press_of_a_name_not_on_screen_is_a_script_error():
    """A scripted name that is not on the screen fails loudly, listing what is there."""
    decider = ScriptedDecider([press("Sign in with Apple")])
    with pytest.raises(ScriptError, match="Create account"):
        decider.decide(signin_flow()[0].state)


def test_scripted_run_reaches_done_and_never_sees_the_secret():
    """A scripted sign-in on the sim reaches done; no state the decider saw holds the secret."""
    decider = ScriptedDecider(
        [
            fill("Email", "email"),
            press("Continue"),
            fill("Password", "password"),
            press("Sign in"),
            done("welcome"),
        ]
    )
    result = run_goal(
        make_sim_device("sim:signin-ios"),
        "Sign in",
        decider=decider,
        inputs=Inputs.of({"email": EMAIL}, {"password": SECRET}),
    )
    assert result.status is RunStatus.DONE
    seen = "".join(s.model_dump_json() for s in decider.seen)
    assert SECRET not in seen
    # A plain input typed into a plain field shows up as that field's value on the next
    # snapshot (projection keeps plain values); the instructor prompt never renders them.
    assert decider.seen[-1].used_inputs == ("email", "password")
