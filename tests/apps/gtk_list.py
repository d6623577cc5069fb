#!/usr/bin/python3
"""A GTK3 list app for journeys on the Linux target: a list of 40 rows in a scrolled window
(longer than the window), each row opening a detail page; the window binds alt+Left to go
back, as GTK apps with a back stack often do (and as agent-device's Linux `back` sends).

Run it with the *system* interpreter (``/usr/bin/python3`` with Debian's python3-gi).

It writes its state as JSON to ``GTK_LIST_STATE_FILE`` at start and after every event: the
screen (``list`` or ``detail``), the row opened last, how far the list is scrolled
(``scrolled``, pixels), and how many times it went back.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import gi

gi.require_version("Gtk", "3.0")
gi.require_version("Gdk", "3.0")
from gi.repository import Gdk, Gtk  # noqa: E402

STATE_ENV = "GTK_LIST_STATE_FILE"
ROWS = 40


class ListApp:
    def __init__(self) -> None:
        self.state_path = os.environ.get(STATE_ENV)
        self.state: dict[str, object] = {
            "screen": "list",
            "opened": None,
            "scrolled": 0,
            "backs": 0,
        }
        self.window = Gtk.Window(title="Rows")
        self.window.set_default_size(320, 300)
        self.window.connect("destroy", Gtk.main_quit)
        accel = Gtk.AccelGroup()
        accel.connect(Gdk.KEY_Left, Gdk.ModifierType.MOD1_MASK, 0, self.on_back)
        self.window.add_accel_group(accel)

        self.stack = Gtk.Stack()
        self.window.add(self.stack)

        rows = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=4)
        for i in range(1, ROWS + 1):
            button = Gtk.Button(label=f"Row {i}")
            button.connect("clicked", self.on_open, i)
            rows.pack_start(button, expand=False, fill=False, padding=0)
        self.scroller = Gtk.ScrolledWindow()
        self.scroller.add(rows)
        self.scroller.get_vadjustment().connect("value-changed", self.on_scrolled)
        self.stack.add_named(self.scroller, "list")

        detail = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=8)
        detail.set_border_width(16)
        self.title = Gtk.Label(label="")
        detail.pack_start(self.title, expand=False, fill=False, padding=0)
        self.stack.add_named(detail, "detail")

        self.window.show_all()
        self.stack.set_visible_child_name("list")
        self.write_state()

    def on_open(self, _button: Gtk.Button, row: int) -> None:
        self.title.set_text(f"Details of row {row}")
        self.stack.set_visible_child_name("detail")
        self.state.update(screen="detail", opened=row)
        self.write_state()

    def on_back(self, *_args: object) -> bool:
        if self.stack.get_visible_child_name() == "detail":
            self.stack.set_visible_child_name("list")
            self.state.update(screen="list", backs=int(str(self.state["backs"])) + 1)
            self.write_state()
        return True

    def on_scrolled(self, adjustment: Gtk.Adjustment) -> None:
        self.state["scrolled"] = round(adjustment.get_value())
        self.write_state()

    def write_state(self) -> None:
        if not self.state_path:
            return
        path = Path(self.state_path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.state), encoding="utf-8")
        tmp.replace(path)


def main() -> int:
    ListApp()
    Gtk.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
