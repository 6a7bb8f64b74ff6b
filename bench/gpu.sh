#!/usr/bin/env bash
# QKV Lab's training speed on a GPU machine, in a few minutes: standard and wq-identity on the
# classroom model, nanoGPT's CPU recipe (shakespeare-char-cpu) and its GPU recipe's shape
# (shakespeare-char, batch 64), on wgpu, each beside its kernel launches per step and beside the
# PyTorch reference on the same GPU (bench/pytorch_reference.py, CUDA where torch has it) with
# each of its AdamW updates (per parameter, foreach, fused), both reading the loss back every 8
# steps. Each config runs qkv three ways: the default build on wgpu (WGSL shaders; Burn's product
# with cubek's default kernel, the one `qkv bench --kernels` models), and the build with
# `--features autotune,vulkan` on `--backend vulkan` (SPIR-V shaders, whose default product takes
# the card's cooperative-matrix instructions where it has them) with that default product
# (QKV_PRODUCT=burn) and with Burn's autotuned one: compiler, then tuning. It names the
# adapter and refuses to report a software one (lavapipe, llvmpipe, SwiftShader: wgpu on the CPU)
# as a GPU figure. Writes the table to gpu-table.md, and one step's time by
# kernel per config and build to gpu-profiles.txt (`qkv bench --kernels --profile`), which ranks
# the kernels worth work next; record them in docs/performance.md, "The GPU path". Both files, and
# the log, go to --out DIR, written as each row ends: at most three files, so that a lent machine
# that returns a few files returns them all, and whatever finished before a kill.
#
# It keeps to a time budget (300 s unless --budget says otherwise; the builds are not counted):
# every command gets at most what is left (`timeout`), and a row with no time left says "skipped"
# in the table. The configs run in the order of what they tell: the classroom model (is the GPU
# path sound), nanoGPT's GPU shape (the gap this project is judged by), then its CPU recipe.
#
#   bash bench/gpu.sh                              # builds qkv here with cargo
#   bash DIR/gpu.sh --prebuilt DIR --out RESULTS   # no cargo, no network: a bundle made by
#                                                  # bench/gpu-bundle.sh (qkv.xz, qkv-tuned.xz,
#                                                  # the Vulkan loader); RESULTS defaults to DIR
#   ... --budget SECONDS                           # another time budget
#   ... --allow-software                           # measure a software adapter anyway (checks the script)
#   QUICK=1 ...                                    # the classroom model only, batch 2, one step
#   FUSION=1 bash bench/gpu.sh                     # (cargo only) adds Burn's fusion,
#                                                  # a second build of Burn, in target/fusion
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

prebuilt="" allow_software="" out="" budget=300
while [ $# -gt 0 ]; do
  case "$1" in
    --prebuilt) prebuilt="$(cd "${2:?--prebuilt DIR}" && pwd)"; shift 2 ;;
    --out) out="${2:?--out DIR}"; shift 2 ;;
    --budget) budget="${2:?--budget SECONDS}"; shift 2 ;;
    --allow-software) allow_software=--allow-software; shift ;;
    *) echo "usage: bash bench/gpu.sh [--prebuilt DIR] [--out DIR] [--budget SECONDS] [--allow-software]" >&2; exit 2 ;;
  esac
done
case "$budget" in ''|*[!0-9]*) echo "error: --budget takes whole seconds, not \"$budget\"" >&2; exit 2 ;; esac

