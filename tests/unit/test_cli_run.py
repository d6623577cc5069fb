"""`goalfleet run`: exit codes, JSON output, and bad input rejected before anything runs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from scheduler.cli.main import main

PASSWORD = "pw-never-printed-42"
SIGN_IN = [
    "--goal", "Sign in",
    "--input", "email=ada@example.com",
    "--secret", "password=env:SIGNIN_PASSWORD",
]  # fmt: skip
"""The sign-in goal with both inputs (the password from the environment)."""


@pytest.fixture(autouse=True)
def _password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGNIN_PASSWORD", PASSWORD)


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["run", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("device", ["sim:signin-ios", "sim:signin-android"])
def test_rules_decider_signs_in_and_json_shows_pinned_refs_not_secrets(
    capsys: pytest.CaptureFixture[str], device: str
) -> None:
    code, out, _ = run_cli(capsys, "--device", device, *SIGN_IN, "--decider", "rules", "--json")
    assert code == 0
    result = json.loads(out)
    assert result["status"] == "done"
    pinned = [s["action"]["pinned"] for s in result["steps"] if s["action"]]
    assert pinned
    assert all(p.startswith("@e") and "~s" in p for p in pinned)
    assert PASSWORD not in out


def test_table_output_and_nonzero_exit_unless_done(capsys: pytest.CaptureFixture[str]) -> None:
    """Without the password the run cannot finish: exit 1, and the table still prints."""
    code, out, _ = run_cli(
        capsys,
        "--device",
        "sim:signin-ios",
        "--goal",
        "Sign in",
        "--input",
        "email=ada@example.com",
        "--max-steps",
        "3",
    )
    assert code == 1
    assert "Sign in to Acme" in out


@pytest.mark.parametrize("device", ["sim:signin-ios", "sim:unnamed-android"])
def test_without_the_secret_nothing_is_submitted(
    capsys: pytest.CaptureFixture[str], device: str
) -> None:
    """`goalfleet run` with the email and no password (issue 42): `blocked`, naming the field
    and the missing input, and no press at all on the password screen — it used to press
    "Sign in" over the empty password field. On `unnamed` the fields have no name of their
    own: the label beside the secure one names it."""
    code, out, _ = run_cli(
        capsys, "--device", device, "--goal", "Sign in", "--input", "email=ada@example.com",
        "--decider", "rules", "--json",
    )  # fmt: skip
    assert code == 1
    result = json.loads(out)
    assert result["status"] == "blocked"
    assert result["reason"].startswith("this screen asks for 'Password'")
    assert result["reason"].endswith("; no input named password was supplied")
    last = result["steps"][-1]
    assert last["action"] is None
    assert last["decision"]["target"] != "none"  # the decider wanted the submit: not made
    presses = [s for s in result["steps"] if s["action"] and s["action"]["kind"] == "press"]
    assert all(s["screen"] != last["screen"] for s in presses)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--device", "sim:nope-ios"], "unknown sim app"),
        (["--device", "usb:1234"], "not a device spec"),
        (
            ["--secret", "password=env:GOALFLEET_TEST_UNSET_VAR"],
            "GOALFLEET_TEST_UNSET_VAR is not set",
        ),
        (["--secret", "password=hunter2"], "never the value"),
        (["--decider", "nonsense"], "unknown decider"),
        (["--decider", "nope/model"], "Unsupported provider: nope"),
        (["--max-steps", "0"], "--max-steps must be between 1 and 100"),
        (["--max-steps", "101"], "--max-steps must be between 1 and 100"),
        (["--min-confidence", "1.5"], "--min-confidence"),
        (["--input", "email"], "NAME=VALUE"),
        (["--input", "1bad=x"], "input name"),
        (["--input", "a=1", "--input", "a=2"], "given twice"),
        (["--goal", "  "], "--goal is blank"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    base = {"--device": "sim:signin-ios", "--goal": "Sign in"}
    argv: list[str] = []
    for k, v in base.items():
        if k not in args:
            argv += [k, v]
    code, out, err = run_cli(capsys, *argv, *args)
    assert code == 2
    assert out == ""
    assert message in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.slow  # the console script as a process: make test, not make unit
def test_console_script_is_installed() -> None:
    """The `goalfleet` entry point runs in a fresh process."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "scheduler.cli.main",
            "run",
            "--device",
            "sim:signin-ios",
            *SIGN_IN,
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "done"


def test_dangerous_controls_come_from_settings(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard list is configurable: with "continue" in it, the inject app's Continue
    escalates; with the default list, the rules decider presses Continue and ends done."""
    args = ["--device", "sim:inject-ios", "--goal", "Sign in", "--done-when", "Welcome", "--json"]
    code, out, _ = run_cli(capsys, *args)
    assert (code, json.loads(out)["status"]) == (0, "done")
    monkeypatch.setenv("GOALFLEET_DANGEROUS_CONTROLS", "delete,continue")
    code, out, _ = run_cli(capsys, *args)
    assert (code, json.loads(out)["status"]) == (1, "escalated")
    assert "dangerous" in json.loads(out)["reason"]


def test_bad_settings_are_one_line_naming_the_variable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOALFLEET_MODEL_TIMEOUT_S", "-1")
    code, _, err = run_cli(capsys, "--device", "sim:signin-ios", "--goal", "Sign in")
    assert code == 2
    assert "GOALFLEET_MODEL_TIMEOUT_S" in err


def test_privacy_dialog_then_phone_code_runs_to_done_with_a_plain_field_secret(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The outside report's app: a cookie dialog first, then phone and a one-time code given
    as a secret the caller lets into a plain field. Done on evidence; the code is printed
    nowhere."""
    from workers.devices.sim.apps import OTP_CODE  # noqa: PLC0415 - the sim app's truth

    monkeypatch.setenv("PRIVACY_OTP", OTP_CODE)
    flags = ["--device", "sim:privacy-android", "--goal", "Sign in", "--input", "phone=5551234567"]
    code, out, err = run_cli(
        capsys, *flags, "--secret", "code=env:PRIVACY_OTP", "--plain-field", "code",
        "--done-when", "You're in", "--json",
    )  # fmt: skip
    assert code == 0, err
    result = json.loads(out)
    assert result["status"] == "done"
    assert result["steps"][0]["screen"] == "Your privacy"
    assert OTP_CODE not in out + err
    assert "5551234567" not in json.dumps(result["steps"])

    code, out, err = run_cli(capsys, *flags, "--secret", "code=env:PRIVACY_OTP", "--json")
    assert code == 1  # without consent the code is never typed into a plain field
    assert json.loads(out)["status"] == "escalated"


def test_plain_field_names_a_secret_or_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(
        capsys, "--device", "sim:privacy-ios", "--goal", "Sign in", "--plain-field", "code"
    )
    assert code == 2
    assert "--plain-field code: no --secret of that name" in err
    assert len(err.strip().splitlines()) <= 2
