"""Fixtures for the observability tests: a clean logging state around each test."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import structlog

from workers import logs


@pytest.fixture(autouse=True)
def _fresh_logging() -> Iterator[None]:
    """Each test configures logging itself; leave no handlers, context or secrets behind."""
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
