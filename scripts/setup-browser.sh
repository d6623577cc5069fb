#!/usr/bin/env bash
# Install the browser the suite tests open the HTML report in (Debian's `chromium`, driven by
# Playwright for Python with executable_path=/usr/bin/chromium: no browser download).
# Idempotent: installs only what is missing. Needs root (CI runs as root). Without it, the
# browser test skips (and fails under CI=true).
set -euo pipefail

APT_NO_RECOMMENDS=1 bash "$(dirname "$0")/apt-ensure.sh" chromium

command -v chromium >/dev/null || { echo "missing after install: chromium" >&2; exit 1; }
echo "browser ready: $(chromium --version 2>/dev/null | head -1)"
