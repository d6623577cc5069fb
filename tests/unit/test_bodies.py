"""A JSON body's nesting, counted before it is parsed (`scheduler.api.bodies.depth`)."""

from __future__ import annotations

import json

import pytest

from scheduler.api.bodies import MAX_DEPTH, depth


@pytest.mark.parametrize(
    ("raw", "deep"),
    [
        (b"[" * 1000 + b"]" * 1000, 1000),
        (b"[" * 1000, 1000),  # never closed: as deep as it opens
        (b'{"a": ' * 40 + b"1" + b"}" * 40, 40),
        (json.dumps({"goal": "[" * 5000, "x": [[[1]]]}).encode(), 4),  # brackets in a string
        (json.dumps(['say \\"[[[[' * 50, {"k": ["]"] * 50}]).encode(), 3),  # escaped quotes
        (b"[" + b"[]," * 10_000 + b"[]]", 2),  # many, shallow
    ],
)
def test_depth_counts_brackets_outside_strings(raw: bytes, deep: int) -> None:
    assert depth(raw) == deep


def test_an_ordinary_body_is_counted_without_a_scan() -> None:
    """Fewer brackets than the bound: at most that many levels, whatever the strings."""
    body = json.dumps({"goal": "Sign in", "selector": {"labels": {"pool": "a"}}}).encode()
    assert depth(body) <= MAX_DEPTH
