"""InstructorDecider over real HTTP against the local fake model server."""

from __future__ import annotations

import json
import math
import statistics
from types import SimpleNamespace

import instructor
import pytest
from openai import OpenAI

from testing.samples import FLOWS, Screen, signin_flow
from workers.core.errors import DecisionInvalidError, ModelUnavailableError
from workers.core.loop import run_goal
from workers.core.model import Inputs, RunResult, RunStatus
from workers.core.params import DEFAULT_PARAMS, RunParams
from workers.decide.instructor import (
    InstructorDecider,
    ModelRequestsNotAllowedError,
    answer_confidence,
)
from workers.decide.prompt import INSTRUCTION, actions_for, render_user
from workers.decide.tokens import count_request
from workers.devices.sim.device import make_sim_device

SECRET = "hunter2-very-secret"
EMAIL = "ada.lovelace@example.com"
INPUTS = Inputs.of({"email": EMAIL}, {"password": SECRET})


def _decider(
    server, *, mode=instructor.Mode.TOOLS, timeout_s=None, logprobs=True, max_output_tokens=64
) -> InstructorDecider:
    sdk = OpenAI(base_url=server.base_url, api_key="test", max_retries=0, timeout=5.0)
    return InstructorDecider(
        instructor.from_openai(sdk, mode=mode),
        "fake-model",
        timeout_s=timeout_s,
        logprobs=logprobs,
        max_output_tokens=max_output_tokens,
    )


def _sign_in(
    server,
    device: str = "sim:signin-ios",
    inputs: Inputs = INPUTS,
    params: RunParams = DEFAULT_PARAMS,
) -> RunResult:
    """A whole "Sign in" run over the sim, the model on `server` deciding every step."""
    return run_goal(
        make_sim_device(device), "Sign in", decider=_decider(server), inputs=inputs, params=params
    )


def _args(action: str, confidence: float = 0.9) -> dict:
    return {"action": action, "confidence": confidence}


def _want(screen: Screen) -> str:
    if screen.want_done:
        return "done"
    if screen.want_input != "none":
        return f"{screen.want_target}={screen.want_input}"
    return screen.want_target


def test_happy_path_returns_the_decision_usage_and_logprob_confidence(model_server):
    """A valid tool call becomes the Decision: confidence from the answer's logprobs, decided
    by the model, provider usage and our own count of the request recorded."""
    model_server.answer({"action": "e2=email"}, usage=(151, 23), p=0.8)
    d = _decider(model_server).decide(signin_flow()[0].state)
    assert (d.target, d.input, d.done, d.blocked) == ("e2", "email", False, False)
    assert d.confidence == pytest.approx(0.8)
    assert (d.decided_by, d.confidence_source) == ("model", "logprobs")
    assert (d.usage.input_tokens, d.usage.output_tokens) == (151, 23)
    assert d.usage.counted_input_tokens == count_request(model_server.bodies[0]).total
    assert 0 < d.usage.counted_input_tokens <= 150


def test_request_forces_one_enum_caps_output_and_asks_for_logprobs(model_server):
    """The request forces the `act` tool whose one required field is an enum of this screen's
    answers; the instruction is in the user message; output is capped; logprobs are asked."""
    model_server.answer({"action": "e3"})
    state = signin_flow()[1].state
    _decider(model_server).decide(state)
    body = model_server.bodies[0]
    assert body["temperature"] == 0
    assert body["max_tokens"] == 64
    assert (body["logprobs"], body["top_logprobs"]) == (True, 5)
    assert body["tool_choice"] == {"type": "function", "function": {"name": "act"}}
    params = body["tools"][0]["function"]["parameters"]
    assert params["required"] == ["action"]
    assert list(params["properties"]) == ["action"]  # no free text, no self-report
    assert params["properties"]["action"]["enum"] == [
        "e2=email",
        "e2=password",
        "e3",
        "e4",
        "e5",
        "done",
        "blocked",
    ]
    assert "title" not in json.dumps(params)
    assert body["messages"] == [{"role": "user", "content": render_user(state)}]
    assert body["messages"][0]["content"].startswith(INSTRUCTION.format(goal="Sign in"))


