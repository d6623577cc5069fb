"""The loop's structural invariants: exactly one row per step, on every path, and each row's
phase durations are the real ones — failures included (a 20 s model timeout is 20 000 ms,
not 0)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workers.core.errors import (
    DecisionInvalidError,
    DeviceNotFoundError,
    ModelUnavailableError,
    StaleRefError,
)
from workers.core.loop import run_goal
from workers.core.model import (
    ActionResult,
    DecideState,
    Decision,
    Inputs,
    InputValue,
    Outcome,
    Platform,
    RunStatus,
    Snapshot,
)
from workers.core.params import RunParams
from workers.core.ports import Device
from workers.core.rows import totals
from workers.decide.rules import RulesDecider
from workers.devices.sim.device import make_sim_device


@dataclass
class Clock:
    """A clock the fakes advance: each phase takes exactly what the test says."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class SlowDevice(Device):
    """A sim device whose snapshot/press/fill take fixed times on the test clock, and whose
    next press can be made to fail."""

    clock: Clock
    snapshot_s: float = 0.3
    act_s: float = 0.7
    fail_press: Exception | None = None
    inner: object = field(default_factory=lambda: make_sim_device("sim:inject-ios"))
    """A screen with a Continue and no field: these tests time phases, not forms (a forward
    press over an empty field is `workers.core.fields`' case)."""

    @property
    def platform(self) -> Platform:
        return Platform.IOS

    def snapshot(self) -> Snapshot:
        self.clock.advance(self.snapshot_s)
        return self.inner.snapshot()  # type: ignore[attr-defined]

    def press(self, pinned: str) -> ActionResult:
        self.clock.advance(self.act_s)
        if self.fail_press is not None:
            raise self.fail_press
        return self.inner.press(pinned)  # type: ignore[attr-defined]

    def fill(self, pinned: str, value: InputValue) -> ActionResult:
        self.clock.advance(self.act_s)
        return self.inner.fill(pinned, value)  # type: ignore[attr-defined]

    def close(self) -> None:
        self.inner.close()  # type: ignore[attr-defined]


@dataclass
class SlowDecider:
    clock: Clock
    seconds: float
    fail: Exception | None = None

    def decide(self, state: DecideState) -> Decision:
        self.clock.advance(self.seconds)
        if self.fail is not None:
            raise self.fail
        button = next(c for c in state.candidates if c.name in {"Continue", "Sign in", "Next"})
        return Decision(target=button.ref, confidence=0.9)


@pytest.mark.parametrize(
    ("failure", "status", "outcome"),
    [
        (ModelUnavailableError("model timed out after 20 s"), RunStatus.ERRORED, Outcome.ERRORED),
        (
            DecisionInvalidError("still invalid after the re-ask"),
            RunStatus.ESCALATED,
            Outcome.ESCALATED,
        ),
    ],
)
def test_a_failed_decide_records_its_real_duration(failure, status, outcome) -> None:
    """A model that fails after 20 s: the step's row says decide_ms=20000, and so do the
    run's totals (the metric is fed from the row)."""
    clock = Clock()
    result = run_goal(
        SlowDevice(clock),
        "Sign in",
        decider=SlowDecider(clock, 20.0, fail=failure),
        clock=clock,
        sleep=clock.advance,
    )
    assert result.status is status
    [row] = result.steps
    assert row.outcome is outcome
    assert row.snapshot_ms == pytest.approx(300.0)
    assert row.decide_ms == pytest.approx(20_000.0)
    assert result.totals.decide_ms == pytest.approx(20_000.0)


def test_a_failed_action_records_its_real_duration_and_a_row() -> None:
    """A press that finds the device gone still yields the step's row with its action time."""
    clock = Clock()
    device = SlowDevice(clock, fail_press=DeviceNotFoundError("gone"))
    result = run_goal(device, "Sign in", decider=SlowDecider(clock, 0.5), clock=clock)
    assert result.status is RunStatus.ERRORED
    [row] = result.steps
    assert row.outcome is Outcome.ERRORED
    assert row.action is not None
    assert (row.snapshot_ms, row.decide_ms, row.action_ms) == pytest.approx((300, 500, 700))


def test_a_stale_action_records_its_duration() -> None:
    clock = Clock()
    device = SlowDevice(clock, fail_press=StaleRefError("ref_frame_expired", reason="expired"))
    result = run_goal(device, "Sign in", decider=SlowDecider(clock, 0.1), clock=clock)
    assert [s.outcome for s in result.steps] == [Outcome.STALE] * 3
    assert all(s.action_ms == pytest.approx(700) for s in result.steps)


