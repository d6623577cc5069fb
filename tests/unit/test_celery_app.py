"""What docs/fleet.md promises of the Celery app, read from a task as Celery resolves it."""

from __future__ import annotations

from workers.fleet.celery_app import make_celery
from workers.settings import Settings


def test_the_broker_delivers_at_most_once() -> None:
    """Acknowledged on receipt (no acks late), and kombu's ack emulation off: no unacked hash,
    no visibility timeout, no restore; every redelivery is the fleet's (docs/design.md)."""
    app = make_celery(Settings(redis_url="redis://127.0.0.1:9/0"))

    def body() -> None:
        return None

    task = app.task(name="t")(body)
    assert task.acks_late is False
    assert app.conf.broker_transport_options["ack_emulation"] is False
    assert "visibility_timeout" not in app.conf.broker_transport_options


def test_behind_sentinels_the_broker_asks_them_for_the_master() -> None:
    """`redis_sentinels` makes kombu's `sentinel://` list, one per sentinel, each with the
    master's password and DB number from `redis_url`, and selects the Sentinel variant of the
    Sentinel transport; without, the plain one on `redis_url`."""
    settings = Settings(
        redis_url="redis://:pw@ignored:1/3",
        redis_sentinels="10.0.0.5:26379,10.0.0.6:26380",
        redis_sentinel_master="farm",
        redis_sentinel_password="spw",
    )
    app = make_celery(settings)
    assert app.conf.broker_url == (
        "sentinel://:pw@10.0.0.5:26379/3;sentinel://:pw@10.0.0.6:26380/3"
    )
    assert app.conf.result_backend == app.conf.broker_url
    assert app.conf.broker_transport == "sentinel"
    for options in (
        app.conf.broker_transport_options,
        app.conf.result_backend_transport_options,
    ):
        assert options["master_name"] == "farm"
        assert options["sentinel_kwargs"]["password"] == "spw"
        assert options["sentinel_kwargs"]["retry"]._retries == 0  # the list is the retry
    plain = make_celery(Settings(redis_url="redis://127.0.0.1:9/0"))
    assert plain.conf.broker_transport == "redis"
    assert "master_name" not in plain.conf.broker_transport_options
