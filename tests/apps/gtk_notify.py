#!/usr/bin/python3
"""The GTK sign-in app (`gtk_signin.py`) that asks a question once signed in: a GTK message
dialog "Allow Acme to send notifications?" with the toolkit's own Yes / No buttons (no "Allow"
on them). Its state file (`GTK_SIGNIN_STATE_FILE`) also says the answer: `notifications` is
None until answered, then "yes" or "no"; the dialog closes on either.

The dialog is its own window at the screen's origin, not centred over the app's: the test
desktop has no window manager, and there AT-SPI reports a dialog's controls relative to the
dialog's own window, so agent-device's click (at those coordinates on the screen) lands on
the control only where the dialog sits at (0, 0). A centred dialog's "No" was reported at
y=78..112 and drawn at y=162..196: the press changed nothing.

Run it with the *system* interpreter, as `gtk_signin.py`.
"""

from __future__ import annotations

import sys

from gtk_signin import Gtk, SignInApp

QUESTION = "Allow Acme to send notifications?"


class NotifyApp(SignInApp):
    def __init__(self) -> None:
        super().__init__()
        self.state["notifications"] = None
        self.write_state()

    def on_sign_in(self, button: Gtk.Button) -> None:
        super().on_sign_in(button)
        if self.state["screen"] != "welcome" or self.state["notifications"] is not None:
            return
        dialog = Gtk.MessageDialog(
            modal=True,
            message_type=Gtk.MessageType.QUESTION,
            buttons=Gtk.ButtonsType.YES_NO,
            text=QUESTION,
        )
        dialog.format_secondary_text("You can change this later.")
        dialog.connect("response", self.on_answer)
        dialog.move(0, 0)  # see the module docstring
        dialog.show_all()

    def on_answer(self, dialog: Gtk.MessageDialog, response: int) -> None:
        self.state["notifications"] = "yes" if response == Gtk.ResponseType.YES else "no"
        dialog.destroy()
        self.write_state()


def main() -> int:
    NotifyApp()
    Gtk.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
