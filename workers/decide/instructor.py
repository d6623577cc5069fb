"""`InstructorDecider`: one schema-forced model call per step, through instructor.

Per step it renders one short user message, instruction first (`workers.decide.prompt`), and a
response model whose one required field, `action`, is an enum of this screen's answers
(`"e2=email"`, `"e3"`, `"done"`, `"blocked"`). instructor validates the answer against it; on
a validation error it re-asks once (`max_retries=1`, two attempts), then we raise
`DecisionInvalidError` and the loop escalates. Transport failures (connection, timeout, HTTP
status) become `ModelUnavailableError` and the loop ends `errored`: infrastructure never
masquerades as a bad decision. Output is capped (`max_output_tokens`) and the answer has no
free-text field, so a model cannot keep a server generating.

Confidence comes from the server's token logprobs where it returns them (`logprobs: true`):
the probability of the chosen `action` value, renormalised at each of its tokens over the
alternatives the server listed that could still spell an allowed answer (a server that
constrains decoding reports the model's raw log-probabilities, so a forced token's raw value
says nothing about the choice). Where a server returns none for the answer (OpenAI does not
for tool-call arguments) or refuses the request (llama-cpp-python started without
`--logits_all true` answers HTTP 500), this decider falls back, for the rest of its life, to a
schema with a self-reported `confidence` and asks that step again.

Usage is recorded for every call, summed over re-asks: what the provider billed
(`input_tokens`, `output_tokens`) and our own cl100k count of each request body
(`counted_input_tokens`, `workers.decide.tokens`).

Input values never reach this module: `DecideState` carries input names only.

`workers.decide.guard.ALLOW_MODEL_REQUESTS` is the test guard (as in pydantic-ai): the test
conftest sets it False, and then a request to anything but a loopback address is refused before
it is sent.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx
import openai
from instructor.core.exceptions import IncompleteOutputException, InstructorRetryException
from instructor.core.hooks import Hooks
from pydantic import ValidationError

from workers.core.errors import DecisionInvalidError, ModelUnavailableError
from workers.core.model import NONE, ConfidenceSource, DecideState, Decision, TokenUsage
from workers.decide import guard
from workers.decide.options import DEFAULT_MAX_OUTPUT_TOKENS
from workers.decide.prompt import (
    ACTION_KEY,
    Choice,
    SelfRated,
    actions_for,
    render_messages,
    response_model_for,
)
from workers.decide.tokens import count_request

DEFAULT_MAX_RETRIES = 1
"""One re-ask after a validation error, so two attempts; then the step escalates."""
TOP_LOGPROBS = 5
"""Alternatives asked for at each answer token, to renormalise the chosen one against."""


class ModelRequestsNotAllowedError(RuntimeError):
    """A test tried to reach a non-loopback model while `ALLOW_MODEL_REQUESTS` is False."""


class StructuredClient(Protocol):
    """The slice of an instructor client we use (`instructor.Instructor` satisfies it)."""

    @property
    def chat(self) -> Any: ...  # noqa: ANN401 - instructor's chat namespace is untyped


class TokenLogprob(Protocol):
    """One generated token as OpenAI-style `logprobs.content` reports it."""

    @property
    def token(self) -> str: ...
    @property
    def logprob(self) -> float: ...
    @property
    def top_logprobs(self) -> Sequence[Any]: ...  # items with .token and .logprob


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
    if guard.ALLOW_MODEL_REQUESTS:
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


def _refuses_logprobs(exc: BaseException) -> bool:
    """An HTTP error that names logprobs: the server cannot return them (llama-cpp-python
    without `--logits_all true` answers 500 "logprobs is not supported ...")."""
    return isinstance(exc, openai.APIStatusError) and "logprobs" in str(exc).lower()


def _usage_of(completion: object) -> TokenUsage:
    usage = getattr(completion, "usage", None)
    if usage is None:
        return TokenUsage()
    # OpenAI-style (prompt/completion) or Anthropic-style (input/output) counters.
    prompt = getattr(usage, "prompt_tokens", None) or getattr(usage, "input_tokens", 0) or 0
    out = getattr(usage, "completion_tokens", None) or getattr(usage, "output_tokens", 0) or 0
    return TokenUsage(input_tokens=int(prompt), output_tokens=int(out))


def _first_line(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        problems = [f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}" for e in exc.errors()]
        return "; ".join(problems)[:200]
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def _answer_tokens(completion: object) -> list[TokenLogprob] | None:
    choices = getattr(completion, "choices", None) or []
    logprobs = getattr(choices[0], "logprobs", None) if choices else None
    content = getattr(logprobs, "content", None)
    return list(content) if content else None


def answer_confidence(
    tokens: Sequence[TokenLogprob], value: str, allowed: Collection[str], *, key: str = ACTION_KEY
) -> float | None:
    """The probability the model gave `value` as the answer's `key`, from its token logprobs.

    The tokens spell the answer's JSON; each one that spells part of `"<value>"` (its closing
    quote too: `"e2"` and `"e2=email"` part there) contributes the probability of the listed
    alternatives that still spell `value` (the chosen token, or another spelling of the same
    answer: `"` and `",` both end it) divided by that of every listed alternative that could
    still spell one of `allowed`, plus, for each allowed next character no listed token
    starts, the least listed alternative's probability (an unlisted token had at most that).
    A server that constrains decoding reports the model's raw log-probabilities, so a token
    the grammar forced contributes 1, whatever its raw value.
    Without any alternatives listed, the raw product of the chosen tokens' probabilities.
    None when the tokens do not spell the answer (the caller falls back to the self-report)."""
    text = "".join(t.token for t in tokens)
    found = re.search(rf'"{re.escape(key)}"\s*:\s*"({re.escape(value)})"', text)
    if found is None:
        return None
    start, end = found.start(1), found.end(1) + 1
    chosen = value + '"'
    endings = [a + '"' for a in allowed]

    def agrees(spelled: str, ending: str) -> bool:
        return ending.startswith(spelled) or spelled.startswith(ending)

    ratio, raw, listed, pos = 1.0, 0.0, False, 0
    for tok in tokens:
        t_start, pos = pos, pos + len(tok.token)
        if pos <= start or t_start >= end:
            continue
        lead = text[t_start:start]  # what this token carries before the value starts
        before = chosen[: max(0, t_start - start)]  # the value spelled before this token
        alternatives = {tok.token: tok.logprob}
        for alt in tok.top_logprobs or ():
            alternatives.setdefault(str(alt.token), float(alt.logprob))
        listed = listed or len(alternatives) > 1
        same = total = 0.0
        covered: set[str] = set()
        for piece, lp in alternatives.items():
            if not piece.startswith(lead) or len(piece) == len(lead):
                continue  # another layout of the JSON, or a token that spells nothing
            spelled = before + piece[len(lead) :]
            if any(agrees(spelled, e) for e in endings):
                covered.add(spelled[len(before)])
                total += math.exp(lp)
                same += math.exp(lp) if agrees(spelled, chosen) else 0.0
        # An allowed next character no listed token starts may still have taken up to the
        # least listed alternative's probability: count it at that (the cautious side).
        branches = {e[len(before)] for e in endings if len(e) > len(before) and agrees(before, e)}
        others = [float(a.logprob) for a in tok.top_logprobs or () if a.token != tok.token]
        if others:
            total += len(branches - covered) * math.exp(min(others))
        raw += tok.logprob
        ratio *= same / total if total > 0 else 1.0
    confidence = ratio if listed else math.exp(raw)
    return min(1.0, max(0.0, confidence))


@dataclass(frozen=True)
class _Answer:
    choice: Choice
    completion: object
    usage: TokenUsage


class _NoLogprobsError(Exception):
    """The server returned no usable logprobs for the answer (or refused to); `usage` is what
    the attempt cost."""

    def __init__(self, usage: TokenUsage) -> None:
        super().__init__("no logprobs")
        self.usage = usage


class InstructorDecider:
    """A `Decider` backed by a model through an instructor client.

    `client` is an instructor client (`instructor.from_openai(OpenAI(...))`,
    `instructor.from_provider("openai/gpt-4o-mini")`, ...); `model` is the provider's model
    name. `logprobs` asks the server for token logprobs and derives confidence from them (see
    the module docstring); False uses the model's self-report from the start. Build it with
    `workers.decide.factory.make_decider` to get the settings right.
    """

    def __init__(
        self,
        client: StructuredClient,
        model: str,
        *,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout_s: float | None = None,
        max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS,
        logprobs: bool = True,
    ) -> None:
        self.client = client
        self.model = model
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self.max_output_tokens = max_output_tokens
        self.logprobs = logprobs

    def decide(self, state: DecideState) -> Decision:
        _check_allowed(self.client)
        spent = TokenUsage()
        if self.logprobs:
            try:
                answer = self._ask(state, logprobs=True)
                confidence = self._confidence(state, answer)
                return self._decision(answer, confidence, "logprobs")
            except _NoLogprobsError as exc:
                self.logprobs = False  # this server gives none: self-report from now on
                spent = exc.usage
        answer = self._ask(state, logprobs=False)
        choice = answer.choice
        if not isinstance(choice, SelfRated):  # pragma: no cover - built by response_model_for
            raise DecisionInvalidError(f"model {self.model!r} gave no confidence")
        answer = _Answer(choice, answer.completion, spent + answer.usage)
        return self._decision(answer, choice.confidence, "self")

    def _confidence(self, state: DecideState, answer: _Answer) -> float:
        tokens = _answer_tokens(answer.completion) or []
        confidence = answer_confidence(tokens, answer.choice.action, actions_for(state))
        if confidence is None:
            raise _NoLogprobsError(answer.usage)
        return confidence

    def _decision(self, answer: _Answer, confidence: float, source: ConfidenceSource) -> Decision:
        target, input_name, done, blocked = answer.choice.parts()
        return Decision(
            target=target,
            input=input_name,
            done=done,
            blocked=blocked,
            confidence=confidence,
            usage=answer.usage,
            decided_by="model",
            confidence_source=source,
        )

    def _ask(self, state: DecideState, *, logprobs: bool) -> _Answer:
        response_model = response_model_for(state, self_rated=not logprobs)
        counted: list[int] = []
        hooks = Hooks()
        hooks.on("completion:kwargs", lambda **kw: counted.append(count_request(kw).total))
        extra: dict[str, Any] = {"max_tokens": self.max_output_tokens}
        if self.timeout_s is not None:
            extra["timeout"] = self.timeout_s
        if logprobs:
            extra |= {"logprobs": True, "top_logprobs": TOP_LOGPROBS}
        try:
            choice, completion = self.client.chat.completions.create_with_completion(
                model=self.model,
                messages=render_messages(state),
                response_model=response_model,
                max_retries=self.max_retries,
                temperature=0,
                hooks=hooks,
                **extra,
            )
        except (
            InstructorRetryException,  # validation failed twice, or the transport failed
            IncompleteOutputException,  # the answer hit max_output_tokens
            ValidationError,  # instructor versions that do not wrap the last error
            openai.APIError,  # transport errors instructor did not wrap
            httpx.HTTPError,
            OSError,
        ) as exc:
            raise self._translate(exc, logprobs=logprobs, counted=sum(counted)) from exc
        if not isinstance(choice, response_model):  # pragma: no cover - instructor returns it
            raise DecisionInvalidError(f"model {self.model!r} returned {type(choice).__name__}")
        if choice.parts()[0] != NONE and choice.parts()[0] not in {c.ref for c in state.candidates}:
            raise AssertionError("response model admitted a ref not on screen")  # pragma: no cover
        usage = _usage_of(completion) + TokenUsage(
            counted_input_tokens=sum(counted), requests=len(counted)
        )
        return _Answer(choice, completion, usage)

    def _translate(self, exc: Exception, *, logprobs: bool, counted: int) -> Exception:
        """What a failed `create_with_completion` means: our error for it."""
        if isinstance(exc, IncompleteOutputException):
            return DecisionInvalidError(
                f"model {self.model!r}: answer exceeded max_output_tokens={self.max_output_tokens}"
            )
        cause: BaseException = exc
        attempts = ""
        if isinstance(exc, InstructorRetryException):
            cause = exc.__cause__ or exc
            attempts = f" in {exc.n_attempts} attempt(s)"
        if logprobs and _refuses_logprobs(cause):
            return _NoLogprobsError(TokenUsage(counted_input_tokens=counted))
        if _is_transport_error(cause):
            return ModelUnavailableError(
                f"model {self.model!r} unavailable: {_first_line(cause)}",
                hint="check the model server, its address and credentials",
            )
        return DecisionInvalidError(
            f"model {self.model!r} gave no valid decision{attempts}: {_first_line(cause)}"
        )
