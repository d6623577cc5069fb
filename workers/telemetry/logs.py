"""Logging for every goalfleet process: structlog, configured once at a composition root.

- `configure_logging(...)` sets up structlog *and* the standard library's root logger, so lines
  from Celery, uvicorn and modules that use `logging.getLogger` go through the same processors
  (context, redaction, rendering). JSON lines in production; a readable console in a terminal.
- `install_celery_hooks()` connects Celery's `setup_logging` signal (so Celery does not
  replace our handlers with its own), clears the context per task (`task_prerun` /
  `task_postrun`), and carries the caller's `request_id` from the publisher (the API) to the
  task in a message header, so one id follows a run from the HTTP request through the worker.
- Context is bound with contextvars (`bind_run`, `bind_step`, `clear_run`): every line of a run
  carries `run_id`, `device_id`, `attempt` and, inside a step, `step`.
- Redaction is defence in depth: every known secret value (`SECRETS`, fed by
  `RedactingSecrets` when the worker resolves a run's secret inputs, and with the worker's own
  secret values at start) is replaced by `**********` in every value of every line and, last,
  in the rendered text itself. The step table already shows secrets as stars; this catches the
  line someone adds later that does not.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any, Literal, TextIO

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from workers.core.request import SecretRef
from workers.core.secrets import SecretResolver

MASK = "**********"
LogFormat = Literal["auto", "json", "console"]
REQUEST_ID_HEADER = "goalfleet_request_id"
"""The Celery message header that carries the publisher's request id to the task."""
RUN_KEYS = ("run_id", "device_id", "attempt", "step", "batch_id", "task_id", "request_id")


class SecretValues:
    """The secret values this process knows, for redaction. Thread-safe; values only grow.

    A worker resolves a bounded set of secrets (its own `GOALFLEET_SECRET_*` variables), so
    keeping every value it ever resolved costs nothing and also covers a line logged after a
    run ended.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: tuple[str, ...] = ()

    def add(self, values: Iterable[str]) -> None:
        with self._lock:
            known = set(self._values)
            known.update(v for v in values if v)
            # longest first, so a secret that contains another is masked whole
            self._values = tuple(sorted(known, key=lambda v: (-len(v), v)))

    def clear(self) -> None:
        with self._lock:
            self._values = ()

    def __len__(self) -> int:
        return len(self._values)

    def redact(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, MASK)
        return text


SECRETS = SecretValues()
"""The process-wide registry the redaction processor reads."""


class RedactingSecrets:
    """A `SecretResolver` that registers every value it resolves for redaction.

    The worker's composition root wraps its resolver with this, so the values of the current
    run's sensitive inputs are known to the log pipeline before the run can log anything.
    """

    def __init__(self, inner: SecretResolver, registry: SecretValues = SECRETS) -> None:
        self._inner = inner
        self._registry = registry

    def resolve(self, name: str, ref: SecretRef) -> str:
        value = self._inner.resolve(name, ref)
        self._registry.add((value,))
        return value


def _redact_value(value: object, registry: SecretValues) -> object:
    if isinstance(value, str):
        return registry.redact(value)
    if isinstance(value, Mapping):
        return {k: _redact_value(v, registry) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_redact_value(v, registry) for v in value]
    if isinstance(value, int | float | bool) or value is None:
        return value
    return registry.redact(str(value))


def redact_processor(registry: SecretValues = SECRETS) -> Processor:
    """A processor that masks every known secret in every value (nested too) of a line."""

    def redact(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
        if not len(registry):
            return event_dict
        return {k: _redact_value(v, registry) for k, v in event_dict.items()}

    return redact


def _redact_rendered(registry: SecretValues, renderer: Processor) -> Processor:
    """The renderer, then a last pass over the text (tracebacks rendered late included)."""

    def render(logger: WrappedLogger, name: str, event_dict: EventDict) -> str:
        out = renderer(logger, name, event_dict)
        text = out if isinstance(out, str) else str(out)
        return registry.redact(text) if len(registry) else text

    return render


def _drop_color_message(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    event_dict.pop("color_message", None)  # uvicorn's duplicate of the message
    return event_dict


def shared_processors(registry: SecretValues = SECRETS) -> list[Processor]:
    """What every line goes through, ours and the standard library's alike."""
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.add_log_level,
        structlog.stdlib.ExtraAdder(),
        _drop_color_message,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        redact_processor(registry),
    ]


class _State:
    configured: bool = False