def test_a_failed_snapshot_still_gets_a_row() -> None:
    clock = Clock()

    class Gone(SlowDevice):
        def snapshot(self) -> Snapshot:
            self.clock.advance(1.5)
            raise DeviceNotFoundError("device went away")

    result = run_goal(Gone(clock), "Sign in", decider=SlowDecider(clock, 0.1), clock=clock)
    assert result.status is RunStatus.ERRORED
    [row] = result.steps
    assert row.outcome is Outcome.ERRORED
    assert row.snapshot_ms == pytest.approx(1500)
    assert row.decision is None


@pytest.mark.parametrize("app", ["signin", "code", "consent", "slow", "disabled", "wide"])
@pytest.mark.parametrize("max_steps", [1, 3, 12])
def test_one_row_per_step_and_one_hook_call_per_row(app: str, max_steps: int) -> None:
    """Rows are numbered 1..n without gaps, every row reached the hook exactly once, and the
    totals are the sum of the rows."""
    seen = []
    result = run_goal(
        make_sim_device(f"sim:{app}-android"),
        "Sign in",
        decider=RulesDecider(),
        inputs=Inputs.of({"email": "ada@example.com"}, {"password": "pw"}),
        params=RunParams(max_steps=max_steps),
        on_step=seen.append,
        sleep=lambda _: None,
    )
    assert [s.index for s in result.steps] == list(range(1, len(result.steps) + 1))
    assert list(result.steps) == seen
    assert 1 <= len(result.steps) <= max_steps
    assert result.totals == totals(result.steps)


def test_a_row_is_scrubbed_of_values_and_one_without_any_is_kept_as_it_is() -> None:
    """`scrub_row` replaces a typed value wherever a row's texts show it; a row that shows
    none is returned itself, not a validated copy (the loop scrubs every row)."""
    from workers.core.model import Action, ActionKind, StepRow  # noqa: PLC0415 - this test's

    inputs = Inputs.of({"email": "ada@example.com"}, {"password": "hunter2!"})
    clean = StepRow(
        index=1,
        screen="Sign in",
        refs_generation="s1",
        candidates=3,
        action=Action(kind=ActionKind.FILL, ref="e2", pinned="@e2~s1", shown_value="{email}"),
        outcome=Outcome.ACTED,
    )
    assert inputs.scrub_row(clean) is clean
    shown = clean.model_copy(update={"screen": "Hi ada@example.com", "error": "hunter2! x"})
    scrubbed = inputs.scrub_row(shown)
    assert scrubbed.screen == "Hi {email}"
    assert scrubbed.error == "{password} x"
    assert scrubbed.action == clean.action


@settings(max_examples=300, deadline=None)
@given(
    value=st.text(min_size=3, max_size=12).filter(lambda v: v.strip() == v and "{" not in v),
    before=st.text(max_size=8),
    after=st.text(max_size=8),
)
def test_a_value_with_any_characters_is_scrubbed_from_a_row(
    value: str, before: str, after: str
) -> None:
    """The row's JSON is looked at first (a row that shows no value is kept as it is): a value
    with quotes, backslashes, control characters or non-ASCII letters, which JSON escapes,
    is still found and scrubbed wherever a text of the row shows it."""
    from workers.core.model import StepRow  # noqa: PLC0415 - this test's

    inputs = Inputs.of({"code": value})
    row = StepRow(
        index=1,
        screen=before + value + after,
        refs_generation="s1",
        candidates=1,
        outcome=Outcome.ACTED,
    )
    assert value in row.screen  # as the row holds it
    assert inputs.scrub_row(row).screen == inputs.scrub(row.screen) != row.screen


def test_a_value_json_cannot_write_is_still_scrubbed_from_a_row() -> None:
    """A value with a lone surrogate (a JSON body's `\\ud800` decodes to one) has no JSON
    form: the row is walked text by text, as every row was before the JSON look."""
    from workers.core.model import StepRow  # noqa: PLC0415 - this test's

    value = "ab\ud800cd"
    inputs = Inputs.of({"code": value})
    row = StepRow(
        index=1, screen=f"Hi {value}", refs_generation="s1", candidates=1, outcome=Outcome.ACTED
    )
    assert inputs.scrub_row(row).screen == "Hi {code}"
    clean = row.model_copy(update={"screen": "Hi"})
    assert inputs.scrub_row(clean).screen == "Hi"
