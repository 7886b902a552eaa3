#!/usr/bin/env bash
# Wharf test fixture: one redis-server (Debian's package, Redis 7) on loopback, shared by every test
# worker and every worktree of the machine. Installs the package with apt-get when missing.
#
#   test/redis/redis-server.sh [up|down|status]          (default: up)
#
#   up      Idempotent. If our server is already healthy, returns at once. Otherwise stops whatever
#           is left of it, wipes $REDIS_DIR and starts a fresh one. Serialised with flock on
#           "$REDIS_DIR.lock", so concurrent callers (test workers) start exactly one server: the
#           others wait for the lock and then find it ready. On success prints one line to stdout:
#             url=redis://:$REDIS_PASSWORD@127.0.0.1:$REDIS_PORT
#           Progress goes to stderr. On failure: message + log tail on stderr, server stopped, exit 1.
#   down    Stops the server (keeps $REDIS_DIR/redis.log for inspection).
#   status  Prints the server's state; exit 0 when healthy, 1 otherwise.
#
# Env (all optional):
#   REDIS_DIR        working dir for config, log and pid   (default /tmp/wharf-test-redis)
#   REDIS_PORT       port on 127.0.0.1                      (default 6390, not Redis's 6379, so a
#                    Redis the machine runs for itself is never touched)
#   REDIS_PASSWORD   password of the default user           (default testsecret: the tests always
#                    go through AUTH, as a production Redis would make them)
#   REDIS_INSTALL    1 = apt-get install redis-server if missing (default 1)
#   REDIS_LOCK_WAIT  seconds to wait for another caller's "up" (default 300)
#
# The server runs as the invoking user (root in CI), detached (setsid, stdin /dev/null, output to
# $REDIS_DIR/redis.log), no systemd, nothing saved to disk (save "", appendonly no). Tests give
# every app a key prefix of its own, so they share this one server without meeting. Tests that
# stop or pause a server start a private one instead (test/helpers/redis.ts), never this one.
# On a machine with systemd, installing the package also starts Debian's own redis-server on
# 6379; this script leaves it alone.
set -Eeuo pipefail

REDIS_DIR=${REDIS_DIR:-/tmp/wharf-test-redis}
REDIS_DIR=${REDIS_DIR%/}
REDIS_PORT=${REDIS_PORT:-6390}
REDIS_PASSWORD=${REDIS_PASSWORD:-testsecret}
REDIS_INSTALL=${REDIS_INSTALL:-1}
REDIS_LOCK_WAIT=${REDIS_LOCK_WAIT:-300}

CONF="$REDIS_DIR/redis.conf"
LOG="$REDIS_DIR/redis.log"
PIDFILE="$REDIS_DIR/redis.pid"
LOCK="$REDIS_DIR.lock"                 # outside $REDIS_DIR: that one gets wiped while we hold the lock
INSTALL_LOG="$REDIS_DIR.install.log"   # idem
STAMP="port=$REDIS_PORT password=$REDIS_PASSWORD"

FIXTURE=redis-server.sh
FIXTURE_TAG=redis
READY="$REDIS_DIR/ready"
# shellcheck source=../lib/fixture.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/fixture.sh"
trap 'fail "command failed (line $LINENO, exit $?): $BASH_COMMAND"' ERR

# A pid is "ours" only if it is alive, is a redis-server, and serves our port (guards against pid
# reuse). Redis rewrites its process title to "redis-server 127.0.0.1:PORT", hence the check.
ours() {
  local pid=$1
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "redis-server.*:$REDIS_PORT\b"
}

stop_server() {
  [ -f "$PIDFILE" ] || return 0
  local pid
  pid=$(cat "$PIDFILE" 2>/dev/null || true)
  if ours "$pid"; then
    log "stopping redis-server (pid $pid)"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do ours "$pid" || break; sleep 0.1; done
    ours "$pid" && kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$PIDFILE"
}