def test_a_text_field_only_appears_with_an_input_and_not_at_all_without_inputs():
    """A text field is offered once per input name and never bare; with no inputs it is not
    offered, so "a text field without an input" cannot validate."""
    state = signin_flow()[0].state
    assert "e2" not in actions_for(state)
    no_inputs = state.model_copy(update={"input_names": ()})
    assert actions_for(no_inputs) == ("e3", "e4", "e5", "done", "blocked")


def test_invented_ref_is_reasked_once_then_accepted(model_server):
    """A ref not on screen fails validation; the re-ask carries the error; the second answer
    is used, and both usages (provider's and ours) sum the two attempts."""
    model_server.answer({"action": "e99"}, usage=(150, 20))
    model_server.answer({"action": "e3"}, usage=(210, 20))
    d = _decider(model_server).decide(signin_flow()[1].state)
    assert d.target == "e3"
    assert len(model_server.bodies) == 2
    reask = json.dumps(model_server.bodies[1]["messages"])
    assert "e99" in reask
    assert (d.usage.input_tokens, d.usage.output_tokens) == (360, 40)
    counted = [count_request(b).total for b in model_server.bodies]
    assert counted[1] > counted[0]  # the re-ask carries the bad answer and the error
    assert d.usage.counted_input_tokens == sum(counted)


def test_bare_text_field_is_reasked(model_server):
    """A text field chosen without an input ("e2") is not an allowed answer: re-asked."""
    model_server.answer({"action": "e2"})
    model_server.answer({"action": "e2=email"})
    d = _decider(model_server).decide(signin_flow()[0].state)
    assert (d.target, d.input) == ("e2", "email")
    assert len(model_server.bodies) == 2


def test_two_invalid_answers_raise_decision_invalid(model_server):
    """Invented refs twice: exactly two requests, then DecisionInvalidError (the loop escalates)."""
    model_server.answer({"action": "e99"})
    model_server.answer({"action": "e42=email"})
    with pytest.raises(DecisionInvalidError, match="2 attempt"):
        _decider(model_server).decide(signin_flow()[1].state)
    assert len(model_server.bodies) == 2


def test_malformed_json_is_reasked_then_invalid(model_server):
    """Malformed tool arguments are re-asked; malformed twice is DecisionInvalidError."""
    model_server.answer_raw_arguments('{"action": ')
    model_server.answer({"action": "e3"})
    assert _decider(model_server).decide(signin_flow()[1].state).target == "e3"
    model_server.answer_raw_arguments("not json at all")
    model_server.answer_raw_arguments("{{{")
    with pytest.raises(DecisionInvalidError):
        _decider(model_server).decide(signin_flow()[1].state)


def test_answer_cut_at_the_output_cap_is_invalid(model_server):
    """An answer that hit max_tokens (finish_reason "length") is DecisionInvalidError naming
    the cap, not a guess from half an answer."""
    model_server.answer_raw_arguments('{"action": "e', finish_reason="length")
    with pytest.raises(DecisionInvalidError, match="max_output_tokens=8"):
        _decider(model_server, max_output_tokens=8).decide(signin_flow()[1].state)


def test_prose_instead_of_a_tool_call_is_invalid(model_server):
    """A model that answers in prose twice gives DecisionInvalidError, not a guess."""
    model_server.answer_text("I would press Continue.")
    model_server.answer_text("Continue, definitely.")
    with pytest.raises(DecisionInvalidError):
        _decider(model_server).decide(signin_flow()[1].state)


def test_done_and_blocked_fold_into_the_action(model_server):
    """ "done" and "blocked" are answers of their own, with no target."""
    model_server.answer({"action": "done"})
    d = _decider(model_server).decide(signin_flow()[4].state)
    assert (d.done, d.blocked, d.target, d.input) == (True, False, "none", "none")
    model_server.answer({"action": "blocked"})
    d = _decider(model_server).decide(signin_flow()[4].state)
    assert (d.done, d.blocked, d.target) == (False, True, "none")


