#!/usr/bin/env bash
# Install what the observability tests run (Debian packages): a real Prometheus server and
# promtool (`prometheus`), Debian's docker-compose 1.29 to validate docker-compose.yml without
# a Docker engine, and redis-server for the mini-fleet. Idempotent: installs only what is
# missing. Needs root (CI runs as root). Without these, the tests that need them skip.
set -euo pipefail

PACKAGES=(prometheus docker-compose redis-server)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  # the prometheus package would start a system service where systemd runs; the tests start
  # their own server on a random loopback port and never use it
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

for tool in prometheus promtool docker-compose redis-server; do
  command -v "$tool" >/dev/null || { echo "missing after install: $tool" >&2; exit 1; }
done
echo "observability tools ready: $(prometheus --version 2>&1 | head -1)"
