"""AgentDeviceDevice over the HTTP transport whose httpx seam replays real captured daemon replies
(`httpx.MockTransport`), so the adapter and the JSON-RPC framing run for real.

The fixtures in tests/fixtures/agent_device/ were recorded from agent-device 0.21.5 driving the
GTK sign-in app (tests/fixtures/agent_device/capture.py).
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from structlog.testing import capture_logs

from workers.core.errors import (
    AppNotInstalledError,
    ConfigError,
    DeviceNotFoundError,
    EmptySnapshotError,
    FatalDeviceError,
    ProtocolError,
    StaleRefError,
    ToolMissingError,
    TransientDeviceError,
    UnauthorizedError,
)
from workers.core.model import InputValue, Kind, Platform
from workers.devices.agent_device.daemon import DaemonInfo
from workers.devices.agent_device.device import (
    AgentDeviceDevice,
    check_daemon,
    map_daemon_error,
    record_name,
)
from workers.devices.agent_device.secrets import PLACEHOLDER_PREFIX, SecretChannel
from workers.devices.agent_device.wire import HttpTransport, SocketTransport

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agent_device"
OK_OPEN = {"ok": True, "data": {"session": "goalfleet", "message": "Opened: goalfleet"}}
SECRET = "hunter2-Secret!"


def fx(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


class ScriptedDaemon:
    """The daemon's `/rpc`, answering with recorded envelopes in order (a daemon error as the
    JSON-RPC error carrying it, as the daemon does). `.requests` keeps each request's params and
    `.bearers` its token, so tests assert on exactly what went over the wire."""

    def __init__(self, envelopes: list[dict[str, Any]]) -> None:
        self._queue = list(envelopes)
        self.requests: list[dict[str, Any]] = []
        self.bearers: list[str] = []
        self.transport = HttpTransport(
            "127.0.0.1", 4310, "tok-123", transport=httpx.MockTransport(self)
        )

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/rpc"
        rpc = json.loads(request.content)
        self.requests.append(rpc["params"])
        self.bearers.append(request.headers["authorization"].removeprefix("Bearer "))
        if not self._queue:
            raise AssertionError(f"the script ran out of replies at {rpc['params']['command']!r}")
        envelope = self._queue.pop(0)
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": rpc["id"]}
        if envelope["ok"]:
            reply["result"] = envelope
        else:
            error = envelope["error"]
            reply["error"] = {"code": -32000, "message": error["message"], "data": error}
        return httpx.Response(200, json=reply)


def device(
    *replies: dict[str, Any],
    record: bool = True,
    clock: Callable[[], float] = time.perf_counter,
    platform: Platform = Platform.LINUX,
    channel: SecretChannel | None = None,
) -> tuple[AgentDeviceDevice, ScriptedDaemon]:
    wire = ScriptedDaemon([OK_OPEN, *replies])
    dev = AgentDeviceDevice(
        wire.transport,
        token="tok-123",
        platform=platform,
        record_script=Path("/tmp/gf/scripts/goalfleet.ad") if record else None,  # noqa: S108
        clock=clock,
        secret_channel=channel,
    )
    dev.open()
    return dev, wire


def secret_input() -> InputValue:
    return InputValue(name="password", value=SecretStr(SECRET), sensitive=True)


def test_open_sends_platform_token_and_arms_recording():
    """open carries the platform, the token (HTTP: as bearer only), and saveScript so recordAs
    is accepted."""
    _, wire = device()
    body = wire.requests[0]
    assert body["command"] == "open"
    assert body["flags"]["platform"] == "linux"
    assert body["flags"]["saveScript"].endswith("goalfleet.ad")
    assert "token" not in body
    assert wire.bearers == ["tok-123"]
    assert body["positionals"] == []
    assert body["meta"]["requestId"]


def test_open_over_the_socket_carries_the_adapter_token():
    """On the socket there is no header: the adapter's token goes in the request line."""
    srv = socket.create_server(("127.0.0.1", 0))
    lines: list[dict[str, Any]] = []

    def serve() -> None:
        conn, _ = srv.accept()
        with conn, conn.makefile("rwb") as f:
            lines.append(json.loads(f.readline()))
            f.write(json.dumps(OK_OPEN).encode() + b"\n")
            f.flush()

    threading.Thread(target=serve, daemon=True).start()
    wire = SocketTransport("127.0.0.1", srv.getsockname()[1], timeout_s=5)
    try:
        AgentDeviceDevice(wire, token="tok-sock", platform=Platform.LINUX).open()
    finally:
        wire.close()
        srv.close()
    assert lines[0]["command"] == "open"
    assert lines[0]["token"] == "tok-sock"