def test_no_logprobs_falls_back_to_the_self_report_for_good(model_server):
    """A server that returns no logprobs for the answer (OpenAI for tool calls): the step is
    asked again with a self-reported confidence, and later steps ask that way at once; usage
    covers both requests of the first step."""
    model_server.answer({"action": "e3"}, p=None, usage=(100, 10))
    model_server.answer(_args("e3", 0.7), p=None, usage=(110, 12))
    decider = _decider(model_server)
    d = decider.decide(signin_flow()[1].state)
    assert (d.target, d.confidence, d.confidence_source) == ("e3", 0.7, "self")
    assert (d.usage.input_tokens, d.usage.output_tokens) == (210, 22)
    assert d.usage.counted_input_tokens == sum(count_request(b).total for b in model_server.bodies)
    second = model_server.bodies[1]
    assert "logprobs" not in second
    params = second["tools"][0]["function"]["parameters"]
    assert params["required"] == ["action", "confidence"]
    model_server.answer(_args("e2=password", 0.6), p=None)
    d = decider.decide(signin_flow()[2].state)
    assert (d.target, d.input, d.confidence_source) == ("e2", "password", "self")
    assert len(model_server.bodies) == 3


def test_a_server_refusing_logprobs_falls_back_to_the_self_report(model_server):
    """llama-cpp-python without --logits_all answers 500 "logprobs is not supported": the
    decider asks again without logprobs instead of ending the run errored."""
    model_server.fail(500, "logprobs is not supported for models created with logits_all=False")
    model_server.answer(_args("e3", 0.65), p=None)
    d = _decider(model_server).decide(signin_flow()[1].state)
    assert (d.target, d.confidence, d.confidence_source) == ("e3", 0.65, "self")
    assert len(model_server.bodies) == 2


def test_self_report_out_of_range_is_reasked(model_server):
    """With logprobs off, a confidence of 90 fails validation and is re-asked."""
    model_server.answer(_args("e3", 90))
    model_server.answer(_args("e3", 0.9))
    d = _decider(model_server, logprobs=False).decide(signin_flow()[1].state)
    assert (d.confidence, d.confidence_source) == (0.9, "self")
    assert "logprobs" not in model_server.bodies[0]
    assert len(model_server.bodies) == 2


def _tok(token: str, lp: float, *alts: tuple[str, float]) -> SimpleNamespace:
    top = [SimpleNamespace(token=t, logprob=a) for t, a in ((token, lp), *alts)]
    return SimpleNamespace(token=token, logprob=lp, top_logprobs=top)


def test_confidence_renormalises_each_value_token_over_allowed_alternatives():
    """Raw logprobs under a constraining grammar are tiny for forced tokens; the confidence
    only weighs the chosen token against listed alternatives that could spell an allowed
    answer (e3 vs e2=...: "3" vs "2"; "x" and "9" spell none), and counts an allowed branch
    no token lists ("b" of blocked, "4" of e4) at the least listed probability."""
    allowed = ("e2=email", "e3", "e4", "done", "blocked")
    tokens = [
        _tok('{"', -12.0, ("\n", -0.5)),  # forced by the grammar: not part of the value
        _tok("action", -3.0),
        _tok('":', -1.0),
        _tok(' "', -9.0, ("1", -0.1)),
        _tok("e", -0.2, ("d", math.log(0.1)), ("x", -0.3)),
        _tok("3", math.log(0.3), ("2", math.log(0.6)), ("9", math.log(0.05))),
        _tok('"}', -0.1, ("x", -0.5)),
    ]
    p_e = math.exp(-0.2) / (math.exp(-0.2) + 0.1 + 0.1)  # "b" unlisted: at most 0.1
    p_3 = 0.3 / (0.3 + 0.6 + 0.05)  # "4" unlisted: at most 0.05
    got = answer_confidence(tokens, "e3", allowed)
    assert got == pytest.approx(p_e * p_3)


