#!/usr/bin/env bash
# Install what the observability tests run (Debian packages): a real Prometheus server and
# promtool (`prometheus`), Debian's docker-compose 1.29 to validate docker-compose.yml without
# a Docker engine, and redis-server for the mini-fleet. Idempotent: installs only what is
# missing. Needs root (CI runs as root). Without these, the tests that need them skip (and
# fail under CI=true).
set -euo pipefail

PACKAGES=(prometheus docker-compose redis-server)

# no recommends: docker-compose would pull in docker.io and containerd, which nothing here runs
APT_NO_RECOMMENDS=1 bash "$(dirname "$0")/apt-ensure.sh" "${PACKAGES[@]}"

for tool in prometheus promtool docker-compose redis-server; do
  command -v "$tool" >/dev/null || { echo "missing after install: $tool" >&2; exit 1; }
done
echo "observability tools ready: $(prometheus --version 2>&1 | head -1)"
