#!/usr/bin/env bash
# Builds what a user downloads, each archive with its SHA-256 beside it:
# - desktop: the two programs (qkv-lab, the playground's window, and qkv, the command line),
#   stripped, with a short README (scripts/package-readme.md), as one archive for the platform it
#   runs on;
# - web: the browser build, which `trunk build --release` makes, with relative links, so that the
#   folder works from any static server and any sub-path.
# The release workflow runs it on each platform.
#
#   bash scripts/package.sh [desktop] [web] [--out DIR] [--from DIR]
#
# Default: desktop into target/package. `--from DIR` packages the programs already built in DIR
# instead of building the release ones (tests/run-all.sh checks an archive of the tests' build).
set -euo pipefail
cd "$(dirname "$0")/.."

desktop="" web="" from=""
out="target/package"
while [ $# -gt 0 ]; do
  case "$1" in
    desktop) desktop=1 ;;
    web) web=1 ;;
    --out) out="$2"; shift ;;
    --from) from="$2"; shift ;;
    *) echo "usage: bash scripts/package.sh [desktop] [web] [--out DIR] [--from DIR]" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$desktop$web" ] || desktop=1
mkdir -p "$out"

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
platform=$(rustc -vV | sed -n 's/^host: //p')
exe=""
case "$platform" in *windows*) exe=".exe" ;; esac
target_dir=${CARGO_TARGET_DIR:-target}

sum() { # sum FILE: its SHA-256 beside it, in the format `sha256sum -c` reads
  (cd "$(dirname "$1")" && { sha256sum "$(basename "$1")" 2> /dev/null || shasum -a 256 "$(basename "$1")"; } > "$(basename "$1").sha256")
}
size() { du -h "$1" | cut -f1; }

if [ -n "$desktop" ]; then
  if [ -z "$from" ]; then
    # Both programs in one build, so that Burn compiles once for the two.
    cargo build --release --locked -p qkv-lab -p qkv-cli
    from="$target_dir/release"
  fi
  name="qkv-lab-$version-$platform"
  stage="$out/$name"
  rm -rf "$stage"
  mkdir -p "$stage"
  for program in qkv-lab qkv; do
    cp "$from/$program$exe" "$stage/"
    # Symbols are for debugging the build, not for running it: stripped, the archive is smaller.
    if [ -z "$exe" ] && command -v strip > /dev/null; then strip "$stage/$program"; fi
  done
  cp scripts/package-readme.md "$stage/README.md"
  # zip on Windows, where a tar.gz is unusual; tar.gz elsewhere.
  if [ -n "$exe" ]; then
    archive="$out/$name.zip"
    (cd "$out" && 7z a -tzip "$name.zip" "$name" > /dev/null)
  else
    archive="$out/$name.tar.gz"
    tar -C "$out" -czf "$archive" "$name"
  fi
  sum "$archive"
  echo "desktop: $archive ($(size "$archive"); qkv-lab $(size "$stage/qkv-lab$exe"), qkv $(size "$stage/qkv$exe") unpacked)"
fi

if [ -n "$web" ]; then
  # Relative links (`--public-url ./`), so that the folder works from any server and any sub-path.
  rm -rf "$out/qkv-lab-web-$version"
  trunk build --release --public-url ./ --dist "$out/qkv-lab-web-$version"
  page="$out/qkv-lab-web-$version.tar.gz"
  tar -C "$out" -czf "$page" "qkv-lab-web-$version"
  sum "$page"
  wasm=$(ls -S "$out/qkv-lab-web-$version"/*.wasm | head -n 1)
  echo "web: $page ($(size "$page"); largest wasm $(size "$wasm"), $(gzip -9 -c "$wasm" | wc -c) bytes under gzip -9)"
fi
