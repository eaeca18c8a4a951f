#!/usr/bin/env bash
# Starts a private dockerd for the integration tests (no registry, no GPUs here): vfs storage,
# no iptables, no bridge, its own socket. Prints the DOCKER_HOST to use.
# Usage: eval "$(.ci/dockerd.sh start DIR)"   |   .ci/dockerd.sh stop DIR
set -euo pipefail
cmd=${1:?start|stop}
dir=${2:?state directory}
case "$cmd" in
start)
    if ! command -v dockerd >/dev/null || [ ! -x /bin/busybox ]; then
        apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io busybox-static >&2
    fi
    mkdir -p "$dir"
    dockerd --host "unix://$dir/docker.sock" --data-root "$dir/data" --exec-root "$dir/exec" \
        --pidfile "$dir/docker.pid" --storage-driver vfs --iptables=false --ip6tables=false --bridge=none \
        >"$dir/dockerd.log" 2>&1 &
    for _ in $(seq 1 100); do
        if DOCKER_HOST="unix://$dir/docker.sock" docker version >/dev/null 2>&1; then
            echo "export DOCKER_HOST=unix://$dir/docker.sock"
            exit 0
        fi
        sleep 0.2
    done
    echo "dockerd did not start; its log:" >&2
    cat "$dir/dockerd.log" >&2
    exit 1
    ;;
stop)
    [ -f "$dir/docker.pid" ] && kill "$(cat "$dir/docker.pid")" 2>/dev/null || true
    ;;
esac
