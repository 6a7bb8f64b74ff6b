#!/usr/bin/env bash
# `qkv compare` of several variants trained together against the same runs one after the other,
# on this machine's cores, and the floor that ratio cannot go below: whatever the scheduling, the
# runs together cannot finish before their one-core work, spread over every core, is done. It
# then says how far the runs together are from that floor, and how they compare with the same
# runs each on one core, one after the other (each run with the share of the machine it gets
# together).
#
# Each round runs, in turn: the variants together (`qkv compare`, each run on its share of the
# cores); each variant alone on every core; each variant alone on one core (RAYON_NUM_THREADS=1).
# Times are wall clock, start-up and evaluations included, averaged over the rounds. Not a test:
# CI never runs it. Run it on a quiet machine.
#
#   bash bench/compare.sh                                  # standard,wq-identity, 200 steps, 3 rounds
#   VARIANTS=standard,shared-kv STEPS=100 ROUNDS=1 bash bench/compare.sh
set -euo pipefail
cd "$(dirname "$0")/.."

variants=${VARIANTS:-standard,wq-identity}
steps=${STEPS:-200}
rounds=${ROUNDS:-3}
preset=${PRESET:-shakespeare-char-cpu}

echo "== cargo build --release -p qkv-cli"
cargo build --release --locked -p qkv-cli --quiet
qkv="${CARGO_TARGET_DIR:-target}/release/qkv"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Seconds one `qkv compare` takes; stops the script with qkv's own message if it fails.
seconds() {
  local start=$EPOCHREALTIME
  if ! "$@" --preset "$preset" --steps "$steps" --out "$out/run" > "$out/log" 2>&1; then
    cat "$out/log" >&2
    exit 1
  fi
  awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'
}

IFS=, read -r -a each <<< "$variants"
cores=$(nproc)
declare -A total
for round in $(seq "$rounds"); do
  total[together]=$(awk -v t="${total[together]:-0}" -v s="$(seconds "$qkv" compare --variants "$variants")" 'BEGIN { print t + s }')
  for variant in "${each[@]}"; do
    total[all:$variant]=$(awk -v t="${total[all:$variant]:-0}" -v s="$(seconds "$qkv" compare --variants "$variant")" 'BEGIN { print t + s }')
    total[one:$variant]=$(awk -v t="${total[one:$variant]:-0}" -v s="$(RAYON_NUM_THREADS=1 seconds "$qkv" compare --variants "$variant")" 'BEGIN { print t + s }')
  done
  echo "round $round of $rounds done"
done

mean() { awk -v t="${total[$1]}" -v n="$rounds" 'BEGIN { printf "%.2f", t / n }'; }
echo "machine: $cores cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "qkv compare --preset $preset --steps $steps, mean of $rounds rounds (seconds):"
together=$(mean together)
apart=0 one_core_work=0 parts=""
for variant in "${each[@]}"; do
  all=$(mean "all:$variant") one=$(mean "one:$variant")
  printf "  %-14s alone on %d cores %6.2f, on one core %6.2f (%.2fx from the other cores)\n" \
    "$variant" "$cores" "$all" "$one" "$(awk -v a="$all" -v o="$one" 'BEGIN { print o / a }')"
  apart=$(awk -v t="$apart" -v a="$all" 'BEGIN { print t + a }')
  one_core_work=$(awk -v t="$one_core_work" -v o="$one" 'BEGIN { print t + o }')
  parts="${parts:+$parts + }$all"
done
printf "  together %.2f, one after the other %s = %.2f\n" "$together" "$parts" "$apart"
awk -v t="$together" -v a="$apart" -v w="$one_core_work" -v c="$cores" 'BEGIN {
  printf "  together / one after the other = %.2f (floor: one-core work over %d cores / one after the other = %.2f)\n", t / a, c, w / c / a
  printf "  together / floor in seconds (one-core work over %d cores, %.2f) = %.2f\n", c, w / c, t / (w / c)
  printf "  together / the same runs each on one core, one after the other (%.2f) = %.2f\n", w, t / w
}'
