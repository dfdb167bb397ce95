#!/usr/bin/env bash
# The project's one way to get Debian packages onto the host (engine, nginx, promtool, mmdebstrap, ...).
#   tools/apt.sh install [--no-recommends] PKG...   apt-get install, `apt-get update` first when needed
#   tools/apt.sh download PKG DIR                   the package's .deb into DIR (nothing installed)
# Two apt-gets at once fail at once ("Could not get lock ..."): a background `docker/engine.sh up` and a
# `make bench-tools` raced like that on fresh machines. So every call here takes its turn:
#   - the project's own calls queue on one lock file (flock), update + install as one step;
#   - any other apt (a user's, unattended-upgrades) is waited for: dpkg's lock with apt's own
#     DPkg::Lock::Timeout, the package lists' lock (which `apt-get update` does not wait for) by retrying.
# Both waits end after APT_LOCK_TIMEOUT seconds (default 600) with one line naming the holder. A failed
# install exits 1 naming the packages and apt's last error: callers fail, they never turn it into a skip.
set -euo pipefail
TIMEOUT=${APT_LOCK_TIMEOUT:-600}
QUEUE=${APT_QUEUE_LOCK:-/run/lock/llm-gateway-apt.lock}
export DEBIAN_FRONTEND=noninteractive
LOG=$(mktemp); trap 'rm -f "$LOG"' EXIT

say() { echo "apt: $*" >&2; }

# apt_get ARGS...: apt-get, waiting for a lock another process holds until the deadline
apt_get() {
  local left
  while :; do
    left=$((DEADLINE - SECONDS)); [ "$left" -gt 0 ] || left=1
    if apt-get -q -o DPkg::Lock::Timeout="$left" "$@" >"$LOG" 2>&1 9>&-; then return 0; fi
    grep -q "Could not get lock" "$LOG" || return 1
    if [ "$SECONDS" -ge "$DEADLINE" ]; then
      local holder; holder=$(grep -o "held by process [0-9]* ([^)]*)" "$LOG" | head -1 || true)
      say "gave up after ${TIMEOUT}s waiting for apt's lock (${holder:-held by another apt or dpkg}):" \
          "let it finish and run this again, or raise APT_LOCK_TIMEOUT"
      return 2
    fi
    sleep 2
  done
}

# with_update ARGS...: apt-get ARGS, and once more after `apt-get update` if it failed (a fresh machine has
# no package lists; stale ones name files the mirror no longer has)
with_update() {
  local rc=0
  apt_get "$@" || rc=$?
  [ "$rc" = 1 ] || return "$rc"
  apt_get update || { rc=$?; [ "$rc" = 2 ] || say "apt-get update failed: $(grep -E '^(E|W):' "$LOG" | tail -2 | tr '\n' ' ')"; return "$rc"; }
  apt_get "$@"
}

[ "$(id -u)" = 0 ] || { say "installing Debian packages needs root (run it with sudo: $0 $*)"; exit 1; }
mkdir -p "$(dirname "$QUEUE")"
exec 9>"$QUEUE"
flock -w "$TIMEOUT" 9 || { say "gave up after ${TIMEOUT}s waiting for another of the project's apt steps ($QUEUE)"; exit 1; }
DEADLINE=$((SECONDS + TIMEOUT))

case "${1:-}" in
  install)
    shift; opts=(-y)
    [ "${1:-}" != --no-recommends ] || { opts+=(--no-install-recommends); shift; }
    [ $# -gt 0 ] || { say "usage: $0 install [--no-recommends] PKG..."; exit 2; }
    rc=0; with_update install "${opts[@]}" "$@" || rc=$?
    [ "$rc" = 0 ] || { [ "$rc" = 2 ] || say "could not install $*: $(grep -E '^E:' "$LOG" | tail -1)"; exit 1; }
    ;;
  download)
    [ $# = 3 ] || { say "usage: $0 download PKG DIR"; exit 2; }
    cd "$3"; rc=0; with_update download "$2" || rc=$?
    [ "$rc" = 0 ] || { [ "$rc" = 2 ] || say "could not download $2: $(grep -E '^E:' "$LOG" | tail -1)"; exit 1; }
    ;;
  *) say "usage: $0 install [--no-recommends] PKG... | download PKG DIR"; exit 2 ;;
esac
