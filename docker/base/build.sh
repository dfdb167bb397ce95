#!/usr/bin/env bash
# The base of both images: Debian bookworm minbase + Python 3.11 (venv, pip) + CA certificates,
# built with mmdebstrap from THIS machine's apt sources (no registry is needed, no mirror hard-coded)
# and loaded with `docker import`. Prints the image reference on the last line.
set -euo pipefail
SUITE=bookworm  # the host's release: its python3 (3.11) matches the wheels the host venvs resolved
INCLUDE=python3,python3-venv,python3-pip,ca-certificates,libnuma1  # libnuma1: vLLM CPU kernels (vllm/_C) link it
TAG=llm-gateway/debian-python:$SUITE
# the machine's own apt sources (one-line and deb822 files), passed to mmdebstrap as files
mapfile -t SOURCES < <(find /etc/apt/sources.list /etc/apt/sources.list.d -maxdepth 1 -type f \
                         \( -name '*.list' -o -name '*.sources' \) -size +0 2>/dev/null | sort)
[ ${#SOURCES[@]} -gt 0 ] || { echo "base: no apt sources on this machine" >&2; exit 1; }
hash=$( { echo "$SUITE $INCLUDE"; cat "$0" "${SOURCES[@]}"; } | sha256sum | cut -c1-16)
if [ -n "$(docker images -q --filter "label=org.llm-gateway.inputs=$hash" "$TAG")" ]; then
  echo "base: $TAG is up to date (inputs $hash)"; echo "$TAG"; exit 0
fi
command -v mmdebstrap >/dev/null || "$(dirname "$0")/../../tools/apt.sh" install --no-recommends mmdebstrap >&2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "base: mmdebstrap $SUITE ($INCLUDE) from ${SOURCES[*]}"
mmdebstrap --quiet --variant=minbase --include="$INCLUDE" \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  "$SUITE" "$tmp/rootfs.tar" "${SOURCES[@]}"
docker import --change "LABEL org.llm-gateway.inputs=$hash" --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["/bin/bash"]' "$tmp/rootfs.tar" "$TAG" >/dev/null
echo "base: imported $TAG ($(docker image inspect -f '{{.Size}}' "$TAG" | numfmt --to=si)B, inputs $hash)"
echo "$TAG"
