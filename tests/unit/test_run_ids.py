"""Run ids as shown: a unique prefix of 6+ characters names its run (as in git); an
ambiguous one lists its matches; anything else is looked up as given."""

from __future__ import annotations

import pytest
import redis

from scheduler.errors import AmbiguousIdError, NotFoundError
from scheduler.service.run_ids import RunIds
from workers.fleet.keys import Keys

A = "630daa7b" + "0" * 24
B = "630daa7c" + "1" * 24
C = "630daa7c" + "2" * 24


@pytest.fixture
def ids(client: redis.Redis) -> RunIds:
    keys = Keys("t")
    for run_id in (A, B, C):
        client.hset(keys.run(run_id), "id", run_id)
        client.hset(keys.steps(run_id), "1", "{}")
    client.hset(Keys("other").run("630daa7d" + "3" * 24), "id", "x")  # another fleet's run
    return RunIds(client, keys)


def test_a_unique_prefix_is_the_whole_id(ids: RunIds) -> None:
    """As the tables show it (8), as short as 6, in capitals: the one run it starts."""
    assert ids.resolve("630daa7b") == A
    assert ids.resolve("630DAA7B0") == A
    assert ids.resolve(B[:9]) == B


def test_an_ambiguous_prefix_lists_its_matches(ids: RunIds) -> None:
    with pytest.raises(AmbiguousIdError) as err:
        ids.resolve("630daa")
    assert "3 runs start with it" in str(err.value)
    assert all(run_id in str(err.value) for run_id in (A, B, C))
    assert err.value.status == 409
    with pytest.raises(AmbiguousIdError):
        ids.resolve("630daa7c")


def test_no_match_is_not_found_and_other_fleets_do_not_count(ids: RunIds) -> None:
    with pytest.raises(NotFoundError):
        ids.resolve("630daa7d")
    with pytest.raises(NotFoundError):
        ids.resolve("ffffff")


def test_whole_ids_pass_through(ids: RunIds) -> None:
    """A whole id (known or not): looked up as given, so the caller answers 404 for it the
    usual way."""
    assert ids.resolve(A) == A
    assert ids.resolve("f" * 32) == "f" * 32
    assert ids.resolve(A.upper()) == A


@pytest.mark.parametrize(
    "given", ["630da", "630daa*", A + ":steps", A + "0", "*", ":", "é" * 8, "x" * 500, ""]
)
def test_anything_but_an_id_or_a_prefix_is_not_found_naming_the_form(
    ids: RunIds, given: str
) -> None:
    """Too short, a glob, another key's suffix, too long, not hex: 404 saying what an id
    looks like, on one line, the value cut short."""
    with pytest.raises(NotFoundError) as err:
        ids.resolve(given)
    assert "32 hex characters" in err.value.hint
    assert len(str(err.value)) < 200
