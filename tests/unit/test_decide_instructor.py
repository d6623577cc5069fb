"""InstructorDecider over real HTTP against the local fake model server."""

from __future__ import annotations

import json

import instructor
import pytest
from openai import OpenAI

from workers.core.errors import DecisionInvalidError, ModelUnavailableError
from workers.core.loop import run_goal
from workers.core.model import Inputs, RunStatus
from workers.decide.instructor import InstructorDecider, ModelRequestsNotAllowedError
from workers.decide.prompt import render_user
from workers.decide.tokens import count_request
from workers.devices.sim import make_sim_device
from workers.testing.samples import FLOWS, signin_flow

SECRET = "hunter2-very-secret"
EMAIL = "ada.lovelace@example.com"


def _decider(server, *, mode=instructor.Mode.TOOLS, timeout_s=None) -> InstructorDecider:
    sdk = OpenAI(base_url=server.base_url, api_key="test", max_retries=0, timeout=5.0)
    return InstructorDecider(
        instructor.from_openai(sdk, mode=mode), "fake-model", timeout_s=timeout_s
    )


def _args(target: str, input_name: str = "none", **extra) -> dict:
    return {"target": target, "input": input_name, "confidence": 0.9, **extra}


def test_happy_path_returns_the_decision_and_provider_usage(model_server):
    """A valid tool call becomes the Decision, with the provider's usage recorded."""
    model_server.answer(_args("e2", "email", reason="email field"), usage=(151, 23))
    d = _decider(model_server).decide(signin_flow()[0].state)
    assert (d.target, d.input, d.done, d.blocked) == ("e2", "email", False, False)
    assert d.confidence == 0.9
    assert d.reason == "email field"
    assert (d.usage.input_tokens, d.usage.output_tokens) == (151, 23)


def test_request_forces_the_schema_at_temperature_zero(model_server):
    """The request forces one tool whose target enum is exactly this screen's refs + none."""
    model_server.answer(_args("e3"))
    state = signin_flow()[1].state
    _decider(model_server).decide(state)
    body = model_server.bodies[0]
    assert body["temperature"] == 0
    assert body["tool_choice"] == {"type": "function", "function": {"name": "Act"}}
    params = body["tools"][0]["function"]["parameters"]
    assert params["properties"]["target"]["enum"] == [c.ref for c in state.candidates] + ["none"]
    assert params["properties"]["input"]["enum"] == ["email", "password", "none"]
    assert "title" not in json.dumps(params)
    assert body["messages"] == [{"role": "user", "content": render_user(state)}]


def test_invented_ref_is_reasked_once_then_accepted(model_server):
    """A ref not on screen fails validation; the re-ask carries the error; the second answer
    is used and usage sums both attempts."""
    model_server.answer(_args("e99"), usage=(150, 20))
    model_server.answer(_args("e3"), usage=(210, 20))
    d = _decider(model_server).decide(signin_flow()[1].state)
    assert d.target == "e3"
    assert len(model_server.bodies) == 2
    reask = json.dumps(model_server.bodies[1]["messages"])
    assert "e99" in reask
    assert (d.usage.input_tokens, d.usage.output_tokens) == (360, 40)


def test_two_invalid_answers_raise_decision_invalid(model_server):
    """Invented refs twice: exactly two requests, then DecisionInvalidError (the loop escalates)."""
    model_server.answer(_args("e99"))
    model_server.answer(_args("e42"))
    with pytest.raises(DecisionInvalidError, match="2 attempt"):
        _decider(model_server).decide(signin_flow()[1].state)
    assert len(model_server.bodies) == 2


def test_malformed_json_is_reasked_then_invalid(model_server):
    """Malformed tool arguments are re-asked; malformed twice is DecisionInvalidError."""
    model_server.answer_raw_arguments('{"target": "e3", "input": ')
    model_server.answer(_args("e3"))
    assert _decider(model_server).decide(signin_flow()[1].state).target == "e3"
    model_server.answer_raw_arguments("not json at all")
    model_server.answer_raw_arguments("{{{")
    with pytest.raises(DecisionInvalidError):
        _decider(model_server).decide(signin_flow()[1].state)


def test_prose_instead_of_a_tool_call_is_invalid(model_server):
    """A model that answers in prose twice gives DecisionInvalidError, not a guess."""
    model_server.answer_text("I would press Continue.")
    model_server.answer_text("Continue, definitely.")
    with pytest.raises(DecisionInvalidError):
        _decider(model_server).decide(signin_flow()[1].state)


def test_no_target_without_done_is_reasked(model_server):
    """target "none" without done/blocked fails validation and is re-asked."""
    model_server.answer(_args("none"))
    model_server.answer(_args("e3"))
    assert _decider(model_server).decide(signin_flow()[1].state).target == "e3"
    assert "done or blocked" in json.dumps(model_server.bodies[1]["messages"])


