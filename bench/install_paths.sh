#!/usr/bin/env bash
# Time each way a user installs memory-ls, from nothing: a new HOME, empty uv and pip caches,
# no model, no llama.cpp wheel kept. Usage (from the repository root):
#
#   python -m build --wheel -o /tmp/dist . && bash bench/install_paths.sh /tmp/dist/memory_ls-*.whl [--model]
#
# Prints, per path, the seconds to a first keyword search of examples/demo; with --model, for
# the uv path also the seconds to a search by meaning after `memory-ls model pull` (which
# compiles llama.cpp for this CPU: minutes). Needs uv and pipx on PATH (the dev extra has both).
set -u
wheel=$(readlink -f "$1")
model=${2:-}
demo=$(readlink -f "$(dirname "$0")/../examples/demo")
elapsed() { echo "$(date +%s.%N) - $1" | bc; }
for path in uv pipx pip; do
  root=$(mktemp -d "/tmp/memory-ls-install-$path.XXXXXX")
  mkdir -p "$root/home"
  cp -r "$demo" "$root/demo"
  export HOME="$root/home" XDG_CACHE_HOME="$root/home/.cache" PIP_NO_CACHE_DIR=1
  export UV_CACHE_DIR="$root/uv-cache" UV_TOOL_DIR="$root/tools" UV_TOOL_BIN_DIR="$root/bin"
  export PIPX_HOME="$root/pipx" PIPX_BIN_DIR="$root/bin"
  start=$(date +%s.%N)
  case $path in
    uv) uv tool install "$wheel" >"$root/install.log" 2>&1; exe="$root/bin/memory-ls" ;;
    pipx) pipx install "$wheel" >"$root/install.log" 2>&1; exe="$root/bin/memory-ls" ;;
    pip) python3 -m venv "$root/venv" && "$root/venv/bin/pip" install -q "$wheel" >"$root/install.log" 2>&1
      exe="$root/venv/bin/memory-ls" ;;
  esac
  "$exe" index -w "$root/demo" >/dev/null 2>&1
  hit=$("$exe" search -w "$root/demo" "what happened to checkout latency" 2>/dev/null | head -1)
  echo "$path: $(elapsed "$start") s to a keyword search (${hit:-NO HIT}); load $(cut -d' ' -f1 /proc/loadavg)"
  if [ "$path" = uv ] && [ "$model" = --model ]; then
    "$exe" model pull >"$root/pull.log" 2>&1
    "$exe" index -w "$root/demo" >/dev/null 2>&1
    mode=$("$exe" search -w "$root/demo" --json "what happened to checkout latency" | grep -o '"mode": "[a-z]*"')
    echo "uv + model pull: $(elapsed "$start") s to a search by meaning ($mode); load $(cut -d' ' -f1 /proc/loadavg)"
  fi
  rm -rf "$root"
done
