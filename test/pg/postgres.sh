#!/usr/bin/env bash
# Wharf test fixture: one PostgreSQL 15 server (Debian's package) on loopback, shared by every test
# worker and every worktree of the machine. Installs the package with apt-get when missing.
#
#   test/pg/postgres.sh [up|down|status]          (default: up)
#
#   up      Idempotent. If our server is already healthy, returns at once. Otherwise stops whatever
#           is left of it, wipes $PG_DIR, runs initdb and starts a fresh server. Serialised with
#           flock on "$PG_DIR.lock", so concurrent callers (test workers) start exactly one server:
#           the others wait for the lock and then find it ready. On success prints one line:
#             url=postgres://$PG_USER:$PG_PASSWORD@127.0.0.1:$PG_PORT/postgres
#           Progress goes to stderr. On failure: message + log tail on stderr, server stopped, exit 1.
#   down    Stops the server (keeps $PG_DIR/postgres.log for inspection).
#   status  Prints the server's state; exit 0 when healthy, 1 otherwise.
#
# Env (all optional):
#   PG_DIR        working dir for the cluster, log and pid   (default /tmp/wharf-test-pg)
#   PG_PORT       port on 127.0.0.1                           (default 5499, not 5432, so a
#                 PostgreSQL the machine runs for itself is never touched)
#   PG_USER       superuser the tests log in as              (default wharf; tests create a
#                 database each, test/helpers/postgres.ts)
#   PG_PASSWORD   its password                                (default testsecret: password auth
#                 over TCP, scram-sha-256, as a production server would want)
#   PG_INSTALL    1 = apt-get install postgresql if missing   (default 1)
#   PG_LOCK_WAIT  seconds to wait for another caller's "up"   (default 300)
#   PG_SETTINGS   more server settings, space-separated name=value pairs, each given as -c
#                 (default none; for measurements, say PG_SETTINGS="shared_preload_libraries=
#                 pg_stat_statements pg_stat_statements.track=all" on a PG_DIR and PG_PORT of
#                 their own: BENCHMARKS.md, issue 16 part 11)
#
# PostgreSQL refuses to run as root: when the script runs as root (CI), the server runs as the
# `postgres` user the package creates (setpriv, which execs, so the pid we record is the
# server's); otherwise as the invoking user. Detached (setsid, stdin /dev/null, output to
# $PG_DIR/postgres.log), no systemd. Durability is off (fsync, synchronous_commit): test data only.
# On a machine with systemd, installing the package also starts Debian's own cluster on 5432;
# this script leaves it alone.
set -Eeuo pipefail

PG_DIR=${PG_DIR:-/tmp/wharf-test-pg}
PG_DIR=${PG_DIR%/}
PG_PORT=${PG_PORT:-5499}
PG_USER=${PG_USER:-wharf}
PG_PASSWORD=${PG_PASSWORD:-testsecret}
PG_INSTALL=${PG_INSTALL:-1}
PG_LOCK_WAIT=${PG_LOCK_WAIT:-300}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}

DATA="$PG_DIR/data"
SOCK="$PG_DIR/sock"
LOG="$PG_DIR/postgres.log"
PIDFILE="$PG_DIR/postgres.pid"
LOCK="$PG_DIR.lock"                 # outside $PG_DIR: that one gets wiped while we hold the lock
INSTALL_LOG="$PG_DIR.install.log"   # idem
PG_SETTINGS=${PG_SETTINGS:-}
STAMP="port=$PG_PORT user=$PG_USER password=$PG_PASSWORD${PG_SETTINGS:+ settings=$PG_SETTINGS}"
# shellcheck disable=SC2206 # split on spaces on purpose: name=value pairs
EXTRA=(); for setting in $PG_SETTINGS; do EXTRA+=(-c "$setting"); done

FIXTURE=postgres.sh
FIXTURE_TAG=postgres
READY="$PG_DIR/ready"
# shellcheck source=../lib/fixture.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/fixture.sh"
trap 'fail "command failed (line $LINENO, exit $?): $BASH_COMMAND"' ERR

# The server runs as `postgres` when we are root (it refuses root), else as ourselves.
as_server() {
  if [ "$(id -u)" = 0 ]; then setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"; else "$@"; fi
}

# A pid is "ours" only if it is alive and is a postgres whose data dir is ours (guards against
# pid reuse). The postmaster keeps its command line; only its children retitle themselves.
ours() {
  local pid=$1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && [ -r "/proc/$pid/cmdline" ] \
    && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "postgres.*-D $DATA\b"
}

stop_server() {
  [ -f "$PIDFILE" ] || return 0
  local pid
  pid=$(cat "$PIDFILE" 2>/dev/null || true)
  if ours "$pid"; then
    log "stopping postgres (pid $pid)"
    kill -INT "$pid" 2>/dev/null || true   # fast shutdown
    for _ in $(seq 1 100); do ours "$pid" || break; sleep 0.1; done
    ours "$pid" && kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$PIDFILE"
}

port_busy() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }
# A real query over TCP with the password: proves the server, its port and the auth work.
answers() {
  [ "$(PGPASSWORD="$PG_PASSWORD" PGCONNECT_TIMEOUT=5 timeout 10 psql -h 127.0.0.1 -p "$PG_PORT" -U "$PG_USER" -d postgres -XAtqc 'SELECT 1' 2>/dev/null)" = 1 ]
}
healthy() {
  [ -f "$PG_DIR/ready" ] && [ "$(cat "$PG_DIR/ready")" = "$STAMP" ] || return 1
  ours "$(cat "$PIDFILE" 2>/dev/null)" || return 1
  command -v psql >/dev/null && answers
}

