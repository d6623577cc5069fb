"""A chain of deciders in the loop: on an escalation cause the same step asks the next one;
every attempt is on the row; guards apply to each answer; only the last one's escalation
ends the run."""

from __future__ import annotations

from collections.abc import Callable

from workers.core.chain import Tier
from workers.core.errors import DecisionInvalidError
from workers.core.loop import run_goal
from workers.core.model import DecideState, Decision, Inputs, Outcome, RunStatus
from workers.decide.rules import RulesDecider
from workers.devices.sim.device import make_sim_device

INPUTS = Inputs.of({"email": "ada@example.com"}, {"password": "pw-1234"})


class Fn:
    def __init__(self, fn: Callable[[DecideState], Decision]) -> None:
        self.fn = fn
        self.calls = 0

    def decide(self, state: DecideState) -> Decision:
        self.calls += 1
        return self.fn(state)


def press(name: str, confidence: float = 0.9) -> Fn:
    def fn(state: DecideState) -> Decision:
        ref = next(c.ref for c in state.candidates if c.name == name)
        return Decision(target=ref, confidence=confidence, decided_by="model")

    return Fn(fn)


def test_the_second_decider_resolves_what_the_first_escalates() -> None:
    """The rules decider cannot tell 'Continue as ada' from 'Continue as guest' (0.40); the
    next decider's answer is acted on, in the same step."""
    second = press("Continue as ada")
    result = run_goal(
        make_sim_device("sim:twins-ios"),
        "Sign in",
        decider=RulesDecider(),
        decider_name="rules",
        escalate_to=(Tier("openai/big", second),),
        inputs=INPUTS,
        sleep=lambda _: None,
    )
    assert result.status is RunStatus.DONE, result.reason
    assert second.calls == 1
    [row] = [r for r in result.steps if r.screen == "Choose how to continue"]
    assert row.outcome is Outcome.ACTED
    assert [a.decider for a in row.attempts] == ["rules", "openai/big"]
    assert row.attempts[0].escalated.startswith("confidence 0.40")
    assert row.attempts[1].escalated == ""
    assert row.decision is not None
    assert row.decision.decided_by == "model"
    others = [r for r in result.steps if r is not row and r.decision]
    assert all(len(r.attempts) == 1 for r in others)  # a chain records every step's asker


def test_guards_apply_to_every_decider_and_the_last_escalation_ends_the_run() -> None:
    first, second = press("Delete account"), press("Delete account", confidence=1.0)
    result = run_goal(
        make_sim_device("sim:inject-ios"),
        "Sign in",
        decider=first,
        decider_name="small",
        escalate_to=(Tier("big", second),),
        sleep=lambda _: None,
    )
    assert result.status is RunStatus.ESCALATED
    [row] = result.steps
    assert row.action is None  # nothing pressed
    assert [a.decider for a in row.attempts] == ["small", "big"]
    assert all("dangerous" in a.escalated for a in row.attempts)


def test_an_invalid_answer_goes_up_the_chain() -> None:
    def invalid(_: DecideState) -> Decision:
        raise DecisionInvalidError("still invalid after the re-ask")

    result = run_goal(
        make_sim_device("sim:signin-android"),
        "Sign in",
        decider=Fn(invalid),
        decider_name="tiny",
        escalate_to=(Tier("rules", RulesDecider()),),
        inputs=INPUTS,
        sleep=lambda _: None,
    )
    assert result.status is RunStatus.DONE
    first = result.steps[0]
    assert first.attempts[0].decision is None
    assert "no valid decision" in first.attempts[0].escalated
    assert first.attempts[1].decider == "rules"


def test_one_decider_records_no_attempts() -> None:
    result = run_goal(
        make_sim_device("sim:signin-ios"),
        "Sign in",
        decider=RulesDecider(),
        inputs=INPUTS,
        sleep=lambda _: None,
    )
    assert result.status is RunStatus.DONE
    assert all(r.attempts == () for r in result.steps)


def test_an_entry_learned_from_the_second_decider_names_it() -> None:
    """The memory records who actually answered a screen: the chain's second decider, not
    the first one whose escalation it resolved."""
    from workers.core.memory import InMemoryMemory  # noqa: PLC0415

    memory = InMemoryMemory("rules")
    result = run_goal(
        make_sim_device("sim:twins-ios"),
        "Sign in",
        decider=RulesDecider(),
        decider_name="rules",
        escalate_to=(Tier("openai/big", press("Continue as ada")),),
        inputs=INPUTS,
        memory=memory,
        sleep=lambda _: None,
    )
    assert result.status is RunStatus.DONE
    [chooser] = [e for e in memory.entries.values() if e.screen == "Choose how to continue"]
    assert (chooser.origin, chooser.source) == ("openai/big", "model")
    assert {e.origin for e in memory.entries.values()} == {"rules", "openai/big"}
