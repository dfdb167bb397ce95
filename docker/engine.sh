#!/usr/bin/env bash
# Make sure a Docker engine answers (`up`), and later stop it only if `up` started it (`down`).
#   docker/engine.sh up     exit 0: an engine answers (ours or one that was already running)
#                           exit 3: no engine and none can be started here (prints one line why)
#   docker/engine.sh down   stops the dockerd `up` started (by its pid) and undoes its host changes:
#                           IP forwarding, iptables rules and chain policies, the docker0 bridge.
# State (pid, what the host looked like before) lives in $ENGINE_STATE (default .cache/dockerd).
set -euo pipefail
cd "$(dirname "$0")/.."
STATE=${ENGINE_STATE:-$PWD/.cache/dockerd}
SOCK=/var/run/docker.sock

answers() { timeout 10 docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

up() {
  if answers; then echo "engine: using the Docker engine already running ($(docker version --format '{{.Server.Version}}'))"; return 0; fi
  if [ "$(id -u)" != 0 ]; then echo "engine: SKIP: no Docker engine answers and starting one needs root"; return 3; fi
  if ! command -v dockerd >/dev/null || ! command -v iptables >/dev/null; then
    echo "engine: installing docker.io and iptables (apt)"
    tools/apt.sh install --no-recommends docker.io iptables ||
      { echo "engine: could not install docker.io and iptables with apt (tools/apt.sh said why above)"; return 3; }
  fi
  mkdir -p "$STATE"
  # what dockerd changes on the host, to put back on `down`
  sysctl -n net.ipv4.ip_forward >"$STATE/ip_forward"
  iptables-save >"$STATE/iptables.before" 2>/dev/null || true
  if ip link show docker0 >/dev/null 2>&1; then echo yes >"$STATE/docker0"; else echo no >"$STATE/docker0"; fi
  local t0=$SECONDS
  dockerd --pidfile "$STATE/dockerd.pid" >"$STATE/dockerd.log" 2>&1 &
  echo $! >"$STATE/started.pid"
  for _ in $(seq 1 60); do
    if answers; then echo "engine: started dockerd $(dockerd --version | cut -d, -f1 | cut -d' ' -f3) (pid $(cat "$STATE/started.pid")) in $((SECONDS - t0))s; log: $STATE/dockerd.log"; return 0; fi
    kill -0 "$(cat "$STATE/started.pid")" 2>/dev/null || break
    sleep 1
  done
  echo "engine: SKIP: dockerd did not start; last lines of $STATE/dockerd.log:"; tail -5 "$STATE/dockerd.log" | sed 's/^/  /'
  down >/dev/null
  return 3
}

down() {
  [ -f "$STATE/started.pid" ] || { echo "engine: not started by us; left alone"; return 0; }
  local pid; pid=$(cat "$STATE/started.pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -0 "$pid" 2>/dev/null && { echo "engine: dockerd $pid ignored SIGTERM for 30s; killing it"; kill -KILL "$pid"; }
  fi
  # undo dockerd's host changes
  sysctl -q -w net.ipv4.ip_forward="$(cat "$STATE/ip_forward")" >/dev/null || true
  local before=$STATE/iptables.before
  for table in filter nat mangle raw; do
    if grep -q "^\*$table\$" "$before"; then  # restore it as it was (iptables-restore replaces the table)
      sed -n "/^\*$table\$/,/^COMMIT\$/p" "$before" | iptables-restore
    elif iptables-save -t "$table" 2>/dev/null | grep -q '^:'; then  # dockerd created it: empty it
      iptables -t "$table" -F; iptables -t "$table" -X
      if [ "$table" = filter ]; then for chain in INPUT FORWARD OUTPUT; do iptables -P "$chain" ACCEPT; done; fi
      if command -v nft >/dev/null; then nft delete table ip "$table" 2>/dev/null || true; fi
    fi
  done
  if [ "$(cat "$STATE/docker0")" = no ] && ip link show docker0 >/dev/null 2>&1; then ip link delete docker0; fi
  rm -f "$STATE/started.pid"
  # what counts: rules and non-ACCEPT policies (an emptied table may stay listed)
  rules() { grep -E '^(\*|-A |:[A-Z0-9_-]+ (DROP|REJECT))' | sed 's/ \[[0-9:]*\]$//'; }
  local left; left=$(diff <(rules <"$before") <(iptables-save 2>/dev/null | rules) | grep -c '^[<>] -A\|^[<>] :' || true)
  echo "engine: stopped dockerd $pid; ip_forward=$(sysctl -n net.ipv4.ip_forward); iptables rules/policies differing from before: $left"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