def wants_json(fmt: LogFormat, stream: TextIO) -> bool:
    if fmt == "auto":
        isatty = getattr(stream, "isatty", None)
        return not (callable(isatty) and isatty())
    return fmt == "json"


def configure_logging(
    *,
    level: str | int = "INFO",
    fmt: LogFormat = "auto",
    stream: TextIO | None = None,
    registry: SecretValues = SECRETS,
    force: bool = False,
) -> None:
    """Configure structlog and the root logger once per process (again only with `force`).

    `fmt="auto"`: a console renderer when `stream` is a terminal, JSON lines otherwise.
    """
    if _State.configured and not force:
        return
    out = stream if stream is not None else sys.stderr
    shared = shared_processors(registry)
    renderer: Processor
    if wants_json(fmt, out):
        renderer = structlog.processors.JSONRenderer(sort_keys=False)
        final: list[Processor] = [structlog.processors.format_exc_info]
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=out.isatty())
        final = []
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            *final,
            _redact_rendered(registry, renderer),
        ],
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level if isinstance(level, int) else level.upper())
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    _State.configured = True


def reset_logging() -> None:
    """Forget the configuration (tests)."""
    _State.configured = False
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()


def get_logger(name: str) -> Any:  # noqa: ANN401 - structlog's bound loggers are dynamic
    return structlog.stdlib.get_logger(name)


# -- context ------------------------------------------------------------------------------


def bind_run(*, run_id: str, device_id: str | None, attempt: int, batch_id: str | None) -> None:
    """Start a run's context: clears whatever the previous task left, keeps the request id."""
    keep = {
        k: v
        for k, v in structlog.contextvars.get_contextvars().items()
        if k in {"request_id", "task_id"}
    }
    structlog.contextvars.clear_contextvars()
    ctx: dict[str, object] = {**keep, "run_id": run_id, "attempt": attempt}
    if device_id is not None:
        ctx["device_id"] = device_id
    if batch_id is not None:
        ctx["batch_id"] = batch_id
    structlog.contextvars.bind_contextvars(**ctx)


def bind_step(index: int) -> None:
    structlog.contextvars.bind_contextvars(step=index)


def clear_run() -> None:
    structlog.contextvars.clear_contextvars()


# -- Celery -------------------------------------------------------------------------------


def _on_setup_logging(**_: Any) -> None:  # noqa: ANN401 - Celery signal kwargs
    """Connected to `setup_logging`: its mere presence stops Celery configuring logging."""


def publish_headers() -> dict[str, str]:
    """The headers the fleet adds to a task message it publishes: the request id bound in
    this context (the API's request), so the worker's lines for the run carry it."""
    request_id = structlog.contextvars.get_contextvars().get("request_id")
    return {REQUEST_ID_HEADER: str(request_id)} if request_id else {}


def _on_before_publish(headers: MutableMapping[str, Any] | None = None, **_: Any) -> None:  # noqa: ANN401 - Celery signal kwargs
    if headers is not None:
        headers.update(publish_headers())


def _on_task_prerun(task_id: str | None = None, task: Any = None, **_: Any) -> None:  # noqa: ANN401 - Celery signal kwargs
    structlog.contextvars.clear_contextvars()
    ctx: dict[str, str] = {}
    if task_id:
        ctx["task_id"] = task_id
    request_id = _header(getattr(task, "request", None), REQUEST_ID_HEADER)
    if request_id:
        ctx["request_id"] = str(request_id)
    structlog.contextvars.bind_contextvars(**ctx)


def _header(request: object, name: str) -> object:
    """A custom message header: Celery puts it on the request, or under `headers`."""
    if request is None:
        return None
    value = getattr(request, name, None)
    if value is None:
        headers = getattr(request, "headers", None)
        if isinstance(headers, Mapping):
            value = headers.get(name)
    return value


def _on_task_postrun(**_: Any) -> None:  # noqa: ANN401 - Celery signal kwargs
    structlog.contextvars.clear_contextvars()


def install_celery_hooks() -> None:
    """Connect the logging hooks to Celery's signals (idempotent: Celery dedupes receivers)."""
    from celery import signals  # noqa: PLC0415 - only processes that run Celery load it

    signals.setup_logging.connect(_on_setup_logging, weak=False)
    signals.before_task_publish.connect(_on_before_publish, weak=False)
    signals.task_prerun.connect(_on_task_prerun, weak=False)
    signals.task_postrun.connect(_on_task_postrun, weak=False)
