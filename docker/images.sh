#!/usr/bin/env bash
# Build the local images, or reuse them when nothing that goes into them changed:
#   llm-gateway/debian-python:bookworm  (docker/base/build.sh)
#   llm-gateway/vllm-cpu:0.32.0         (docker/vllm-cpu/)
#   llm-gateway/litellm:1.108.7         (docker/litellm/)
#   llm-gateway/prometheus:bookworm     (docker/prometheus/: Debian's prometheus package, apt in the build)
#   llm-gateway/redis:bookworm          (docker/redis/: Debian's redis-server package, apt in the build)
# Each image carries the label org.llm-gateway.inputs = hash of its inputs (base image id, the files
# of its folder: Dockerfile, requirements lock, ...; and extra_context's); an image with the current hash is reused.
# Packages: the locked versions, served to the build over HTTP on the docker0 bridge (nothing is sent as
# build context or kept in a layer): for vllm-cpu, the host's .venv-vllm site-packages as a tar stream when
# that venv holds exactly its lock (`make venv-vllm` installs the lock; IMAGES_WAIT_FOR_VENV=<seconds> waits
# for an install in progress, as CI's background build does); otherwise a wheelhouse fetched on the host
# with THIS machine's pip configuration (its local CPU torch wheel, its indexes) into .cache/docker/wheels/.
set -euo pipefail
cd "$(dirname "$0")/.."
export DOCKER_BUILDKIT=0  # the legacy builder: no buildx plugin, nothing pulled
CACHE=$PWD/.cache/docker
mkdir -p "$CACHE"
SERVER=; VLLM_BUILD=
# a failed build leaves no package server behind, nor the vllm-cpu build running beside (its server with it)
trap '[ -z "$SERVER" ] || kill "$SERVER" 2>/dev/null; [ -z "$VLLM_BUILD" ] || pkill -P "$VLLM_BUILD" 2>/dev/null' EXIT

t0=$SECONDS
docker/base/build.sh >"$CACHE/base.log" || { cat "$CACHE/base.log"; exit 1; }
sed '$d' "$CACHE/base.log"; BASE=$(tail -1 "$CACHE/base.log")
base_id=$(docker image inspect -f '{{.Id}}' "$BASE")
[ $((SECONDS - t0)) -lt 5 ] || echo "images: base ready in $((SECONDS - t0))s"

serve() {  # serve NAME DIR: a static HTTP server on the bridge address for image NAME's build; sets SERVE_URL and
  # SERVER. DIR/site-packages.tar, if asked for, is DIR itself as a tar stream (made as it is sent: no 3 GB file on disk)
  local port_file=$CACHE/server-$1.port; shift
  local ip; ip=$(ip -4 -o addr show docker0 | awk '{print $4}' | cut -d/ -f1)
  [ -n "$ip" ] || { echo "images: no docker0 bridge address to serve the packages on (rootless or another bridge?)"; exit 1; }
  rm -f "$port_file"
  python3 -c 'import functools, http.server, shutil, subprocess, sys
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args): pass
    def do_GET(self):
        if self.path != "/site-packages.tar":
            return super().do_GET()
        self.send_response(200); self.send_header("Content-Type", "application/x-tar"); self.end_headers()
        tar = subprocess.Popen(["tar", "-c", "-C", sys.argv[2], "."], stdout=subprocess.PIPE)
        shutil.copyfileobj(tar.stdout, self.wfile, 1 << 20)
        assert tar.wait() == 0, "tar failed"
s = http.server.ThreadingHTTPServer((sys.argv[1], 0), functools.partial(Quiet, directory=sys.argv[2]))
print(s.server_address[1], flush=True)
s.serve_forever()' "$ip" "$1" >"$port_file" &
  SERVER=$!
  for _ in $(seq 50); do [ -s "$port_file" ] && break; sleep 0.1; done
  SERVE_URL="http://$ip:$(cat "$port_file")/"
}

VLLM_VENV=.venv-vllm
venv_holds_lock() {  # venv_holds_lock LOCK: .venv-vllm is installed, on Python 3.11 (the base's), with exactly LOCK
  local waited=0
  while [ ! -f "$VLLM_VENV/.installed" ] && [ "$waited" -lt "${IMAGES_WAIT_FOR_VENV:-0}" ]; do
    [ "$waited" != 0 ] || echo "images: waiting up to ${IMAGES_WAIT_FOR_VENV}s for the $VLLM_VENV install in progress"
    sleep 2; waited=$((waited + 2))
  done
  [ -f "$VLLM_VENV/.installed" ] && grep -q "^version = 3\.11\." "$VLLM_VENV/pyvenv.cfg" &&
    "$VLLM_VENV/bin/python" -m pip freeze --all --exclude-editable 2>/dev/null | grep -v "^pip==" |
    diff -q <(grep -v "^#" "$1") - >/dev/null
}

