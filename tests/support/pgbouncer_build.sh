#!/usr/bin/env bash
# A current PgBouncer for the pooler tests, built from Debian's source package (Debian 12 ships
# 1.18, older than the prepared-statement tracking that 1.21 added and 1.22 turned on by
# default, which is what teams run today). Pinned by version and checksum; built once into
# PREFIX and reused. Needs a C compiler, make, pkg-config and libevent/OpenSSL headers
# (apt-get install build-essential pkg-config libevent-dev libssl-dev).
#
#   pgbouncer_build.sh PREFIX    prints the path of the pgbouncer binary
set -euo pipefail

version=1.24.1
sha256=da72a3aba13072876d055a3e58dd4aba4a5de4ed6148e73033185245598fd3e0
url=https://deb.debian.org/debian/pool/main/p/pgbouncer/pgbouncer_${version}.orig.tar.gz
prefix=${1:?usage: pgbouncer_build.sh PREFIX}
binary=$prefix/bin/pgbouncer

if [ -x "$binary" ] && "$binary" --version 2>/dev/null | grep -qx "PgBouncer $version"; then
  echo "$binary"
  exit 0
fi
work=$(mktemp -d /tmp/memory-ls-pgbouncer.XXXXXX)
trap 'rm -rf "$work"' EXIT
curl -fsSL --retry 3 -o "$work/src.tar.gz" "$url"
echo "$sha256  $work/src.tar.gz" | sha256sum -c --quiet -
tar -xzf "$work/src.tar.gz" -C "$work"
(
  cd "$work/pgbouncer-$version"
  # c-ares is optional (libevent's resolver serves 127.0.0.1); no systemd or PAM needed.
  ./configure --prefix="$prefix" --without-cares >"$work/configure.log" 2>&1 ||
    { tail -20 "$work/configure.log" >&2; exit 1; }
  make -j"$(nproc)" >"$work/make.log" 2>&1 || { tail -20 "$work/make.log" >&2; exit 1; }
  make install >"$work/install.log" 2>&1 || { tail -20 "$work/install.log" >&2; exit 1; }
)
"$binary" --version | grep -qx "PgBouncer $version"
echo "$binary"
