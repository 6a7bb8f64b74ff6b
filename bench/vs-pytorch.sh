#!/usr/bin/env bash
# QKV Lab's training speed against PyTorch on this machine's CPU, in one run: `qkv bench` and
# bench/pytorch_reference.py (the same GPT, recipe, batch and corpus) back to back, per config
# and variant, printing `ours / pytorch = R` (tokens per second, higher is better for us).
#
# Installs torch into bench/.venv on first use (several GB from PyPI; a few minutes). Not a test:
# CI never runs it. Run it on a quiet machine; both sides use every core.
#
#   bash bench/vs-pytorch.sh             # both configs
#   QUICK=1 bash bench/vs-pytorch.sh     # fewer steps, for a first look
set -euo pipefail
cd "$(dirname "$0")/.."

source bench/torch-venv.sh

echo "== cargo build --release -p qkv-cli"
cargo build --release --locked -p qkv-cli --quiet
qkv="${CARGO_TARGET_DIR:-target}/release/qkv"

# name, preset, layers, heads, embd, context, batch, dropout, steps, rounds. The CPU config's step
# takes about 20 ms, so it times 30 steps per round (6 took about 0.1 s, which this VM's hiccups
# could swing by a tenth either way), over 5 rounds; the GPU shape's takes about half a second.
# The ViT on the 8x8 digits (17 tokens an image: 16 patches and the class token) is paper 2's
# vision domain at the size QKV Lab trains it.
configs=(
  "nanoGPT-cpu shakespeare-char-cpu 4 4 128 64 12 0.0 30 5"
  "nanoGPT-gpu-shape shakespeare-char 6 6 384 256 8 0.2 6 3"
  "ViT-digits vision-digits 3 4 64 17 64 0.1 30 5"
)

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "torch: $("${py[@]}" -c 'import torch; print(torch.__version__, "threads", torch.get_num_threads())')"
for config in "${configs[@]}"; do
  read -r name preset layers heads embd context batch dropout steps rounds <<< "$config"
  if [ -n "${QUICK:-}" ]; then steps=3 rounds=1; fi
  ours=$("$qkv" bench --preset "$preset" --variants standard,wq-identity --batch "$batch" \
    --steps "$steps" --rounds "$rounds" --warmup 2 --gen-tokens 8 --json 2> /dev/null)
  case "$preset" in
    vision-digits) shape=(--image 8,8,1,2 --mlp-hidden 128) ;;
    *) shape=(--corpus assets/shakespeare.txt --context "$context") ;;
  esac
  theirs=$("${py[@]}" bench/pytorch_reference.py "${shape[@]}" --layers "$layers" \
    --heads "$heads" --embd "$embd" --batch "$batch" --dropout "$dropout" \
    --steps "$steps" --rounds "$rounds" --warmup 2)
  OURS="$ours" THEIRS="$theirs" NAME="$name" "${py[@]}" - << 'EOF'
import json, os
ours = json.loads(os.environ["OURS"])
theirs = {row["variant"]: row for row in map(json.loads, os.environ["THEIRS"].splitlines())}
print(f'{os.environ["NAME"]} ({ours["preset"]}, batch {ours["batch"]} x {ours["block"]}):')
for row in ours["rows"]:
    v = row["variant"]
    mine, ref = row["train_tokens_per_sec"], theirs[v]["train_tokens_per_sec"]
    print(f'  {v:<12} ours {mine:8.0f} tok/s ({row["train_gflops"]:5.1f} GFLOP/s)  pytorch {ref:8.0f} tok/s'
          f'  ours / pytorch = {mine / ref:.2f}')
m = ours.get("memory")
if m:
    print(f'  memory: {m["rss_after_warmup_mib"]:.0f} MiB after warm-up, {m["rss_at_end_mib"]:.0f} MiB at the end')
EOF
done
