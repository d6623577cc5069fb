#!/usr/bin/env bash
# Install what the partition tests (tests/partition) need: iproute2's `ip`, which makes the
# network namespaces, veth pairs and the bridge they run on. Idempotent; needs root (CI runs
# as root, and the tests themselves need it to make namespaces).
set -euo pipefail

bash "$(dirname "$0")/apt-ensure.sh" iproute2

command -v ip >/dev/null || { echo "missing after install: ip" >&2; exit 1; }
echo "netns tools ready: $(ip -V)"
