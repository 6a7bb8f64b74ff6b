#!/usr/bin/env bash
# How much this machine's busy cores slow each other, by kind of work: `bench/cores.rs` alone on
# one core, then one copy on every core at once, for arithmetic on registers and for streaming
# over arrays from the size of a core's own cache to the size of main memory's work. The ratio
# says what training several runs at once (one per core) can expect to lose to the hardware
# itself: nothing where the cores share only their clock, more where they share caches and
# memory. Each figure is the median of ROUNDS rounds (a VM's neighbours can halve a core's speed
# for a second). Not a test: CI never runs it. Run it on a quiet machine.
#
#   bash bench/cores.sh                 # compute, and streams of 1, 4, 12, 48 MiB; 5 rounds
#   SIZES="2 24" ROUNDS=3 bash bench/cores.sh
set -euo pipefail
cd "$(dirname "$0")/.."

sizes=${SIZES:-1 4 12 48}
rounds=${ROUNDS:-5}
cores=$(nproc)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
rustc -O -C target-cpu=native --edition 2024 bench/cores.rs -o "$out/cores"

echo "machine: $cores cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
lscpu | grep -E '^L[123]' | sed 's/^/  /' || true
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "seconds of the loop, median of $rounds rounds: alone on core 0, then on each of the $cores cores at once (the slowest)"
works=$(printf 'stream:%s\n' $sizes)
if grep -qw avx512f /proc/cpuinfo; then
  works="compute $works"
else
  echo "  compute: skipped (the loop is written for AVX-512, which this processor lacks)"
fi
for work in $works; do
  args=${work/:/ }
  : > "$out/alone"; : > "$out/together"
  for _ in $(seq "$rounds"); do
    taskset -c 0 "$out/cores" $args >> "$out/alone"
    for core in $(seq 0 $((cores - 1))); do
      taskset -c "$core" "$out/cores" $args > "$out/at-$core" &
    done
    wait
    sort -g "$out"/at-* | tail -1 >> "$out/together"
  done
  alone=$(median < "$out/alone") together=$(median < "$out/together")
  label=$args
  [[ $work == stream:* ]] && label="stream over ${args#stream } MiB x 2"
  printf "  %-26s alone %6.3f, every core at once %6.3f: %.2fx slower\n" \
    "$label" "$alone" "$together" "$(awk -v a="$alone" -v t="$together" 'BEGIN { print t / a }')"
done
