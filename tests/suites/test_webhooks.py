"""Webhooks against a real HTTP receiver on loopback, from a real fleet (own Redis, API and
scheduler in threads, two `goalfleet worker` processes: the `flaky` sim app and the `twins`
app, whose account chooser the rules decider cannot decide): a suite with its own webhook and
a fleet-wide one; the first attempt of the flaky flow fails (run.failed, retrying), the twins
run waits for a person (question.waiting), the batch finishes (batch.finished). Every call is
signed (HMAC-SHA256 over the timestamp and body), a 500 is tried again, and no body holds a
secret or an input's value. The worker never waits on a call: the receiver stalls its first
answer and the runs finish meanwhile."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from fleetkit import quick_settings

from scheduler.local.fleet import LocalFleet, SimWorker
from scheduler.local.redis import LocalRedis
from scheduler.service.webhooks import DELIVERY, EVENT, SIGNATURE, verify
from scheduler.suites.flows import parse
from workers.core.model import RunStatus

TOKEN = "hooks-token-31"
SIGNING_KEY = "whsec-Signing-Key-8812"
SECRET_VALUE = "Hooks-pw-Secret-4402"
EMAIL = "grace.hooks@example.com"


class Receiver:
    """A loopback HTTP server that records every call; the first call of each delivery to
    `/suite` is answered 500 after a stall (so the sender must retry, and must not wait)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, object]] = []
        self.lock = threading.Lock()
        seen: set[str] = set()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                delivery = self.headers[DELIVERY]
                with outer.lock:
                    outer.calls.append(
                        {"path": self.path, "headers": dict(self.headers), "body": body,
                         "at": time.time()}
                    )  # fmt: skip
                    first = self.path == "/suite" and delivery not in seen
                    if self.path == "/suite":
                        seen.add(delivery)
                if first:
                    time.sleep(0.5)
                self.send_response(500 if first else 204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def events(self, path: str) -> list[dict[str, object]]:
        with self.lock:
            return [c for c in self.calls if c["path"] == path]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()


@pytest.fixture(scope="module")
def hooked_fleet(
    receiver: Receiver, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalFleet]:
    workers = [
        SimWorker("hook-flaky", "ios", "17.5", labels={"app": "flaky"}, app="flaky"),
        SimWorker("hook-twins", "android", "14", labels={"app": "twins"}, app="twins"),
    ]
    with LocalRedis() as server:
        settings = quick_settings(
            server.url,
            key_prefix="gfhook",
            token=TOKEN,
            webhook_secret=SIGNING_KEY,
            webhook_url=f"{receiver.url}/fleet",
            webhook_allow="127.0.0.0/8",  # the suite's own webhook is this loopback receiver
        )
        env = {"GOALFLEET_SECRET_HOOK_PW": SECRET_VALUE}
        logs = tmp_path_factory.mktemp("hook-logs")
        with LocalFleet(settings, log_dir=logs, extra_env=env) as f:
            yield f.start_all(workers, timeout_s=90)


def _signed_and_clean(c: dict[str, object]) -> None:
    """Signed as a receiver checks it (by the documented scheme, not through our own code), and
    holding no secret, signing key, token or input value in its body or headers."""
    body = bytes(c["body"])
    headers = {str(k).lower(): str(v) for k, v in c["headers"].items()}  # type: ignore[union-attr]
    # as a receiver checks it, by the documented scheme (not through our own code)
    parts = dict(p.split("=", 1) for p in headers[SIGNATURE.lower()].split(","))
    assert abs(time.time() - int(parts["t"])) < 60
    mac = hmac.new(SIGNING_KEY.encode(), parts["t"].encode() + b"." + body, hashlib.sha256)
    assert hmac.compare_digest(parts["v1"], mac.hexdigest())
    assert verify(SIGNING_KEY, headers[SIGNATURE.lower()], body, now=time.time())
    assert not verify("another-key", headers[SIGNATURE.lower()], body, now=time.time())
    assert not verify(SIGNING_KEY, headers[SIGNATURE.lower()], body + b" ", now=time.time())
    for secret in (SECRET_VALUE, SIGNING_KEY, EMAIL, TOKEN):
        assert secret.encode() not in body
        assert all(secret not in v for v in headers.values())


def _got(receiver: Receiver, path: str, event: str) -> bool:
    return any(c["headers"][EVENT] == event for c in receiver.events(path))  # type: ignore[index]


def _wait(what: str, check: object, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_webhooks_are_signed_retried_and_hold_no_secret(
    hooked_fleet: LocalFleet, receiver: Receiver
) -> None:
    flows = parse(f"""\
suite: hooks
webhook: {receiver.url}/suite
defaults:
  inputs: {{email: {EMAIL}}}
  secrets: {{password: env:HOOK_PW}}
  done_when: Welcome
flows:
  - name: flaky
    goal: Sign in
    retries: 1
    matrix: {{labels: {{app: flaky}}}}
    params: {{ask_person: false}}
  - name: chooser
    goal: Sign in
    matrix: {{labels: {{app: twins}}}}
""")
    with hooked_fleet.client() as api:
        batch = api.submit_batch(flows.body)
        runs = api.batch_runs(batch.id)
        twins = next(r for r in runs if r.flow == "chooser")
        _wait(
            "the twins run to wait", lambda: api.run(twins.id).status is RunStatus.AWAITING_ANSWER
        )
        _wait("question.waiting", lambda: _got(receiver, "/suite", "question.waiting"))
        api.answer(twins.id, {"target": "Continue as ada"})
        api.wait_batch(batch.id, timeout_s=60)
        final = api.batch(batch.id)
        runs_after = api.batch_runs(batch.id)
    assert final.counts == {"blocked": 1, "done": 2}
    for path in ("/suite", "/fleet"):
        _wait(f"batch.finished at {path}", lambda p=path: _got(receiver, p, "batch.finished"))
    time.sleep(1.0)  # any last retry lands

    suite = receiver.events("/suite")
    fleet = receiver.events("/fleet")
    by_event: dict[str, list[dict[str, object]]] = {}
    for c in suite:
        by_event.setdefault(str(c["headers"][EVENT]), []).append(c)
    assert set(by_event) == {"run.failed", "question.waiting", "batch.finished"}
    # each delivery to /suite came twice: the 500, then the retry, with the same body
    for event, calls in by_event.items():
        deliveries: dict[str, list[bytes]] = {}
        for c in calls:
            deliveries.setdefault(str(c["headers"][DELIVERY]), []).append(bytes(c["body"]))
        for d, bodies in deliveries.items():
            assert len(bodies) == 2, (event, d, len(bodies))
            assert bodies[0] == bodies[1]
    # the fleet-wide URL got each event once (it answered 204 the first time)
    assert sorted(str(c["headers"][EVENT]) for c in fleet) == sorted(
        {str(c["headers"][DELIVERY]): str(c["headers"][EVENT]) for c in suite}.values()
    )
    failed = json.loads(bytes(by_event["run.failed"][0]["body"]))
    assert failed["run"]["flow"] == "flaky"
    assert (failed["run"]["status"], failed["run"]["failure"]) == ("blocked", "decision")
    assert failed["run"]["retrying"] is True
    question = json.loads(bytes(by_event["question.waiting"][0]["body"]))
    assert question["run"]["id"] == twins.id
    assert question["question"]["step"] >= 1
    finished = json.loads(bytes(by_event["batch.finished"][0]["body"]))
    assert finished["batch"]["id"] == batch.id
    assert finished["batch"]["suite"] == "hooks"
    assert finished["batch"]["counts"] == {"blocked": 1, "done": 2}
    for c in suite + fleet:
        _signed_and_clean(c)
    # the worker never waited on a call: the flaky flow's second attempt ran and finished
    # while the first attempt's run.failed call was still stalled, failed and waiting to retry
    retried = next(r for r in runs_after if r.flow == "flaky" and r.retry == 1)
    assert retried.status is RunStatus.DONE
    second_call = sorted(float(c["at"]) for c in by_event["run.failed"])[1]  # type: ignore[arg-type]
    assert retried.finished_at is not None
    assert retried.finished_at < second_call
