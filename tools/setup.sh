#!/usr/bin/env bash
# Shared set-up for tools/ccsim and tools/test: installs missing Debian packages (as root),
# configures the Release build in build/ and builds the requested targets. Sourced, not run.
set -euo pipefail

CCSIM_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CCSIM_BUILD="${CCSIM_BUILD_DIR:-$CCSIM_ROOT/build}"

# Debian packages the build and the tests need (CUDA is optional and never installed here).
CCSIM_PACKAGES=(cmake make g++ libboost-graph-dev libboost-program-options-dev libeigen3-dev
  nlohmann-json3-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev
  python3-dev pybind11-dev python3-numpy python3-torch python3-sklearn python3-matplotlib python3-pandas
  openmpi-bin libopenmpi-dev)

ccsim_install_packages() {
  if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "ccsim: not a Debian system; make sure these (or equivalents) are installed: ${CCSIM_PACKAGES[*]}" >&2
    return 0
  fi
  local missing=()
  for p in "${CCSIM_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then missing+=("$p"); fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "ccsim: missing Debian packages: ${missing[*]}" >&2
    echo "ccsim: install them with:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 2
  fi
  echo "ccsim: installing Debian packages: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  local log
  log="$(mktemp)"
  if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "ccsim: apt-get could not install: ${missing[*]}" >&2
    exit 1
  fi
  rm -f "$log"
}

ccsim_configure() {
  # nvcc in the toolkit's default location is used when it is not on PATH already.
  if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
  fi
  if [ ! -f "$CCSIM_BUILD/CMakeCache.txt" ]; then
    mkdir -p "$CCSIM_BUILD"
    if ! cmake -S "$CCSIM_ROOT" -B "$CCSIM_BUILD" -DCMAKE_BUILD_TYPE=Release >"$CCSIM_BUILD/configure.log" 2>&1; then
      cat "$CCSIM_BUILD/configure.log" >&2
      echo "ccsim: configuring failed (log: $CCSIM_BUILD/configure.log)" >&2
      rm -f "$CCSIM_BUILD/CMakeCache.txt"
      exit 1
    fi
    grep -E "^-- ccsim:" "$CCSIM_BUILD/configure.log" | sed 's/^-- /  /' >&2 || true
  fi
}

# ccsim_build [target...]: builds quietly; prints the log's errors on failure.
ccsim_build() {
  local jobs
  jobs="$(nproc 2>/dev/null || echo 2)"
  local args=()
  for t in "$@"; do args+=(--target "$t"); done
  if [ ! -f "$CCSIM_BUILD/.built-once" ]; then
    echo "ccsim: building in ${CCSIM_BUILD#"$CCSIM_ROOT"/}/ ($jobs jobs); the first build takes a few minutes; log in ${CCSIM_BUILD#"$CCSIM_ROOT"/}/build.log" >&2
  fi
  if ! cmake --build "$CCSIM_BUILD" -j "$jobs" "${args[@]}" >"$CCSIM_BUILD/build.log" 2>&1; then
    grep -E "error|Error" -A3 "$CCSIM_BUILD/build.log" | head -60 >&2 || tail -40 "$CCSIM_BUILD/build.log" >&2
    echo "ccsim: build failed (log: $CCSIM_BUILD/build.log)" >&2
    exit 1
  fi
  touch "$CCSIM_BUILD/.built-once"
}
