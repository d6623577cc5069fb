"""`InstructorDecider`: one schema-forced model call per step, through instructor.

Per step it renders two short messages (`workers.decide.prompt`) and a response model whose
`target` is a `Literal` of this screen's refs plus "none" and whose `input` is a `Literal` of the
input names plus "none". instructor validates the answer against it; on a validation error it
re-asks once (`max_retries=1`, two attempts), then we raise `DecisionInvalidError` and the loop
escalates. Transport failures (connection, timeout, HTTP status) become `ModelUnavailableError`
and the loop ends `errored`: infrastructure never masquerades as a bad decision.

Input values never reach this module: `DecideState` carries input names only.

`ALLOW_MODEL_REQUESTS` is the test guard (as in pydantic-ai): the test conftest sets it False,
and then a request to anything but a loopback address is refused before it is sent.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx
import openai
from instructor.core.exceptions import InstructorRetryException
from pydantic import ValidationError

from workers.core.errors import DecisionInvalidError, ModelUnavailableError
from workers.core.model import NONE, DecideState, Decision, TokenUsage
from workers.decide.prompt import Choice, render_messages, response_model_for

ALLOW_MODEL_REQUESTS = True
"""False in tests: only loopback model servers may be called (see tests/conftest.py)."""

DEFAULT_MAX_RETRIES = 1
"""One re-ask after a validation error, so two attempts; then the step escalates."""


class ModelRequestsNotAllowedError(RuntimeError):
    """A test tried to reach a non-loopback model while `ALLOW_MODEL_REQUESTS` is False."""


class StructuredClient(Protocol):
    """The slice of an instructor client we use (`instructor.Instructor` satisfies it)."""

    @property
    def chat(self) -> Any: ...  # noqa: ANN401 - instructor's chat namespace is untyped


def _is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def base_url_of(client: object) -> str | None:
    """The base URL of the SDK client under an instructor client, where it has one."""
    sdk = getattr(client, "client", None)
    url = getattr(sdk, "base_url", None)
    return None if url is None else str(url)


def _check_allowed(client: object) -> None:
    if ALLOW_MODEL_REQUESTS:
        return
    url = base_url_of(client)
    if url is None or not _is_loopback(url):
        raise ModelRequestsNotAllowedError(
            f"model requests are disabled (ALLOW_MODEL_REQUESTS=False) and {url or 'this client'}"
            " is not a loopback server; tests use tests/fakes/model_server.py"
        )


def _is_transport_error(exc: BaseException) -> bool:
    if isinstance(exc, (openai.APIError, httpx.TransportError, TimeoutError, ConnectionError)):
        # openai.APIError covers connection errors, timeouts and HTTP status errors. Its
        # APIResponseValidationError (the provider's body is not a completion) is also here:
        # the transport failed to deliver an answer we could read.
        return True
    # Other providers' SDKs (anthropic, google, ...) follow the same shape.
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"APIError", "APIConnectionError", "APITimeoutError", "APIStatusError"})


def _usage_of(completion: object) -> TokenUsage:
    usage = getattr(completion, "usage", None)
    if usage is None:
        return TokenUsage()
    # OpenAI-style (prompt/completion) or Anthropic-style (input/output) counters.
    prompt = getattr(usage, "prompt_tokens", None) or getattr(usage, "input_tokens", 0) or 0
    out = getattr(usage, "completion_tokens", None) or getattr(usage, "output_tokens", 0) or 0
    return TokenUsage(input_tokens=int(prompt), output_tokens=int(out))


def _decision(choice: Choice, usage: TokenUsage) -> Decision:
    return Decision(
        target=choice.target,
        input=choice.input,
        done=choice.done,
        blocked=choice.blocked,
        confidence=choice.confidence,
        reason=choice.reason,
        usage=usage,
    )


def _first_line(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        problems = [f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}" for e in exc.errors()]
        return "; ".join(problems)[:200]
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


class InstructorDecider:
    """A `Decider` backed by a model through an instructor client.

    `client` is an instructor client (`instructor.from_openai(OpenAI(...))`,
    `instructor.from_provider("openai/gpt-4o-mini")`, ...); `model` is the provider's model
    name. Build it with `workers.decide.factory.make_decider` to get the settings right.
    """

    def __init__(
        self,
        client: StructuredClient,
        model: str,
        *,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout_s: float | None = None,
        max_output_tokens: int | None = None,
    ) -> None:
        self.client = client
        self.model = model
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self.max_output_tokens = max_output_tokens

    def decide(self, state: DecideState) -> Decision:
        _check_allowed(self.client)
        response_model = response_model_for(state)
        extra: dict[str, Any] = {}
        if self.timeout_s is not None:
            extra["timeout"] = self.timeout_s
        if self.max_output_tokens is not None:
            extra["max_tokens"] = self.max_output_tokens
        try:
            choice, completion = self.client.chat.completions.create_with_completion(
                model=self.model,
                messages=render_messages(state),
                response_model=response_model,
                max_retries=self.max_retries,
                temperature=0,
                **extra,
            )
        except InstructorRetryException as exc:
            cause = exc.__cause__ or exc
            if _is_transport_error(cause):
                raise ModelUnavailableError(
                    f"model {self.model!r} unavailable: {_first_line(cause)}",
                    hint="check the model server, its address and credentials",
                ) from cause
            attempts = exc.n_attempts
            raise DecisionInvalidError(
                f"model {self.model!r} gave no valid decision in {attempts} attempt(s): "
                f"{_first_line(cause)}"
            ) from cause
        except ValidationError as exc:  # instructor versions that do not wrap the last error
            raise DecisionInvalidError(
                f"model {self.model!r} gave no valid decision: {_first_line(exc)}"
            ) from exc
        except (openai.APIError, httpx.HTTPError, OSError) as exc:  # not wrapped by instructor
            raise ModelUnavailableError(
                f"model {self.model!r} unavailable: {_first_line(exc)}"
            ) from exc
        if not isinstance(choice, Choice):  # pragma: no cover - instructor returns the model
            raise DecisionInvalidError(f"model {self.model!r} returned {type(choice).__name__}")
        decision = _decision(choice, _usage_of(completion))
        if decision.target != NONE and all(c.ref != decision.target for c in state.candidates):
            raise AssertionError("response model admitted a ref not on screen")  # pragma: no cover
        return decision
