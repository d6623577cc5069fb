"""Properties of run_goal under arbitrary decisions and faults (hypothesis)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workers.core.loop import run_goal
from workers.core.model import ActionResult, DecideState, Decision, Inputs, InputValue, Snapshot
from workers.core.params import RunParams
from workers.devices.sim import Faults, SimDevice, make_sim_device
from workers.devices.sim_apps import APPS

SUPPLIED = {"email": "ada@example.com", "password": "s3cret-pw", "code": "123456"}


@dataclass
class Recording:
    """A DevicePort wrapper that records what the loop did to the device."""

    inner: SimDevice
    last: Snapshot | None = None
    actions: list[tuple[str, Snapshot | None, str | None]] = field(default_factory=list)

    @property
    def platform(self):
        return self.inner.platform

    def snapshot(self) -> Snapshot:
        self.last = self.inner.snapshot()
        return self.last

    def press(self, pinned_ref: str) -> ActionResult:
        self.actions.append((pinned_ref, self.last, None))
        return self.inner.press(pinned_ref)

    def fill(self, pinned_ref: str, value: InputValue) -> ActionResult:
        self.actions.append((pinned_ref, self.last, value.reveal()))
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
    for pinned, snap, text in device.actions:
        assert snap is not None
        ref = pinned.removeprefix("@").split("~s")[0]
        assert pinned == snap.pin(ref), "every mutation is pinned to the latest snapshot"
        assert snap.candidate(ref) is not None, "never acts on a ref that is not on screen"
        assert text is None or text in SUPPLIED.values(), "never types unsupplied text"
    assert SUPPLIED["password"] not in result.model_dump_json()
