"""The switch that keeps tests off live models (as pydantic-ai's `ALLOW_MODEL_REQUESTS`).

`InstructorDecider` reads it before every request: while it is False, a request to anything but
a loopback address is refused before it is sent. The test conftest sets it False for every
test. It lives apart from `workers.decide.instructor` so that setting it imports no model SDK
(importing `openai` alone takes ~1.7 s).
"""

from __future__ import annotations

ALLOW_MODEL_REQUESTS = True
