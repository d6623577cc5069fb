"""Properties of run_goal under arbitrary decisions and faults (hypothesis)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from simkit import Act, ErrorBlind, RecordingSim

from workers.core.loop import run_goal
from workers.core.model import (
    ActionResult,
    DecideState,
    Decision,
    Inputs,
    InputValue,
    Kind,
    Snapshot,
)
from workers.core.params import RunParams
from workers.core.ports import Device
from workers.devices.sim.apps import APPS, LOGIN_PASSWORD
from workers.devices.sim.device import Faults, SimDevice, make_sim_device

SUPPLIED = {"email": "ada@example.com", "password": "s3cret-pw", "code": "123456"}


@dataclass
class Recording(Device):
    """A DevicePort wrapper that records what the loop did to the device."""

    inner: SimDevice
    last: Snapshot | None = None
    made: list[tuple[str, Snapshot | None, str | None]] = field(default_factory=list)

    @property
    def platform(self):
        return self.inner.platform

    def snapshot(self) -> Snapshot:
        self.last = self.inner.snapshot()
        return self.last

    def press(self, pinned_ref: str) -> ActionResult:
        self.made.append((pinned_ref, self.last, None))
        return self.inner.press(pinned_ref)

    def fill(self, pinned_ref: str, value: InputValue) -> ActionResult:
        self.made.append((pinned_ref, self.last, value.reveal()))
        return self.inner.fill(pinned_ref, value)

    def close(self) -> None:
        self.inner.close()


decisions = st.builds(
    Decision,
    target=st.sampled_from(["none", "e1", "e2", "e3", "e4", "e5", "e6", "e9", "e42", "x"]),
    input=st.sampled_from(["none", "email", "password", "code", "ssn", "made_up"]),
    # done/blocked end a run at once without acting; leaving them out keeps runs acting
    done=st.just(False),  # noqa: FBT003 - a strategy argument
    blocked=st.just(False),  # noqa: FBT003 - a strategy argument
    confidence=st.floats(min_value=0.0, max_value=1.0),
)
faults = st.builds(
    Faults,
    stale_on=st.frozensets(st.integers(1, 30), max_size=5),
    transient_on=st.frozensets(st.integers(1, 30), max_size=5),
    disconnect_after=st.none() | st.integers(1, 40),
)


class ListDecider:
    def __init__(self, items: list[Decision]) -> None:
        self.items = items
        self.i = 0

    def decide(self, state: DecideState) -> Decision:
        d = self.items[self.i % len(self.items)]
        self.i += 1
        return d


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    app=st.sampled_from(sorted(APPS)),
    platform=st.sampled_from(["ios", "android"]),
    items=st.lists(decisions, min_size=1, max_size=8),
    fault_plan=faults,
    max_steps=st.integers(1, 15),
    min_conf=st.floats(0.0, 1.0),
)
def test_loop_invariants(
    app: str,
    platform: str,
    items: list[Decision],
    fault_plan: Faults,
    max_steps: int,
    min_conf: float,
) -> None:
    """Never acts on an unknown ref, never types unsupplied text, always pins, always ends."""
    device = Recording(make_sim_device(f"sim:{app}-{platform}", faults=fault_plan))
    result = run_goal(
        device,
        "Sign in",
        decider=ListDecider(items),
        inputs=Inputs.of(
            {"email": SUPPLIED["email"], "code": SUPPLIED["code"]},
            {"password": SUPPLIED["password"]},
        ),
        params=RunParams(max_steps=max_steps, min_confidence=min_conf, max_unproductive=2),
        sleep=lambda _: None,
    )
    assert result.status.terminal
    assert len(result.steps) <= max_steps
    for pinned, snap, text in device.made:
        assert snap is not None
        ref = pinned.removeprefix("@").split("~s")[0]
        assert pinned == snap.pin(ref), "every mutation is pinned to the latest snapshot"
        assert snap.candidate(ref) is not None, "never acts on a ref that is not on screen"
        assert text is None or text in SUPPLIED.values(), "never types unsupplied text"
    assert SUPPLIED["password"] not in result.model_dump_json()


INPUT_NAMES = ("email", "password", "code")
FORWARD = ("Continue", "Next", "Sign in", "Log in", "Verify", "Allow")


def _forward(state: DecideState) -> Decision | None:
    """What a competent decider would do here: type each input once, then press on."""
    for c in state.candidates:
        if c.kind.fillable:
            secure = c.kind is Kind.SECURE_TEXT_FIELD
            want = "password" if secure else "code" if "code" in c.name.lower() else "email"
            if want not in state.used_inputs:
                return Decision(target=c.ref, input=want)
    return next((Decision(target=c.ref) for c in state.candidates if c.name in FORWARD), None)


class ScreenDecider:
    """Cycles through `choices`: (candidate index, input index) picks a control of the screen
    it is shown (and an input for a text field); a negative index is what a competent decider
    would do, when it knows. So runs get deep into the sim apps and repeat themselves."""

    def __init__(self, choices: list[tuple[int, int]]) -> None:
        self.choices = choices
        self.i = 0

    def decide(self, state: DecideState) -> Decision:
        pick, which = self.choices[self.i % len(self.choices)]
        self.i += 1
        forward = _forward(state) if pick < 0 else None
        if forward is not None:
            return forward
        if not state.candidates:
            return Decision(blocked=True, reason="nothing to press")
        c = state.candidates[abs(pick) % len(state.candidates)]
        return Decision(target=c.ref, input=INPUT_NAMES[which] if c.kind.fillable else "none")


def _brought_an_error(a: Act) -> bool:
    """The press left the sim with an error text it did not show before."""
    assert a.after is not None
    return any(e[0] == "error" for e in a.after) and not any(e[0] == "error" for e in a.before)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    app=st.sampled_from(sorted(APPS)),
    platform=st.sampled_from(["ios", "android"]),
    choices=st.lists(st.tuples(st.integers(-4, 9), st.integers(0, 2)), min_size=1, max_size=8),
    fault_plan=faults,
    max_steps=st.integers(1, 20),
    max_unproductive=st.integers(0, 5),
    password=st.sampled_from([SUPPLIED["password"], LOGIN_PASSWORD]),
    blind=st.booleans(),
)
def test_no_repeated_submits(
    app: str,
    platform: str,
    choices: list[tuple[int, int]],
    fault_plan: Faults,
    max_steps: int,
    max_unproductive: int,
    password: str,
    blind: bool,  # noqa: FBT001 - a strategy argument
) -> None:
    """Judged by what the sim app saw, under any choices and faults: no control pressed again
    on a screen that looks as it did right after a press of it that changed nothing or
    brought up an error (one the loop could see: `blind` hides them); at most one credential
    submit (a button pressed right after a secret was typed, or on a screen where one was)
    per screen; no fill of a field that already holds that text."""
    device = RecordingSim(make_sim_device(f"sim:{app}-{platform}", faults=fault_plan))
    result = run_goal(
        ErrorBlind(device) if blind else device,
        "Sign in",
        decider=ScreenDecider(choices),
        inputs=Inputs.of(
            {"email": SUPPLIED["email"], "code": SUPPLIED["code"]}, {"password": password}
        ),
        params=RunParams(
            max_steps=max_steps, min_confidence=0.0, max_unproductive=max_unproductive
        ),
        sleep=lambda _: None,
    )
    assert result.status.terminal
    made = device.made()
    for i, a in enumerate(made):
        if a.kind == "press" and (a.after == a.before or (_brought_an_error(a) and not blind)):
            again = [b for b in made[i + 1 :] if b.kind == "press" and b.element == a.element]
            assert all(b.before != a.after for b in again), f"{a.element} pressed again"
    submits: Counter[str] = Counter()
    armed: set[str] = set()
    secret_just_typed = False
    for a in made:
        if a.kind == "fill":
            assert a.held != a.text, f"{a.element} already held what was typed again"
            secret_just_typed = a.text == password
            armed |= {a.screen} if secret_just_typed else set()
            continue
        if a.element_kind == "button" and (secret_just_typed or a.screen in armed):
            submits[a.screen] += 1
        secret_just_typed = False
    assert all(n <= 1 for n in submits.values()), submits
    assert password not in result.model_dump_json()
