"""Logging: configured once, JSON or console, run context, Celery hooks, and redaction."""

from __future__ import annotations

import io
import json
import logging
import os

import structlog
from celery import Celery
from obs_support import (
    SECRET,
    fresh_logging,  # noqa: F401 - an autouse fixture, found by name
)

from workers.core.request import SecretRef
from workers.core.secrets import DictSecrets
from workers.telemetry import logs


def json_lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def test_json_lines_carry_the_run_context() -> None:
    """Every line of a run carries run_id, device_id, attempt and the step, as JSON."""
    out = io.StringIO()
    logs.configure_logging(level="DEBUG", fmt="json", stream=out)
    logs.bind_run(run_id="r1", device_id="ios-1", attempt=2, batch_id="b1")
    logs.bind_step(3)
    logs.get_logger("t").info("step.finished", outcome="acted")
    logging.getLogger("celery.worker").warning("from %s", "the stdlib")
    logs.clear_run()
    logs.get_logger("t").info("after")

    first, second, third = json_lines(out)
    for line in (first, second):
        assert line["run_id"] == "r1"
        assert line["device_id"] == "ios-1"
        assert line["attempt"] == 2
        assert line["step"] == 3
        assert line["batch_id"] == "b1"
        assert "timestamp" in line
    assert first["event"] == "step.finished"
    assert first["level"] == "info"
    assert second["event"] == "from the stdlib"
    assert second["logger"] == "celery.worker"
    assert "run_id" not in third


def test_configured_once() -> None:
    """A second configure_logging is a no-op unless forced (the composition root wins)."""
    first, second = io.StringIO(), io.StringIO()
    logs.configure_logging(fmt="json", stream=first)
    logs.configure_logging(fmt="json", stream=second)
    logs.get_logger("t").info("hello")
    assert "hello" in first.getvalue()
    assert second.getvalue() == ""


def test_console_output_in_a_terminal() -> None:
    """`auto` renders for people on a terminal (a real pty) and JSON everywhere else."""
    master, slave = os.openpty()
    try:
        with os.fdopen(slave, "w", closefd=True) as tty:
            logs.configure_logging(fmt="auto", stream=tty)
            logs.get_logger("t").info("hello.tty", run="r1")
            tty.flush()
            text = os.read(master, 65536).decode(errors="replace")
    finally:
        os.close(master)
    assert "hello.tty" in text
    assert not text.lstrip().startswith("{")

    piped = io.StringIO()
    assert logs.wants_json("auto", piped)
    logs.configure_logging(fmt="auto", stream=piped, force=True)
    logs.get_logger("t").info("hello.pipe")
    assert json_lines(piped)[0]["event"] == "hello.pipe"


def test_a_resolved_secret_never_reaches_the_output() -> None:
    """Whatever a line does with a resolved secret — message, field, nested, stdlib args,
    traceback — the value is masked in the text written."""
    out = io.StringIO()
    logs.configure_logging(level="DEBUG", fmt="json", stream=out)
    resolver = logs.RedactingSecrets(DictSecrets({"PASSWORD": SECRET}))
    assert resolver.resolve("password", SecretRef(ref="env:PASSWORD")) == SECRET

    log = logs.get_logger("leaky")
    log.info(f"typed {SECRET} into the field")  # noqa: G004 - the careless line under test
    log.info("fill", value=SECRET, nested={"inputs": [SECRET, "plain"]}, n=3)
    logging.getLogger("stdlib.leaky").error("password was %s", SECRET)
    try:
        raise ValueError(f"device rejected {SECRET}")
    except ValueError:
        log.exception("fill.failed")
    text = out.getvalue()
    assert SECRET not in text
    assert SECRET[:-1] not in text  # not even most of it
    assert text.count(logs.MASK) >= 5
    lines = json_lines(out)
    assert lines[1]["nested"] == {"inputs": [logs.MASK, "plain"]}
    assert lines[1]["n"] == 3
    assert "ValueError" in str(lines[3]["exception"])


def test_redaction_in_the_console_renderer_too() -> None:
    """The console renderer's text goes through the same last pass."""
    master, slave = os.openpty()
    logs.SECRETS.add([SECRET])
    try:
        with os.fdopen(slave, "w", closefd=True) as tty:
            logs.configure_logging(fmt="console", stream=tty)
            logs.get_logger("t").warning("oops", pw=SECRET)
            tty.flush()
            text = os.read(master, 65536).decode(errors="replace")
    finally:
        os.close(master)
    assert "oops" in text
    assert SECRET not in text


def test_redact_processor_with_capture_logs() -> None:
    """The processor masks known values in every value of the event dict."""
    logs.SECRETS.add(["s3cr3t-value", "s3cr3t"])
    with structlog.testing.capture_logs(
        processors=[logs.redact_processor(logs.SECRETS)]
    ) as captured:
        structlog.get_logger().info("x s3cr3t-value y", field=("s3cr3t", 1), other="fine")
    (entry,) = captured
    assert entry["event"] == f"x {logs.MASK} y"
    assert entry["field"] == [logs.MASK, 1]
    assert entry["other"] == "fine"


def test_celery_does_not_hijack_logging() -> None:
    """With the setup_logging hook connected, Celery's logging setup leaves our handler alone."""
    out = io.StringIO()
    logs.configure_logging(fmt="json", stream=out)
    logs.install_celery_hooks()
    ours = list(logging.getLogger().handlers)
    app = Celery("t", set_as_current=False)
    app.conf.worker_hijack_root_logger = True  # even asked to, it must not
    app.log.setup_logging_subsystem(loglevel="DEBUG")
    assert logging.getLogger().handlers == ours
    logging.getLogger("celery").warning("still ours")
    assert json_lines(out)[-1]["event"] == "still ours"


def test_request_id_travels_with_the_task_and_context_is_cleared_per_task() -> None:
    """The publisher's request_id rides in a message header; a task starts with a clean
    context (only its task id and that request id) and leaves none behind."""
    logs.install_celery_hooks()
    app = Celery("t", broker="memory://", set_as_current=False)
    seen: list[dict[str, object]] = []

    @app.task(name="t.probe", bind=True)
    def probe(self: object) -> None:
        seen.append(dict(structlog.contextvars.get_contextvars()))

    structlog.contextvars.bind_contextvars(request_id="req-42", run_id="stale-run")
    app.send_task("t.probe", queue="q")
    with app.connection_for_read() as conn:
        queue = conn.SimpleQueue("q")
        message = queue.get(timeout=5)
        headers = dict(message.headers)
        message.ack()
        queue.close()
    assert headers[logs.REQUEST_ID_HEADER] == "req-42"

    probe.apply(task_id="task-1", headers={logs.REQUEST_ID_HEADER: "req-42"})
    assert seen == [{"task_id": "task-1", "request_id": "req-42"}]
    assert structlog.contextvars.get_contextvars() == {}
