#!/usr/bin/env bash
# The CPU kernels' unsafe code under two checkers (not part of the tests or CI):
#  1. AddressSanitizer: qkv-kernels' tests built with -Zsanitizer=address (the stable toolchain
#     told to accept nightly flags, RUSTC_BOOTSTRAP=1), in a target folder of their own: reads or
#     writes outside a buffer, use after free.
#  2. valgrind's memcheck on the ordinary debug build of the same tests: reads of memory never
#     written (the kernels write outputs into uninitialised buffers, which must be written whole).
# Debug builds also assert every raw-pointer write's bounds (`parallel::SharedMut`).
# QKV_TEST_CPU_ONLY=1 leaves wgpu out of the fused ops' comparisons (each says so), and the GPU
# kernels' own tests are skipped by name: the checkers cannot see into a GPU. Miri cannot run the gemm crate's CPU detection.
#   bash scripts/sanitize.sh [asan|valgrind]...
set -euo pipefail
cd "$(dirname "$0")/.."
checks=("$@")
[ ${#checks[@]} -gt 0 ] || checks=(asan valgrind)
export QKV_TEST_CPU_ONLY=1 RUST_BACKTRACE=1
host=$(rustc -vV | sed -n 's/^host: //p')
skip=(--skip cube:: --skip wgpu_drops_what_flex_drops)

# The path of qkv-kernels' test binary, built (with the workspace's features, as every entry
# point resolves them) by `cargo test … --no-run`.
kernel_tests() {
  cargo test --workspace --locked --lib --no-run --message-format=json "$@" 2> /dev/null |
    python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "qkv_kernels" and m.get("executable"):
        print(m["executable"])'
}

for check in "${checks[@]}"; do
  case "$check" in
    asan)
      echo "== AddressSanitizer: qkv-kernels' tests"
      # --target keeps the flag off build scripts and proc macros, which run on the host.
      binary=$(RUSTC_BOOTSTRAP=1 RUSTFLAGS="-Zsanitizer=address" \
        CARGO_TARGET_DIR="${QKV_ASAN_TARGET_DIR:-$HOME/.cache/qkv-lab/asan-target}" kernel_tests --target "$host")
      [ -n "$binary" ] || { echo "the AddressSanitizer build failed" >&2; exit 1; }
      ASAN_OPTIONS="detect_leaks=0" "$binary" "${skip[@]}" 2>&1 | grep -E '^(test result|ERROR|SUMMARY|==[0-9]+==)|panicked|FAILED'
      ;;
    valgrind)
      command -v valgrind > /dev/null || { [ "$(id -u)" = 0 ] && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind > /dev/null; }
      export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/qkv-lab/target}"
      echo "== valgrind memcheck: qkv-kernels' tests (debug build)"
      binary=$(kernel_tests)
      [ -n "$binary" ] || { echo "the build failed" >&2; exit 1; }
      # One thread: memcheck serialises threads anyway, and its reports stay readable.
      valgrind --error-exitcode=99 --errors-for-leak-kinds=none --track-origins=yes -q \
        "$binary" --test-threads=1 "${skip[@]}" 2>&1 | grep -E '^(test result|==[0-9]+==)|panicked|FAILED'
      ;;
    *) echo "unknown check $check: asan or valgrind" >&2; exit 2 ;;
  esac
done
