#!/usr/bin/env bash
# Wharf test fixture: a single-node Ceph (mon + memstore osd + radosgw) serving S3 on loopback.
# Debian bookworm packages (Ceph Pacific 16.2.x); installs them with apt-get when missing.
#
#   test/s3/ceph-rgw.sh [up|down|status]          (default: up)
#
#   up      Idempotent. If our cluster is already healthy, returns at once. Otherwise stops whatever
#           is left of it, wipes $CEPH_DIR and builds a fresh cluster. Serialised with flock on
#           "$CEPH_DIR.lock", so concurrent callers (test workers) start exactly one cluster: the
#           others wait for the lock and then find it ready. On success prints one line to stdout:
#             endpoint=http://127.0.0.1:$RGW_PORT
#           Progress goes to stderr. On failure: message + log tail on stderr, daemons stopped, exit 1.
#   down    Stops the daemons (keeps $CEPH_DIR/log for inspection).
#   status  Prints cluster / gateway state; exit 0 when healthy, 1 otherwise.
#
# Env (all optional):
#   CEPH_DIR       working dir for config/data/logs    (default /tmp/wharf-test-ceph)
#   RGW_PORT       S3 port on 127.0.0.1                 (default 7480)
#   MON_V2_PORT / MON_V1_PORT   monitor ports on 127.0.0.1 (default 3300 / 6789)
#   OSD_STORE      memstore | bluestore                 (default memstore)
#   S3_ACCESS_KEY / S3_SECRET_KEY                       (default test / testsecret)
#   S3_REGION      region clients sign with             (default us-east-1; anything else becomes
#                  the zonegroup api_name so CreateBucket with a LocationConstraint works)
#   CEPH_INSTALL   1 = apt-get install packages if missing (default 1)
#   CEPH_LOCK_WAIT seconds to wait for another caller's "up" (default 900)
#
# Daemons run as the invoking user (root in CI), detached (setsid, stdin /dev/null, output to
# files under $CEPH_DIR/log), no systemd, auth = none. Memstore: data lives only in RAM.
set -Eeuo pipefail

CEPH_DIR=${CEPH_DIR:-/tmp/wharf-test-ceph}
CEPH_DIR=${CEPH_DIR%/}
RGW_PORT=${RGW_PORT:-7480}
MON_V2_PORT=${MON_V2_PORT:-3300}
MON_V1_PORT=${MON_V1_PORT:-6789}
OSD_STORE=${OSD_STORE:-memstore}
S3_ACCESS_KEY=${S3_ACCESS_KEY:-test}
S3_SECRET_KEY=${S3_SECRET_KEY:-testsecret}
S3_REGION=${S3_REGION:-us-east-1}
CEPH_INSTALL=${CEPH_INSTALL:-1}
CEPH_LOCK_WAIT=${CEPH_LOCK_WAIT:-900}

CONF="$CEPH_DIR/ceph.conf"
LOGS="$CEPH_DIR/log"
PIDS="$CEPH_DIR/pids"
LOCK="$CEPH_DIR.lock"                 # outside $CEPH_DIR: that one gets wiped while we hold the lock
INSTALL_LOG="$CEPH_DIR.install.log"   # idem
STAMP="port=$RGW_PORT mon=$MON_V2_PORT,$MON_V1_PORT store=$OSD_STORE access=$S3_ACCESS_KEY secret=$S3_SECRET_KEY region=$S3_REGION"
CEPH=(ceph -c "$CONF" --connect-timeout 10)

BUILDING=0
t0=$(date +%s.%N)
log() { printf '[ceph-rgw %6.1fs] %s\n' "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')" "$*" >&2; }

# fail MESSAGE [LOGFILE...]: report, show the log tails, stop what we started, exit 1.
fail() {
  trap - ERR
  set +e
  echo "ceph-rgw: ERROR: $1" >&2
  shift
  local f
  for f in "$@"; do
    [ -f "$f" ] || continue
    echo "ceph-rgw: ---- last lines of $f ----" >&2
    tail -n 30 "$f" >&2
  done
  echo "ceph-rgw: read the logs in $LOGS/ (and $INSTALL_LOG if packages were being installed)" >&2
  if [ "$BUILDING" = 1 ]; then   # only a half-built cluster of our own is torn down, never a working one
    stop_daemons
    rm -f "$CEPH_DIR/ready"
  fi
  exit 1
}
trap 'fail "command failed (line $LINENO, exit $?): $BASH_COMMAND"' ERR

