#!/usr/bin/env bash
# Debian packages the tests need: MariaDB (the real database), Chromium (browser tests),
# docker-compose and docker.io (the compose files, parsed and, in `make test-compose`, run for
# real) and debootstrap (the stand-in base images). Installs only what is missing.
set -euo pipefail
need=()
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || need+=(mariadb-server mariadb-client)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "missing Debian packages: ${need[*]} (run as root or: sudo apt-get install ${need[*]})" >&2
  exit 1
fi
echo "installing ${need[*]} from Debian's packages" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
