"""make_decider: specs to deciders, and clear ConfigErrors for bad ones."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from workers.core.errors import ConfigError
from workers.decide.factory import ModelSettings, make_decider
from workers.decide.instructor import InstructorDecider
from workers.decide.rules import RulesDecider
from workers.decide.scripted import ScriptedDecider, done
from workers.testing.samples import signin_flow


def test_rules_and_scripted_specs():
    """ "rules" is a RulesDecider; "scripted" uses the given script, or answers like rules."""
    assert isinstance(make_decider("rules"), RulesDecider)
    scripted = make_decider("scripted", script=[done()])
    assert isinstance(scripted, ScriptedDecider)
    assert scripted.decide(signin_flow()[0].state).done
    default = make_decider("scripted")
    assert default.decide(signin_flow()[0].state).input == "email"


@pytest.mark.parametrize("spec", ["", "gpt-4o", "magic", "openai/", "/model", "Open AI/x y"])
def test_unknown_specs_are_config_errors_naming_the_fix(spec: str):
    """An unknown spec is a ConfigError that says which specs exist."""
    with pytest.raises(ConfigError, match="rules"):
        make_decider(spec)


def test_openai_compatible_spec_builds_an_instructor_decider_without_calling():
    """ "<provider>/<model>" with a base_url builds an InstructorDecider; nothing is sent."""
    settings = ModelSettings(
        base_url="http://127.0.0.1:9/v1", api_key=SecretStr("k"), timeout_s=3, mode="json_schema"
    )
    decider = make_decider("ollama/llama3.2", settings)
    assert isinstance(decider, InstructorDecider)
    assert decider.model == "llama3.2"
    assert decider.timeout_s == 3


def test_provider_without_its_sdk_is_a_config_error():
    """A provider whose SDK is not installed is a ConfigError naming the package to install."""
    with pytest.raises(ConfigError, match="nosuchprovider"):
        make_decider("nosuchprovider/some-model")
