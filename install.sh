#!/usr/bin/env bash
# Install memory-ls and its development tools into ./.venv (README command 1 and .ci/run use this).
#
# The slow part of a first install is compiling llama-cpp-python (llama.cpp) from source. Three
# settings make that build fast and its wheel safe to reuse:
# - CMAKE_BUILD_PARALLEL_LEVEL: every core. Without ninja, CMake's makefiles build on one core.
# - CMAKE_ARGS: leave out what memory-ls never uses (multimodal "mtmd", tools, examples, tests,
#   server).
# - On x86-64: build for the instruction sets this CPU has (AVX2, AVX-VNNI, and AVX-512 with VNNI,
#   VBMI and BF16 where present; local embedding is about 1.4x as fast with AVX-512) but never with
#   -march=native, and keep the wheel in a folder named for exactly those sets
#   (~/.cache/memory-ls/wheels/x86_64-<sets>), outside pip's own cache: pip's cache is keyed by
#   the source only, so a wheel for one CPU would be handed to another and crash it with an
#   illegal instruction. Later installs on a CPU with the same sets take seconds.
# A CMAKE_ARGS already in the environment (a GPU build, say) wins: llama-cpp-python is then
# built and cached by pip as usual. So does CMAKE_BUILD_PARALLEL_LEVEL.
set -euo pipefail
cd "$(dirname "$0")"

cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$cores}"
wheels=""
if [ -z "${CMAKE_ARGS:-}" ]; then
  CMAKE_ARGS="-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
  CMAKE_ARGS="$CMAKE_ARGS -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF"
  case "$(uname -m)" in
    x86_64 | amd64)
      cpu=" $({ grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true; } | cut -d: -f2) "
      has() { case "$cpu" in *" $1 "*) return 0 ;; esac; return 1; }
      if [ -z "${cpu// /}" ]; then
        sets="" # no /proc/cpuinfo (macOS): llama.cpp's own defaults and pip's cache, as before
      elif has avx2 && has fma && has f16c && has bmi2; then
        sets="avx2"
        CMAKE_ARGS="$CMAKE_ARGS -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
        CMAKE_ARGS="$CMAKE_ARGS -DGGML_BMI2=ON"
        if has avx_vnni; then
          sets="$sets-avx_vnni"
          CMAKE_ARGS="$CMAKE_ARGS -DGGML_AVX_VNNI=ON"
        fi
        # ggml's AVX512 switch turns on these five (-mavx512f -mavx512cd -mavx512vl ...).
        if has avx512f && has avx512cd && has avx512vl && has avx512dq && has avx512bw; then
          sets="$sets-avx512"
          CMAKE_ARGS="$CMAKE_ARGS -DGGML_AVX512=ON"
          for pair in avx512_vnni:AVX512_VNNI avx512vbmi:AVX512_VBMI avx512_bf16:AVX512_BF16; do
            if has "${pair%%:*}"; then
              sets="$sets-${pair%%:*}"
              CMAKE_ARGS="$CMAKE_ARGS -DGGML_${pair##*:}=ON"
            fi
          done
        fi
      else # before 2013 (no AVX2): SSE4.2 only, as ggml's x86-64 default would assume AVX
        sets="sse42"
        CMAKE_ARGS="$CMAKE_ARGS -DGGML_SSE42=ON -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF"
        CMAKE_ARGS="$CMAKE_ARGS -DGGML_F16C=OFF -DGGML_BMI2=OFF"
      fi
      if [ -n "$sets" ]; then
        CMAKE_ARGS="$CMAKE_ARGS -DGGML_NATIVE=OFF"
        wheels="${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/memory-ls/wheels/x86_64-$sets"
      fi
      ;;
  esac
  export CMAKE_ARGS
fi

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
if [ -n "$wheels" ]; then
  # The requirement as pyproject.toml states it, e.g. llama-cpp-python>=0.3.16.
  spec=$(.venv/bin/python -c 'import re, tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
print(next(d for d in deps if re.match(r"llama[-_]cpp[-_]python\b", d)))')
  # A wheel in the folder that meets the requirement, else one built now (once per folder
  # and version), installed over whatever .venv held (an older install's build). pip runs
  # --isolated so that no configured find-links or index can supply another build; the
  # wheel's own dependencies come with the project's below.
  from_folder=(.venv/bin/python -m pip install -q --isolated --no-index --find-links "$wheels")
  from_folder+=(--no-deps --force-reinstall)
  if ! "${from_folder[@]}" "$spec" 2>/dev/null; then
    echo "install.sh: compiling llama-cpp-python for this CPU ($wheels), a few minutes" >&2
    mkdir -p "$wheels"
    build=$(mktemp -d "$wheels/.build.XXXXXX") # two installs at once never see half a wheel
    .venv/bin/python -m pip wheel -q --no-deps --no-cache-dir --no-binary llama-cpp-python \
      -w "$build" "$spec"
    mv "$build"/llama_cpp_python-*.whl "$wheels"/
    rmdir "$build"
    "${from_folder[@]}" "$spec"
  fi
fi
.venv/bin/python -m pip install -q -e '.[dev]'