# A pid is "ours" only if it is alive and its command line names our ceph.conf (guards against pid reuse).
ours() {
  local pid=$1
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$CONF"
}

stop_daemons() {
  [ -d "$PIDS" ] || return 0
  local name pf pid
  for name in rgw osd mon; do           # reverse start order
    for pf in "$PIDS/$name".*.pid; do
      [ -e "$pf" ] || continue
      pid=$(cat "$pf" 2>/dev/null || true)
      if ours "$pid"; then
        log "stopping $(basename "$pf" .pid) (pid $pid)"
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do ours "$pid" || break; sleep 0.1; done
        ours "$pid" && kill -9 "$pid" 2>/dev/null || true
      fi
      rm -f "$pf"
    done
  done
}

# spawn NAME CMD...: run a daemon in the foreground (-f) of its own session, fully detached from our
# stdin/stdout/stderr (a parent reading our output must see EOF when we exit) and from the lock fd.
spawn() {
  local name=$1; shift
  setsid "$@" </dev/null >>"$LOGS/$name.out" 2>&1 9>&- &
  echo $! >"$PIDS/$name.pid"
}

port_busy() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }
rgw_alive() { curl -fsS -o /dev/null --max-time 3 "http://127.0.0.1:$RGW_PORT/" 2>/dev/null; }
# A signed ListBuckets with the test credentials: proves the gateway, the user and RADOS all work.
s3_signed_ok() {
  # (curl 7.88 does not add x-amz-content-sha256 itself, and RGW wants it signed: sha256 of "".)
  curl -fsS -o /dev/null --max-time 10 --aws-sigv4 "aws:amz:$S3_REGION:s3" \
    -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
    --user "$S3_ACCESS_KEY:$S3_SECRET_KEY" "http://127.0.0.1:$RGW_PORT/" 2>/dev/null
}
daemons_alive() {
  local pf n=0
  for pf in "$PIDS"/mon.*.pid "$PIDS"/osd.*.pid "$PIDS"/rgw.*.pid; do
    [ -e "$pf" ] || return 1
    ours "$(cat "$pf" 2>/dev/null)" || return 1
    n=$((n + 1))
  done
  [ "$n" -ge 3 ]
}
healthy() {
  [ -f "$CEPH_DIR/ready" ] && [ "$(cat "$CEPH_DIR/ready")" = "$STAMP" ] || return 1
  daemons_alive || return 1
  local i
  for i in 1 2 3; do s3_signed_ok && return 0; sleep 1; done
  return 1
}

status() {
  if [ -f "$CONF" ]; then timeout 15 "${CEPH[@]}" -s 2>&1 || true; fi
  if healthy; then echo "rgw: up on http://127.0.0.1:$RGW_PORT ($CEPH_DIR)"; return 0; fi
  if rgw_alive; then echo "rgw: something answers on 127.0.0.1:$RGW_PORT but it is not a healthy cluster of $CEPH_DIR"
  else echo "rgw: down"; fi
  return 1
}

cmd=${1:-up}
case "$cmd" in
  up|down|status) ;;
  *) echo "usage: $0 [up|down|status]" >&2; exit 2 ;;
esac

command -v flock >/dev/null || { echo "ceph-rgw: ERROR: flock (util-linux) is required" >&2; exit 1; }
mkdir -p "$(dirname "$CEPH_DIR")"
exec 9>>"$LOCK"

if [ "$cmd" = status ]; then
  trap - ERR
  if status; then exit 0; else exit 1; fi
fi

if ! flock -w "$CEPH_LOCK_WAIT" 9; then
  echo "ceph-rgw: ERROR: waited ${CEPH_LOCK_WAIT}s for $LOCK (another ceph-rgw.sh is stuck?)" >&2; exit 1
fi

if [ "$cmd" = down ]; then
  stop_daemons
  rm -f "$CEPH_DIR/ready"
  log "down"
  exit 0
fi

# ------------------------------------------------------------------------------------------ up
if healthy; then
  log "already up on 127.0.0.1:$RGW_PORT"
  echo "endpoint=http://127.0.0.1:$RGW_PORT"
  exit 0
fi

