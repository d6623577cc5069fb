"""A Python client for the queue API. Errors come back as `ApiError` with the API's own
message and fix; a dead API is `ApiUnreachableError`.

    with FleetClient("http://127.0.0.1:8787", token="...") as fleet:
        run = fleet.submit_run({"goal": "Sign in", "selector": {"platform": "ios"}})
        for row in fleet.follow(run.id):
            print(row.index, row.outcome)

Kept-alive connections (`scheduler.client.keepalive`, the standard library's `http.client`); threads
may share a client.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from types import TracebackType
from typing import Any, Self

from pydantic import TypeAdapter

from scheduler.client.keepalive import KeepAlive, LostError, NotConnectedError
from workers.core.errors import GoalfleetError
from workers.core.memory import Remembered
from workers.core.model import StepRow
from workers.core.records import BatchRecord, DeviceState, Question, RunRecord

_STEPS = TypeAdapter(list[StepRow])
_DEVICES = TypeAdapter(list[DeviceState])
_MEMORY = TypeAdapter(list[Remembered])
_QUESTIONS = TypeAdapter(list[Question])
_RUNS = TypeAdapter(list[RunRecord])


class ApiError(GoalfleetError):
    """The API answered with an error status."""

    code = "API"

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        message = str(body.get("message") or body.get("detail") or f"HTTP {status}")
        super().__init__(message, code=str(body.get("error", "API")), hint=str(body.get("fix", "")))
        self.status = status
        self.body = body


class ApiUnreachableError(GoalfleetError):
    code = "API_UNREACHABLE"


class FleetClient:
    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout_s: float = 10.0,
        connect_wait_s: float = 0.0,
    ) -> None:
        """`connect_wait_s`: how long a call keeps retrying (with backoff) while the API
        refuses connections — an API still starting up; 0 fails at once. Only a connection
        that was never made is retried, so a POST is never sent twice."""
        self.connect_wait_s = connect_wait_s
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = KeepAlive(base_url, headers=headers, timeout_s=timeout_s)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def _send(
        self,
        method: str,
        path: str,
        *,
        body: object = None,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        raw = json.dumps(body).encode() if body is not None else None
        deadline = time.monotonic() + self.connect_wait_s
        pause = 0.1
        while True:
            try:
                return self.http.request(method, path, body=raw, params=params, headers=headers)
            except NotConnectedError as exc:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._unreachable(exc) from None
                time.sleep(min(pause, left))
                pause = min(pause * 2, 1.0)
            except LostError as exc:
                raise self._unreachable(exc) from None

    def _unreachable(self, exc: OSError) -> ApiUnreachableError:
        waited = f" (waited {self.connect_wait_s:g} s)" if self.connect_wait_s else ""
        return ApiUnreachableError(
            f"cannot reach the goalfleet API at {self.http.base_url}{waited}: {exc}",
            hint="start it with `goalfleet api`, or set GOALFLEET_API_URL (or --api) to where "
            "it listens",
        )

    def _call(self, method: str, path: str, **kw: Any) -> Any:  # noqa: ANN401 - JSON
        status, data = self._send(method, path, **kw)
        if status >= 400:  # noqa: PLR2004 - HTTP error statuses
            try:
                body = json.loads(data)
            except ValueError:
                body = {"message": data.decode(errors="replace")}
            raise ApiError(status, body if isinstance(body, dict) else {})
        if status == 204:  # noqa: PLR2004 - no content
            return None
        return json.loads(data)

    # -- the API ---------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """/health's answer, up (200) or down (503) alike."""
        out: dict[str, Any] = json.loads(self._send("GET", "/health")[1])
        return out

    def submit_run(self, body: dict[str, Any], *, idempotency_key: str | None = None) -> RunRecord:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        return RunRecord.model_validate(self._call("POST", "/v1/runs", body=body, headers=headers))

    def submit_batch(
        self, body: dict[str, Any], *, idempotency_key: str | None = None
    ) -> BatchRecord:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        return BatchRecord.model_validate(
            self._call("POST", "/v1/batches", body=body, headers=headers)
        )

    def run(self, run_id: str) -> RunRecord:
        return RunRecord.model_validate(self._call("GET", f"/v1/runs/{run_id}"))

    def steps(self, run_id: str, *, after: int = 0) -> list[StepRow]:
        return _STEPS.validate_python(
            self._call("GET", f"/v1/runs/{run_id}/steps", params={"after": str(after)})
        )

    def runs(self, **filters: str | float | None) -> tuple[list[RunRecord], str | None]:
        """One page of `GET /v1/runs` (filters as its query; None ones are left out): the
        runs and the next page's cursor (None: the last page)."""
        params = {k: str(v) for k, v in filters.items() if v is not None}
        page = self._call("GET", "/v1/runs", params=params)
        return _RUNS.validate_python(page["runs"]), page["next"]

    def screenshot(self, run_id: str, index: int) -> bytes:
        """Step `index`'s picture (PNG bytes); `ApiError` 404 when it has none."""
        status, data = self._send("GET", f"/v1/runs/{run_id}/steps/{index}/screenshot")
        if status >= 400:  # noqa: PLR2004 - HTTP error statuses
            raise ApiError(status, json.loads(data))
        return data

    def cancel(self, run_id: str) -> RunRecord:
        return RunRecord.model_validate(self._call("POST", f"/v1/runs/{run_id}/cancel"))

    def batch(self, batch_id: str) -> BatchRecord:
        return BatchRecord.model_validate(self._call("GET", f"/v1/batches/{batch_id}"))

    def batch_runs(self, batch_id: str) -> list[RunRecord]:
        return _RUNS.validate_python(self._call("GET", f"/v1/batches/{batch_id}/runs"))

    def devices(self) -> list[DeviceState]:
        return _DEVICES.validate_python(self._call("GET", "/v1/devices"))

    def questions(self) -> list[Question]:
        return _QUESTIONS.validate_python(self._call("GET", "/v1/questions"))

    def answer(self, run_id: str, body: dict[str, object]) -> RunRecord:
        return RunRecord.model_validate(self._call("POST", f"/v1/runs/{run_id}/answer", body=body))

    def memory(self, *, goal: str | None = None) -> list[Remembered]:
        params = {"goal": goal} if goal else {}
        return _MEMORY.validate_python(self._call("GET", "/v1/memory", params=params))

    def memory_entry(self, key: str) -> Remembered:
        return Remembered.model_validate(self._call("GET", f"/v1/memory/{key}"))

    def forget(self, key: str) -> None:
        self._call("DELETE", f"/v1/memory/{key}")

    def forget_many(self, *, goal: str | None = None) -> int:
        params: dict[str, str] = {"goal": goal} if goal else {"all": "true"}
        body = self._call("DELETE", "/v1/memory", params=params)
        return int(body["forgotten"])

    # -- helpers ---------------------------------------------------------------------------

    def follow(
        self, run_id: str, *, poll_s: float = 0.2, timeout_s: float | None = None
    ) -> Iterator[StepRow]:
        """Yield step rows as they are written, until the run ends."""
        seen = 0
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            run = self.run(run_id)
            for row in self.steps(run_id, after=seen):
                seen = max(seen, row.index)
                yield row
            if run.status.terminal:
                return
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"run {run_id} still {run.status.value} after {timeout_s} s")
            time.sleep(poll_s)

    def wait(self, run_id: str, *, poll_s: float = 0.2, timeout_s: float = 300.0) -> RunRecord:
        deadline = time.monotonic() + timeout_s
        while True:
            run = self.run(run_id)
            if run.status.terminal:
                return run
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {run_id} still {run.status.value} after {timeout_s} s")
            time.sleep(poll_s)

    def wait_batch(
        self, batch_id: str, *, poll_s: float = 0.3, timeout_s: float = 600.0
    ) -> BatchRecord:
        deadline = time.monotonic() + timeout_s
        while True:
            batch = self.batch(batch_id)
            if batch.complete:
                return batch
            if time.monotonic() > deadline:
                raise TimeoutError(f"batch {batch_id} not complete after {timeout_s} s")
            time.sleep(poll_s)
