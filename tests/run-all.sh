#!/usr/bin/env bash
# Runs every QKV Lab test. Installs what the tests need when it is missing and we are root
# (Mesa's lavapipe, so that wgpu has a Vulkan adapter on a machine without a GPU).
#
# `--fast`: the common loop while working. Skips the long tiers (the browser end-to-end test, the
# page served from a sub-path, the desktop smoke test and the desktop archive) and what only they
# need; CI runs the full command.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--fast" ]; then
  export QKV_SKIP_WEB=1 QKV_SKIP_DESKTOP=1
elif [ -n "${1:-}" ]; then
  echo "usage: bash tests/run-all.sh [--fast]" >&2
  exit 2
fi

# Each stage's start, in seconds since the script's: where a slow run spends its time.
start=$(date +%s)
stage() { echo "== [$(( $(date +%s) - start )) s] $*"; }

# Free space, where the build goes: a nearly full disk fails builds, and makes browsers refuse to
# store files (tests/web_e2e.rs keeps its browser profiles on a RAM disk for that reason).
free_space() { df -Ph "$1" 2> /dev/null | awk 'NR == 2 { print $4 }'; }
build_dir=${CARGO_TARGET_DIR:-target}
while [ ! -e "$build_dir" ]; do build_dir=$(dirname "$build_dir"); done
stage "free space: $(free_space "$build_dir") where the build goes, $(free_space /dev/shm) on /dev/shm"

have_lavapipe() { compgen -G "/usr/share/vulkan/icd.d/lvp_icd*.json" > /dev/null; }

# Mesa's lavapipe gives wgpu a Vulkan adapter without a GPU; Xvfb gives the desktop app a screen;
# Chromium runs the browser build.
missing=()
have_lavapipe || missing+=(mesa-vulkan-drivers)
if [ -z "${QKV_SKIP_DESKTOP:-}" ]; then
  command -v xvfb-run > /dev/null || missing+=(xvfb xauth)
fi
if [ -z "${QKV_SKIP_WEB:-}" ]; then
  command -v chromium > /dev/null || command -v chromium-browser > /dev/null || missing+=(chromium)
  # The page served from a sub-path is checked with the deployed site's own script (Node).
  command -v npm > /dev/null || missing+=(nodejs npm)
fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
    stage "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" > /dev/null
  else
    echo "error: the tests need ${missing[*]}: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi

# The browser build: the wasm32 target, trunk and the wasm-bindgen-cli that matches Cargo.lock
# (trunk cannot download one offline, and a different version cannot read the build's output).
# The test builds the page as the README's `trunk serve` does; the deployed build's wasm-opt is
# installed by web/bench.sh, which measures that build.
rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
if [ -z "${QKV_SKIP_WEB:-}" ]; then
  # The two tools are compiled for this run, not for speed: unoptimised and without trunk's fat
  # LTO, trunk compiles in 2 min instead of 7 and wasm-bindgen-cli in 1 instead of 2.3, and
  # cost the page build 15 s (docs/performance.md, "CI time"). trunk without its default
  # features: no TLS and no update check, which `trunk serve` on localhost never uses.
  quick_install() {
    CARGO_PROFILE_RELEASE_OPT_LEVEL=0 CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
      cargo install --quiet "$@"
  }
  if ! command -v trunk > /dev/null; then
    stage "installing trunk"
    quick_install --locked --no-default-features trunk@0.21.14
  fi
  bindgen=$(grep -A1 '^name = "wasm-bindgen"$' Cargo.lock | sed -n 's/^version = "\(.*\)"$/\1/p')
  if ! wasm-bindgen --version 2> /dev/null | grep -qx "wasm-bindgen $bindgen"; then
    stage "installing wasm-bindgen-cli $bindgen"
    quick_install --force wasm-bindgen-cli --version "$bindgen"
  fi
fi

# winit and wgpu look for a runtime directory; a private one keeps them quiet and away from
# the user's session.
if [ -z "${XDG_RUNTIME_DIR:-}" ]; then
  XDG_RUNTIME_DIR=$(mktemp -d)
  export XDG_RUNTIME_DIR
  trap 'rm -rf "$XDG_RUNTIME_DIR"' EXIT
fi

for component in rustfmt clippy; do
  rustup component list --installed | grep -q "^$component" || rustup component add "$component"
done
stage "cargo fmt --check"
cargo fmt --all --check

# The GitHub workflows (the Pages deployment cannot run here), checked against GitHub's published
# workflow schema, which check-jsonschema ships: installed once into a venv beside the build.
stage "the workflows against GitHub's schema"
lint_venv="$HOME/.cache/qkv-lab/workflow-lint"
if [ ! -x "$lint_venv/bin/check-jsonschema" ]; then
  python3 -m venv "$lint_venv"
  "$lint_venv/bin/pip" install --quiet check-jsonschema==0.39.0
