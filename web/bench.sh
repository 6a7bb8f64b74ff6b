#!/usr/bin/env bash
# The browser build's figures: the download (raw, gzip and brotli, as a server would send it,
# and the code by crate, so that a regression has a culprit), then what headless Chromium
# measures in the end-to-end test (tests/web_e2e.rs): page load to the first training step on
# WebGPU and on the CPU fallback, the page's training tokens/s and its frame time while
# training (in a Web Worker, and on the page's own thread for reference). Needs what
# tests/run-all.sh installs, and installs brotli and binaryen's wasm-opt when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/qkv-lab/target}"
dist=$(mktemp -d)
trap 'rm -rf "$dist"' EXIT

if ! command -v brotli > /dev/null && [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq brotli > /dev/null
fi

# binaryen's wasm-opt shrinks the release page's wasm; Trunk.toml names the version.
if ! wasm-opt --version 2> /dev/null | grep -q "(version_116)"; then
  echo "== installing wasm-opt (binaryen 116; compiles its C++, about 8 minutes on 2 cores)"
  cargo install --locked --quiet --force wasm-opt@0.116.1
fi
# The end-to-end test below opens this build, not the README's `trunk serve` one, and leaves the
# number of training workers to the page, as a visitor gets it.
export QKV_WEB_RELEASE=1 QKV_WEB_WORKERS=auto

echo "== trunk build --release (the web profile, then wasm-opt)"
start=$(date +%s)
trunk build --release --offline --dist "$dist" > "$dist/build.log" 2>&1 || { tail -40 "$dist/build.log"; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
wasm=$(ls "$dist"/*.wasm)
raw=$(stat -c %s "$wasm")
gz=$(gzip -9 -c "$wasm" | wc -c)
br=$(command -v brotli > /dev/null && brotli -q 11 -c "$wasm" | wc -c || echo 0)
js=$(cat "$dist"/qkv-lab-*.js | wc -c)
awk -v r="$raw" -v g="$gz" -v b="$br" -v j="$js" 'BEGIN {
  printf "wasm %.2f MB raw, %.2f MB gzip, %s brotli; JS glue %.0f kB\n", r/1e6, g/1e6, (b > 0 ? sprintf("%.2f MB", b/1e6) : "(no brotli here)"), j/1e3 }'

echo "== where the bytes go (the build's own output, which still names its functions)"
python3 web/wasm_size.py "$CARGO_TARGET_DIR/wasm32-unknown-unknown/web/qkv-lab.wasm" 15

echo "== in the page (headless Chromium)"
out=$(cargo test --workspace --locked --test web_e2e -- --nocapture 2>&1) || { echo "$out" | tail -40; exit 1; }
echo "$out" | grep '^web e2e'
echo "$out" | awk '/^web e2e WebGPU:/ { match($0, /first training step [0-9]+/); g = substr($0, RSTART + 20, RLENGTH - 20) }
                   /^web e2e CPU fallback:/ { match($0, /first training step [0-9]+/); c = substr($0, RSTART + 20, RLENGTH - 20) }
                   END { if (g > 0) printf "CPU fallback / WebGPU, page load to first step: %.2f×\n", c / g }'

echo "== the CPU fallback trained on the page's own thread (?worker=0), the reference for the worker"
in_page=$(QKV_WEB_RUNS=cpu QKV_WEB_IN_PAGE=1 cargo test --workspace --locked --test web_e2e -- --nocapture 2>&1) || { echo "$in_page" | tail -40; exit 1; }
echo "$in_page" | grep '^web e2e CPU'
printf '%s\n%s\n' "$out" "$in_page" | awk '
  /^web e2e CPU fallback:/ { match($0, /page frame [0-9.]+/); w = substr($0, RSTART + 11, RLENGTH - 11) }
  /^web e2e CPU fallback in the page:/ { match($0, /page frame [0-9.]+/); p = substr($0, RSTART + 11, RLENGTH - 11) }
  END { if (w > 0 && p > 0) printf "page frame while training, Web Worker / in the page: %.1f / %.1f ms = %.2f×\n", w, p, w / p }'