port_busy() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }
# PING with the password: proves the server, its port and AUTH work.
pong() { [ "$(REDISCLI_AUTH="$REDIS_PASSWORD" timeout 5 redis-cli -h 127.0.0.1 -p "$REDIS_PORT" --no-auth-warning ping 2>/dev/null)" = PONG ]; }
healthy() {
  [ -f "$REDIS_DIR/ready" ] && [ "$(cat "$REDIS_DIR/ready")" = "$STAMP" ] || return 1
  ours "$(cat "$PIDFILE" 2>/dev/null)" || return 1
  command -v redis-cli >/dev/null && pong
}

url() { echo "url=redis://:$REDIS_PASSWORD@127.0.0.1:$REDIS_PORT"; }

cmd=${1:-up}
case "$cmd" in
  up|down|status) ;;
  *) echo "usage: $0 [up|down|status]" >&2; exit 2 ;;
esac

command -v flock >/dev/null || { echo "redis-server.sh: ERROR: flock (util-linux) is required" >&2; exit 1; }
mkdir -p "$(dirname "$REDIS_DIR")"
exec 9>>"$LOCK"

if [ "$cmd" = status ]; then
  trap - ERR
  if healthy; then echo "redis: up on 127.0.0.1:$REDIS_PORT ($REDIS_DIR)"; exit 0; fi
  echo "redis: down"; exit 1
fi

if ! flock -w "$REDIS_LOCK_WAIT" 9; then
  echo "redis-server.sh: ERROR: waited ${REDIS_LOCK_WAIT}s for $LOCK (another redis-server.sh is stuck?)" >&2; exit 1
fi

if [ "$cmd" = down ]; then
  stop_server
  rm -f "$REDIS_DIR/ready"
  log "down"
  exit 0
fi

# ------------------------------------------------------------------------------------------ up
if healthy; then
  log "already up on 127.0.0.1:$REDIS_PORT"
  url
  exit 0
fi

# ---------------------------------------------------------------- packages
need=()
for c in redis-server:redis-server redis-cli:redis-tools setsid:util-linux timeout:coreutils; do
  command -v "${c%%:*}" >/dev/null || need+=("${c#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  install_packages "$REDIS_INSTALL" REDIS_INSTALL "$INSTALL_LOG" "${need[@]}"
  for c in redis-server redis-cli; do
    command -v "$c" >/dev/null || fail "$c still missing after apt-get install" "$INSTALL_LOG"
  done
  log "packages installed: $(redis-server --version | head -n 1)"
fi

# ---------------------------------------------------------------- fresh dir
STARTING=1
stop_server
if port_busy "$REDIS_PORT"; then
  echo "redis-server.sh: ERROR: port 127.0.0.1:$REDIS_PORT is already in use by another process (not the server of $REDIS_DIR); stop it or set REDIS_PORT" >&2
  exit 1
fi
rm -rf "$REDIS_DIR"
mkdir -p "$REDIS_DIR/data"
# The password is in the file, not on the command line (which `ps` shows to every user).
(umask 077 && cat >"$CONF" <<EOF
bind 127.0.0.1
port $REDIS_PORT
protected-mode yes
daemonize no
dir $REDIS_DIR/data
logfile ""
save ""
appendonly no
requirepass $REDIS_PASSWORD
maxmemory 256mb
maxmemory-policy noeviction
EOF
)

log "starting redis-server on 127.0.0.1:$REDIS_PORT"
setsid redis-server "$CONF" </dev/null >>"$LOG" 2>&1 9>&- &
echo $! >"$PIDFILE"
ok=0
# Alive, not ours(): Redis renames its process to "redis-server 127.0.0.1:PORT" only once it has
# started, so a check that early would take a server still starting for a dead one.
for _ in $(seq 1 100); do
  kill -0 "$(cat "$PIDFILE")" 2>/dev/null || break
  pong && { ok=1; break; }
  sleep 0.1
done
[ $ok = 1 ] || fail "redis-server did not come up on 127.0.0.1:$REDIS_PORT" "$LOG"

printf '%s' "$STAMP" >"$REDIS_DIR/ready"
log "ready: 127.0.0.1:$REDIS_PORT ($(redis-server --version | sed -n 's/.*\(v=[^ ]*\).*/\1/p'))"
url
