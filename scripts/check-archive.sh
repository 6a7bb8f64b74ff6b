#!/usr/bin/env bash
# Checks a desktop archive as a user without Rust would use it: unpacked into a scratch folder
# and run with nothing but the system on the PATH, the playground opens lesson 1 and trains for
# a few seconds under Xvfb, and `qkv compare` writes its report.
#
#   bash scripts/check-archive.sh ARCHIVE.tar.gz
set -euo pipefail
archive=$(realpath "$1")
(cd "$(dirname "$archive")" && sha256sum -c "$(basename "$archive").sha256")
scratch=$(mktemp -d)
runtime=$(mktemp -d)
trap 'rm -rf "$scratch" "$runtime"' EXIT
tar -C "$scratch" -xzf "$archive"
cd "$scratch"/qkv-lab-*/
chmod 700 "$runtime"
# No cargo, no rustup, no project: the system's PATH only, and a home of its own.
clean() { env -i PATH=/usr/bin:/bin HOME="$scratch" XDG_RUNTIME_DIR="$runtime" "$@"; }
clean xvfb-run -a ./qkv-lab --lesson 1 --train-for 8 --compute flex | grep "qkv-lab smoke: standard"
clean ./qkv compare --preset classroom --variants standard,wq-identity --steps 20 --out "$scratch/report" 2>&1 | tail -n 1
test -s "$scratch/report/report.md"
echo "the archive runs: $(basename "$archive")"
