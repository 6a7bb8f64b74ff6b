#!/usr/bin/env bash
# The browser build's figures: the wasm size (raw and gzip, as a server would send it) and the
# time from page load to the first completed training step on WebGPU and on the CPU fallback,
# measured by the end-to-end test in headless Chromium (tests/web_e2e.rs). Needs what
# tests/run-all.sh installs.
set -euo pipefail
cd "$(dirname "$0")/.."
dist=$(mktemp -d)
trap 'rm -rf "$dist"' EXIT

echo "== trunk build --release"
trunk build --release --offline --dist "$dist" > /dev/null 2>&1
wasm=$(ls "$dist"/*.wasm)
raw=$(stat -c %s "$wasm")
gz=$(gzip -9 -c "$wasm" | wc -c)
js=$(cat "$dist"/*.js | wc -c)
awk -v r="$raw" -v g="$gz" -v j="$js" 'BEGIN {
  printf "wasm %.2f MB raw, %.2f MB gzip (%.1f%% of raw); JS glue %.0f kB\n", r/1e6, g/1e6, 100*g/r, j/1e3 }'

echo "== page load to first training step (headless Chromium)"
out=$(cargo test --workspace --locked --test web_e2e -- --nocapture 2>&1) || { echo "$out" | tail -40; exit 1; }
echo "$out" | grep '^web e2e'
echo "$out" | awk '/^web e2e WebGPU/ { match($0, /first training step [0-9]+/); g = substr($0, RSTART + 20, RLENGTH - 20) }
                   /^web e2e CPU/ { match($0, /first training step [0-9]+/); c = substr($0, RSTART + 20, RLENGTH - 20) }
                   END { if (g > 0) printf "CPU fallback / WebGPU, page load to first step: %.2f×\n", c / g }'
