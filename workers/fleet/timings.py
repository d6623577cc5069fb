"""The fleet's timing settings, published at start so that no worker runs with other ones.

Every worker restores *any* unacked message older than its own visibility timeout, whichever
device's it is: a worker with a shorter one than the rest of the fleet puts another device's
in-flight run back on the queue while it still runs. Time limits that differ make a run's fate
depend on which worker took it. So at start:

- the API and the scheduler publish their timings as the fleet's (they define it: restart them
  with new values first to change the fleet's; a change is logged once);
- a worker publishes its own and compares them with the fleet's: the first process of a fleet
  defines them, and a worker whose visibility timeout or time limits differ refuses to start
  with one line naming the setting (`TimingsMismatchError`, a `ConfigError`: exit 2).

`{p}:timings` (hash): `fleet` → the checked timings (JSON); `<who>` → each publisher's timings,
lease and heartbeat included, with its host, pid and time (for an operator's eyes).
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Mapping
from typing import Literal

import redis
import structlog

from workers.core.errors import ConfigError
from workers.fleet.connections import store_client
from workers.fleet.keys import Keys
from workers.fleet.state.scripts import RedisStore, Script
from workers.settings import Settings

log = structlog.stdlib.get_logger("goalfleet.timings")

CHECKED = ("visibility_timeout_s", "soft_time_limit_s", "time_limit_s")
"""What every worker must share with the fleet."""
SHOWN = (*CHECKED, "lease_s", "heartbeat_interval_s")
"""What each process publishes about itself."""

Role = Literal["api", "scheduler", "worker"]


class TimingsMismatchError(ConfigError, code="TIMINGS_MISMATCH"):
    """This worker's visibility timeout or time limits differ from the fleet's."""


def checked(settings: Settings) -> dict[str, float]:
    """The timings a worker must share with the fleet, as published."""
    return {name: float(getattr(settings, name)) for name in CHECKED}


def _json(values: Mapping[str, object]) -> str:
    return json.dumps(values, sort_keys=True, separators=(",", ":"))


class FleetTimings(RedisStore):
    _publish = Script("publish_timings")

    def publish(self, settings: Settings, *, role: Role, who: str) -> None:
        """Publish this process's timings; a worker's must equal the fleet's (or define them).

        Raises `TimingsMismatchError` for a worker whose timings differ (nothing written)."""
        ours = checked(settings)
        mine = {
            **{name: float(getattr(settings, name)) for name in SHOWN},
            "role": role,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "at": round(time.time(), 3),
        }
        defines = "0" if role == "worker" else "1"
        before = self._publish(keys=[self.k.timings], args=[_json(ours), who, _json(mine), defines])
        fleet = json.loads(before) if before else None
        if fleet is None or fleet == ours:
            return
        if role == "worker":
            name = next(n for n in CHECKED if fleet.get(n) != ours[n])
            raise TimingsMismatchError(
                f"GOALFLEET_{name.upper()} is {ours[name]:g} here but {fleet.get(name):g} in "
                f"the fleet (key prefix {self.k.prefix}); start this worker with the fleet's "
                + ", ".join(f"{n}={fleet.get(n):g}" for n in CHECKED)
                + ", or restart the API and the scheduler with new ones first"
            )
        log.warning(
            "fleet_timings_changed",
            by=who,
            before=fleet,
            after=ours,
            hint="restart every worker with the new timings",
        )


def publish_at_start(settings: Settings, *, role: Role, who: str) -> None:
    """`publish` over a connection of its own. The API and the scheduler start while Redis is
    down too (they wait for it): for them a Redis error is logged, not raised."""
    client = store_client(settings)
    try:
        FleetTimings(client, Keys(settings.key_prefix)).publish(settings, role=role, who=who)
    except redis.RedisError as exc:
        if role == "worker":
            raise
        log.warning("timings_not_published", role=role, error=str(exc))
    finally:
        client.close()
