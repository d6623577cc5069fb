"""Routing picks an idle, healthy, matching, least-loaded device, or keeps the run pending."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scheduler.dispatch.routing import IdleByClass, choose, matching
from workers.core.model import Platform
from workers.core.records import DeviceInfo, DeviceState, Selector


def dev(
    did: str,
    platform: str = "ios",
    os_version: str = "17.5",
    *,
    labels: dict[str, str] | None = None,
    alive: bool = True,
    run: str | None = None,
    quarantined: bool = False,
    runs_total: int = 0,
) -> DeviceState:
    return DeviceState(
        info=DeviceInfo(
            id=did, platform=Platform(platform), os_version=os_version, labels=labels or {}
        ),
        alive=alive,
        run=run,
        quarantined=quarantined,
        runs_total=runs_total,
    )


def test_exact_target_only_that_device():
    """An exact device id matches that device only, and only when it is idle."""
    devices = [dev("a"), dev("b")]
    assert choose(devices, "b", None).info.id == "b"
    assert choose([dev("a"), dev("b", run="r1")], "b", None) is None


def test_selector_platform_os_prefix_and_labels():
    """Platform, exact or prefix (`17.*`) os version, and every label must match."""
    devices = [
        dev("i17", "ios", "17.5", labels={"pool": "a"}),
        dev("i16", "ios", "16.4", labels={"pool": "b"}),
        dev("a14", "android", "14", labels={"pool": "a"}),
    ]
    assert [d.info.id for d in matching(devices, None, Selector(platform=Platform.IOS))] == [
        "i17",
        "i16",
    ]
    assert choose(devices, None, Selector(os_version="16.*")).info.id == "i16"
    assert choose(devices, None, Selector(os_version="17.5")).info.id == "i17"
    sel = Selector(platform=Platform.ANDROID, labels={"pool": "a"})
    assert choose(devices, None, sel).info.id == "a14"
    assert matching(devices, None, Selector(labels={"pool": "c"})) == []


def test_skips_busy_down_and_quarantined():
    """Only idle devices are chosen: busy, down and quarantined ones keep the run pending."""
    devices = [dev("busy", run="r"), dev("down", alive=False), dev("sick", quarantined=True)]
    assert choose(devices, None, None) is None
    assert len(matching(devices, None, None)) == 3


def test_least_loaded_first_then_id():
    """Among idle matches the device with the fewest runs wins; ties go by id."""
    devices = [dev("c", runs_total=1), dev("b", runs_total=5), dev("a", runs_total=1)]
    assert choose(devices, None, None).info.id == "a"


@given(
    loads=st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=12),
    platforms=st.lists(st.sampled_from(["ios", "android"]), min_size=12, max_size=12),
    wants=st.lists(
        st.sampled_from([None, "ios", "android", "d0", "d5", "d11", "d99"]), min_size=1, max_size=20
    ),
)
def test_idle_by_class_hands_out_what_choose_would(
    loads: list[int], platforms: list[str], wants: list[str | None]
) -> None:
    """Picking run after run from one `IdleByClass` (the device used leaves `idle`, as the
    dispatcher does) gives exactly what `choose` over the remaining idle devices gives, for
    selector runs and for runs naming a device (`d99` is not registered)."""
    devices = [dev(f"d{i}", platforms[i], runs_total=n) for i, n in enumerate(loads)]
    idle = {d.info.id: d for d in devices}
    picker = IdleByClass(idle)
    for want in wants:
        target = want if want is not None and want.startswith("d") else None
        sel = Selector(platform=Platform(want)) if want and target is None else None
        expected = choose(idle.values(), target, sel)
        got = picker.pick(want or "any", target, sel)
        assert got == expected
        if got is not None:
            del idle[got.info.id]
