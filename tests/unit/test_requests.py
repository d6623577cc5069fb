"""Request validation the API relies on: names, decider specs, sensitive-looking inputs."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from scheduler.service.requests import RunSubmit, looks_sensitive
from workers.core.request import GoalRunRequest


@pytest.mark.parametrize(
    ("name", "sensitive"),
    [
        ("password", True),
        ("userPassword", True),
        ("api_key", True),
        ("apiKey", True),
        ("otp_code", True),
        ("pin", True),
        ("secret_answer", True),
        ("passport", False),
        ("bypass", False),
        ("footprint", False),
        ("code", False),
        ("email", False),
        ("keyboard", False),
    ],
)
def test_sensitive_names_are_matched_by_word(name: str, *, sensitive: bool) -> None:
    assert looks_sensitive(name) is sensitive


def test_sensitive_looking_plain_input_is_refused_naming_the_fix() -> None:
    with pytest.raises(ValidationError, match="move it to secrets"):
        RunSubmit(goal="Sign in", inputs={"password": "hunter2"})


@pytest.mark.parametrize("decider", ["bogus", "openai", "/gpt", "rules ", "OpenAI/x"])
def test_unknown_decider_is_refused(decider: str) -> None:
    with pytest.raises(ValidationError, match="is not a decider"):
        GoalRunRequest(goal="Sign in", decider=decider)


@pytest.mark.parametrize("decider", ["rules", "scripted", "openai/gpt-4o-mini", "ollama/llama3.2"])
def test_known_deciders_pass(decider: str) -> None:
    assert GoalRunRequest(goal="Sign in", decider=decider).decider == decider


def test_a_name_cannot_be_both_input_and_secret() -> None:
    with pytest.raises(ValidationError, match="both an input and a secret"):
        GoalRunRequest(
            goal="Sign in", inputs={"email": "a@b.c"}, secrets={"email": {"ref": "env:EMAIL"}}
        )


@pytest.mark.parametrize("wait", [0, -5, 8 * 86400])
def test_a_device_wait_out_of_bounds_is_refused_naming_the_field(wait: float) -> None:
    """`device_wait_s` is more than 0 and at most 7 days; the refusal names the field."""
    with pytest.raises(ValidationError) as refused:
        RunSubmit(goal="Sign in", device="d1", device_wait_s=wait)
    assert refused.value.errors()[0]["loc"] == ("device_wait_s",)


def test_a_device_wait_reaches_the_stored_request() -> None:
    """The bound travels with the run's request (the scheduler reads it from the record)."""
    sub = RunSubmit(goal="Sign in", device="d1", device_wait_s=300)
    assert sub.goal_request().device_wait_s == 300
