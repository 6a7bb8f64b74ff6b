#!/usr/bin/env bash
# Soak: trains the classroom model a long while with `qkv train` (20,000 steps on flex, 2,000 on
# wgpu: lavapipe where there is no GPU), samples its resident memory every 2 s and its speed at
# every evaluation, and checks that resident memory at the end of training (95% of the way in:
# the last seconds write the checkpoint and summary) is within 5% of what it was after warm-up
# (a tenth of the way in). A leak of a few bytes a step shows over that many steps. Not a
# test: CI never runs it (about 25 minutes here). Results go into docs/performance.md, "Memory".
#
#   bash bench/soak.sh
#   FLEX_STEPS=2000 BACKENDS=flex bash bench/soak.sh      # shorter, one backend
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/qkv-lab/target}"
flex_steps=${FLEX_STEPS:-20000}
wgpu_steps=${WGPU_STEPS:-2000}
backends=${BACKENDS:-flex,wgpu}

echo "== cargo build --release -p qkv-cli"
cargo build --release --locked -p qkv-cli --quiet
qkv="$CARGO_TARGET_DIR/release/qkv"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

failed=0
soak() {
  local backend=$1 steps=$2
  echo "== $backend: $steps classroom steps"
  "$qkv" train --preset classroom --backend "$backend" --steps "$steps" --out "$out/$backend" > /dev/null 2> "$out/$backend.log" &
  local pid=$! start=$EPOCHREALTIME
  : > "$out/$backend.rss"
  while kill -0 "$pid" 2> /dev/null; do
    local rss
    rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$pid/status" 2> /dev/null || true)
    [ -n "$rss" ] && echo "$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }') $rss" >> "$out/$backend.rss"
    sleep 2
  done
  if ! wait "$pid"; then
    tail -20 "$out/$backend.log" >&2
    exit 1
  fi
  # The log has a line per evaluation ("standard step 50/20000: loss … 61234 tok/s"); the samples
  # are "seconds KiB".
  python3 - "$out/$backend.rss" "$out/$backend.log" << 'PY' || failed=1
import re, sys
samples = [tuple(map(float, line.split())) for line in open(sys.argv[1]) if line.strip()]
evals = [(int(m[1]), float(m[2])) for m in re.finditer(r"step (\d+)/\d+: .* (\d+) tok/s", open(sys.argv[2]).read())]
if len(samples) < 5 or not evals:
    sys.exit(f"too short to judge: {len(samples)} memory samples, {len(evals)} evaluations")
total = samples[-1][0]
def at(fraction):
    return min(samples, key=lambda s: abs(s[0] - fraction * total))
print(f"{'into the run':>14} {'seconds':>8} {'resident MiB':>13}")
for fraction in (0.1, 0.25, 0.5, 0.75, 0.95, 1.0):
    t, rss = at(fraction)
    print(f"{fraction:>13.0%} {t:>8.0f} {rss / 1024:>13.1f}")
peak = max(s[1] for s in samples)
print(f"peak {peak / 1024:.1f} MiB over {len(samples)} samples")
speeds = [tps for _, tps in evals]
tenth = max(1, len(speeds) // 10)
first, last = sum(speeds[1:1 + tenth]) / len(speeds[1:1 + tenth] or [1]), sum(speeds[-tenth:]) / tenth
print(f"tokens/s: {first:.0f} over the first tenth of the evaluations, {last:.0f} over the last ({last / first:.2f}x)")
warm, end = at(0.1)[1], at(0.95)[1]
change = end / warm - 1
print(f"resident memory at the end of training against after warm-up: {change:+.1%} ({'within' if abs(change) <= 0.05 else 'OUTSIDE'} 5%)")
sys.exit(0 if abs(change) <= 0.05 else 1)
PY
}

IFS=, read -r -a chosen <<< "$backends"
for backend in "${chosen[@]}"; do
  case $backend in
    flex) soak flex "$flex_steps" ;;
    wgpu) soak wgpu "$wgpu_steps" ;;
    *) echo "BACKENDS takes flex and wgpu, not $backend" >&2; exit 2 ;;
  esac
done
[ "$failed" = 0 ] || { echo "== resident memory grew by more than 5%" >&2; exit 1; }
echo "== soak passed"
