"""What the store-level dispatch tests share (imported by name, as `storekit`): register a
device as a worker process would, and end a run as its worker would."""

from __future__ import annotations

from scheduler.store.runs import FleetStore
from workers.core.model import Platform, RunResult, RunStatus
from workers.core.records import DeviceInfo, RunRecord
from workers.fleet.keys import lease_holder, worker_name
from workers.fleet.state.runs import RunStore
from workers.fleet.state.states import Failure


def register(store: FleetStore, did: str, **labels: str) -> str:
    """Register iOS device `did` with `labels`; returns its lease holder token."""
    info = DeviceInfo(id=did, platform=Platform.IOS, os_version="17.5", labels=labels)
    holder = lease_holder(worker_name(did))
    store.registry.register(info, holder, lease_s=30)
    return holder


def loaded(store: FleetStore, run_id: str) -> RunRecord:
    record = store.load(run_id)
    assert record is not None
    return record


def finish(store: FleetStore, rs: RunStore, run_id: str, did: str) -> None:
    """Claim `run_id` on `did` and end it `done`, freeing the device."""
    claim = rs.claim(run_id, did, f"w@{did}", cap=3)
    done = RunResult(status=RunStatus.DONE, goal="g")
    assert rs.finish(
        loaded(store, run_id),
        claim.token,
        done,
        failure=Failure.NONE,
        quarantine_after=3,
        retention_s=60,
    )
