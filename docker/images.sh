#!/usr/bin/env bash
# Build the local images, or reuse them when nothing that goes into them changed:
#   llm-gateway/debian-python:bookworm  (docker/base/build.sh)
#   llm-gateway/vllm-cpu:0.32.0         (docker/vllm-cpu/)
#   llm-gateway/litellm:1.108.7         (docker/litellm/)
#   llm-gateway/prometheus:bookworm     (docker/prometheus/: Debian's prometheus package, apt in the build)
#   llm-gateway/redis:bookworm          (docker/redis/: Debian's redis-server package, apt in the build)
# Each image carries the label org.llm-gateway.inputs = hash of its inputs (base image id, the files
# of its folder: Dockerfile, requirements lock, ...); an image with the current hash is reused.
# Wheels: the locked versions are fetched on the host with THIS machine's pip configuration (its
# local CPU torch wheel, its indexes) into .cache/docker/wheels/, then served to the build over HTTP
# on the docker0 bridge: nothing is sent as build context or kept in a layer.
set -euo pipefail
cd "$(dirname "$0")/.."
export DOCKER_BUILDKIT=0  # the legacy builder: no buildx plugin, nothing pulled
CACHE=$PWD/.cache/docker
mkdir -p "$CACHE"
SERVER=
trap '[ -z "$SERVER" ] || kill "$SERVER" 2>/dev/null' EXIT

t0=$SECONDS
docker/base/build.sh >"$CACHE/base.log" || { cat "$CACHE/base.log"; exit 1; }
sed '$d' "$CACHE/base.log"; BASE=$(tail -1 "$CACHE/base.log")
base_id=$(docker image inspect -f '{{.Id}}' "$BASE")
[ $((SECONDS - t0)) -lt 5 ] || echo "images: base ready in $((SECONDS - t0))s"

serve() {  # serve DIR: a static HTTP server on the bridge address; sets WHEELS_URL
  local ip; ip=$(ip -4 -o addr show docker0 | awk '{print $4}' | cut -d/ -f1)
  [ -n "$ip" ] || { echo "images: no docker0 bridge address to serve the wheels on (rootless or another bridge?)"; exit 1; }
  rm -f "$CACHE/server.port"
  python3 -c 'import functools, http.server, sys
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args): pass
s = http.server.ThreadingHTTPServer((sys.argv[1], 0), functools.partial(Quiet, directory=sys.argv[2]))
print(s.server_address[1], flush=True)
s.serve_forever()' "$ip" "$1" >"$CACHE/server.port" &
  SERVER=$!
  for _ in $(seq 50); do [ -s "$CACHE/server.port" ] && break; sleep 0.1; done
  WHEELS_URL="http://$ip:$(cat "$CACHE/server.port")/"
}

build() {  # build NAME TAG
  local name=$1 tag=$2 dir=docker/$1 t0=$SECONDS
  local hash; hash=$( { echo "$base_id"; find "$dir" -type f | sort | xargs cat; } | sha256sum | cut -c1-16)
  if [ -n "$(docker images -q --filter "label=org.llm-gateway.inputs=$hash" "$tag")" ]; then
    echo "images: $tag is up to date (inputs $hash)"; return
  fi
  echo "images: building $tag (inputs $hash)"
  local wheels=$CACHE/wheels/$name pip_py=.venv/bin/python
  mkdir -p "$wheels"; [ -x "$pip_py" ] || pip_py=python3
  local want; want=$(sha256sum <"$dir/requirements.txt")
  if [ "$(cat "$wheels/.complete" 2>/dev/null)" != "$want" ]; then  # files already there are not fetched again
    "$pip_py" -m pip download -q --no-deps -r "$dir/requirements.txt" -d "$wheels" 2> >(grep -v "is ignored: it is neither" >&2)
    echo "$want" >"$wheels/.complete"
  fi
  echo "images: wheelhouse $(du -sh "$wheels" | cut -f1) ready after $((SECONDS - t0))s; docker build"
  serve "$wheels"
  docker build -q --build-arg "BASE=$BASE" --build-arg "WHEELS_URL=$WHEELS_URL" \
    --label "org.llm-gateway.inputs=$hash" -t "$tag" "$dir" >/dev/null
  kill "$SERVER"; SERVER=
  echo "images: built $tag in $((SECONDS - t0))s ($(docker image inspect -f '{{.Size}}' "$tag" | numfmt --to=si)B)"
}

build_apt() {  # build_apt NAME TAG: an image whose Dockerfile installs Debian packages (no wheels)
  local name=$1 tag=$2 dir=docker/$1 t0=$SECONDS
  local hash; hash=$( { echo "$base_id"; find "$dir" -type f | sort | xargs cat; } | sha256sum | cut -c1-16)
  if [ -n "$(docker images -q --filter "label=org.llm-gateway.inputs=$hash" "$tag")" ]; then
    echo "images: $tag is up to date (inputs $hash)"; return
  fi
  echo "images: building $tag (inputs $hash): apt in the build, from the base's sources"
  docker build -q --build-arg "BASE=$BASE" --label "org.llm-gateway.inputs=$hash" -t "$tag" "$dir" >/dev/null
  echo "images: built $tag in $((SECONDS - t0))s ($(docker image inspect -f '{{.Size}}' "$tag" | numfmt --to=si)B)"
}

build vllm-cpu llm-gateway/vllm-cpu:0.32.0
build litellm llm-gateway/litellm:1.108.7
build_apt prometheus "${PROMETHEUS_TAG:-llm-gateway/prometheus:bookworm}"
build_apt redis llm-gateway/redis:bookworm
# superseded builds of our tags would otherwise pile up
docker image prune -f --filter label=org.llm-gateway.inputs >/dev/null
