#!/usr/bin/env bash
# Builds local stand-ins, under their official names, for the base images that the project's
# Dockerfile and compose files name, on a machine that cannot reach the public image
# registries (this project's development and CI machines). Users never need it: their
# `docker compose` pulls the real images.
#
#   debian:bookworm-slim                 debootstrap --variant=minbase bookworm | docker import
#   ghcr.io/astral-sh/uv:<version>       FROM scratch with uv/uvx from PyPI's wheel of that version
#   python:<3.11 tag>-slim-bookworm      the debian stand-in with Debian's python3 at /usr/local/bin,
#                                        trusting this machine's extra CAs (deploy/standins/)
#   mariadb:<series>                     Debian's mariadb-server behind the official entrypoint
#                                        contract (deploy/standins/mariadb-entrypoint.sh)
#   ghcr.io/ggml-org/llama.cpp:server-*  scripts/llama-server.sh's binary (only with --llama)
#
# Versions are read from Dockerfile and compose*.yaml. Idempotent: an image that
# exists is kept, unless it is a stand-in whose inputs changed; a missing one is pulled first
# and built only when the pull fails. Each stand-in is labelled org.ax3l.standin=<inputs hash>.
#   scripts/docker-standins.sh [--llama] [--rebuild]
#   scripts/docker-standins.sh clean   # cold mode: remove every stand-in and the images built
#                                      # on them, so the next run builds them all again
# uv's wheel is cached in $AX3L_CACHE_DIR/docker (default ~/.cache/ax3l/docker); point
# AX3L_CACHE_DIR at an empty folder for a cold run. No pip needed: scripts/uv_wheel.py takes the
# wheel from PyPI's JSON index with the standard library (under `uv run` python3 is the venv's,
# without pip).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=${AX3L_CACHE_DIR:-$HOME/.cache/ax3l}/docker
STANDINS=$ROOT/deploy/standins
MIRROR=${AX3L_DEBIAN_MIRROR:-http://deb.debian.org/debian}
PULL_TIMEOUT=${AX3L_STANDIN_PULL_TIMEOUT:-20}
llama=0
rebuild=0
clean=0
for arg in "$@"; do
  case "$arg" in
    --llama) llama=1 ;;
    --rebuild) rebuild=1 ;;
    clean) clean=1 ;;
    *) echo "usage: $0 [--llama] [--rebuild] | $0 clean" >&2; exit 2 ;;
  esac
done
export DOCKER_BUILDKIT=0 # the classic builder: BuildKit would fetch its frontend image
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

log() { echo "standins: $*" >&2; }

