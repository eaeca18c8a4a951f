#!/usr/bin/env bash
# Every Debian package CI uses, installed in one apt-get run (one index update, one
# resolution, no recommended extras) and only when missing. .ci/run starts it in the
# background at the top, so downloads and unpacking overlap the Rust build, and waits for it
# before the first step that needs a package. The per-step installs in dockerd.sh,
# registry.sh and packages.sh stay as fallbacks for running those scripts alone.
#
# Usage: .ci/apt.sh   (root, or a user with passwordless sudo)
set -euo pipefail

# promtool (Debian's prometheus): tests/telemetry.rs checks the scrape config the graph deploys.
# jq: doctor --perf's storage-driver fix is run, as printed, by perf_engine's tests.
# valgrind, strace and GNU time: `bench/scale.py --quick` counts instructions and syscalls
# and reads peak memory with them.
# command:package — the command (or, when absolute, the file) that tells whether the package
# is there. bash-completion: tests/install_lines.rs loads the README's bash completion line
# through it, as a user's interactive bash does.
wanted=(
    dockerd:docker.io /bin/busybox:busybox-static docker-registry:docker-registry
    zsh:zsh fish:fish /usr/share/bash-completion/bash_completion:bash-completion chromium:chromium
    lintian:lintian rpm:rpm man:man-db ruby:ruby nix-instantiate:nix-bin shellcheck:shellcheck
    promtool:prometheus jq:jq valgrind:valgrind strace:strace /usr/bin/time:time
)
missing=()
for entry in "${wanted[@]}"; do
    probe=${entry%%:*}
    if [ "${probe#/}" != "$probe" ]; then [ -e "$probe" ] && continue; else command -v "$probe" >/dev/null && continue; fi
    missing+=("${entry#*:}")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "apt: nothing to install"
    exit 0
fi
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
echo "apt: installing ${missing[*]}"
start=$SECONDS
as_root apt-get update -qq
# Chromium's recommends (a desktop's fonts, sandbox, notification daemon, upower …) are not
# needed headless; one font package keeps the rendered text checkable. needrestart, where
# the image has it, would scan every process after the install: not in a CI container.
as_root env DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1 \
    apt-get install -y -qq --no-install-recommends "${missing[@]}" fonts-dejavu-core >/dev/null
echo "apt: done in $((SECONDS - start)) s"
