#!/usr/bin/env bash
# apt-ensure.sh PKG...: install the Debian packages that are not installed yet (root or sudo).
# Idempotent and quick when everything is there. APT_NO_RECOMMENDS=1 leaves recommends out.
#
# Nothing installed here is started or enabled as a service: the tests start their own
# processes (Prometheus, Redis, D-Bus) on random ports. During the install a policy-rc.d that
# refuses every start is in place (unless the host has its own), and on a systemd host each
# newly installed package's unit of the same name (prometheus.service, redis-server.service) is
# disabled, so it does not start at the next boot either.
set -euo pipefail

missing=()
for pkg in "$@"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "installing: ${missing[*]} (no service is started or enabled)"
  POLICY=/usr/sbin/policy-rc.d
  if [ ! -e "$POLICY" ]; then
    # exit 101: "action forbidden by policy" (invoke-rc.d and deb-systemd-invoke honour it)
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$POLICY" >/dev/null
    $SUDO chmod 755 "$POLICY"
    trap '$SUDO rm -f "$POLICY"' EXIT
  fi
  $SUDO apt-get update -qq
  flags=(-y -qq)
  if [ "${APT_NO_RECOMMENDS:-0}" = 1 ]; then flags+=(--no-install-recommends); fi
  DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $SUDO apt-get install "${flags[@]}" "${missing[@]}"
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
    for pkg in "${missing[@]}"; do
      if systemctl list-unit-files --quiet "$pkg.service" 2>/dev/null | grep -q .; then
        $SUDO systemctl disable --quiet "$pkg.service" || true
      fi
    done
  fi
fi
