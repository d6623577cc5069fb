#!/usr/bin/python3
"""A tiny GTK3 sign-in app: the real target of the agent-device end-to-end tests.

Run it with the *system* interpreter (``/usr/bin/python3`` with Debian's python3-gi), not the
project venv: PyGObject is not installed there.

Screen 1 ("signin"): an email entry, a password entry (visibility False), a "Sign in" button and
a "Forgot password?" distractor. Pressing "Sign in" with a non-empty email and password switches
to screen 2 ("welcome"), a label "Welcome".

``GTK_SIGNIN_NAME`` (optional) tells several apps apart: the window title becomes "Sign in to
<name>" and the first screen gets an extra button "About <name>" (an interactive element, so it
is in every interactive snapshot of that screen).

The app writes its state as JSON to the file named by ``GTK_SIGNIN_STATE_FILE`` (if set) at start
and after every event, atomically (write + rename). The password itself is never written: only
whether one was received, its length, and, when ``GTK_SIGNIN_EXPECTED_PASSWORD_SHA256`` is set,
whether its SHA-256 matches that digest.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import Gtk  # noqa: E402

STATE_ENV = "GTK_SIGNIN_STATE_FILE"
DIGEST_ENV = "GTK_SIGNIN_EXPECTED_PASSWORD_SHA256"
NAME_ENV = "GTK_SIGNIN_NAME"


class SignInApp:
    def __init__(self) -> None:
        self.state_path = os.environ.get(STATE_ENV)
        self.expected_digest = os.environ.get(DIGEST_ENV)
        self.state: dict[str, object] = {
            "screen": "signin",
            "email": None,
            "password_received": False,
            "password_length": 0,
            "password_matches": None,
            "forgot_pressed": 0,
            "failed_attempts": 0,
            "pid": os.getpid(),
        }

        name = os.environ.get(NAME_ENV, "")
        self.state["name"] = name
        self.window = Gtk.Window(title=f"Sign in to {name}" if name else "Sign in")
        self.window.set_default_size(360, 280)
        self.window.connect("destroy", Gtk.main_quit)

        self.stack = Gtk.Stack()
        self.window.add(self.stack)

        form = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=8)
        form.set_border_width(16)
        form.pack_start(Gtk.Label(label="Sign in to continue"), expand=False, fill=False, padding=0)

        self.email = Gtk.Entry()
        self.email.set_placeholder_text("Email")
        self.email.get_accessible().set_name("Email")
        form.pack_start(self.email, expand=False, fill=False, padding=0)

        self.password = Gtk.Entry()
        self.password.set_visibility(False)
        self.password.set_placeholder_text("Password")
        self.password.get_accessible().set_name("Password")
        form.pack_start(self.password, expand=False, fill=False, padding=0)

        self.error = Gtk.Label(label="")
        form.pack_start(self.error, expand=False, fill=False, padding=0)

        sign_in = Gtk.Button(label="Sign in")
        sign_in.connect("clicked", self.on_sign_in)
        form.pack_start(sign_in, expand=False, fill=False, padding=0)

        forgot = Gtk.Button(label="Forgot password?")
        forgot.connect("clicked", self.on_forgot)
        form.pack_start(forgot, expand=False, fill=False, padding=0)

        if name:
            form.pack_start(Gtk.Button(label=f"About {name}"), expand=False, fill=False, padding=0)

        welcome = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=8)
        welcome.set_border_width(16)
        welcome.pack_start(Gtk.Label(label="Welcome"), expand=False, fill=False, padding=0)

        self.stack.add_named(form, "signin")
        self.stack.add_named(welcome, "welcome")
        self.window.show_all()
        self.stack.set_visible_child_name("signin")
        self.write_state()

    def on_sign_in(self, _button: Gtk.Button) -> None:
        email = self.email.get_text()
        password = self.password.get_text()
        self.state["email"] = email
        self.state["password_received"] = bool(password)
        self.state["password_length"] = len(password)
        if self.expected_digest:
            digest = hashlib.sha256(password.encode()).hexdigest()
            self.state["password_matches"] = digest == self.expected_digest
        if email and password:
            self.state["screen"] = "welcome"
            self.stack.set_visible_child_name("welcome")
            self.window.set_title("Welcome")
        else:
            self.state["failed_attempts"] = int(str(self.state["failed_attempts"])) + 1
            self.error.set_text("Email and password are required")
        self.write_state()

    def on_forgot(self, _button: Gtk.Button) -> None:
        self.state["forgot_pressed"] = int(str(self.state["forgot_pressed"])) + 1
        self.write_state()

    def write_state(self) -> None:
        if not self.state_path:
            return
        tmp = Path(f"{self.state_path}.tmp")
        tmp.write_text(json.dumps(self.state), encoding="utf-8")
        tmp.replace(self.state_path)


def main() -> int:
    SignInApp()
    Gtk.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