builds=()
if [ -n "$prebuilt" ]; then
  work="$prebuilt"
  # The Vulkan loader, unpacked beside the bundle (nothing outside it is touched), where the
  # machine has none; and the NVIDIA driver's ICD file where the loader cannot find it alone.
  if ! ldconfig -p 2> /dev/null | grep -q libvulkan.so.1 && compgen -G "$prebuilt/debs/*.deb" > /dev/null; then
    for deb in "$prebuilt"/debs/*.deb; do dpkg -x "$deb" "$prebuilt/root"; done
    export LD_LIBRARY_PATH="$prebuilt/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$nvidia_icd" ]; then export VK_DRIVER_FILES="$nvidia_icd"; fi
  for binary in qkv qkv-tuned; do
    [ -x "$prebuilt/$binary" ] || [ ! -f "$prebuilt/$binary.xz" ] && continue
    if command -v xz > /dev/null; then xz -dc "$prebuilt/$binary.xz" > "$prebuilt/$binary"
    else python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$prebuilt/$binary.xz" "$prebuilt/$binary"; fi
    chmod +x "$prebuilt/$binary"
  done
  qkv="$prebuilt/qkv" tuned="$prebuilt/qkv-tuned" reference="$prebuilt/pytorch_reference.py" corpus="$prebuilt/shakespeare.txt"
else
  cd "$here/.."
  target="${CARGO_TARGET_DIR:-target}"
  echo "== cargo build --release -p qkv-cli"
  cargo build --release --locked -p qkv-cli --quiet
  echo "== cargo build --release -p qkv-cli --features autotune,vulkan"
  cargo build --release --locked -p qkv-cli --features autotune,vulkan --quiet --target-dir "$target/tuned"
  qkv="$target/release/qkv" tuned="$target/tuned/release/qkv" reference=bench/pytorch_reference.py
  corpus=assets/shakespeare.txt work="$target"
  if [ -n "${FUSION:-}" ]; then
    echo "== cargo build --release -p qkv-cli --features fusion"
    cargo build --release --locked -p qkv-cli --features fusion --quiet --target-dir "$target/fusion"
    builds+=("fusion|$target/fusion/release/qkv|wgpu|")
  fi
fi
# build label | binary | backend | QKV_PRODUCT (empty: qkv's choice)
builds=("default|$qkv|wgpu|" "${builds[@]}")
[ -x "$tuned" ] && builds+=("vulkan|$tuned|vulkan|burn" "vulkan, autotune|$tuned|vulkan|")
if [ -z "${XDG_RUNTIME_DIR:-}" ]; then
  XDG_RUNTIME_DIR=$(mktemp -d)
  export XDG_RUNTIME_DIR
fi
out="${out:-$work}"
mkdir -p "$out"
table="$out/gpu-table.md" profiles="$out/gpu-profiles.txt"
: > "$profiles"
exec > >(tee "$out/gpu-log.txt") 2>&1

# The budget starts after the builds and the unpacking. `within CMD...` runs CMD with what is left
# of it, and fails (as `timeout` does, 124) when nothing is.
SECONDS=0
left() { echo $((budget - SECONDS)); }
within() {
  local seconds
  seconds=$(left)
  [ "$seconds" -gt 0 ] || return 124
  timeout "$seconds" "$@"
}
echo "budget: $budget s"

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/gpu: /'
# The adapter qkv computes on, refused unless it is a GPU (or --allow-software).
if ! within "$qkv" bench --preset classroom --backend wgpu --variants standard --kernels --steps 1 --warmup 0 --gen-tokens 1 \
  --require-gpu $allow_software --json > /dev/null 2> "$work/gpu-adapter.err"; then
  grep -v XDG_RUNTIME "$work/gpu-adapter.err" | tail -3 >&2
  exit 1
fi
grep -E '^(adapter|products):' "$work/gpu-adapter.err"

torch_device=cpu
python3 -c 'import torch; assert torch.cuda.is_available()' 2> /dev/null && torch_device=cuda
python3 -c 'import torch' 2> /dev/null || torch_device=""
echo "pytorch: ${torch_device:-not installed}"

# "key":value pairs of a `qkv bench --json` row, one row a line → "variant value".
field() { tr -d '\n ' | grep -o "\"variant\":\"[^\"]*\"[^}]*\"$1\":[0-9.e+-]*" | sed -E "s/\"variant\":\"([^\"]*)\".*\"$1\":([0-9.e+-]*)/\1 \2/"; }

# name, preset, layers, heads, embd, context, batch, dropout
configs=(
  "classroom classroom 2 4 64 64 16 0.0"
  "nanoGPT-gpu-shape shakespeare-char 6 6 384 256 64 0.2"
  "nanoGPT-cpu shakespeare-char-cpu 4 4 128 64 12 0.0"
)
if [ -n "${QUICK:-}" ]; then configs=("classroom classroom 2 4 64 64 2 0.0"); steps=1 rounds=1; else steps=16 rounds=3; fi
{
  echo "| config | batch | variant | build | backend | qkv tok/s | launches/step | pytorch (${torch_device:-none}) tok/s: per-parameter, foreach, fused AdamW | qkv / fastest pytorch |"
  echo "|---|---:|---|---|---|---:|---:|---:|---:|"
} > "$table"
for config in "${configs[@]}"; do
  read -r name preset layers heads embd context batch dropout <<< "$config"
  # PyTorch with each AdamW in one process: one start of torch and its device, not three.
  reference_rows=""
  [ -n "$torch_device" ] && reference_rows=$(within python3 -W "ignore:Failed to initialize NumPy" "$reference" --corpus "$corpus" \
    --device "$torch_device" --layers "$layers" --heads "$heads" --embd "$embd" --context "$context" --batch "$batch" \
    --dropout "$dropout" --steps "$steps" --rounds "$rounds" --warmup 3 --read-back-every 8 --adamw per-parameter,foreach,fused \
    2> /dev/null || true)
  declare -A theirs=()
  for adamw in per-parameter foreach fused; do
    theirs[$adamw]=$(echo "$reference_rows" | grep -F "\"adamw\": \"$adamw\"" | field train_tokens_per_sec || true)
  done
  for row in "${builds[@]}"; do
    IFS='|' read -r build binary backend product <<< "$row"
    if [ "$(left)" -le 0 ]; then
      echo "| $name | $batch | — | $build | $backend | skipped: the $budget s budget was spent | — | — | — |" >> "$table"
      continue
    fi
    export QKV_PRODUCT="$product"
    launches=$(within "$binary" bench --kernels --json --preset "$preset" --backend "$backend" --variants standard,wq-identity \
      --batch "$batch" --steps 1 --warmup 1 --gen-tokens 1 $allow_software 2> /dev/null | field launches_per_step || true)
    # One step of standard timed kernel by kernel (each launch waits for the last: the sum is not
    # the step's time, the ranking is what counts).
    echo "== $name, $build, $backend: one step by kernel" >> "$profiles"
    within "$binary" bench --kernels --profile --preset "$preset" --backend "$backend" --variants standard --batch "$batch" \
      --steps 1 --warmup 2 --gen-tokens 1 $allow_software >> "$profiles" 2> /dev/null \
      || echo "$name ($build, $backend): the profile failed or ran out of time" | tee -a "$profiles" >&2
    if ! ours=$(within "$binary" bench --json --preset "$preset" --backend "$backend" --variants standard,wq-identity \
      --batch "$batch" --steps "$steps" --rounds "$rounds" --warmup 3 --gen-tokens 16 --read-back-every 8 2> "$work/gpu-bench.err" \
      | field train_tokens_per_sec); then
      why=$(tail -1 "$work/gpu-bench.err")
      [ "$(left)" -le 0 ] && why="the $budget s budget ran out"
      echo "$name ($build, $backend): failed: $why"
      echo "| $name | $batch | — | $build | $backend | failed: ${why//|/\\|} | — | — | — |" >> "$table"
      continue
    fi
    while read -r variant rate; do
      count=$(echo "$launches" | awk -v v="$variant" '$1 == v { printf "%.0f", $2 }')
      refs=() best=""
      for adamw in per-parameter foreach fused; do
        ref=$(echo "${theirs[$adamw]}" | awk -v v="$variant" '$1 == v { print $2 }')
        refs+=("$([ -n "$ref" ] && printf '%.0f' "$ref" || echo —)")
        [ -n "$ref" ] && best=$(awk -v a="$ref" -v b="${best:-0}" 'BEGIN { print (a > b ? a : b) }')
      done
      ratio=$([ -n "$best" ] && awk -v a="$rate" -v b="$best" 'BEGIN { printf "%.2f", a / b }' || echo "—")
      printf '| %s | %s | %s | %s | %s | %.0f | %s | %s | %s |\n' "$name" "$batch" "$variant" "$build" "$backend" "$rate" "${count:-—}" \
        "${refs[0]}, ${refs[1]}, ${refs[2]}" "$ratio" >> "$table"
    done <<< "$ours"
  done
done
echo "spent: $SECONDS s of $budget"
cat "$table"
# Each profile's ranking: its heading, then the kernels from the longest, 16 lines.
awk '/^== / { print ""; print; shown = -1; next } /timed kernel by kernel/ { shown = 0 } shown >= 0 && shown < 16 { print; shown++ }' "$profiles"
