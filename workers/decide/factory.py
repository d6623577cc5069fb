"""Build a `Decider` from a spec: the one place model clients and credentials are made.

    make_decider("rules")                              # offline baseline, no model
    make_decider("scripted", script=[...])             # tests: a ScriptedDecider
    make_decider("openai/gpt-4o-mini", ModelSettings(api_key=SecretStr("sk-..."), ...))
    make_decider("ollama/llama3.2", ModelSettings(base_url="http://127.0.0.1:11434/v1"))

`<provider>/<model>` with a `base_url`, or with provider `openai`, is spoken to as an
OpenAI-compatible server (`instructor.from_openai` over an `openai.OpenAI` client we build, so
timeouts and transport retries are ours). Any other provider goes through
`instructor.from_provider`, which needs that provider's SDK installed. Without an `api_key`
the provider SDK falls back to its own environment variable (e.g. `OPENAI_API_KEY`); pass one
from the composition root's `Settings` to keep the environment read in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from workers.core.errors import ConfigError
from workers.core.model import PROVIDER_SPEC, DecideState, Decision
from workers.core.ports import Decider
from workers.decide.options import ModelSettings

SPEC_HELP = 'use "rules", "scripted" or "<provider>/<model>" (e.g. "openai/gpt-4o-mini")'
_OPENAI_COMPATIBLE = frozenset({"openai"})


def make_decider(
    spec: str,
    settings: ModelSettings | None = None,
    *,
    script: Callable[[DecideState], Decision] | Iterable[Decision] | None = None,
) -> Decider:
    """The decider `spec` names. Raises `ConfigError` naming the problem for a bad spec, a
    missing provider SDK or an unusable setting — before anything runs."""
    spec = spec.strip()
    if spec == "rules":
        from workers.decide.rules import RulesDecider  # noqa: PLC0415 - load what is used

        return RulesDecider()
    if spec == "scripted":
        from workers.decide.rules import RulesDecider  # noqa: PLC0415
        from workers.decide.scripted import ScriptedDecider  # noqa: PLC0415

        # Without a script (e.g. `goalfleet run --decider scripted`) it answers as the rules
        # decider does, and still records every state it is asked (`.seen`).
        return ScriptedDecider(script if script is not None else RulesDecider().decide)
    match = PROVIDER_SPEC.fullmatch(spec)
    if match is None:
        raise ConfigError(f"unknown decider {spec!r}; {SPEC_HELP}")
    return _model_decider(match["provider"], match["model"], settings or ModelSettings())


def _model_decider(provider: str, model: str, settings: ModelSettings) -> Decider:
    import instructor  # noqa: PLC0415 - model SDKs load only when a model is configured

    from workers.decide.instructor import InstructorDecider  # noqa: PLC0415

    mode = instructor.Mode.TOOLS if settings.mode == "tools" else instructor.Mode.JSON
    key = settings.api_key.get_secret_value() if settings.api_key else None
    if settings.base_url is not None or provider in _OPENAI_COMPATIBLE:
        import openai  # noqa: PLC0415

        try:
            sdk = openai.OpenAI(
                api_key=key or ("not-needed" if settings.base_url else None),
                base_url=settings.base_url,
                timeout=settings.timeout_s,
                max_retries=settings.transport_retries,
            )
        except openai.OpenAIError as exc:  # no key anywhere
            raise ConfigError(
                f"decider {provider}/{model}: {exc}",
                hint="set GOALFLEET_MODEL_API_KEY (for fleet runs: on the workers)",
            ) from None
        client = instructor.from_openai(sdk, mode=mode)
    else:
        kwargs: dict[str, object] = {"timeout": settings.timeout_s}
        if key:
            kwargs["api_key"] = key
        try:
            client = instructor.from_provider(f"{provider}/{model}", **kwargs)  # type: ignore[call-overload]
        except ImportError as exc:
            raise ConfigError(
                f"decider {provider}/{model} needs the {provider!r} SDK: {exc}",
                hint=f"pip install 'instructor[{provider}]'",
            ) from None
        except (ValueError, instructor.core.exceptions.InstructorError) as exc:
            raise ConfigError(f"decider {provider}/{model}: {exc}", hint=SPEC_HELP) from None
    return InstructorDecider(
        client,
        model,
        timeout_s=settings.timeout_s,
        max_output_tokens=settings.max_output_tokens,
        logprobs=settings.logprobs,
    )
