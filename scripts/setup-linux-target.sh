#!/usr/bin/env bash
# Install the Linux desktop target's stack for agent-device: a virtual X server, a D-Bus session
# bus, the AT-SPI accessibility bus, GTK 3 with PyGObject for the test app and for
# agent-device's AT-SPI dump, xdotool for input, ImageMagick for its screenshots, ffmpeg to film
# a run's window (x11grab, VP8 WebM), and tesseract to OCR stored screenshots and video frames
# (the tests that no picture or frame shows a secret); zenity, yad, GTK 4's
# demo app, lxqt-openssh-askpass (Qt 5) and Chromium: third-party apps the end-to-end tests drive
# (tests/agent_device/test_third_party_e2e.py, test_chromium_e2e.py).
# Idempotent: installs only what is missing.
# Needs root (CI runs as root); run `make agent-device` too for the pinned npm package.
set -euo pipefail

PACKAGES=(xvfb dbus-x11 at-spi2-core python3-gi gir1.2-gtk-3.0 gir1.2-atspi-2.0 xdotool x11-utils imagemagick tesseract-ocr ffmpeg zenity yad gtk-4-examples lxqt-openssh-askpass chromium)

bash "$(dirname "$0")/apt-ensure.sh" "${PACKAGES[@]}"

# What agent-device and the tests will actually run:
for tool in Xvfb dbus-daemon xdotool xdpyinfo tesseract ffmpeg zenity yad gtk4-demo-application lxqt-openssh-askpass chromium /usr/libexec/at-spi-bus-launcher; do
  command -v "$tool" >/dev/null || { echo "missing after install: $tool" >&2; exit 1; }
done
/usr/bin/python3 -c 'import gi; gi.require_version("Gtk", "3.0"); gi.require_version("Atspi", "2.0"); from gi.repository import Gtk, Atspi' \
  || { echo "python3-gi cannot load Gtk 3.0 / Atspi 2.0" >&2; exit 1; }
echo "linux target ready"
