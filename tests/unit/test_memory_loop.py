"""Decision memory in the loop (fake memory beside the seam, real sim devices): a second run
decides known screens from memory on any platform; only `done` runs write; every guard still
applies; a remembered action that moves nothing is invalidated and costs one action at most;
no value ever reaches a key or an entry."""

from __future__ import annotations

from dataclasses import dataclass, field

from workers.core.loop import run_goal
from workers.core.memory import InMemoryMemory, Remembered, Target, memory_key
from workers.core.model import (
    Candidate,
    DecideState,
    Decision,
    Inputs,
    Kind,
    Outcome,
    RunResult,
    RunStatus,
)
from workers.core.params import RunParams
from workers.decide.rules import RulesDecider
from workers.devices.sim.device import Faults, make_sim_device

INPUTS = Inputs.of({"email": "ada@example.com", "code": "123456"}, {"password": "hunter2!"})


@dataclass
class Counting:
    """The rules decider, counting how often it is asked."""

    inner: RulesDecider = field(default_factory=RulesDecider)
    calls: int = 0

    def decide(self, state: DecideState) -> Decision:
        self.calls += 1
        return self.inner.decide(state)


def run(
    spec: str,
    memory: InMemoryMemory,
    *,
    goal: str = "Sign in",
    inputs: Inputs = INPUTS,
    faults: Faults | None = None,
    params: RunParams | None = None,
) -> tuple[RunResult, Counting]:
    decider = Counting()
    result = run_goal(
        make_sim_device(spec, faults=faults or Faults()),
        goal,
        decider=decider,
        inputs=inputs,
        memory=memory,
        params=params or RunParams(),
        sleep=lambda _: None,
    )
    return result, decider


def test_second_run_decides_every_known_screen_from_memory() -> None:
    memory = InMemoryMemory("rules")
    first, asked = run("sim:code-ios", memory)
    assert first.status is RunStatus.DONE
    assert first.memory_writes == len(first.steps) == asked.calls
    assert {r.memory.outcome for r in first.steps if r.memory} == {"miss"}

    second, asked = run("sim:code-ios", memory)
    assert second.status is RunStatus.DONE
    assert asked.calls == 0
    assert [r.decision.decided_by for r in second.steps if r.decision] == ["memory"] * len(
        second.steps
    )
    assert all(r.memory and r.memory.outcome == "hit" for r in second.steps)
    assert second.memory_writes == 0
    assert [r.outcome for r in second.steps] == [r.outcome for r in first.steps]


def test_platforms_share_the_screens_they_draw_alike() -> None:
    """iOS draws 'Forgot password?' as a button, Android as a link: one role, one entry. (A
    typed Android field is named by its id, not its label: that screen differs, and misses.)"""
    memory = InMemoryMemory("rules")
    run("sim:signin-ios", memory)
    result, _ = run("sim:signin-android", memory)
    assert result.status is RunStatus.DONE
    assert result.steps[0].memory is not None
    assert result.steps[0].memory.outcome == "hit"
    assert result.steps[-1].memory is not None
    assert result.steps[-1].memory.outcome == "hit"  # the welcome screen


def test_other_input_values_share_the_entries() -> None:
    """Keys hold input names, never values: a run with another email hits every entry."""
    memory = InMemoryMemory("rules")
    run("sim:signin-ios", memory)
    other = Inputs.of({"email": "bob@example.org"}, {"password": "another-secret"})
    result, asked = run("sim:signin-ios", memory, inputs=other)
    assert (result.status, asked.calls) == (RunStatus.DONE, 0)


def test_blocked_and_escalated_runs_write_nothing() -> None:
    memory = InMemoryMemory("rules")
    blocked, _ = run("sim:signin-ios", memory, goal="Delete account")
    assert blocked.status is RunStatus.BLOCKED
    escalated, _ = run("sim:signin-ios", memory, params=RunParams(min_confidence=0.99))
    assert escalated.status is RunStatus.ESCALATED
    assert escalated.steps  # it did act before escalating...
    assert memory.entries == {}  # ...and remembered none of it


def test_a_screen_that_gained_a_control_has_another_key() -> None:
    base = DecideState(
        goal="Sign in",
        step=1,
        candidates=(Candidate(ref="e1", kind=Kind.BUTTON, name="Continue"),),
        context=("Sign in to Acme",),
        input_names=("email",),
    )
    gained = base.model_copy(
        update={
            "candidates": (*base.candidates, Candidate(ref="e2", kind=Kind.BUTTON, name="Delete"))
        }
    )
    relabelled = base.model_copy(
        update={"candidates": (Candidate(ref="e1", kind=Kind.BUTTON, name="Next"),)}
    )
    moved_refs = base.model_copy(
        update={"candidates": (Candidate(ref="e9", kind=Kind.BUTTON, name="Continue"),)}
    )
    keys = {memory_key(s, "rules") for s in (base, gained, relabelled)}
    assert len(keys) == 3
    assert memory_key(moved_refs, "rules") == memory_key(base, "rules")  # refs are not the screen
    assert memory_key(base, "openai/small") != memory_key(base, "rules")  # per decider
    typed = base.model_copy(update={"used_inputs": ("email",)})
    assert memory_key(typed, "rules") != memory_key(base, "rules")