def test_confidence_counts_the_closing_quote_and_tokens_straddling_the_value():
    """ "e2" against "e2=email": the token after "e2" decides between them; a token carrying
    the opening quote and the value's first letter is compared with alternatives that do."""
    allowed = ("e2", "e2=email", "done", "blocked")
    tokens = [
        _tok('{"action": "e', -0.1, ('{"action": "d', math.log(0.25)), ('{"action": "b', -9.0)),
        _tok("2", -0.05),
        _tok("=", math.log(0.2), ('"', math.log(0.8))),
        _tok("email", -0.01, ("password", -5.0)),  # password is not allowed here
        _tok('"}', 0.0),
    ]
    got = answer_confidence(tokens, "e2=email", allowed)
    p_first = math.exp(-0.1) / (math.exp(-0.1) + 0.25 + math.exp(-9.0))
    assert got == pytest.approx(p_first * 0.2 / (0.2 + 0.8))


def test_confidence_counts_other_spellings_of_the_same_answer_as_the_answer():
    """After "e2=email", `"` and `",` both end the value (the same answer), so the closing
    token costs nothing; an alternative that spells nothing (a control token) is ignored.
    Observed on llama.cpp with Gemma 3 270M: `"` at -4.3 beside `",` at -1.6."""
    allowed = ("e2=email", "e2=password", "e3", "done", "blocked")
    tokens = [
        _tok('{ "action": "', 0.0),
        _tok("e", -2.54, ("sign", -1.75), ("d", -9.0), ("b", -9.5)),
        _tok("2", -0.57, ("3", -2.08), ("4", -2.72), ('",', -2.92)),
        _tok("=", -9.6, ('",', -0.23), ('"', -3.19)),
        _tok("e", -1.29, ("1", -2.08), ("", -0.5), ("pass", -6.0)),
        _tok("mail", -13.05, ("3", -0.46)),
        _tok('"', -4.3, ('",', -1.6), (",", -2.66)),
        _tok("}", -10.52, (" ,", -0.9)),
    ]
    p_e = math.exp(-2.54) / (math.exp(-2.54) + math.exp(-9.0) + math.exp(-9.5))
    p_2 = math.exp(-0.57) / (math.exp(-0.57) + math.exp(-2.08))  # "e4" is not an answer here
    p_email = math.exp(-1.29) / (math.exp(-1.29) + math.exp(-6.0))
    assert answer_confidence(tokens, "e2=email", allowed) == pytest.approx(p_e * p_2 * p_email)


def test_confidence_is_cautious_about_allowed_answers_no_token_lists():
    """Observed: on the welcome screen the listed alternatives of the first letter spell no
    other answer ("d" of done and "b" of blocked are not among them), which made pressing
    "Sign out" look certain (1.0). Each unlisted branch now counts at the least listed
    probability, so the answer is only as sure as the listing can show."""
    allowed = ("e4", "done", "blocked")
    tokens = [
        _tok('{"action": "', 0.0),
        _tok("e", -2.5, ("sign", -1.0), ("Sign", -2.0), ("next", -3.0)),
        _tok("4", -0.3, ("2", -1.0)),
        _tok('"}', 0.0),
    ]
    got = answer_confidence(tokens, "e4", allowed)
    assert got == pytest.approx(math.exp(-2.5) / (math.exp(-2.5) + 2 * math.exp(-3.0)))
    assert got < 0.5


def test_confidence_without_alternatives_is_the_raw_probability_and_none_when_absent():
    """No alternatives listed: the product of the chosen value tokens' probabilities. Tokens
    that do not spell the answer: None (the decider falls back to the self-report)."""
    tokens = [_tok('{"action": "', 0.0), _tok("e3", math.log(0.4)), _tok('"}', 0.0)]
    for t in tokens:
        t.top_logprobs = []
    assert answer_confidence(tokens, "e3", ("e3", "done")) == pytest.approx(0.4)
    assert answer_confidence(tokens, "e4", ("e3", "e4", "done")) is None
    assert answer_confidence([], "e3", ("e3",)) is None


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