# files from outside its folder an image's build context also holds (at its root): the vllm-cpu image's .pth runs the
# CPU examples' patches for tiny backends (generator/shipped/on_demand/cpu_backend_patches.py and the uvicorn tick it
# applies, generator/shipped/gateway_hooks/calm_tick.py; docs/testing.md)
extra_context() {
  [ "$1" != vllm-cpu ] || echo generator/shipped/on_demand/cpu_backend_patches.py generator/shipped/gateway_hooks/calm_tick.py
}
context() {  # context NAME: the build context as a tar stream (docker build ... -): its folder plus extra_context
  local f args=(-C "docker/$1" .)
  for f in $(extra_context "$1"); do args+=(-C "$PWD/$(dirname "$f")" "$(basename "$f")"); done
  tar -c "${args[@]}"
}

build() {  # build NAME TAG
  local name=$1 tag=$2 dir=docker/$1 t0=$SECONDS
  local hash; hash=$( { echo "$base_id"; { find "$dir" -type f | sort; extra_context "$name"; } | xargs cat; } | sha256sum | cut -c1-16)
  if [ -n "$(docker images -q --filter "label=org.llm-gateway.inputs=$hash" "$tag")" ]; then
    echo "images: $tag is up to date (inputs $hash)"; return
  fi
  echo "images: building $tag (inputs $hash)"
  if [ "$name" = vllm-cpu ]; then  # its toolchain stage first (apt; the layer cache keeps it for the build below)
    docker build -q --build-arg "BASE=$BASE" --target toolchain "$dir" >/dev/null
    echo "images: $tag: toolchain stage ready after $((SECONDS - t0))s"
  fi
  if [ "$name" = vllm-cpu ] && venv_holds_lock "$dir/requirements.txt"; then
    echo "images: packages from $VLLM_VENV (it holds the lock); docker build"
    serve "$name" "$VLLM_VENV/lib/python3.11/site-packages"
    context "$name" | docker build -q --build-arg "BASE=$BASE" --build-arg "SITE_PACKAGES_URL=${SERVE_URL}site-packages.tar" \
      --label "org.llm-gateway.inputs=$hash" -t "$tag" - >/dev/null
    kill "$SERVER"; SERVER=
    echo "images: built $tag in $((SECONDS - t0))s ($(docker image inspect -f '{{.Size}}' "$tag" | numfmt --to=si)B)"
    return
  fi
  local wheels=$CACHE/wheels/$name pip_py=.venv/bin/python
  mkdir -p "$wheels"; [ -x "$pip_py" ] || pip_py=python3
  local want; want=$(sha256sum <"$dir/requirements.txt")
  if [ "$(cat "$wheels/.complete" 2>/dev/null)" != "$want" ]; then  # files already there are not fetched again
    "$pip_py" -m pip download -q --no-deps -r "$dir/requirements.txt" -d "$wheels" 2> >(grep -v "is ignored: it is neither" >&2)
    echo "$want" >"$wheels/.complete"
  fi
  echo "images: wheelhouse $(du -sh "$wheels" | cut -f1) ready after $((SECONDS - t0))s; docker build"
  serve "$name" "$wheels"
  context "$name" | docker build -q --build-arg "BASE=$BASE" --build-arg "WHEELS_URL=$SERVE_URL" \
    --label "org.llm-gateway.inputs=$hash" -t "$tag" - >/dev/null
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

# vllm-cpu (the longest: 3.4 GB unpacked, ~2-4 min, and it may first wait for a .venv-vllm install) is built
# beside the three others, one after the other: mostly disk and network on both sides
( trap '[ -z "$SERVER" ] || kill "$SERVER" 2>/dev/null' EXIT; build vllm-cpu llm-gateway/vllm-cpu:0.32.0 ) & VLLM_BUILD=$!
build litellm llm-gateway/litellm:1.108.7
build_apt prometheus "${PROMETHEUS_TAG:-llm-gateway/prometheus:bookworm}"
build_apt redis llm-gateway/redis:bookworm
rc=0; wait "$VLLM_BUILD" || rc=$?; VLLM_BUILD=
[ $rc = 0 ] || { echo "images: FAILED: llm-gateway/vllm-cpu:0.32.0 (exit $rc)"; exit 1; }
# superseded builds of our tags would otherwise pile up
docker image prune -f --filter label=org.llm-gateway.inputs >/dev/null