def test_snapshot_projects_the_real_sign_in_screen():
    """The GTK screen becomes candidates: two fields (one secure) and two buttons."""
    dev, wire = device(fx("snapshot_signin"))
    snap = dev.snapshot()
    assert wire.requests[1]["flags"] == {"snapshotInteractiveOnly": True}
    assert snap.refs_generation == str(fx("snapshot_signin")["data"]["refsGeneration"])
    kinds = {c.name: c.kind for c in snap.candidates}
    assert kinds == {
        "Email": Kind.TEXT_FIELD,
        "Password": Kind.SECURE_TEXT_FIELD,
        "Sign in": Kind.BUTTON,
        "Forgot password?": Kind.BUTTON,
    }
    assert "Sign in to continue" in snap.context
    assert snap.pin("e7") == f"@e7~s{snap.refs_generation}"


def test_secure_field_value_is_never_carried():
    """After the password was typed the AT-SPI dump shows dots; the node keeps no value."""
    dev, _ = device(fx("snapshot_filled"))
    snap = dev.snapshot()
    pw = next(n for n in snap.nodes if n.label == "Password" or n.role == "password text")
    assert pw.secure
    assert pw.value == ""


def test_empty_tree_on_success_is_an_error():
    """An empty desktop answers snapshot with ok + no nodes; that is EmptySnapshotError."""
    dev, _ = device(fx("snapshot_empty"))
    with pytest.raises(EmptySnapshotError, match="empty accessibility tree"):
        dev.snapshot()


def test_press_reads_the_settle_diff():
    """Sign in → Welcome: 2 additions, 7 removals, the added refs and the new generation."""
    reply = fx("press_signin_welcome")
    dev, wire = device(reply)
    result = dev.press("@e7~s925770")
    flags = wire.requests[1]["flags"]
    assert flags["settle"] is True
    assert flags["settleQuietMs"] == dev.settle_quiet_ms
    assert flags["timeoutMs"] == dev.action_timeout_ms
    assert wire.requests[1]["positionals"] == ["@e7~s925770"]
    assert result.changed
    assert (result.additions, result.removals) == (2, 7)
    assert result.added_refs == ("e2", "e3")
    assert result.refs_generation == str(reply["data"]["settle"]["refsGeneration"])
    assert result.settled


def test_press_that_changes_nothing_is_unchanged():
    """Forgot password? changes nothing on screen: changed is False."""
    dev, _ = device(fx("press_forgot_nochange"))
    result = dev.press("@e8~s1")
    assert not result.changed
    assert result.additions == result.removals == 0


def test_press_without_settle_result_is_a_protocol_error():
    """We always ask for settle; a reply without it is not one we understand."""
    dev, _ = device(fx("press_forgot_no_settle"))
    with pytest.raises(ProtocolError, match="settle"):
        dev.press("@e8~s1")


@pytest.mark.parametrize("ref", ["e5", "@e5", "@e5~s", "e5~s12", "@x5~s12", "@e5~sabc"])
def test_only_pinned_refs_are_sent(ref):
    """A mutation with an unpinned ref never reaches the wire."""
    dev, wire = device()
    with pytest.raises(ConfigError, match="pinned"):
        dev.press(ref)
    assert len(wire.requests) == 1


def test_plain_fill_drops_the_echoed_text_and_logs_no_value():
    """fill echoes `text`; the result carries none of it and the debug log has no value."""
    reply = fx("fill_email_settle")
    assert reply["data"]["text"] == "alice@example.com"
    dev, wire = device(reply)
    value = InputValue(name="email", value=SecretStr("alice@example.com"))
    with capture_logs() as logs:
        result = dev.fill("@e4~s1", value)
    assert wire.requests[1]["positionals"] == ["@e4~s1", "alice@example.com"]
    assert "recordAs" not in wire.requests[1]["flags"]
    assert result.changed
    assert "alice@example.com" not in repr(result)
    assert "alice@example.com" not in repr(logs)


