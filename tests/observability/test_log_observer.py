"""The log observer over a real sim run: one canonical line per step and per run, context
bound and cleared, device commands at debug with pinned refs, and no secret in the output."""

from __future__ import annotations

import io
import json
import re

import structlog
from obs_support import (
    EMAIL,
    SECRET,
    fresh_logging,  # noqa: F401 - an autouse fixture, found by name
    make_record,
)

from workers.core.device_hooks import with_hooks
from workers.core.loop import run_goal
from workers.core.model import Inputs, RunResult, RunStatus
from workers.core.records import RunRecord
from workers.decide.rules import RulesDecider
from workers.devices.sim.device import Faults, make_sim_device
from workers.telemetry import logs
from workers.telemetry.log_observer import (
    DEVICE_EVENT,
    RUN_EVENT,
    STEP_EVENT,
    DeviceLog,
    LogObserver,
)

PINNED = re.compile(r"^@e\d+~s\w+$")


def observed_run(
    observer: LogObserver, record: RunRecord, *, faults: Faults | None = None
) -> RunResult:
    """What the task does around run_goal, with the observer hooked in."""
    inputs = Inputs.of({"email": EMAIL}, {"password": SECRET})
    device = with_hooks(make_sim_device("sim:signin-ios", faults=faults or Faults()), DeviceLog())
    observer.run_started(record, 1)
    result = run_goal(
        device,
        record.request.goal,
        decider=RulesDecider(),
        inputs=inputs,
        on_step=lambda row: observer.step(record, row),
    )
    device.close()
    result = result.model_copy(update={"run_id": record.id, "device_id": "ios-1"})
    observer.run_finished(record, result)
    return result


def test_one_line_per_step_and_one_per_run() -> None:
    """capture_logs sees a step.finished per row with the canonical fields, then run.finished."""
    record = make_record()
    with structlog.testing.capture_logs(
        processors=[structlog.contextvars.merge_contextvars]
    ) as captured:
        result = observed_run(LogObserver(), record)
    assert result.status is RunStatus.DONE
    steps = [e for e in captured if e["event"] == STEP_EVENT]
    runs = [e for e in captured if e["event"] == RUN_EVENT]
    assert len(steps) == len(result.steps)
    assert len(runs) == 1
    for entry, row in zip(steps, result.steps, strict=True):
        assert entry["step"] == row.index
        assert entry["run_id"] == "run-1"
        assert entry["device_id"] == "ios-1"
        assert entry["attempt"] == 1
        assert entry["screen"] == row.screen
        assert entry["outcome"] == row.outcome.value
        assert entry["snapshot_ms"] == round(row.snapshot_ms, 1)
        assert entry["decide_ms"] == round(row.decide_ms, 1)
        assert entry["action_ms"] == round(row.action_ms, 1)
        assert {"target", "input", "confidence", "input_tokens", "output_tokens"} <= set(entry)
    fill = next(e for e in steps if e["input"] == "password")
    assert fill["value"] == logs.MASK
    assert PINNED.match(str(fill["action"]).split(" ", 1)[1])
    # a plain fill's log line names its input, as its step row does: no typed value logged
    assert next(e for e in steps if e["input"] == "email")["value"] == "{email}"
    assert all(EMAIL not in str(e) for e in steps)
    (run,) = runs
    assert run["status"] == "done"
    assert run["steps"] == len(result.steps)
    assert run["run_id"] == "run-1"
    assert "step" not in run
    assert run["decide_ms"] == round(result.totals.decide_ms, 1)
    assert structlog.contextvars.get_contextvars() == {}


def test_json_output_of_a_run_has_no_secret_and_logs_device_commands() -> None:
    """At debug level the whole run, device commands included, never shows the password,
    and each press/fill names its pinned ref and how long it took."""
    out = io.StringIO()
    logs.configure_logging(level="DEBUG", fmt="json", stream=out)
    # the worker's RedactingSecrets registers the value when it resolves it
    logs.SECRETS.add([SECRET])
    result = observed_run(LogObserver(), make_record(), faults=Faults(stale_on=frozenset({2})))
    text = out.getvalue()
    assert SECRET not in text
    lines = [json.loads(line) for line in text.splitlines()]
    commands = [line for line in lines if line["event"] == DEVICE_EVENT]
    mutations = [c for c in commands if c["command"] in {"press", "fill"}]
    assert mutations
    for c in mutations:
        assert PINNED.match(c["ref"])
        assert isinstance(c["ms"], float)
        assert c["run_id"] == "run-1"
    assert any(c.get("error") == "StaleRefError" for c in mutations)
    assert any(c["command"] == "fill" and c["sensitive"] for c in mutations)
    assert [line["event"] for line in lines].count(STEP_EVENT) == len(result.steps)
    assert any(line.get("outcome") == "stale" for line in lines)


def test_a_run_that_never_started_still_gets_its_line() -> None:
    """The attempt cap ends a run without run_started: the run line still has its context."""
    record = make_record("run-9")
    result = RunResult(status=RunStatus.ERRORED, reason="attempt cap", goal="g", attempt=4)
    with structlog.testing.capture_logs(
        processors=[structlog.contextvars.merge_contextvars]
    ) as captured:
        LogObserver().run_finished(record, result)
    (entry,) = captured
    assert entry["event"] == RUN_EVENT
    assert entry["log_level"] == "warning"
    assert entry["run_id"] == "run-9"
    assert entry["attempt"] == 4
    assert entry["status"] == "errored"


def test_a_memory_invalidation_is_a_warning_line_and_steps_say_who_decided() -> None:
    """A remembered press that changes nothing: one `memory.invalidated` warning naming the
    entry and why; every step line carries `decided_by` and the memory outcome."""
    from workers.core.memory import InMemoryMemory, Remembered, Target, memory_key  # noqa: PLC0415
    from workers.core.model import DecideState, Decision, Kind  # noqa: PLC0415

    seen: list[DecideState] = []

    class Spy(RulesDecider):
        def decide(self, state: DecideState) -> Decision:
            seen.append(state)
            return super().decide(state)

    inputs = Inputs.of({"email": EMAIL, "code": "123456"}, {"password": SECRET})
    run_goal(make_sim_device("sim:code-ios"), "Sign in", decider=Spy(), inputs=inputs)
    code_screen = next(s for s in seen if s.screen.startswith("Enter the 6-digit"))
    memory = InMemoryMemory("rules")
    key = memory_key(code_screen, "rules")  # remember a press of a link that does nothing
    dead = Target(kind=Kind.BUTTON, name="Resend code")
    memory.entries[key] = Remembered(key=key, target=dead, source="model")
    record = make_record()
    observer = LogObserver()
    with structlog.testing.capture_logs(
        processors=[structlog.contextvars.merge_contextvars]
    ) as captured:
        run_goal(
            make_sim_device("sim:code-ios"),
            record.request.goal,
            decider=RulesDecider(),
            inputs=inputs,
            memory=memory,
            on_step=lambda row: observer.step(record, row),
        )
    steps = [e for e in captured if e["event"] == STEP_EVENT]
    assert all(e["decided_by"] in {"rules", "memory"} for e in steps)
    assert {e.get("memory") for e in steps} <= {"miss", "hit", "invalidated"}
    [warning] = [e for e in captured if e["event"] == "memory.invalidated"]
    assert warning["log_level"] == "warning"
    assert warning["entry"] == key
    assert warning["why"] == "its action changed nothing"
