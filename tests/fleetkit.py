"""What the test fleets of tests/fleet and tests/observability share (imported by name, as
`fleetkit`): settings whose timings let a test see a heartbeat, a lost lease and a dispatch
within seconds. The chaos fleet's own, shorter limits are `chaoskit.chaos_settings`."""

from __future__ import annotations

from pydantic import SecretStr

from workers.settings import Settings

QUICK: dict[str, object] = {
    "heartbeat_interval_s": 0.5,
    "lease_s": 3.0,
    "dispatch_interval_s": 0.3,
    "soft_time_limit_s": 60,
    "time_limit_s": 90,
    "retention_s": 3600,
}


def quick_settings(redis_url: str, *, key_prefix: str, token: str, **over: object) -> Settings:
    """A test fleet's settings: its own Redis and key prefix, one API token (`name:token`
    names it), the `QUICK` timings, then `over`."""
    base = {"redis_url": redis_url, "key_prefix": key_prefix, "api_tokens": [SecretStr(token)]}
    return Settings.model_validate({**base, **QUICK, **over})
