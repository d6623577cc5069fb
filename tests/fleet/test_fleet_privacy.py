"""The outside report through the fleet: a cookie dialog, then phone sign-in with a one-time
code the caller passes as a plain-field secret. The run ends `done` on evidence, the decision
memory learns only that verified run, a wrong code ends `blocked` with its banner after one
Verify, and no typed value is stored anywhere in Redis."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from conftest import BAD_OTP
from redis_values import keys_holding

from scheduler.client.api_client import FleetClient
from scheduler.local.fleet import LocalFleet, SimWorker
from workers.core.model import ActionKind, RunStatus
from workers.devices.sim.apps import OTP_CODE, WRONG_CODE

pytestmark = pytest.mark.fleet

PHONE = "5551234567"
DEVICE = "privacy-1"


def otp_run(secret: str, **extra: object) -> dict[str, object]:
    return {
        "goal": "Sign in",
        "device": DEVICE,
        "inputs": {"phone": PHONE},
        "secrets": {"code": {"ref": f"env:{secret}", "plain_field": True}},
        **extra,
    }


@pytest.fixture(scope="module")
def privacy_device(fleet: LocalFleet) -> Iterator[str]:
    fleet.start_worker(SimWorker(DEVICE, "android", "14", "Pixel 8", {"pool": "privacy"},
                                 app="privacy"))  # fmt: skip
    fleet.wait_devices([DEVICE], timeout_s=60)
    yield DEVICE
    fleet.stop_worker(DEVICE)


def test_cookie_dialog_then_phone_code_is_done_and_leaks_nothing(
    api: FleetClient, db: redis.Redis, privacy_device: str
):
    run = api.wait(api.submit_run(otp_run("FLEET_OTP", done_when="You're in")).id, timeout_s=60)
    assert run.status is RunStatus.DONE, run.reason
    steps = api.steps(run.id)
    assert steps[0].screen == "Your privacy"
    assert steps[-1].screen == "You're in"
    names = [s.decision.reason for s in steps if s.decision and s.action]
    assert "Manage choices" not in " ".join(names)
    assert keys_holding(db, OTP_CODE) == []  # the secret: nowhere
    # the plain input: in the run's request, which the caller gave, and in no step or memory
    # of this fleet (another test's fleet on the same server, e.g. the history's `gfh`, may
    # hold its own run of the same phone)
    ours = [k for k in keys_holding(db, PHONE) if k.startswith("gft:")]
    assert ours == [f"gft:run:{run.id}"]

    # the second run passes from memory: what it learned was the verified run
    again = api.wait(api.submit_run(otp_run("FLEET_OTP", done_when="You're in")).id, timeout_s=60)
    assert again.status is RunStatus.DONE, again.reason
    again_steps = api.steps(again.id)
    assert any(s.memory and s.memory.outcome == "hit" for s in again_steps), [
        (s.screen, s.memory) for s in again_steps
    ]
    assert again_steps[0].decision is not None
    assert not again_steps[0].decision.done  # the dialog was pressed, never taken as done


def test_a_wrong_code_is_blocked_with_its_banner_after_one_verify(
    api: FleetClient, privacy_device: str
):
    run = api.wait(api.submit_run(otp_run("FLEET_BAD_OTP", memory=False)).id, timeout_s=60)
    assert run.status is RunStatus.BLOCKED
    assert WRONG_CODE in run.reason
    verify = [
        s
        for s in api.steps(run.id)
        if s.action and s.action.kind is ActionKind.PRESS and s.screen.startswith("Enter the code")
    ]
    assert len(verify) == 1
    assert BAD_OTP not in run.model_dump_json()
