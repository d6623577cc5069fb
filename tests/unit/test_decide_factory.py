"""make_decider: specs to deciders, and clear ConfigErrors for bad ones."""

from __future__ import annotations

import instructor
import pytest
from pydantic import SecretStr

from scheduler.cli._common import load_settings
from testing.samples import signin_flow
from workers.core.errors import ConfigError
from workers.decide.factory import make_decider
from workers.decide.instructor import InstructorDecider
from workers.decide.options import ModelSettings
from workers.decide.rules import RulesDecider
from workers.decide.scripted import ScriptedDecider, done
from workers.settings import Settings


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
        base_url="http://127.0.0.1:9/v1", api_key=SecretStr("k"), timeout_s=3, mode="json"
    )
    decider = make_decider("ollama/llama3.2", settings)
    assert isinstance(decider, InstructorDecider)
    assert decider.model == "llama3.2"
    assert decider.timeout_s == 3


def test_provider_without_its_sdk_is_a_config_error():
    """A provider whose SDK is not installed is a ConfigError naming the package to install."""
    with pytest.raises(ConfigError, match="nosuchprovider"):
        make_decider("nosuchprovider/some-model")


def test_model_settings_cap_output_and_ask_for_logprobs_by_default():
    """Defaults: answers capped at 64 tokens, confidence from logprobs, the tools mode; the
    decider built from them carries all three."""
    settings = ModelSettings(base_url="http://127.0.0.1:9/v1")
    assert (settings.max_output_tokens, settings.logprobs, settings.mode) == (64, True, "tools")
    decider = make_decider("local/gemma", settings)
    assert isinstance(decider, InstructorDecider)
    assert (decider.max_output_tokens, decider.logprobs) == (64, True)
    assert decider.client.mode is instructor.Mode.TOOLS


def test_json_mode_builds_an_instructor_json_client():
    """mode "json" is instructor's JSON mode (response_format json_object)."""
    settings = ModelSettings(base_url="http://127.0.0.1:9/v1", mode="json", logprobs=False)
    decider = make_decider("local/gemma", settings)
    assert isinstance(decider, InstructorDecider)
    assert decider.client.mode is instructor.Mode.JSON
    assert decider.logprobs is False


def test_settings_reach_the_decider():
    """GOALFLEET_MODEL_* settings become the ModelSettings the factory gets."""
    s = Settings(model_mode="json", model_max_output_tokens=32, model_logprobs=False)
    assert s.model_settings().model_dump(include={"mode", "max_output_tokens", "logprobs"}) == {
        "mode": "json",
        "max_output_tokens": 32,
        "logprobs": False,
    }


@pytest.mark.parametrize("mode", ["json_schema", "JSON", "md_json", ""])
def test_an_unsupported_mode_is_a_one_line_config_error_at_start(monkeypatch, mode):
    """GOALFLEET_MODEL_MODE=json_schema (llama.cpp's server answers it with HTTP 500) is refused
    when the settings are read, in one line that names the modes there are."""
    monkeypatch.setenv("GOALFLEET_MODEL_MODE", mode)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("GOALFLEET_MODEL_MODE: ")
    assert "tools, json" in message
    with pytest.raises(ValueError, match="not supported"):
        ModelSettings(mode=mode)
