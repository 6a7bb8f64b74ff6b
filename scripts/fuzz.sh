#!/usr/bin/env bash
# Fuzzes everything QKV Lab reads from outside (fuzz/fuzz_targets: checkpoints, safetensors,
# tokenizer.json, the #setup= link's JSON, the page↔worker wire format, configs and names), each
# for SECONDS (default 300), with cargo-fuzz (libFuzzer, AddressSanitizer). No nightly toolchain
# can be downloaded here, so the stable one is told to accept nightly flags (RUSTC_BOOTSTRAP=1).
# Not part of the tests or CI. A crash is saved under fuzz/artifacts/TARGET/; make it a
# regression test beside the code it broke, fix it, and run again.
#   bash scripts/fuzz.sh [SECONDS] [TARGET ...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-300}"
shift || true
export RUSTC_BOOTSTRAP=1
# Its own target folder: the instrumented build shares nothing with the project's.
export CARGO_TARGET_DIR="${QKV_FUZZ_TARGET_DIR:-$HOME/.cache/qkv-lab/fuzz-target}"
if ! cargo fuzz --version > /dev/null 2>&1; then
  echo "== installing cargo-fuzz"
  cargo install --locked --quiet cargo-fuzz
fi
# The same dependency versions as the project's own build.
[ -f fuzz/Cargo.lock ] || cp Cargo.lock fuzz/Cargo.lock
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(cargo fuzz list --fuzz-dir fuzz)
echo "== building ${targets[*]}"
cargo fuzz build --fuzz-dir fuzz --release --debug-assertions > /dev/null
for target in "${targets[@]}"; do
  echo "== $target, $seconds s"
  mkdir -p "fuzz/corpus/$target"
  # -rss_limit_mb: a file that makes a reader ask for gigabytes is a finding, not a machine to swap.
  cargo fuzz run --fuzz-dir fuzz --release --debug-assertions "$target" "fuzz/corpus/$target" -- \
    -max_total_time="$seconds" -rss_limit_mb=4096 -print_final_stats=1 2>&1 |
    grep -E '^(#[0-9]+ +DONE|Done|stat::number_of_executed_units|stat::peak_rss_mb|==[0-9]+==ERROR|SUMMARY|artifact_prefix|Test unit written)' || true
  [ -z "$(ls -A "fuzz/artifacts/$target" 2> /dev/null)" ] || { echo "$target: crash saved in fuzz/artifacts/$target"; exit 1; }
done
echo "== no crash in ${targets[*]}"
