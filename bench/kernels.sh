#!/usr/bin/env bash
# What one training step asks of a GPU, QKV Lab against PyTorch eager: `qkv bench --kernels` on
# wgpu (kernel launches, host waits, kernels compiled by the first step) beside the compute ops
# PyTorch runs for the same model and step (bench/pytorch_reference.py --count-ops: leaf aten ops,
# views and allocations excluded, AdamW per parameter as ours). Counts, not timings: they do not
# depend on the machine, so lavapipe (wgpu on the CPU) gives a GPU's figures. Record the output
# in docs/performance.md, "The GPU path".
#
# Installs torch into bench/.venv on first use (as bench/vs-pytorch.sh). Not a test: CI never
# runs it. About a minute on 2 cores after the build: QKV Lab's steps are counted on a dry run
# (`--dry-run`: every launch compiled and dropped), so nanoGPT's GPU shape counts at its batch.
#
#   bash bench/kernels.sh
#   QKV_FUSED=0 bash bench/kernels.sh   # Burn's composed ops alone, the figures before the kernels
set -euo pipefail
cd "$(dirname "$0")/.."

source bench/torch-venv.sh

# Counts do not depend on the optimisation level: the tests' build serves.
echo "== cargo build -p qkv-cli"
cargo build --locked -p qkv-cli --quiet
qkv="${CARGO_TARGET_DIR:-target}/debug/qkv"
if [ -z "${XDG_RUNTIME_DIR:-}" ]; then
  XDG_RUNTIME_DIR=$(mktemp -d)
  export XDG_RUNTIME_DIR
  trap 'rm -rf "$XDG_RUNTIME_DIR"' EXIT
fi

# name, preset, layers, heads, embd, context, batch, dropout.
configs=(
  "classroom classroom 2 4 64 64 16 0.0"
  "shakespeare-char shakespeare-char 6 6 384 256 64 0.2"
)
echo "torch: $("${py[@]}" -c 'import torch; print(torch.__version__)')${QKV_FUSED:+, QKV_FUSED=$QKV_FUSED}"
for config in "${configs[@]}"; do
  read -r name preset layers heads embd context batch dropout <<< "$config"
  ours=$("$qkv" bench --kernels --json --preset "$preset" --backend wgpu --variants standard,wq-identity \
    --batch "$batch" --steps 1 --warmup 0 --dry-run 2> /dev/null)
  theirs=$("${py[@]}" bench/pytorch_reference.py --count-ops --corpus assets/shakespeare.txt --layers "$layers" \
    --heads "$heads" --embd "$embd" --context "$context" --batch "$batch" --dropout "$dropout" --warmup 1 2> /dev/null)
  OURS="$ours" THEIRS="$theirs" NAME="$name" "${py[@]}" - << 'EOF'
import json, os
ours = json.loads(os.environ["OURS"])
theirs = {row["variant"]: row for row in map(json.loads, os.environ["THEIRS"].splitlines())}
print(f'{os.environ["NAME"]} ({ours["preset"]}, batch {ours["batch"]} x {ours["block"]}), one training step:')
for row in ours["rows"]:
    v = row["variant"]
    ref = theirs[v]["compute_ops"]
    print(f'  {v:<12} ours {row["launches_per_step"]:5.0f} launches, {row["host_waits_per_step"]:.0f} host wait,'
          f' {row["compiled_by_first_step"]:3} kernels compiled by step 1 |'
          f' pytorch eager {ref:4} compute ops | ours / pytorch = {row["launches_per_step"] / ref:.2f}')
EOF
done
