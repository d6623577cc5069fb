"""A Python client for the queue API, on the standard library's `http.client`. Errors come
back as `ApiError` with the API's own message and fix; a dead API is `ApiUnreachableError`.

    with FleetClient("http://127.0.0.1:8787", token="...") as fleet:
        run = fleet.submit_run({"goal": "Sign in", "selector": {"platform": "ios"}})
        for row in fleet.follow(run.id):
            print(row.index, row.outcome)

`transport` is the seam (`scheduler.client.transport`): the default, `StdlibTransport`, keeps
connections between calls, one per thread calling at the same moment (threads may share a
client), and notices a connection the server closed while it sat idle before reuse and
replaces it; tests pass `FunctionTransport(handler)`, a function playing the server. The
client builds each request (the path under the base URL's, the query URL-encoded, the bearer
token, a JSON body) and reads each answer (a status of 400 or more as the API's JSON error;
204 as None). A client for one JSON API over HTTP/1.1 is the standard library's job here,
not httpx's (which the rest of the project uses), for one figure: httpx costs `goalfleet
status` ~25 ms (~21 %) of its start, ~153 ms against its 150 ms bar (measured for issue 41
on 7431c6b, this client on httpx, reverted; docs/benchmarks.md §15). The bench's `pydantic +
httpx alone` row keeps the figure (bench/bench_cli_start.py).

The records an answer is read into (`workers.core.records`, its step models) load with the
first call that returns one, not with the client: `goalfleet status` prints `run_json` as it
came, and a client command's start is mostly imports (bench/bench_cli_start.py).

What a caller can rely on:

- No connection could be made (refused, connect timeout): nothing was sent, so the call is
  retried with backoff for up to `connect_wait_s` (an API starting), then
  `ApiUnreachableError`, whose hint is to start it.
- The URL cannot reach an API as given (`Misdirected`: a host name that does not resolve, a
  TLS handshake that failed — an https:// URL for the http API, a certificate not trusted —
  or an http:// URL for a server that speaks TLS): `ApiUnreachableError` at once, saying
  which, with the fix for that one.
- The connection dropped after the request began to go out: an idempotent request (GET,
  HEAD, OPTIONS, PUT, DELETE) is sent once more, on a new connection; any other (a POST: a
  submit, a cancel, an answer) is `ApiUnreachableError` at once, never sent twice. No answer
  within `timeout_s` is `ApiUnreachableError` at once, whatever the method.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar
from urllib.parse import quote, urlencode, urlsplit

from scheduler.client.stdlib_transport import StdlibTransport
from scheduler.client.transport import (
    ConnectError,
    DroppedError,
    Misdirected,
    NoSuchHost,
    Request,
    Response,
    TlsError,
    Transport,
    TransportError,
)
from workers.core.backoff import Backoff
from workers.core.errors import GoalfleetError

if TYPE_CHECKING:
    from pydantic import TypeAdapter

    from workers.core.memory import Remembered
    from workers.core.model import StepRow
    from workers.core.records import BatchRecord, DeviceState, Question, RunRecord

T = TypeVar("T")

IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
"""Methods whose repeat has the effect of one request (RFC 9110 §9.2.2)."""
PATH_SAFE = "/:@!$&'()*+,;="
"""What a path keeps as it is (RFC 3986's pchar and `/`); anything else is %-encoded, so an
id or key with `?`, `#`, `%` or a space names one resource."""
URL_SETTING = "GOALFLEET_API_URL (or --api)"
CONNECT_BACKOFF = Backoff(base_s=0.1, cap_s=1.0, jitter=0)
"""The pause between refused connections while `connect_wait_s` lasts: one caller's own
wait, so no jitter."""


@functools.cache
def _list_of(kind: type[T]) -> TypeAdapter[list[T]]:
    """The adapter that reads a JSON list of `kind` (one per kind, built at its first use)."""
    from pydantic import TypeAdapter  # noqa: PLC0415 - see the module's docstring

    return TypeAdapter(list[kind])  # type: ignore[valid-type]


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


def _error(resp: Response) -> ApiError:
    """An error answer as `ApiError`: the API's JSON error object, else what it said."""
    try:
        body = json.loads(resp.body)
    except ValueError:
        body = {"message": resp.body.decode(errors="replace")}
    return ApiError(resp.status, body if isinstance(body, dict) else {})


class FleetClient:
    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout_s: float = 10.0,
        connect_wait_s: float = 0.0,
        transport: Transport | None = None,
    ) -> None:
        """`connect_wait_s`: how long a call keeps retrying (with backoff) while the API
        refuses connections — an API still starting up; 0 fails at once. Only a connection
        that was never made is retried, so a POST is never sent twice. `timeout_s` bounds
        the connect and each read and write. `transport`: default `StdlibTransport` to the
        base URL's host; tests pass `FunctionTransport`."""
        parts = urlsplit(base_url)
        try:
            host, port = parts.hostname, parts.port
        except ValueError:  # a port that is no number, or out of range
            host, port = None, None
        if parts.scheme not in {"http", "https"} or not host:
            raise ValueError(f"{base_url!r}: give an http:// or https:// URL with a host")
        self.base_url = base_url.rstrip("/")
        self.connect_wait_s = connect_wait_s
        self.prefix = parts.path.rstrip("/")
        """The base URL's path, which every request's path goes under."""
        self.headers = {"Accept": "application/json", "User-Agent": "goalfleet-client"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.transport: Transport = transport or StdlibTransport(
            parts.scheme, host, port, timeout_s=timeout_s
        )

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
        self.transport.close()

    def _send(
        self,
        method: str,
        path: str,
        *,
        body: object = None,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Response:
        sent = self.headers | (headers or {})
        raw = None
        if body is not None:
            raw = json.dumps(body).encode()
            sent["Content-Type"] = "application/json"
        target = self.prefix + quote(path, safe=PATH_SAFE)
        if params:
            target += "?" + urlencode(params)
        request = Request(method, target, sent, raw)
        deadline = time.monotonic() + self.connect_wait_s
        refused = 0
        resent = False
        while True:
            try:
                return self.transport.handle(request)
            except Misdirected as exc:  # waiting would not help: say which
                raise self._misdirected(exc) from None
            except ConnectError as exc:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._unreachable(exc) from None
                time.sleep(min(CONNECT_BACKOFF.delay(refused), left))
                refused += 1
            except DroppedError as exc:
                if method in IDEMPOTENT and not resent:
                    resent = True  # once, on a new connection (the transport closed this one)
                    continue
                raise self._unreachable(exc, f"{method} {path}") from None
            except TransportError as exc:  # no answer within the timeout
                raise self._unreachable(exc, f"{method} {path}") from None

    def _unreachable(self, exc: TransportError, sent: str = "") -> ApiUnreachableError:
        waited = f" (waited {self.connect_wait_s:g} s)" if self.connect_wait_s else ""
        lost = f"{sent}: " if sent else ""
        cause = f"{type(exc).__name__}: {exc}".replace("\n", " ")[:200]
        return ApiUnreachableError(
            f"cannot reach the goalfleet API at {self.base_url}{waited}: {lost}{cause}",
            hint="start it with `goalfleet api`, or set GOALFLEET_API_URL (or --api) to where "
            "it listens",
        )

    def _misdirected(self, exc: Misdirected) -> ApiUnreachableError:
        said = str(exc).replace("\n", " ")[:200]
        if isinstance(exc, NoSuchHost):
            what, fix = "its host name does not resolve", f"check the host name in {URL_SETTING}"
        elif isinstance(exc, TlsError) and "CERTIFICATE_VERIFY_FAILED" in said:
            what = "its TLS certificate is not trusted here"
            fix = "add its CA to this host's store (SSL_CERT_FILE), or fix the certificate"
        elif isinstance(exc, TlsError):
            what = "it does not speak TLS"
            fix = f"use an http:// URL in {URL_SETTING}: goalfleet api serves plain http"
        else:
            what, fix = "it speaks TLS", f"use an https:// URL in {URL_SETTING}"
        return ApiUnreachableError(
            f"cannot reach the goalfleet API at {self.base_url}: {what} "
            f"({type(exc).__name__}: {said})",
            hint=fix,
        )

    def _call(self, method: str, path: str, **kw: Any) -> Any:  # noqa: ANN401 - JSON
        resp = self._send(method, path, **kw)
        if resp.status >= 400:  # noqa: PLR2004 - HTTP error statuses
            raise _error(resp)
        if resp.status == 204:  # noqa: PLR2004 - no content
            return None
        return json.loads(resp.body)

    # -- the API ---------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """/health's answer, up (200) or down (503) alike."""
        out: dict[str, Any] = json.loads(self._send("GET", "/health").body)
        return out

    def submit_run(self, body: dict[str, Any], *, idempotency_key: str | None = None) -> RunRecord:
        from workers.core.records import RunRecord  # noqa: PLC0415 - see the module's docstring

        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        return RunRecord.model_validate(self._call("POST", "/v1/runs", body=body, headers=headers))

    def submit_batch(
        self, body: dict[str, Any], *, idempotency_key: str | None = None
    ) -> BatchRecord:
        from workers.core.records import BatchRecord  # noqa: PLC0415

        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        return BatchRecord.model_validate(
            self._call("POST", "/v1/batches", body=body, headers=headers)
        )

    def run_json(self, run_id: str) -> dict[str, Any]:
        """`GET /v1/runs/{id}` as the API answered it: the run's JSON object (the fields of
        `RunRecord`), no model built."""
        out: dict[str, Any] = self._call("GET", f"/v1/runs/{run_id}")
        return out

    def run(self, run_id: str) -> RunRecord:
        from workers.core.records import RunRecord  # noqa: PLC0415

        return RunRecord.model_validate(self.run_json(run_id))

    def steps(self, run_id: str, *, after: int = 0) -> list[StepRow]:
        from workers.core.model import StepRow  # noqa: PLC0415

        return _list_of(StepRow).validate_python(
            self._call("GET", f"/v1/runs/{run_id}/steps", params={"after": str(after)})
        )

    def runs(self, **filters: str | float | None) -> tuple[list[RunRecord], str | None]:
        """One page of `GET /v1/runs` (filters as its query; None ones are left out): the
        runs and the next page's cursor (None: the last page)."""
        params = {k: str(v) for k, v in filters.items() if v is not None}
        page = self._call("GET", "/v1/runs", params=params)
        from workers.core.records import RunRecord  # noqa: PLC0415

        return _list_of(RunRecord).validate_python(page["runs"]), page["next"]

    def screenshot(self, run_id: str, index: int) -> bytes:
        """Step `index`'s picture (PNG bytes); `ApiError` 404 when it has none."""
        resp = self._send("GET", f"/v1/runs/{run_id}/steps/{index}/screenshot")
        if resp.status >= 400:  # noqa: PLR2004 - HTTP error statuses
            raise _error(resp)
        return resp.body

    def video(self, run_id: str) -> bytes:
        """The run's video (WebM bytes, secrets painted over); `ApiError` 404 when it has none."""
        resp = self._send("GET", f"/v1/runs/{run_id}/video")
        if resp.status >= 400:  # noqa: PLR2004 - HTTP error statuses
            raise _error(resp)
        return resp.body

    def final_screenshot(self, run_id: str) -> bytes:
        """The picture of the screen a failed run ended on (its failure report's); `ApiError`
        404 when it has none."""
        resp = self._send("GET", f"/v1/runs/{run_id}/final/screenshot")
        if resp.status >= 400:  # noqa: PLR2004 - HTTP error statuses
            raise _error(resp)
        return resp.body

    def cancel(self, run_id: str) -> RunRecord:
        from workers.core.records import RunRecord  # noqa: PLC0415

        return RunRecord.model_validate(self._call("POST", f"/v1/runs/{run_id}/cancel"))

    def batch(self, batch_id: str) -> BatchRecord:
        from workers.core.records import BatchRecord  # noqa: PLC0415

        return BatchRecord.model_validate(self._call("GET", f"/v1/batches/{batch_id}"))

    def batch_runs(self, batch_id: str) -> list[RunRecord]:
        from workers.core.records import RunRecord  # noqa: PLC0415

        return _list_of(RunRecord).validate_python(
            self._call("GET", f"/v1/batches/{batch_id}/runs")
        )

    def add_schedule(self, body: dict[str, Any]) -> dict[str, Any]:
        """`POST /v1/schedules`: a recurring batch or suite; the schedule as stored."""
        out: dict[str, Any] = self._call("POST", "/v1/schedules", body=body)
        return out

    def schedules(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = self._call("GET", "/v1/schedules")
        return out

    def remove_schedule(self, schedule_id: str) -> None:
        self._call("DELETE", f"/v1/schedules/{schedule_id}")

    def devices(self) -> list[DeviceState]:
        from workers.core.records import DeviceState  # noqa: PLC0415

        return _list_of(DeviceState).validate_python(self._call("GET", "/v1/devices"))

    def questions(self) -> list[Question]:
        from workers.core.records import Question  # noqa: PLC0415

        return _list_of(Question).validate_python(self._call("GET", "/v1/questions"))

    def answer(self, run_id: str, body: dict[str, object]) -> RunRecord:
        from workers.core.records import RunRecord  # noqa: PLC0415

        return RunRecord.model_validate(self._call("POST", f"/v1/runs/{run_id}/answer", body=body))

    def memory(self, *, goal: str | None = None) -> list[Remembered]:
        from workers.core.memory import Remembered  # noqa: PLC0415

        params = {"goal": goal} if goal else {}
        return _list_of(Remembered).validate_python(self._call("GET", "/v1/memory", params=params))

    def memory_entry(self, key: str) -> Remembered:
        from workers.core.memory import Remembered  # noqa: PLC0415

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
