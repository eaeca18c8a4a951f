#!/usr/bin/env bash
# The report page as a person sees it: a real headless Chromium (Debian's `chromium`) renders
# report.html at a laptop width to a PNG, and this fails unless the page made no request
# (Chromium's net log holds no URL but the page's own file://) and the key text is rendered.
# CI keeps OUT (the page, the PNG, the net log) as artifacts.
# Usage: bench/report_screenshot.sh [BINARY] [OUT]   (defaults: target/debug/k3d-gpu, target/report-screenshot)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/debug/k3d-gpu}
out=${2:-target/report-screenshot}
command -v chromium >/dev/null || { echo "chromium is not installed (apt-get install chromium)" >&2; exit 2; }
rm -rf "$out" && mkdir -p "$out"
"$bin" --config examples/arc-homelab-dra.toml --root tests/fixtures/hosts/arc-b580-xe-rpl-igpu \
    report --offline "$out/report"
page="$(realpath "$out/report/report.html")"
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
# Chromium's own background traffic (updates, sync, accounts, spelling) is switched off, so
# every request left in the net log would be the page's.
flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run --user-data-dir="$profile"
    --disable-background-networking --disable-component-update --disable-sync --disable-default-apps
    --disable-domain-reliability --disable-client-side-phishing-detection --disable-spell-checking
    --disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication)
timeout 120 chromium "${flags[@]}" --window-size=1366,4000 --screenshot="$out/report.png" \
    --log-net-log="$out/netlog.json" "file://$page" >/dev/null 2>"$out/chromium.log"
timeout 120 chromium "${flags[@]}" --dump-dom "file://$page" >"$out/dom.html" 2>>"$out/chromium.log"
test -s "$out/report.png" || { echo "no screenshot" >&2; exit 1; }
python3 - "$out" "$page" <<'PY'
import json, sys
out, page = sys.argv[1], sys.argv[2]
text = open(f"{out}/netlog.json", encoding="utf-8", errors="replace").read().rstrip()
# A net log cut short by the browser's exit lacks its closing brackets.
log = json.loads(text if text.endswith("}") else text.rstrip(",") + "]}")
# Requests the browser makes for itself carry the initiator "not an origin"; one the page
# makes carries the page's (opaque, "null") origin.
made = sorted({e["params"]["url"] for e in log["events"]
               if "url" in e.get("params", {}) and e["params"].get("initiator", "not an origin") != "not an origin"})
if made:
    sys.exit(f"the page made requests: {made}")
dom = open(f"{out}/dom.html", encoding="utf-8").read()
report = json.load(open(f"{out}/report/report.json"))
for needle in ["k3d-gpu report: cluster arc", report["plan"]["hash"], "gpu.intel.com", "<svg", "k3d/cluster/arc"]:
    if needle not in dom:
        sys.exit(f"not rendered: {needle!r}")
png = open(f"{out}/report.png", "rb").read()
width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
print(f"report.png {width}x{height}, {len(png)} bytes; requests off the page: none; key text rendered")
PY
