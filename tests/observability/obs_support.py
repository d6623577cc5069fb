"""Helpers shared by the observability tests (imported by name; tests are not a package)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest
import structlog

from workers.core.records import RunRecord
from workers.core.request import GoalRunRequest, SecretRef
from workers.telemetry import logs

SECRET = "hunter2-correct-horse-battery"
EMAIL = "ada@example.com"


@pytest.fixture(autouse=True)
def fresh_logging() -> Iterator[None]:
    """Each test configures logging itself; leave no handlers, context or secrets behind.

    Imported by the test modules that use it (no conftest.py here: other test folders import
    their conftest by name, and a second `conftest` module would shadow theirs)."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    logs.reset_logging()
    logs.SECRETS.clear()
    yield
    logs.reset_logging()
    logs.SECRETS.clear()
    structlog.contextvars.clear_contextvars()
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])


def make_record(
    run_id: str = "run-1", *, device: str = "ios-1", submitted_ago_s: float = 2.0
) -> RunRecord:
    request = GoalRunRequest(
        goal="Sign in",
        inputs={"email": EMAIL},
        secrets={"password": SecretRef(ref="env:PASSWORD")},
    )
    return RunRecord(
        id=run_id,
        request=request,
        device=device,
        batch="batch-1",
        submitted_at=time.time() - submitted_ago_s,
    )


def scrape(
    url: str, *, headers: dict[str, str] | None = None
) -> dict[str, list[tuple[dict[str, str], float]]]:
    """GET a /metrics endpoint and parse it: sample name → [(labels, value), ...]."""
    import httpx  # noqa: PLC0415 - only the tests that scrape need it
    from prometheus_client.parser import text_string_to_metric_families  # noqa: PLC0415

    resp = httpx.get(url, headers=headers, timeout=10)
    resp.raise_for_status()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(resp.text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def total(
    samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str
) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    return sum(
        v for ls, v in samples.get(name, []) if all(ls.get(k) == want for k, want in labels.items())
    )