def test_sensitive_fill_uses_record_as_and_leaks_nowhere(tmp_path):
    """On Linux a secret goes as a placeholder with recordAs=PASSWORD, its value over the FIFO
    (nobody reads it here: it is dropped, the FIFO removed); it is in no request, log line or
    result."""
    dev, wire = device(fx("fill_password_record_as"), channel=SecretChannel(tmp_path))
    with capture_logs() as logs:
        result = dev.fill("@e5~s1", secret_input())
    ref, placeholder = wire.requests[1]["positionals"]
    assert ref == "@e5~s1"
    assert placeholder.startswith(PLACEHOLDER_PREFIX)
    assert wire.requests[1]["flags"]["recordAs"] == "PASSWORD"
    assert SECRET not in json.dumps(wire.requests)
    assert SECRET not in repr(result)
    assert SECRET not in repr(logs)
    assert logs[-1]["target"] == "@e5~s1"
    assert list(tmp_path.iterdir()) == []


def test_sensitive_fill_on_linux_without_a_channel_is_refused_before_the_wire():
    """A Linux daemon goalfleet did not start with its xdotool shim would put the value on
    xdotool's command line: refused, naming what to do instead."""
    dev, wire = device()
    with pytest.raises(ConfigError, match="secret channel") as info:
        dev.fill("@e5~s1", secret_input())
    assert "goalfleet" in info.value.hint
    assert SECRET not in str(info.value)
    assert len(wire.requests) == 1


def test_sensitive_fill_off_linux_sends_the_literal_with_record_as():
    """iOS and Android daemons type over their own runner / adb: the literal goes over
    loopback once, with recordAs."""
    dev, wire = device(fx("fill_password_record_as"), platform=Platform.IOS)
    dev.fill("@e5~s1", secret_input())
    assert wire.requests[1]["positionals"] == ["@e5~s1", SECRET]
    assert wire.requests[1]["flags"]["recordAs"] == "PASSWORD"


def test_sensitive_fill_without_recording_is_refused_before_the_wire():
    """Without an armed recording agent-device would refuse recordAs; we refuse first."""
    dev, wire = device(record=False)
    with pytest.raises(ConfigError, match="sensitive") as info:
        dev.fill("@e5~s1", secret_input())
    assert SECRET not in str(info.value)
    assert len(wire.requests) == 1


def test_failed_fill_scrubs_the_value_from_the_error():
    """Should the daemon ever quote the typed text in an error, we do not repeat it."""
    reply = {
        "ok": False,
        "error": {
            "code": "COMMAND_FAILED",
            "message": f"could not type {SECRET!r}",
            "hint": SECRET,
        },
    }
    dev, _ = device(reply, platform=Platform.IOS)
    with capture_logs() as logs, pytest.raises(FatalDeviceError) as info:
        dev.fill("@e5~s1", secret_input())
    assert SECRET not in str(info.value)
    assert SECRET not in info.value.hint
    assert SECRET not in repr(logs)


def test_typed_secret_is_masked_in_later_snapshots(tmp_path):
    """A secret typed into a plain field shows up as that field's label; it is masked."""
    snap = fx("snapshot_filled")
    for node in snap["data"]["nodes"]:
        if node.get("label") == "alice@example.com":
            node["label"] = SECRET
    dev, _ = device(fx("fill_password_record_as"), snap, channel=SecretChannel(tmp_path))
    dev.fill("@e5~s1", secret_input())
    shot = dev.snapshot()
    assert SECRET not in shot.model_dump_json()


def test_record_name_shapes():
    """Input names become agent-device variable names; AD_* is reserved."""
    assert record_name("password") == "PASSWORD"
    assert record_name("otp_code") == "OTP_CODE"
    assert record_name("ad_token") == "GF_AD_TOKEN"


@pytest.mark.parametrize(
    ("fixture", "error_type", "reason"),
    [
        ("err_ref_generation_mismatch", StaleRefError, "ref_generation_mismatch"),
        ("err_ref_frame_expired", StaleRefError, "ref_frame_expired"),
        (
            "err_plain_ref_requires_complete_frame",
            StaleRefError,
            "plain_ref_requires_complete_frame",
        ),
        ("err_ref_not_issued", StaleRefError, "ref_not_issued"),
        ("err_unknown_ref", StaleRefError, "ref_not_found"),
        ("err_unauthorized", UnauthorizedError, None),
        ("err_tool_missing", ToolMissingError, None),
        ("err_device_in_use", TransientDeviceError, None),
        ("err_invalid_args_record_as", ProtocolError, None),
        ("err_session_not_found", FatalDeviceError, None),
        ("err_unsupported_platform", FatalDeviceError, None),
    ],
)
def test_real_error_replies_map_to_the_typed_tree(fixture, error_type, reason):
    """Each captured daemon error becomes the right class (and stale reason)."""
    dev, _ = device(fx(fixture))
    with pytest.raises(error_type) as info:
        dev.press("@e8~s1")
    assert type(info.value) is error_type
    if reason is not None:
        assert info.value.reason == reason  # type: ignore[attr-defined]
    assert fx(fixture)["error"]["code"] in (info.value.code, "COMMAND_FAILED", "INVALID_ARGS")


