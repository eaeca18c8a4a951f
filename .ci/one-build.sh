#!/usr/bin/env bash
# The README's set-up promises one build: its second command (`cargo test --locked`) reuses
# what its first (`cargo run --locked -- detect …`) compiled. Feature unification breaks that
# without a word: a feature that a dev-dependency adds to a normal dependency makes the test
# build compile that crate, and every crate above it, a second time (Cargo.toml, "Feature
# alignment"). This runs the two commands as README.md states them, the second with
# --no-run (.ci/run runs the tests later), and fails when the second compiles any crate but
# k3d-gpu itself.
#
# Usage: .ci/one-build.sh [DIR]   (a checkout with its README.md; default: this one)
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"

# The set-up section's cargo commands, as a reader copies them.
mapfile -t commands < <(awk '/^## Set up on a fresh machine/ { on = 1; next } /^## / { on = 0 }
    on && /^    cargo / { sub(/^    /, ""); print }' README.md)
if [ ${#commands[@]} -ne 2 ] || [ "${commands[1]#cargo test}" = "${commands[1]}" ]; then
    echo "one-build: README.md's set-up should have two cargo commands, the second \`cargo test …\`; found:" >&2
    printf '  %s\n' "${commands[@]}" >&2
    exit 1
fi
first=${commands[0]}
second="cargo test --no-run${commands[1]#cargo test}"

echo "one-build: $first" >&2
eval "$first"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "one-build: $second" >&2
eval "$second" 2>&1 | tee "$log" >&2
rebuilt=$(grep -E '^ *Compiling ' "$log" | grep -vE '^ *Compiling k3d-gpu v' || true)
if [ -n "$rebuilt" ]; then
    echo "one-build: \`$second\` compiled again what \`$first\` had built:" >&2
    echo "$rebuilt" >&2
    echo "one-build: a dev-dependency turns on a feature the normal build lacks; compare" >&2
    echo "  cargo tree -e no-dev -f '{p} {f}' and cargo tree -f '{p} {f}', and give [dependencies] the missing features" >&2
    exit 1
fi
echo "one-build: the test build compiled no dependency again" >&2