fi
"$lint_venv/bin/check-jsonschema" --builtin-schema vendor.github-workflows .github/workflows/*.yml

# Every committed report's tables, rebuilt from its results.csv by the script a reader would run
# (standard-library Python, a fraction of a second).
stage "the reports' tables from their results.csv"
python3 scripts/recompute.py

# The browser's build, linted with clippy.toml's rules for it (no threads, no std clock): a check
# of the page's crates for wasm32, 3 min with nothing built (178 s of a cold run's 1,538 s) and
# seconds warm, so `--fast` runs it too.
stage "cargo clippy --target wasm32-unknown-unknown -p qkv-lab"
cargo clippy --quiet --target wasm32-unknown-unknown -p qkv-lab --locked -- -D warnings

# Clippy lints inside the test build, with the same lints and `-D warnings` as `cargo clippy
# --workspace --all-targets -- -D warnings`: clippy-driver, cargo's wrapper for the workspace's
# own crates (what `cargo clippy` sets up for `cargo check`), lints each of them and compiles it,
# so the dependencies are compiled once instead of once checked for clippy and once built for
# the tests (7 of a cold run's minutes). `cargo test` builds every target `--all-targets` names
# but benches and examples, which this project has none of; a lint fails the build before any
# test runs. The browser test's `trunk serve` inherits the wrapper, so the page's wasm build is
# linted too.
# The lints and their levels are Cargo.toml's `[workspace.lints]`; `-D warnings` reaches
# clippy-driver in CLIPPY_ARGS, in the encoding `cargo clippy` itself uses. That encoding is
# clippy's own, not a promise: the canary below fails this script if a clippy update stops
# reading it, rather than letting the lints pass silently.
driver=$(rustup which clippy-driver)
clippy_args="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
canary=$(mktemp -d)
# needless_return warns by default: with -D warnings it must fail.
echo 'fn f() -> i32 { return 1; } fn main() { f(); }' > "$canary/canary.rs"
if CLIPPY_ARGS=$clippy_args "$driver" "$(rustup which rustc)" --edition 2024 --out-dir "$canary" "$canary/canary.rs" > /dev/null 2>&1; then
  echo "error: clippy-driver no longer reads -D warnings from CLIPPY_ARGS; update tests/run-all.sh" >&2
  exit 1
fi
rm -rf "$canary"
stage "cargo test --workspace, linted by clippy -D warnings"
RUSTC_WORKSPACE_WRAPPER=$driver CLIPPY_ARGS=$clippy_args cargo test --workspace --locked

# Burn's autotuned product (qkv-kernels' `autotune` feature, off by default: it makes tuning
# Burn's default for every op, which takes minutes on lavapipe): the kernels' tests that take it
# and the choice that gives it, in a second build of Burn's crates above burn-cubecl (2 minutes).
stage "qkv-kernels' tuned product (--features autotune)"
RUSTC_WORKSPACE_WRAPPER=$driver CLIPPY_ARGS=$clippy_args cargo test --locked -p qkv-kernels --lib --features autotune \
  -- weight_gradient product_choice

# The desktop archive a user downloads, made by scripts/package.sh from the programs the tests
# have just built (a release build would add a second build of Burn), unpacked and run as by a
# user without Rust: lesson 1 trains under Xvfb, `qkv compare` writes its report.
if [ -z "${QKV_SKIP_DESKTOP:-}" ]; then
  stage "the desktop archive, packaged from the tests' build and run without cargo"
  archives=$(mktemp -d)
  bash scripts/package.sh desktop --from "${CARGO_TARGET_DIR:-target}/debug" --out "$archives"
  bash scripts/check-archive.sh "$archives"/qkv-lab-*.tar.gz
  rm -rf "$archives"
fi
# The page as a static server hosts it, from a sub-path (a project's GitHub Pages site, the web
# archive unpacked anywhere): the tests' own build of it (the browser test above built the wasm;
# the same wrapper keeps cargo from building it again), linked relatively as `package.sh web`
# links the release page, then lesson 1 started by its link checked to train by the script the
# Pages workflow runs on the deployed site.
if [ -z "${QKV_SKIP_WEB:-}" ]; then
  stage "the page from a sub-path of a static server, checked as the deployed site is"
  site=$(mktemp -d)
  RUSTC_WORKSPACE_WRAPPER=$driver CLIPPY_ARGS=$clippy_args trunk build --offline --public-url ./ --dist "$site/qkv-lab" > "$site/build.log" 2>&1 ||
    { cat "$site/build.log" >&2; exit 1; }
  node_dir="$HOME/.cache/qkv-lab/check-deployed"
  if [ ! -d "$node_dir/node_modules/playwright-core" ]; then
    mkdir -p "$node_dir"
    npm install --silent --no-save --prefix "$node_dir" playwright-core@1.64.1
  fi
  # The script resolves playwright-core beside itself.
  cp web/check-deployed.mjs "$node_dir/"
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  python3 -m http.server --bind 127.0.0.1 --directory "$site" "$port" > /dev/null 2>&1 &
  server=$!
  for _ in $(seq 50); do
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/qkv-lab/')" 2> /dev/null && break
    sleep 0.2
  done
  chromium_bin=$(command -v chromium || command -v chromium-browser)
  checked=0
  node "$node_dir/check-deployed.mjs" "http://127.0.0.1:$port/qkv-lab/" "$chromium_bin" || checked=$?
  kill "$server"
  rm -rf "$site"
  [ "$checked" = 0 ] || exit 1
fi
echo "== all tests passed in $(( $(date +%s) - start )) s"
