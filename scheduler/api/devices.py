"""`GET /v1/devices`: every registered device, its state and (where the token may read it)
its run."""

from __future__ import annotations

from fastapi import APIRouter

from scheduler.api.bodies import BoundedRoute
from scheduler.api.views import Who, need, shown_devices
from scheduler.service.fleet import Fleet
from workers.core.access import Action
from workers.core.records import DeviceState


def devices_router(fleet: Fleet) -> APIRouter:
    router = APIRouter(route_class=BoundedRoute)

    @router.get("/v1/devices", response_model=list[DeviceState])
    def devices(who: Who) -> list[DeviceState]:
        need(who, Action.DEVICES)
        return shown_devices(who, fleet.devices(), fleet.store.owners)

    return router
