#!/usr/bin/env bash
# Install memory-ls and its development tools into ./.venv (README command 1 and .ci/run use this).
#
# The slow part of a first install is compiling llama-cpp-python (llama.cpp) from source; pip keeps
# the wheel in its cache, so later installs take seconds. Three settings make that first build fast
# and the cached wheel safe to reuse:
# - CMAKE_BUILD_PARALLEL_LEVEL: every core. Without ninja, CMake's makefiles build on one core.
# - CMAKE_ARGS: leave out what memory-ls never uses (multimodal "mtmd", tools, examples, tests,
#   server), and build for a fixed x86-64 level (AVX2, FMA, F16C) instead of -march=native, so a
#   wheel built on one CPU does not crash with an illegal instruction on an older one.
# MEMORY_LS_NATIVE_BUILD=1 builds for this CPU instead (-march=native): on an AVX-512 CPU local
# embedding is then about 1.4x as fast, but the cached wheel is for this CPU only. pip reuses a
# cached wheel whatever these settings say: add PIP_NO_CACHE_DIR=1 to build again.
# A CMAKE_ARGS or CMAKE_BUILD_PARALLEL_LEVEL already in the environment wins.
set -euo pipefail
cd "$(dirname "$0")"

cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$cores}"
if [ -z "${CMAKE_ARGS:-}" ]; then
  CMAKE_ARGS="-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
  CMAKE_ARGS="$CMAKE_ARGS -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF"
  case "${MEMORY_LS_NATIVE_BUILD:-0}:$(uname -m)" in
    0:x86_64 | 0:amd64)
      CMAKE_ARGS="$CMAKE_ARGS -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON"
      CMAKE_ARGS="$CMAKE_ARGS -DGGML_F16C=ON -DGGML_BMI2=ON"
      ;;
  esac
  export CMAKE_ARGS
fi

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[dev]'
