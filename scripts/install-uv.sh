#!/usr/bin/env bash
# Installs uv, the version the project's Dockerfile uses, for `make` on a machine without it.
#
#   scripts/install-uv.sh DIR     # puts uv and uvx into DIR (make's default:
#                                 # $AX3L_CACHE_DIR/uv-<version>, ~/.cache/ax3l/uv-<version>)
#   scripts/install-uv.sh --version   # prints that version
#
# Debian 12's own python3 has no pip, and PEP 668 refuses `pip install` into the system Python
# ("externally-managed-environment"); there is no Debian package of uv. So no pip and no venv:
# scripts/uv_wheel.py fetches PyPI's wheel with the standard library (sha256 checked) and
# takes the two binaries out of it. Needs python3, which every Debian 12 system has.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(grep -hoE 'ghcr.io/astral-sh/uv:[0-9.]+' Dockerfile | sort -u)
[ "$(wc -l <<<"$version")" = 1 ] && [ -n "$version" ] || {
  echo "install-uv: expected one uv version in Dockerfile, got: $version" >&2
  exit 1
}
version=${version##*:}
if [ "${1:-}" = --version ]; then echo "$version"; exit 0; fi
[ $# = 1 ] || { echo "usage: $0 DIR | $0 --version" >&2; exit 2; }
dir=$1
if [ -x "$dir/uv" ]; then exit 0; fi
command -v python3 >/dev/null 2>&1 || {
  echo "install-uv: python3 is needed (apt-get install python3)" >&2
  exit 1
}
echo "install-uv: installing uv $version into $dir (no pip needed)" >&2
python3 scripts/uv_wheel.py "$version" "${AX3L_CACHE_DIR:-$HOME/.cache/ax3l}/wheels" --extract "$dir" >/dev/null
"$dir/uv" --version >&2
