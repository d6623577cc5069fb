"""Journeys in the flows file (issue 43, item 1): a flow with `steps:` becomes the suite body
the API takes (step secrets as references, bare words kept), and a bad journey is refused
with every problem and its line, in one pass."""

from __future__ import annotations

import re

import pytest
from journeykit import JOURNEY_YAML

from scheduler.service.requests import RunSubmit, SuiteSubmit
from scheduler.suites.flows import FlowsFileError, parse

GOOD = "suite: journeys\nflows:\n" + JOURNEY_YAML

BAD = """\
suite: journeys
flows:
  - name: bad
    steps:
      - forward
      - press: Settings
        back: true
      - scroll: {until: Appearance, max: 99}
      - tap: Foo
      - press: Settings
        done_when: Welcome
      - wait: {timeout_s: 3}
  - name: neither
    retries: 1
  - name: both
    goal: Sign in
    steps: [back]
"""


def test_a_journey_flow_is_a_suite_body_the_api_takes() -> None:
    """Each step as written (a bare word stays one), a goal step's secret as a reference,
    and no goal of its own: the API names it."""
    body = parse(GOOD).body
    flow = body["flows"][0]
    assert "goal" not in flow
    assert flow["steps"][0]["secrets"] == {"password": {"ref": "env:SUITE_PW"}}
    assert flow["steps"][5] == "back"
    suite = SuiteSubmit.model_validate(body)
    steps = suite.flows[0].steps or []
    assert [s.kind for s in steps] == [
        "goal", "press", "scroll", "press", "press", "back", "back", "check"
    ]  # fmt: skip
    assert suite.flows[0].goal == "journey of 8 steps"
    assert suite.flows[0].every_input()[1]["password"].ref == "env:SUITE_PW"
    stored = suite.flows[0].goal_request()  # as the run record keeps it, and reads it back
    assert type(stored).model_validate_json(stored.model_dump_json()) == stored


def test_a_bad_journey_names_every_problem_with_its_line() -> None:
    """Every problem at once, by line: an unknown bare step, two kinds in one step, a bound,
    an unknown step kind, a goal's setting on a plain step, a wait without its text, a flow
    with neither goal nor steps, one with both."""
    try:
        parse(BAD)
    except FlowsFileError as exc:
        found = [(p.line, p.where) for p in exc.problems]
        said = "\n".join(map(str, exc.problems))
    else:
        raise AssertionError("a bad journey was accepted")
    assert found == [
        (5, "flows[0].steps[0]"),
        (6, "flows[0].steps[1]"),
        (8, "flows[0].steps[2].scroll.max"),
        (9, "flows[0].steps[3]"),
        (11, "flows[0].steps[4].done_when"),
        (12, "flows[0].steps[5].wait"),
        (13, "flows[1]"),
        (15, "flows[2]"),
    ], said
    assert "'forward' is not one of ['back', 'launch', 'relaunch', 'submit']" in said
    assert "this one has press, back" in said
    assert "done_when belongs to a goal step, not to a press step" in said
    assert "has neither goal nor steps" in said
    assert "has both goal and steps" in said


CASES = [
    ({"goal": "Sign in", "steps": ["back"]}, "give goal (one goal) or steps"),
    ({"steps": [{"press": "A", "back": True}]}, "this one is press, back"),
    ({"steps": [{"goal": "x", "secrets": {"pw": "plain"}}]}, "secrets.pw is a plaintext"),
    ({"steps": [{"goal": "x", "inputs": {"password": "p"}}]}, "inputs.password looks sens"),
]


def test_the_api_takes_a_journey_and_refuses_goal_and_steps_together() -> None:
    """`POST /v1/runs` takes steps (its goal then says what it is); goal and steps together
    are refused naming both; a step of two kinds is refused naming the step."""
    run = RunSubmit.model_validate({"steps": ["back", {"check": '"Welcome" is visible'}]})
    assert run.goal == "journey of 2 steps"
    for body, said in CASES:
        with pytest.raises(ValueError, match=re.escape(said)):
            RunSubmit.model_validate(body)
