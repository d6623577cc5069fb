"""A fleet run takes pictures when its device does: the wrappers a worker puts around a
device (logs and metrics, then the lease's fence) keep its optional camera
(`ScreenshotPort`), the fence checked before each picture, and add none to a device that has
no camera. (Before, both wrappers hid it: every fleet row said "this device takes no
screenshots".)"""

from __future__ import annotations

import time

import pytest

from workers.core.model import Platform
from workers.core.records import DeviceInfo
from workers.core.shots import ScreenshotPort
from workers.devices.sim import make_sim_device
from workers.fleet.fence import Fence, FencedDevice, LeaseLostError, open_fenced
from workers.telemetry.setup import WorkerTelemetry


def _fence() -> Fence:
    fence = Fence("d1", "h", lease_s=30)
    fence.granted(time.monotonic_ns())
    return fence


def test_the_worker_s_wrappers_keep_the_camera_behind_the_fence() -> None:
    telemetry = WorkerTelemetry(DeviceInfo(id="d1", platform=Platform.IOS), observers=())
    opener = telemetry.wrap_opener(lambda _rid: make_sim_device("sim:signin-ios"))
    fence = _fence()
    device = open_fenced(opener, "r1", fence)
    assert isinstance(device, ScreenshotPort)
    device.snapshot()
    assert device.screenshot().png.startswith(b"\x89PNG")
    fence.lose()
    with pytest.raises(LeaseLostError):
        device.screenshot()


def test_a_device_without_a_camera_gets_none() -> None:
    fence = _fence()
    # FencedDevice passes on the DevicePort's methods only: a device with no camera
    blind = FencedDevice(make_sim_device("sim:signin-ios"), fence)
    telemetry = WorkerTelemetry(DeviceInfo(id="d1", platform=Platform.IOS), observers=())
    assert not isinstance(telemetry.wrap_device(blind), ScreenshotPort)
    assert not isinstance(open_fenced(lambda _rid: blind, "r2", fence), ScreenshotPort)
