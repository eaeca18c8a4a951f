#!/usr/bin/env bash
# End-to-end cost of `k3d-gpu facts --root HOST` against the floor any detector pays: one
# process that reads the same files. Target: facts <= 1.5x cat (issue 25 keeps it).
#
#   [BIN=path/to/k3d-gpu] bench/facts_vs_cat.sh [HOST_DIR] [RUNS]
set -euo pipefail

cd "$(dirname "$0")/.."
host=${1:-tests/fixtures/hosts/desktop-rpl-nvidia}
runs=${2:-300}
# BIN=path/to/k3d-gpu measures that binary instead of building one.
bin=${BIN:-target/release/k3d-gpu}
target_ratio=1.5

# cargo decides whether anything is stale; a no-op build costs well under a second.
[[ -n ${BIN:-} ]] || cargo build --release --quiet

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The capture holds what detection touched, so its file list is the fair workload for cat.
# Capture resolves links, so each file sits at its real path and maps 1:1 back into HOST.
# Device nodes are empty stand-ins in HOST too, so they cost cat only an open. Files capture
# invents have no HOST original or a different size: `.keep` markers for empty directories,
# and empty placeholders for the entries of a listed directory that detection only named,
# never read (a file it read is copied byte for byte, so its size matches). The stat sidecar
# is left out as detection reads it outside the trail, and only on fixture hosts.
"$bin" facts capture --root "$host" --out "$work/capture" >"$work/capture.log" 2>&1 ||
    { cat "$work/capture.log" >&2; exit 1; }
files=()
invented=0
while IFS= read -r -d '' f; do
    rel=${f#"$work/capture/"}
    if [[ -f $host/$rel && $(stat -c %s "$f") == $(stat -L -c %s "$host/$rel") ]]; then
        files+=("$host/$rel")
    else
        invented=$((invented + 1))
    fi
done < <(find "$work/capture" -type f ! -name .k3d-gpu-stat -print0 | sort -z)
echo "host: $host  files detection reads: ${#files[@]} (+$invented written by capture only)  runs: $runs"

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
