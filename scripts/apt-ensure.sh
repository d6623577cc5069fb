#!/usr/bin/env bash
# apt-ensure.sh PKG...: install the Debian packages that are not installed yet (root or sudo).
# Idempotent and quick when everything is there. APT_NO_RECOMMENDS=1 leaves recommends out.
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
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  flags=(-y -qq)
  if [ "${APT_NO_RECOMMENDS:-0}" = 1 ]; then flags+=(--no-install-recommends); fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install "${flags[@]}" "${missing[@]}"
fi
