#!/usr/bin/env bash
# Several machines, shown on one: `qkv serve` in one process lends its device (Burn's remote
# backend over WebSocket), and `qkv train --remote` in another trains with every batch split
# between its own device and the lent one. The same run then trains on one device, and the two
# loss sequences are printed side by side; they must agree within 1e-4 (the gradients of the two
# halves of a batch add up to the whole batch's).
#
#   bash scripts/two-machines.sh             # release build with `--features remote` (a second
#                                            # build of Burn, in target/remote), then ~1 minute
#   PROFILE=dev bash scripts/two-machines.sh # a quicker build (dependencies still optimised)
#
# On two real machines: `qkv serve --port 3000` on one, `qkv train ... --remote ws://HOST:3000`
# on the other (docs/scaling.md).
set -euo pipefail
cd "$(dirname "$0")/.."

target="${CARGO_TARGET_DIR:-target}"
profile=${PROFILE:-release}
echo "== cargo build --profile $profile -p qkv-cli --features remote"
cargo build --locked -p qkv-cli --features remote --profile "$profile" --quiet --target-dir "$target/remote"
out_dir=$profile
[ "$profile" = dev ] && out_dir=debug
qkv="$target/remote/$out_dir/qkv"

port=${PORT:-3917}
work=$(mktemp -d)
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2> /dev/null && wait "$server" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT

echo "== process 1: qkv serve --port $port"
"$qkv" serve --port "$port" > "$work/serve.log" 2>&1 &
server=$!
for _ in $(seq 100); do
  (: < "/dev/tcp/127.0.0.1/$port") 2> /dev/null && break
  kill -0 "$server" 2> /dev/null || { cat "$work/serve.log"; exit 1; }
  sleep 0.1
done
head -n 1 "$work/serve.log"

# The server's CPU time (user + system, in clock ticks), to show that it computed its share.
server_ticks() { awk '{ print $14 + $15 }' "/proc/$server/stat"; }
run=(train --preset classroom --steps 20 --seed 3 --batch 8)
echo "== process 2: qkv ${run[*]} --remote ws://127.0.0.1:$port"
before=$(server_ticks)
"$qkv" "${run[@]}" --remote "ws://127.0.0.1:$port" --out "$work/two" 2>&1 | grep -v "^standard step"
echo "process 1 computed for $(( ($(server_ticks) - before) * 1000 / $(getconf CLK_TCK) )) ms of CPU time meanwhile"
echo "== the same run on this process's device alone"
"$qkv" "${run[@]}" --out "$work/one" 2>&1 | grep -v "^standard step"

# Column 6 of metrics.csv is train_loss; the step-0 evaluation row has none.
losses() { awk -F, 'NR > 1 && $6 != "" { print $3, $6 }' "$1/metrics.csv"; }
paste -d' ' <(losses "$work/one") <(losses "$work/two") | awk '
  BEGIN { printf "%5s %12s %12s %10s\n", "step", "one device", "two", "|diff|" }
  { d = $2 - $4; if (d < 0) d = -d; if (d > max) max = d; printf "%5d %12.6f %12.6f %10.2e\n", $1, $2, $4, d; n++ }
  END {
    if (n != 20) { print "expected 20 steps, got " n; exit 1 }
    printf "largest difference over %d steps: %.2e (allowed 1e-4)\n", n, max
    exit (max > 1e-4)
  }'
