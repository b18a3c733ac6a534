#!/usr/bin/env bash
# Install memory-ls and its development tools into ./.venv (README command 1 and .ci/run use this).
#
# The slow part of a first install is compiling llama-cpp-python (llama.cpp, the local models'
# runtime) from source. memory_ls/models/llama_build.py builds it on every core, without what
# memory-ls never uses, and on x86-64 for the instruction sets this CPU has (never
# -march=native), keeping the wheel per CPU in ~/.cache/memory-ls/wheels/ so that later
# installs take seconds. A CMAKE_ARGS already in the environment (a GPU build, say) wins, and
# so does CMAKE_BUILD_PARALLEL_LEVEL.
set -euo pipefail
cd "$(dirname "$0")"

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# memory-ls alone first (its dependencies are wheels: seconds), so that its llama.cpp builder
# can run; then llama-cpp-python; then the extras (dev: the local model, the team index, the
# manual and the tools), which find llama-cpp-python already there.
.venv/bin/python -m pip install -q -e .
.venv/bin/python -m memory_ls.models.llama_build
.venv/bin/python -m pip install -q -e '.[dev]'