def test_json_mode_works_too(model_server):
    """instructor's JSON mode sends response_format json_object and the schema in a system
    message; the instruction stays in the user message; the answer parses the same, with
    confidence from the content's logprobs."""
    model_server.answer({"action": "e3"}, p=0.75)
    d = _decider(model_server, mode=instructor.Mode.JSON).decide(signin_flow()[1].state)
    assert (d.target, d.confidence, d.confidence_source) == ("e3", pytest.approx(0.75), "logprobs")
    body = model_server.bodies[0]
    assert "tools" not in body
    assert body["response_format"] == {"type": "json_object"}
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert '"e2=email"' in body["messages"][0]["content"]
    assert body["messages"][1]["content"] == render_user(signin_flow()[1].state)


def test_sign_in_decisions_fit_the_token_aim(model_server):
    """Every decision on the sign-in flows: median at most 120 and max at most 150 input
    tokens, message and schema counted (cl100k, bench/bench_tokens.py); with the self-report
    fallback, still at most 150."""
    screens = [screen for flow in FLOWS.values() for screen in flow()]
    for logprobs in (True, False):
        decider = _decider(model_server, logprobs=logprobs)
        start = len(model_server.bodies)
        for screen in screens:
            model_server.answer(_args(_want(screen)))
            d = decider.decide(screen.state)
            assert d.usage.counted_input_tokens == count_request(model_server.bodies[-1]).total
        totals = [count_request(b).total for b in model_server.bodies[start:]]
        assert len(totals) == len(screens)
        assert max(totals) <= 150, totals
        if logprobs:
            assert statistics.median(totals) <= 120, totals


def test_a_full_run_never_sends_input_values(model_server):
    """A whole sign-in over the sim with the model deciding: done, and neither the secret nor
    the plain email value ever appears in any request body; usage adds up in the totals."""
    for action in ["e2=email", "e3", "e2=password", "e3", "done"]:
        model_server.answer({"action": action})
    result = _sign_in(model_server, "sim:signin-android")
    assert result.status is RunStatus.DONE, result.reason
    assert len(model_server.raw) == 5
    wire = b"".join(model_server.raw)
    assert SECRET.encode() not in wire
    assert EMAIL.encode() not in wire
    assert result.totals.input_tokens == 5 * 120
    assert all(s.decision is not None for s in result.steps)
    assert all(s.decision.decided_by == "model" for s in result.steps if s.decision)


def test_low_logprob_confidence_escalates_the_run(model_server):
    """An answer the model gave probability 0.3 is below min_confidence 0.5: escalated. (With
    the device's moves offered, the answers may start with an `m` no listed token starts, so
    the same token reads as 0.22, the cautious side: `answer_confidence`.)"""
    for moves, shown in ((False, "0.30"), (True, "0.22")):
        model_server.answer({"action": "e2=email"}, p=0.3)
        result = _sign_in(model_server, params=RunParams(moves=moves))
        assert result.status is RunStatus.ESCALATED, result.reason
        assert shown in result.reason


def test_invalid_decision_escalates_the_run(model_server):
    """Two invented refs in a run end it escalated, not errored."""
    model_server.answer({"action": "e77"})
    model_server.answer({"action": "e78"})
    result = _sign_in(model_server, inputs=Inputs())
    assert result.status is RunStatus.ESCALATED


def test_model_outage_errors_the_run(model_server):
    """A model server failure ends the run errored (infrastructure), not escalated."""
    model_server.fail(503)
    result = _sign_in(model_server, inputs=Inputs())
    assert result.status is RunStatus.ERRORED
    assert result.error is not None
    assert result.error.type == "ModelUnavailableError"