def test_text_field_without_input_is_reasked(model_server):
    """A text field chosen with input "none" fails validation and is re-asked."""
    model_server.answer(_args("e2"))
    model_server.answer(_args("e2", "email"))
    d = _decider(model_server).decide(signin_flow()[0].state)
    assert (d.target, d.input) == ("e2", "email")
    assert "pick an input" in json.dumps(model_server.bodies[1]["messages"])


def test_done_with_no_target_is_valid(model_server):
    """target "none" with done=true is a valid answer (the goal is reached)."""
    model_server.answer(_args("none", done=True, reason="Welcome is shown"))
    d = _decider(model_server).decide(signin_flow()[4].state)
    assert d.done
    assert d.target == "none"


def test_http_500_is_model_unavailable(model_server):
    """An HTTP 500 from the model server is ModelUnavailableError, not a decision failure."""
    model_server.fail(500)
    with pytest.raises(ModelUnavailableError, match="500"):
        _decider(model_server).decide(signin_flow()[0].state)
    assert len(model_server.bodies) == 1


def test_timeout_is_model_unavailable(model_server):
    """A model slower than the timeout is ModelUnavailableError."""
    model_server.stall(2.0)
    with pytest.raises(ModelUnavailableError):
        _decider(model_server, timeout_s=0.3).decide(signin_flow()[0].state)


def test_connection_refused_is_model_unavailable():
    """Nothing listening on the port is ModelUnavailableError."""
    sdk = OpenAI(base_url="http://127.0.0.1:9/v1", api_key="test", max_retries=0)
    decider = InstructorDecider(instructor.from_openai(sdk), "fake-model")
    with pytest.raises(ModelUnavailableError):
        decider.decide(signin_flow()[0].state)


def test_guard_refuses_non_loopback_models_before_sending():
    """With ALLOW_MODEL_REQUESTS False (conftest), a non-loopback client is refused unsent."""
    sdk = OpenAI(base_url="https://api.openai.com/v1", api_key="test", max_retries=0)
    decider = InstructorDecider(instructor.from_openai(sdk), "gpt-4o-mini")
    with pytest.raises(ModelRequestsNotAllowedError, match="ALLOW_MODEL_REQUESTS"):
        decider.decide(signin_flow()[0].state)


def test_json_schema_mode_works_too(model_server):
    """JSON_SCHEMA mode sends response_format instead of tools and parses the same answer."""
    model_server.answer(_args("e3"))
    d = _decider(model_server, mode=instructor.Mode.JSON_SCHEMA).decide(signin_flow()[1].state)
    assert d.target == "e3"
    assert "tools" not in model_server.bodies[0]
    assert model_server.bodies[0]["response_format"]["type"] == "json_schema"


def test_every_sign_in_decision_fits_the_token_budget(model_server):
    """Every decision on the sign-in flows is at most 200 input tokens, schema included."""
    decider = _decider(model_server)
    for flow in FLOWS.values():
        for screen in flow():
            model_server.answer(_args(screen.want_target, screen.want_input, done=screen.want_done))
            decider.decide(screen.state)
    totals = [count_request(b).total for b in model_server.bodies]
    assert len(totals) == sum(len(f()) for f in FLOWS.values())
    assert max(totals) <= 200, totals


def test_a_full_run_never_sends_input_values(model_server):
    """A whole sign-in over the sim with the model deciding: done, and neither the secret nor
    the plain email value ever appears in any request body."""
    for step in [("e2", "email"), ("e3", "none"), ("e2", "password"), ("e3", "none")]:
        model_server.answer(_args(*step))
    model_server.answer(_args("none", done=True))
    result = run_goal(
        make_sim_device("sim:signin-android"),
        "Sign in",
        decider=_decider(model_server),
        inputs=Inputs.of({"email": EMAIL}, {"password": SECRET}),
    )
    assert result.status is RunStatus.DONE, result.reason
    assert len(model_server.raw) == 5
    wire = b"".join(model_server.raw)
    assert SECRET.encode() not in wire
    assert EMAIL.encode() not in wire
    assert result.totals.input_tokens == 5 * 120


def test_invalid_decision_escalates_the_run(model_server):
    """Two invented refs in a run end it escalated, not errored."""
    model_server.answer(_args("e77"))
    model_server.answer(_args("e78"))
    result = run_goal(make_sim_device("sim:signin-ios"), "Sign in", decider=_decider(model_server))
    assert result.status is RunStatus.ESCALATED


def test_model_outage_errors_the_run(model_server):
    """A model server failure ends the run errored (infrastructure), not escalated."""
    model_server.fail(503)
    result = run_goal(make_sim_device("sim:signin-ios"), "Sign in", decider=_decider(model_server))
    assert result.status is RunStatus.ERRORED
    assert result.error is not None
    assert result.error.type == "ModelUnavailableError"
