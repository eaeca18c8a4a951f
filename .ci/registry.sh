#!/usr/bin/env bash
# Starts a private OCI registry for the image-lock tests: Debian's docker-registry (the
# distribution v2 server) on 127.0.0.1, storage under DIR, no auth. Docker treats 127.0.0.0/8
# as an insecure registry by default, so the private dockerd pushes to it over plain HTTP.
# Prints the address to use.
# Usage: eval "$(.ci/registry.sh start DIR)"   |   .ci/registry.sh stop DIR
set -euo pipefail
cmd=${1:?start|stop}
dir=${2:?state directory}
case "$cmd" in
start)
    if ! command -v docker-registry >/dev/null; then
        apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-registry >&2
    fi
    mkdir -p "$dir/data"
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    cat >"$dir/config.yml" <<CONFIG
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $dir/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
CONFIG
    docker-registry serve "$dir/config.yml" >"$dir/registry.log" 2>&1 &
    echo $! >"$dir/registry.pid"
    for _ in $(seq 1 100); do
        if python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/v2/')" 2>/dev/null; then
            echo "export K3D_GPU_TEST_REGISTRY=127.0.0.1:$port"
            exit 0
        fi
        sleep 0.1
    done
    echo "docker-registry did not start; its log:" >&2
    cat "$dir/registry.log" >&2
    exit 1
    ;;
stop)
    [ -f "$dir/registry.pid" ] && kill "$(cat "$dir/registry.pid")" 2>/dev/null || true
    ;;
esac
