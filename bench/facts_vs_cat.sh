#!/usr/bin/env bash
# End-to-end cost of `k3d-gpu facts --root HOST` against the floor any detector pays: one
# process that reads the same files. Target: facts <= 1.3x cat (issue 42). Exits 1 on a miss.
#
#   [BIN=path/to/k3d-gpu] bench/facts_vs_cat.sh [HOST_DIR] [RUNS]
set -euo pipefail

cd "$(dirname "$0")/.."
host=${1:-tests/fixtures/hosts/desktop-rpl-nvidia}
runs=${2:-300}
# BIN=path/to/k3d-gpu measures that binary instead of building one.
bin=${BIN:-target/release/k3d-gpu}
target_ratio=1.3

# cargo decides whether anything is stale; a no-op build costs well under a second.
[[ -n ${BIN:-} ]] || cargo build --release --quiet

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The floor is `cat` of exactly the files facts opens: strace lists them (successful opens of
# regular files under HOST; the binary's own libraries and locale files are start-up, which
# cat pays too). `facts capture` is not the list: it also copies what `doctor --perf` and
# `host-setup` read, twice as many files on some hosts, which padded the floor.
command -v strace >/dev/null || { echo "strace is needed to list the files facts opens" >&2; exit 1; }
# -y: facts opens a file by its name in a directory it holds open (`openat(3, "vendor")`);
# strace then prints each descriptor's path, the returned one's too (`= 4</abs/path>`), which
# is the file opened whatever the directory.
strace -f -qq -y -e trace=open,openat,openat2 -e status=successful -o "$work/trace" \
    "$bin" facts --root "$host" >/dev/null
host_abs=$(cd "$host" && pwd -P)
files=()
declare -A seen=()
while IFS= read -r path; do
    [[ $path == "$host_abs"/* && -f $path && -z ${seen[$path]:-} ]] || continue
    seen[$path]=1
    files+=("$path")
done < <(grep -v O_DIRECTORY "$work/trace" | sed -n 's/.*) = [0-9]*<\(.*\)>$/\1/p')
echo "host: $host  files facts opens: ${#files[@]}  runs: $runs"

facts_cmd="$bin facts --root $host"
cat_cmd="cat ${files[*]}"
echo "facts command: $facts_cmd >/dev/null"
echo "cat command:   $cat_cmd >/dev/null"

if command -v hyperfine >/dev/null; then
    # -N runs each command without a shell, so both sides pay exactly one fork+exec
    # (hyperfine splits on spaces, which fixture paths never contain).
    hf=(hyperfine -N --warmup 20 --runs "$runs" --export-json "$work/h.json" -n facts "$facts_cmd" -n cat "$cat_cmd")
    echo "timer: hyperfine -N --warmup 20 --runs $runs --export-json $work/h.json -n facts \"<facts command>\" -n cat \"<cat command>\""
    "${hf[@]}" >/dev/null
    read -r facts_ms cat_ms < <(python3 -c '
import json, sys
r = {x["command"]: x["median"] * 1e3 for x in json.load(open(sys.argv[1]))["results"]}
print(r["facts"], r["cat"])' "$work/h.json")
else
    # Called directly, not through `bash -c`, so no extra shell is counted on either side.
    run_facts() { "$bin" facts --root "$host" >/dev/null; }
    run_cat() { cat "${files[@]}" >/dev/null; }
    median_ms() {
        local t0 samples=()
        for ((i = 0; i < runs; i++)); do
            t0=$(date +%s%N); "$1"; samples+=($(( $(date +%s%N) - t0 )))
        done
        printf '%s\n' "${samples[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.3f", a[int((NR+1)/2)]/1e6}'
    }
    echo "timer: bash loop, date +%s%N around each run ($runs runs each; hyperfine not found)"
    facts_ms=$(median_ms run_facts)
    cat_ms=$(median_ms run_cat)
fi

awk -v f="$facts_ms" -v c="$cat_ms" -v t="$target_ratio" 'BEGIN {
    printf "median per run: facts %.3f ms, cat %.3f ms; facts / cat = %.2fx\n", f, c, f / c
    printf "target: facts / cat <= %gx -> %s\n", t, (f / c <= t ? "PASS" : "FAIL")
}'
awk -v f="$facts_ms" -v c="$cat_ms" -v t="$target_ratio" 'BEGIN { exit (f / c <= t ? 0 : 1) }'