only() { # the one distinct match of a pattern in files, or fail
  local found
  found=$(grep -hoE "$1" "${@:2}" | sort -u)
  [ "$(wc -l <<<"$found")" = 1 ] && [ -n "$found" ] || { log "expected one '$1', got: $found"; exit 1; }
  echo "$found"
}
PYTHON_IMAGE=$(only 'python:[0-9.]+-slim-bookworm' Dockerfile)
UV_IMAGE=$(only 'ghcr.io/astral-sh/uv:[0-9.]+' Dockerfile)
UV_VERSION=${UV_IMAGE##*:}
DB_IMAGE=$(only 'mariadb:[0-9.]+' compose.yaml)
LLAMA_IMAGE=$(only 'ghcr.io/ggml-org/llama.cpp:server-[A-Za-z0-9.]+' compose.llama.yaml)
DEBIAN_IMAGE=debian:bookworm-slim

# Keep an existing image, pull a real one, or tell the caller to build (return 1).
# A stand-in whose label differs from the inputs' hash is rebuilt.
wanted() {
  local image=$1 hash=$2 label
  if label=$(docker image inspect --format '{{ index .Config.Labels "org.ax3l.standin" }}' "$image" 2>/dev/null); then
    if [ -z "$label" ] || [ "$label" = "<no value>" ]; then
      log "$image: a real image is present"; return 0
    fi
    if [ "$label" = "$hash" ] && [ "$rebuild" = 0 ]; then
      log "$image: stand-in up to date"; return 0
    fi
    log "$image: rebuilding the stand-in"
    return 1
  fi
  if timeout "$PULL_TIMEOUT" docker pull --quiet "$image" >/dev/null 2>&1; then
    log "$image: pulled the real image"; return 0
  fi
  log "$image: cannot be pulled; building a stand-in"
  return 1
}

build() { # image hash context dockerfile
  docker build --label "org.ax3l.standin=$2" -t "$1" -f "$4" "$3" >"$WORK/build.log" 2>&1 || {
    tail -30 "$WORK/build.log" >&2; exit 1
  }
  log "$1: built"
}

debian() {
  local hash
  hash=$(echo "minbase bookworm $MIRROR v1" | sha256sum | cut -c1-16)
  wanted "$DEBIAN_IMAGE" "$hash" && return
  command -v debootstrap >/dev/null || {
    log "installing debootstrap from Debian's packages"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  }
  local root=$WORK/debian
  mkdir -p "$root"
  debootstrap --variant=minbase bookworm "$root/fs" "$MIRROR" >"$root/debootstrap.log" 2>&1 || {
    tail -20 "$root/debootstrap.log" >&2; exit 1
  }
  # As the official image: updates and security suites, no package lists or caches.
  rm -f "$root/fs/etc/apt/sources.list"
  cat >"$root/fs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${MIRROR%/debian}/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  rm -rf "$root/fs/var/lib/apt/lists/"* "$root/fs/var/cache/apt/"*.bin "$root/fs/var/cache/apt/archives/"*.deb
  tar -C "$root/fs" -c . | docker import --change 'CMD ["bash"]' \
    --change "LABEL org.ax3l.standin=$hash" - "$DEBIAN_IMAGE" >/dev/null
  log "$DEBIAN_IMAGE: built"
}

uv_image() {
  local hash
  hash=$(echo "$UV_VERSION" | cat - "$STANDINS/uv.Dockerfile" | sha256sum | cut -c1-16)
  wanted "$UV_IMAGE" "$hash" && return
  local ctx=$WORK/uv
  mkdir -p "$ctx"
  mkdir -p "$CACHE"
  python3 scripts/uv_wheel.py "$UV_VERSION" "$CACHE" --extract "$ctx" >/dev/null
  cp "$STANDINS/uv.Dockerfile" "$ctx/Dockerfile"
  build "$UV_IMAGE" "$hash" "$ctx" "$ctx/Dockerfile"
}

base_id() { docker image inspect --format '{{.Id}}' "$DEBIAN_IMAGE"; }

# Keeps, pulls or builds the stand-in $1 on the debian stand-in: the Dockerfile $3 in the build
# context $WORK/$2, with each further SOURCE=TARGET copied (mode kept) to TARGET in it. The label
# hashes the debian image's id, the Dockerfile and the sources, in that order.
debian_standin() {
  local image=$1 ctx=$WORK/$2 dockerfile=$3 hash pair
  shift 3
  hash=$( (base_id; cat "$dockerfile" "${@%%=*}") | sha256sum | cut -c1-16)
  wanted "$image" "$hash" && return
  mkdir -p "$ctx"
  for pair in "$@"; do cp -p "${pair%%=*}" "$ctx/${pair#*=}"; done
  cp "$dockerfile" "$ctx/Dockerfile"
  build "$image" "$hash" "$ctx" "$ctx/Dockerfile"
}

python_image() {
  local ca=(/usr/local/share/ca-certificates/*.crt) cert certs=()
  [ -e "${ca[0]}" ] || ca=()
  mkdir -p "$WORK/python/ca" # COPY ca/ wants the folder, also when this machine adds no CA
  for cert in "${ca[@]}"; do certs+=("$cert=ca/${cert##*/}"); done
  debian_standin "$PYTHON_IMAGE" python "$STANDINS/python.Dockerfile" "${certs[@]}"
}

db_image() {
  debian_standin "$DB_IMAGE" db "$STANDINS/mariadb.Dockerfile" \
    "$STANDINS/mariadb-entrypoint.sh=mariadb-entrypoint.sh"
}

llama_image() {
  local binary
  binary=$(scripts/llama-server.sh path)
  [ -x "$binary" ] || { log "no llama-server binary yet: run scripts/llama-server.sh build"; exit 1; }
  debian_standin "$LLAMA_IMAGE" llama "$STANDINS/llama-server.Dockerfile" "$binary=llama-server"
}

# Cold mode: untag every stand-in and every image built on one (the services' images), then drop
# the layers nothing names any more, so the next run builds them all again.
clean_standins() {
  local standins image children
  standins=$(docker image ls --filter label=org.ax3l.standin --format '{{.Repository}}:{{.Tag}}')
  [ -n "$standins" ] || { log "no stand-in images"; return 0; }
  for image in $standins; do
    children=$(docker image ls --filter "since=$image" --format '{{.Repository}}:{{.Tag}}' \
      | grep -v '<none>' || true)
    # shellcheck disable=SC2086 # one image reference per word
    [ -z "$children" ] || docker image rm --force $children >/dev/null 2>&1 || true
  done
  # shellcheck disable=SC2086
  docker image rm --force $standins >/dev/null
  docker image prune --force >/dev/null
  log "removed $(tr '\n' ' ' <<<"$standins")and the images built on them"
}

if [ "$clean" = 1 ]; then
  clean_standins
  exit 0
fi

debian
uv_image
python_image
db_image
[ "$llama" = 0 ] || llama_image