# ---------------------------------------------------------------- packages
need=()
for c in radosgw:radosgw ceph-mon:ceph-mon ceph-osd:ceph-osd ceph:ceph-common radosgw-admin:radosgw \
         monmaptool:ceph-common curl:curl setsid:util-linux timeout:coreutils; do
  command -v "${c%%:*}" >/dev/null || need+=("${c#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
  [ "$CEPH_INSTALL" = 1 ] || fail "missing packages: ${need[*]} (CEPH_INSTALL=$CEPH_INSTALL)"
  [ "$(id -u)" = 0 ] || fail "missing packages: ${need[*]}; run as root or install them: apt-get install ${need[*]}"
  log "installing packages: ${need[*]} (log: $INSTALL_LOG)"
  export DEBIAN_FRONTEND=noninteractive
  : >"$INSTALL_LOG"
  # /tmp/wharf-apt.lock serialises every apt-get the tests run (test/helpers/browser.ts too).
  flock /tmp/wharf-apt.lock apt-get -o DPkg::Lock::Timeout=600 update >>"$INSTALL_LOG" 2>&1 </dev/null 9>&- \
    || fail "apt-get update failed" "$INSTALL_LOG"
  flock /tmp/wharf-apt.lock apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=600 "${need[@]}" >>"$INSTALL_LOG" 2>&1 </dev/null 9>&- \
    || fail "apt-get install ${need[*]} failed" "$INSTALL_LOG"
  for c in radosgw ceph-mon ceph-osd ceph radosgw-admin monmaptool curl; do
    command -v "$c" >/dev/null || fail "$c still missing after apt-get install" "$INSTALL_LOG"
  done
  log "packages installed"
fi

# ---------------------------------------------------------------- fresh dir
BUILDING=1
stop_daemons
for p in "$RGW_PORT" "$MON_V2_PORT" "$MON_V1_PORT"; do
  if port_busy "$p"; then
    echo "ceph-rgw: ERROR: port 127.0.0.1:$p is already in use by another process (not a cluster of $CEPH_DIR); stop it or set RGW_PORT / MON_V2_PORT / MON_V1_PORT" >&2
    exit 1
  fi
done
rm -rf "$CEPH_DIR"
mkdir -p "$CEPH_DIR"/{run,log,pids,mon/ceph-a,osd/ceph-0,rgw}
FSID=$(cat /proc/sys/kernel/random/uuid)
OSD_UUID=$(cat /proc/sys/kernel/random/uuid)

cat >"$CONF" <<EOF
[global]
fsid = $FSID
mon host = v2:127.0.0.1:$MON_V2_PORT,v1:127.0.0.1:$MON_V1_PORT
mon initial members = a
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind ipv6 = false
auth cluster required = none
auth service required = none
auth client required = none
auth allow insecure global id reclaim = false
# radosgw defaults ms_mon_client_mode=secure, which cannot work with auth=none
ms mon client mode = crc
run dir = $CEPH_DIR/run
pid file = $CEPH_DIR/run/\$name.pid
admin socket = $CEPH_DIR/run/\$name.asok
log file = $CEPH_DIR/log/\$name.log
mon data = $CEPH_DIR/mon/ceph-\$id
osd data = $CEPH_DIR/osd/ceph-\$id
keyring = /dev/null
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon max pg per osd = 1000
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
osd objectstore = $OSD_STORE
memstore device bytes = 2147483648
bluestore block path = $CEPH_DIR/osd/ceph-\$id/block.img
bluestore block create = true
bluestore block size = 4294967296
bluestore fsck on mkfs = false
osd memory target = 939524096
bluestore cache autotune = false
bluestore cache size = 134217728
osd op num shards = 1
osd op num threads per shard = 2
debug ms = 0
[client.rgw.a]
rgw frontends = beast endpoint=127.0.0.1:$RGW_PORT tcp_nodelay=1
rgw data = $CEPH_DIR/rgw
rgw thread pool size = 64
rgw enable usage log = false
EOF

# ---------------------------------------------------------------- mon
log "creating mon (127.0.0.1:$MON_V2_PORT/$MON_V1_PORT)"
monmaptool --create --clobber --fsid "$FSID" --addv a "[v2:127.0.0.1:$MON_V2_PORT,v1:127.0.0.1:$MON_V1_PORT]" \
  "$CEPH_DIR/monmap" >"$LOGS/monmaptool.out" 2>&1 </dev/null \
  || fail "monmaptool failed" "$LOGS/monmaptool.out"
ceph-mon -c "$CONF" --mkfs -i a --monmap "$CEPH_DIR/monmap" >"$LOGS/mon-mkfs.out" 2>&1 </dev/null 9>&- \
  || fail "ceph-mon --mkfs failed" "$LOGS/mon-mkfs.out" "$LOGS/mon.a.log"
spawn mon.a ceph-mon -f -c "$CONF" -i a
ok=0
for _ in $(seq 1 120); do
  ours "$(cat "$PIDS/mon.a.pid")" || break
  timeout 15 "${CEPH[@]}" mon stat >/dev/null 2>&1 </dev/null && { ok=1; break; }
  sleep 0.5
done
[ $ok = 1 ] || fail "ceph-mon did not come up" "$LOGS/mon.a.out" "$LOGS/mon.a.log"
log "mon up"

# ---------------------------------------------------------------- osd
OSD_ID=$(timeout 30 "${CEPH[@]}" osd new "$OSD_UUID" 2>"$LOGS/osd-new.out" </dev/null) \
  || fail "ceph osd new failed" "$LOGS/osd-new.out"
log "creating osd.$OSD_ID ($OSD_STORE)"
ceph-osd -c "$CONF" -i "$OSD_ID" --mkfs --osd-uuid "$OSD_UUID" >"$LOGS/osd-mkfs.out" 2>&1 </dev/null 9>&- \
  || fail "ceph-osd --mkfs failed" "$LOGS/osd-mkfs.out" "$LOGS/osd.$OSD_ID.log"
spawn "osd.$OSD_ID" ceph-osd -f -c "$CONF" -i "$OSD_ID"
ok=0
for _ in $(seq 1 240); do
  ours "$(cat "$PIDS/osd.$OSD_ID.pid")" || break
  timeout 15 "${CEPH[@]}" osd dump 2>/dev/null </dev/null | grep -q "^osd.$OSD_ID up" && { ok=1; break; }
  sleep 0.5
done
[ $ok = 1 ] || fail "ceph-osd did not come up" "$LOGS/osd.$OSD_ID.out" "$LOGS/osd.$OSD_ID.log"
log "osd up"

# ---------------------------------------------------------------- rgw
start_rgw() {
  log "starting radosgw on 127.0.0.1:$RGW_PORT"
  spawn rgw.a radosgw -f -c "$CONF" -n client.rgw.a
  local ok=0
  for _ in $(seq 1 240); do
    ours "$(cat "$PIDS/rgw.a.pid")" || break
    rgw_alive && { ok=1; break; }
    sleep 0.5
  done
  [ $ok = 1 ] || fail "radosgw did not come up on 127.0.0.1:$RGW_PORT" "$LOGS/rgw.a.out" "$LOGS/client.rgw.a.log"
  log "rgw up"
}
start_rgw

radosgw-admin -c "$CONF" -n client.admin user create --uid=test --display-name="wharf test user" \
  --access-key="$S3_ACCESS_KEY" --secret-key="$S3_SECRET_KEY" >"$CEPH_DIR/user.json" 2>"$LOGS/user-create.out" </dev/null 9>&- \
  || fail "radosgw-admin user create failed" "$LOGS/user-create.out"

if [ "$S3_REGION" != us-east-1 ]; then
  # The default zonegroup exists only once radosgw has initialised it; rename its api_name, restart rgw.
  log "setting zonegroup api_name=$S3_REGION (restarting radosgw)"
  radosgw-admin -c "$CONF" -n client.admin zonegroup modify --rgw-zonegroup=default --api-name="$S3_REGION" \
    >"$LOGS/zonegroup.out" 2>&1 </dev/null 9>&- || fail "radosgw-admin zonegroup modify failed" "$LOGS/zonegroup.out"
  pid=$(cat "$PIDS/rgw.a.pid"); kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do ours "$pid" || break; sleep 0.1; done
  ours "$pid" && kill -9 "$pid" 2>/dev/null || true
  start_rgw
fi

ok=0
for _ in $(seq 1 60); do s3_signed_ok && { ok=1; break; }; sleep 0.5; done
[ $ok = 1 ] || fail "radosgw answers, but a signed ListBuckets as $S3_ACCESS_KEY fails" "$LOGS/client.rgw.a.log"

printf '%s' "$STAMP" >"$CEPH_DIR/ready"
log "ready: S3 endpoint http://127.0.0.1:$RGW_PORT region=$S3_REGION access=$S3_ACCESS_KEY secret=$S3_SECRET_KEY"
echo "endpoint=http://127.0.0.1:$RGW_PORT"
