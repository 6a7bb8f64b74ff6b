#!/usr/bin/env bash
# Builds here what a bare GPU machine needs to measure QKV Lab with `bench/gpu.sh --prebuilt DIR`:
# the release `qkv` (wgpu over Vulkan) and `qkv-tuned` (`--features autotune,vulkan`: Burn's
# autotuned products, and SPIR-V shaders with `--backend vulkan`), stripped and compressed; the
# Vulkan loader (Debian's libvulkan1), which such a machine may lack while its driver is there; the
# PyTorch reference and the corpus it reads; and gpu.sh itself. Nothing in it needs cargo or a
# network there.
#
#   bash bench/gpu-bundle.sh [DIR]   # DIR defaults to .gpu-bundle (ignored by git); at most 40 MB
#
# The device tool carries DIR (`carry`); there, `bash DIR/gpu.sh --prebuilt DIR`.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.gpu-bundle}
limit_mb=40

target=${CARGO_TARGET_DIR:-target}
echo "== cargo build --release -p qkv-cli"
cargo build --release --locked -p qkv-cli --quiet
# A second build of Burn, in a folder of its own so that neither build undoes the other.
echo "== cargo build --release -p qkv-cli --features autotune,vulkan"
cargo build --release --locked -p qkv-cli --features autotune,vulkan --quiet --target-dir "$target/tuned"
rm -rf "$out"
mkdir -p "$out/debs"
strip -o "$out/qkv" "$target/release/qkv"
strip -o "$out/qkv-tuned" "$target/tuned/release/qkv"
xz -9 -T0 "$out/qkv" "$out/qkv-tuned"

# The loader for the GPU machine's processor (x86-64), whatever this one's is.
lists=$(mktemp -d)
apt_amd64=(-o APT::Architecture=amd64 -o APT::Architectures=amd64 -o "Dir::State::Lists=$lists")
mkdir -p "$lists/partial"
apt-get "${apt_amd64[@]}" update -qq
(cd "$out/debs" && apt-get "${apt_amd64[@]}" download -qq libvulkan1)
rm -rf "$lists"

cp bench/gpu.sh bench/pytorch_reference.py "$out/"
cp assets/shakespeare.txt "$out/"

size_mb=$(du -sm "$out" | cut -f1)
du -ah "$out" | sort -h
if [ "$size_mb" -gt "$limit_mb" ]; then
  echo "error: the bundle is $size_mb MB, over $limit_mb MB" >&2
  exit 1
fi
echo "bundle: $out, $size_mb MB"