def test_a_remembered_disabled_or_missing_candidate_falls_back() -> None:
    state = DecideState(
        goal="Sign in",
        step=1,
        candidates=(Candidate(ref="e1", kind=Kind.BUTTON, name="Sign in", enabled=False),),
        context=(),
        input_names=(),
    )
    entry = Remembered(key="k", target=Target(kind=Kind.BUTTON, name="Sign in"), source="rules")
    assert entry.decision_for(state) is None
    gone = state.model_copy(update={"candidates": ()})
    assert entry.decision_for(gone) is None


def _poison(memory: InMemoryMemory, spec: str, screen: str, press: str) -> str:
    """Plant an entry for the state the rules decider will be asked on `screen`, saying
    `press` — as if a bad decision had been remembered."""
    seen: list[DecideState] = []

    class Spy(RulesDecider):
        def decide(self, state: DecideState) -> Decision:
            seen.append(state)
            return super().decide(state)

    run_goal(make_sim_device(spec), "Sign in", decider=Spy(), inputs=INPUTS, sleep=lambda _: None)
    state = next(s for s in seen if s.screen == screen and not s.used_inputs.count("code"))
    key = memory_key(state, "rules")
    memory.entries[key] = Remembered(
        key=key, target=Target(kind=Kind.BUTTON, name=press), source="model"
    )
    return key


def test_a_remembered_action_that_changes_nothing_is_invalidated_and_the_decider_decides() -> None:
    """'Resend code' changes nothing: the entry goes, the same step asks the decider, and the
    run still ends done — one wasted action, never a wrong run, nothing counted against it."""
    memory = InMemoryMemory("rules")
    key = _poison(memory, "sim:code-ios", "Enter the 6-digit code we sent you", "Resend code")
    result, asked = run("sim:code-ios", memory)
    assert result.status is RunStatus.DONE
    assert [k for k, _ in memory.invalidated] == [key]
    [row] = [r for r in result.steps if r.memory and r.memory.outcome == "invalidated"]
    assert row.memory is not None
    assert row.memory.why == "its action changed nothing"
    assert row.decision is not None
    assert row.decision.decided_by == "rules"
    assert row.outcome is Outcome.ACTED
    assert asked.calls >= 1
    # the run then remembered the right answer in its place
    assert key in memory.entries
    assert memory.entries[key].target == Target(kind=Kind.TEXT_FIELD, name="Verification code")


def test_guards_apply_to_a_remembered_decision() -> None:
    """A remembered press of a dangerous control escalates as a decider's would."""
    memory = InMemoryMemory("rules")
    result, _ = run("sim:inject-ios", memory)
    assert result.status is RunStatus.DONE
    [key] = [k for k, e in memory.entries.items() if e.target and e.target.name == "Continue"]
    memory.entries[key] = memory.entries[key].model_copy(
        update={"target": Target(kind=Kind.BUTTON, name="Delete account")}
    )
    result, _ = run("sim:inject-ios", memory)
    assert result.status is RunStatus.ESCALATED
    assert "dangerous" in result.reason


def test_a_stale_remembered_action_falls_back() -> None:
    memory = InMemoryMemory("rules")
    run("sim:signin-ios", memory)
    # command 2 is the first mutation: the remembered fill comes back stale
    result, asked = run("sim:signin-ios", memory, faults=Faults(stale_on=frozenset({2})))
    assert result.status is RunStatus.DONE
    assert memory.invalidated
    assert memory.invalidated[0][1] == "its ref was stale"
    assert asked.calls >= 1


def test_no_value_reaches_the_memory() -> None:
    memory = InMemoryMemory("rules")
    for spec in ("sim:signin-ios", "sim:code-android", "sim:disabled-ios", "sim:consent-ios"):
        run(spec, memory)
    dump = "".join(e.model_dump_json() for e in memory.entries.values()) + "".join(memory.entries)
    for value in ("ada@example.com", "hunter2!", "123456"):
        assert value not in dump


def test_scrub_replaces_typed_values_in_what_the_decider_sees() -> None:
    state = DecideState(
        goal="Sign in",
        step=2,
        candidates=(
            Candidate(ref="e1", kind=Kind.TEXT_FIELD, name="Email", value="ada@example.com"),
        ),
        context=("Hi ada@example.com, enter your password",),
        input_names=("email",),
    )
    clean = INPUTS.scrub_state(state)
    assert clean.context == ("Hi {email}, enter your password",)
    assert clean.candidates[0].value == ""
    other = Inputs.of({"email": "bob@example.org"}).scrub_state(
        state.model_copy(update={"context": ("Hi bob@example.org, enter your password",)})
    )
    assert memory_key(clean, "rules") == memory_key(other, "rules")