@pytest.mark.parametrize(
    ("error", "error_type", "code"),
    [
        ({"code": "DEVICE_NOT_FOUND", "message": "x"}, DeviceNotFoundError, "DEVICE_NOT_FOUND"),
        ({"code": "APP_NOT_INSTALLED", "message": "x"}, AppNotInstalledError, "APP_NOT_INSTALLED"),
        ({"code": "AMBIGUOUS_MATCH", "message": "x"}, FatalDeviceError, "AMBIGUOUS_MATCH"),
        ({"code": "UNKNOWN", "message": "x"}, FatalDeviceError, "UNKNOWN"),
        ({"code": "UNKNOWN", "message": "x", "retriable": True}, TransientDeviceError, "UNKNOWN"),
        (
            {
                "code": "DEVICE_IN_USE",
                "message": "owned by session s in workspace w",
                "retriable": False,
                "details": {"reason": "DEVICE_CLAIM_LIVE_OWNER"},
            },
            FatalDeviceError,
            "DEVICE_IN_USE:DEVICE_CLAIM_LIVE_OWNER",
        ),
        (
            {"code": "COMMAND_FAILED", "message": "adb", "details": {"retriable": True}},
            TransientDeviceError,
            "COMMAND_FAILED",
        ),
        (
            {"code": "COMMAND_FAILED", "message": "x", "details": {"reason": "selector_not_found"}},
            FatalDeviceError,
            "COMMAND_FAILED:selector_not_found",
        ),
    ],
)
def test_every_documented_code_has_a_home(error, error_type, code):
    """Codes not seen live here (no macOS, no emulator) map by the documented shape."""
    mapped = map_daemon_error(error, command="press", target="@e1~s1")
    assert type(mapped) is error_type
    assert mapped.code == code
    assert "press @e1~s1" in mapped.message


def test_debug_log_has_command_pinned_ref_duration_outcome():
    """Each command is one debug line: the request log the issue asks for. The duration is
    the daemon call's, read from the adapter's clock (here one that ticks 0.25 s a read)."""
    ticks = itertools.count()
    dev, _ = device(
        fx("press_signin_welcome"), fx("err_ref_frame_expired"), clock=lambda: next(ticks) * 0.25
    )
    with capture_logs() as logs:
        dev.press("@e7~s925770")
        with pytest.raises(StaleRefError):
            dev.press("@e7~s925770")
    ok, stale = logs
    assert ok["event"] == "device_command"
    assert ok["log_level"] == "debug"
    assert ok["target"] == "@e7~s925770"
    assert ok["outcome"] == "ok"
    assert ok["duration_ms"] == 250.0
    assert stale["duration_ms"] == 250.0
    assert stale["outcome"] == "COMMAND_FAILED"
    assert stale["reason"] == "ref_frame_expired"


def test_close_ignores_a_session_the_daemon_already_dropped():
    """close after an idle reap must not fail the run's teardown; the wire is closed."""
    dev, wire = device(fx("err_session_not_found"))
    dev.close()
    assert wire.transport.is_closed
    dev.close()  # idempotent


def test_check_daemon_accepts_the_captured_daemon():
    """The real daemon.json and /health pass the version and protocol check."""
    info = DaemonInfo.model_validate(fx("daemon_json"))
    check_daemon(info, fx("http_health"))
    assert "<token>" not in repr(info)


@pytest.mark.parametrize(
    ("version", "health"),
    [("0.22.0", None), ("0.21.5", {"ok": True, "rpcProtocolVersion": 3}), ("0.21.5", {})],
)
def test_check_daemon_refuses_an_unknown_wire(version, health):
    """A daemon of another version or RPC protocol fails at connect, clearly."""
    info = DaemonInfo.model_validate({**fx("daemon_json"), "version": version})
    with pytest.raises(ProtocolError, match=r"version|protocol"):
        check_daemon(info, health)