url() { echo "url=postgres://$PG_USER:$PG_PASSWORD@127.0.0.1:$PG_PORT/postgres"; }

cmd=${1:-up}
case "$cmd" in
  up|down|status) ;;
  *) echo "usage: $0 [up|down|status]" >&2; exit 2 ;;
esac

command -v flock >/dev/null || { echo "postgres.sh: ERROR: flock (util-linux) is required" >&2; exit 1; }
mkdir -p "$(dirname "$PG_DIR")"
exec 9>>"$LOCK"

if [ "$cmd" = status ]; then
  trap - ERR
  if healthy; then echo "postgres: up on 127.0.0.1:$PG_PORT ($PG_DIR)"; exit 0; fi
  echo "postgres: down"; exit 1
fi

if ! flock -w "$PG_LOCK_WAIT" 9; then
  echo "postgres.sh: ERROR: waited ${PG_LOCK_WAIT}s for $LOCK (another postgres.sh is stuck?)" >&2; exit 1
fi

if [ "$cmd" = down ]; then
  stop_server
  rm -f "$PG_DIR/ready"
  log "down"
  exit 0
fi

# ------------------------------------------------------------------------------------------ up
if healthy; then
  log "already up on 127.0.0.1:$PG_PORT"
  url
  exit 0
fi

# ---------------------------------------------------------------- packages
need=()
[ -x "$PG_BIN/postgres" ] && [ -x "$PG_BIN/initdb" ] || need+=(postgresql)
for c in psql:postgresql-client setsid:util-linux setpriv:util-linux timeout:coreutils; do
  command -v "${c%%:*}" >/dev/null || need+=("${c#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  install_packages "$PG_INSTALL" PG_INSTALL "$INSTALL_LOG" "${need[@]}"
  [ -x "$PG_BIN/postgres" ] || fail "$PG_BIN/postgres still missing after apt-get install (not PostgreSQL 15? set PG_BIN)" "$INSTALL_LOG"
  command -v psql >/dev/null || fail "psql still missing after apt-get install" "$INSTALL_LOG"
  log "packages installed: $("$PG_BIN/postgres" --version)"
fi
if [ "$(id -u)" = 0 ]; then id postgres >/dev/null 2>&1 || fail "user postgres missing (the postgresql package creates it)"; fi

# ---------------------------------------------------------------- fresh cluster
STARTING=1
stop_server
if port_busy "$PG_PORT"; then
  echo "postgres.sh: ERROR: port 127.0.0.1:$PG_PORT is already in use by another process (not the server of $PG_DIR); stop it or set PG_PORT" >&2
  exit 1
fi
rm -rf "$PG_DIR"
mkdir -p "$PG_DIR" "$SOCK"
: >"$LOG"
PWFILE="$PG_DIR/pwfile"
(umask 077 && printf '%s\n' "$PG_PASSWORD" >"$PWFILE")
[ "$(id -u)" = 0 ] && chown -R postgres:postgres "$PG_DIR"
chmod 700 "$PG_DIR"

log "initdb $DATA"
as_server "$PG_BIN/initdb" -D "$DATA" -U "$PG_USER" --pwfile="$PWFILE" --auth=scram-sha-256 -E UTF8 --locale=C.UTF-8 >>"$LOG" 2>&1 </dev/null \
  || fail "initdb failed" "$LOG"
rm -f "$PWFILE"

log "starting postgres on 127.0.0.1:$PG_PORT"
# setpriv execs: $! is the postmaster itself.
if [ "$(id -u)" = 0 ]; then
  setsid setpriv --reuid=postgres --regid=postgres --init-groups -- "$PG_BIN/postgres" -D "$DATA" -p "$PG_PORT" \
    -c listen_addresses=127.0.0.1 -c unix_socket_directories="$SOCK" -c max_connections=300 \
    -c fsync=off -c synchronous_commit=off -c full_page_writes=off "${EXTRA[@]}" </dev/null >>"$LOG" 2>&1 9>&- &
else
  setsid "$PG_BIN/postgres" -D "$DATA" -p "$PG_PORT" \
    -c listen_addresses=127.0.0.1 -c unix_socket_directories="$SOCK" -c max_connections=300 \
    -c fsync=off -c synchronous_commit=off -c full_page_writes=off "${EXTRA[@]}" </dev/null >>"$LOG" 2>&1 9>&- &
fi
echo $! >"$PIDFILE"
ok=0
# Alive (kill -0) and answering a real query: not the process title, which says nothing about
# whether the server accepts connections yet.
for _ in $(seq 1 300); do
  kill -0 "$(cat "$PIDFILE")" 2>/dev/null || break
  if "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" && answers; then ok=1; break; fi
  sleep 0.1
done
[ $ok = 1 ] || fail "postgres did not come up on 127.0.0.1:$PG_PORT" "$LOG"

printf '%s' "$STAMP" >"$PG_DIR/ready"
log "ready: 127.0.0.1:$PG_PORT ($("$PG_BIN/postgres" --version))"
url
