#!/usr/bin/env bash
# QKV Lab's training speed on a GPU machine, in a few minutes: both benchmark configurations
# (nanoGPT's CPU recipe and its GPU recipe's shape), standard and wq-identity, on flex (the CPU)
# and on wgpu (the GPU), the latter also with the losses read back every 8 steps instead of
# every step (`wgpu+rb8`, as the app does while playing), one line per figure. Record its output
# in docs/performance.md.
#
#   bash bench/gpu.sh            # ~3 minutes after the build on a recent GPU
#   QUICK=1 bash bench/gpu.sh    # batch 2, one short round each: checks that the script runs
#                                # (also on lavapipe, wgpu on the CPU, without a GPU)
#   FUSION=1 bash bench/gpu.sh   # adds rows for wgpu with Burn's kernel fusion and autotuning
#                                # (a second build of Burn, in target/fusion)
#   NATIVE=cuda bash bench/gpu.sh  # adds rows for Burn's native backend (cuda, rocm, metal or
#                                # vulkan; a build with that feature, in target/NATIVE) and a
#                                # 200-step `qkv compare` on it (CUDA's build fetches an LLVM
#                                # bundle from the internet: README, "Scaling up")
#   Last, the 6/6/384 config on one device and on two (data parallel, `--devices 2`).
set -euo pipefail
cd "$(dirname "$0")/.."

target="${CARGO_TARGET_DIR:-target}"
echo "== cargo build --release -p qkv-cli"
cargo build --release --locked -p qkv-cli --quiet
qkv="$target/release/qkv"
builds=("$qkv")
if [ -n "${FUSION:-}" ]; then
  echo "== cargo build --release -p qkv-cli --features fusion"
  cargo build --release --locked -p qkv-cli --features fusion --quiet --target-dir "$target/fusion"
  builds+=("$target/fusion/release/qkv")
fi

native=${NATIVE:-}
case "$native" in
  "" | cuda | rocm | metal | vulkan) ;;
  *) echo "NATIVE=$native: use cuda, rocm, metal or vulkan" >&2; exit 2 ;;
esac
if [ -n "$native" ]; then
  echo "== cargo build --release -p qkv-cli --features $native"
  cargo build --release --locked -p qkv-cli --features "$native" --quiet --target-dir "$target/$native"
fi

if [ -n "${QUICK:-}" ]; then steps=2 rounds=1; else steps=16 rounds=3; fi

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | sed 's/^/gpu: /'

# `qkv bench --json` on stdin → "variant tokens-per-second", a line per variant (no Python needed
# on the GPU machine).
train_rates() {
  tr -d '\n ' | grep -o '"variant":"[^"]*"[^}]*"train_tokens_per_sec":[0-9.e+-]*' |
    sed -E 's/"variant":"([^"]*)".*"train_tokens_per_sec":([0-9.e+-]*)/\1 \2/'
}

# name, preset, batch
configs=(
  "nanoGPT-cpu shakespeare-char-cpu 12"
  "nanoGPT-gpu-shape shakespeare-char 64"
)
for config in "${configs[@]}"; do
  read -r name preset batch <<< "$config"
  [ -n "${QUICK:-}" ] && batch=2
  for run in flex wgpu wgpu+rb8 ${FUSION:+wgpu+fusion} $native; do
    backend=${run%+*}
    binary=$qkv
    [ "$run" = wgpu+fusion ] && binary=${builds[1]}
    [ -n "$native" ] && [ "$run" = "$native" ] && binary="$target/$native/release/qkv"
    read_back=1
    [ "$run" = wgpu+rb8 ] && read_back=8
    if ! out=$("$binary" bench --preset "$preset" --variants standard,wq-identity --backend "$backend" \
      --batch "$batch" --steps "$steps" --rounds "$rounds" --warmup 3 --gen-tokens 16 \
      --read-back-every "$read_back" --json 2> /tmp/qkv-gpu-bench.err); then
      echo "$name on $run: failed: $(tail -1 /tmp/qkv-gpu-bench.err)"
      continue
    fi
    echo "$out" | train_rates |
      while read -r variant rate; do
        printf '%-18s %-12s batch %-3s %-12s %10.0f tok/s\n' "$name" "$run" "$batch" "$variant" "$rate"
      done
  done
done

# A comparison as a user runs one: two variants on the same batches, 200 steps, wall clock.
compare_backend=${native:-wgpu}
compare_binary=$qkv
[ -n "$native" ] && compare_binary="$target/$native/release/qkv"
[ -n "${QUICK:-}" ] && compare_steps=4 || compare_steps=200
start=$(date +%s%N)
if "$compare_binary" compare --preset shakespeare-char-cpu --variants standard,wq-identity --backend "$compare_backend" \
  --steps "$compare_steps" --out "$(mktemp -d)" > /tmp/qkv-gpu-compare.out 2>&1; then
  echo "compare standard,wq-identity on $compare_backend, $compare_steps steps: $((($(date +%s%N) - start) / 1000000)) ms"
else
  echo "compare on $compare_backend: failed: $(tail -1 /tmp/qkv-gpu-compare.out)"
fi

# Data parallel: the 6/6/384 config on two devices against one, where the machine has two
# (`--devices 2` says how many there are otherwise).
[ -n "${QUICK:-}" ] && dp_batch=2 dp_rounds=1 || dp_batch=32 dp_rounds=2
for devices in 1 2; do
  if out=$("$compare_binary" bench --preset shakespeare-char --variants standard --backend "$compare_backend" \
    --devices "$devices" --batch "$dp_batch" --steps 2 --rounds "$dp_rounds" --warmup 2 --gen-tokens 1 --json \
    2> /tmp/qkv-gpu-devices.err); then
    rate=$(echo "$out" | train_rates | head -1 | cut -d' ' -f2)
    printf 'data parallel on %s, --devices %s: %10.0f tok/s\n' "$compare_backend" "$devices" "$rate"
  else
    echo "data parallel on $compare_backend, --devices $devices: $(tail -1 /tmp/qkv-gpu-devices.err)"
  fi
done
