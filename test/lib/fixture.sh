# Shared parts of the test fixtures that start a server on loopback (test/redis/redis-server.sh,
# test/pg/postgres.sh): progress lines, the failure report, and installing Debian packages.
# Sourced, not run. The script sets before sourcing:
#   FIXTURE       its name in messages ("redis-server.sh")
#   FIXTURE_TAG   its tag in progress lines ("redis")
#   READY         the file that marks its server healthy (removed when a start fails)
# and defines stop_server. It sets STARTING=1 once it starts a server of its own.

STARTING=0
t0=$(date +%s.%N)
log() { printf '[%s %6.1fs] %s\n' "$FIXTURE_TAG" "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')" "$*" >&2; }

# fail MESSAGE [LOGFILE...]: report, show the log tails, stop what we started, exit 1.
fail() {
  trap - ERR
  set +e
  echo "$FIXTURE: ERROR: $1" >&2
  shift
  local f
  for f in "$@"; do
    [ -f "$f" ] || continue
    echo "$FIXTURE: ---- last lines of $f ----" >&2
    tail -n 30 "$f" >&2
  done
  if [ "$STARTING" = 1 ]; then   # only a half-started server of our own is stopped, never a working one
    stop_server
    rm -f "$READY"
  fi
  exit 1
}

# install_packages ALLOWED SWITCH LOGFILE PACKAGE...: apt-get install the packages (sorted, once
# each) when ALLOWED is 1 and we are root; otherwise fail saying how (SWITCH names the variable).
# /tmp/wharf-apt.lock serialises every apt-get the tests run (these fixtures,
# test/s3/ceph-rgw.sh, test/helpers/debian.ts).
install_packages() {
  local allowed=$1 switch=$2 install_log=$3
  shift 3
  local need
  mapfile -t need < <(printf '%s\n' "$@" | sort -u)
  [ "$allowed" = 1 ] || fail "missing packages: ${need[*]} ($switch=$allowed)"
  [ "$(id -u)" = 0 ] || fail "missing packages: ${need[*]}; run as root or install them: apt-get install ${need[*]}"
  log "installing packages: ${need[*]} (log: $install_log)"
  export DEBIAN_FRONTEND=noninteractive
  : >"$install_log"
  flock /tmp/wharf-apt.lock apt-get -o DPkg::Lock::Timeout=600 update >>"$install_log" 2>&1 </dev/null 9>&- \
    || fail "apt-get update failed" "$install_log"
  flock /tmp/wharf-apt.lock apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=600 "${need[@]}" >>"$install_log" 2>&1 </dev/null 9>&- \
    || fail "apt-get install ${need[*]} failed" "$install_log"
}
