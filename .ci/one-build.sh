#!/usr/bin/env bash
# The README's set-up promises one build: its second command (`cargo test --locked`) reuses
# what its first (`cargo run --locked -- detect …`) compiled. Feature unification breaks that
# without a word: a feature that a dev-dependency adds to a normal dependency makes the test
# build compile that crate, and every crate above it, a second time (Cargo.toml, "Feature
# alignment"). This runs the two commands as README.md states them, the first with -v (so
# cargo names every crate of its build, fresh or compiled) and the second with --no-run
# (.ci/run runs the tests later), and fails when the second compiles a crate the first had
# built, other than the checkout's own (k3d-gpu: cargo names it with its path). Crates only
# the tests use (the dev-dependencies and what they pull in) are compiled by the second
# alone, once.
#
# Usage: .ci/one-build.sh [DIR]   (a checkout with its README.md; default: this one)
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"

# The set-up section's cargo commands, as a reader copies them.
mapfile -t commands < <(awk '/^## Set up on a fresh machine/ { on = 1; next } /^## / { on = 0 }
    on && /^    cargo / { sub(/^    /, ""); print }' README.md)
if [ ${#commands[@]} -ne 2 ] || [ "${commands[0]#cargo }" = "${commands[0]}" ] ||
    [ "${commands[1]#cargo test}" = "${commands[1]}" ]; then
    echo "one-build: README.md's set-up should have two cargo commands, the second \`cargo test …\`; found:" >&2
    printf '  %s\n' "${commands[@]}" >&2
    exit 1
fi
first="cargo -v ${commands[0]#cargo }"
second="cargo test --no-run${commands[1]#cargo test}"

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
echo "one-build: $first" >&2
eval "$first" 2>"$logs/first" || { cat "$logs/first" >&2; exit 1; }
echo "one-build: $second" >&2
eval "$second" 2>&1 | tee "$logs/second" >&2

# "Compiling NAME vVERSION" or "Fresh NAME vVERSION": one line per crate cargo built or
# reused; a crate from a path ("… (/work/k3d-gpu)") is the checkout's own.
crates() { sed -nE "/ \(\//d; s/^ *($1) ([^ ]+ v[^ ]+).*/\2/p" "$2" | sort -u; }
crates 'Compiling|Fresh' "$logs/first" >"$logs/first-crates"
crates 'Compiling' "$logs/second" >"$logs/second-compiled"
again=$(comm -12 "$logs/first-crates" "$logs/second-compiled")
if [ ! -s "$logs/first-crates" ]; then
    echo "one-build: \`$first\` named no crate; cannot tell what it built" >&2
    exit 1
fi
if [ -n "$again" ]; then
    echo "one-build: \`$second\` compiled again what \`${commands[0]}\` had built:" >&2
    while read -r crate; do echo "  $crate"; done <<<"$again" >&2
    echo "one-build: a dev-dependency turns on a feature the normal build lacks; compare" >&2
    echo "  cargo tree -e no-dev -f '{p} {f}' and cargo tree -f '{p} {f}', and give [dependencies] the missing features" >&2
    exit 1
fi
echo "one-build: the test build compiled no crate of the first build again (what it compiled besides k3d-gpu, only the tests use: $(wc -l <"$logs/second-compiled") crates)" >&2
