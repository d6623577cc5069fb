"""The one retry delay of the fleet: exponential, capped, with jitter. Every call the fleet
retries waits by it: a device command's transient error (the loop), a heartbeat during an
outage (presence), a Redis command during one (`workers.fleet.outages.WaitOutOutages`), the
broker's delivery, the dispatcher's loop and the Python client's wait for an API still
starting (`scheduler.client.api_client`)."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    """Wait n (from 0) is drawn from [d * (1 - jitter), d], where d = min(cap_s, base_s *
    2**n). Bounded by `cap_s`; the jitter keeps a fleet of workers from retrying in step (0:
    exactly d, where nothing else retries in step with it, as one device's own command)."""

    base_s: float = 0.1
    cap_s: float = 2.0
    jitter: float = 0.5

    def longest(self, n: int) -> float:
        """Wait n at its longest (d: the jitter only shortens it)."""
        return min(self.cap_s, self.base_s * 2.0 ** min(max(n, 0), 30))

    def delay(self, n: int, rng: random.Random | None = None) -> float:
        d = self.longest(n)
        if not self.jitter:
            return d
        return d * (1 - self.jitter) + (rng or random).uniform(0.0, d * self.jitter)
