#!/usr/bin/env bash
# Runs every QKV Lab test. Installs what the tests need when it is missing and we are root
# (Mesa's lavapipe, so that wgpu has a Vulkan adapter on a machine without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."

have_lavapipe() { compgen -G "/usr/share/vulkan/icd.d/lvp_icd*.json" > /dev/null; }

# Mesa's lavapipe gives wgpu a Vulkan adapter without a GPU; Xvfb gives the desktop app a screen.
missing=()
have_lavapipe || missing+=(mesa-vulkan-drivers)
command -v xvfb-run > /dev/null || missing+=(xvfb xauth)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
    echo "== installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" > /dev/null
  else
    echo "error: the tests need ${missing[*]}: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi

# winit and wgpu look for a runtime directory; a private one keeps them quiet and away from
# the user's session.
if [ -z "${XDG_RUNTIME_DIR:-}" ]; then
  XDG_RUNTIME_DIR=$(mktemp -d)
  export XDG_RUNTIME_DIR
  trap 'rm -rf "$XDG_RUNTIME_DIR"' EXIT
fi

start=$(date +%s)
echo "== cargo test --workspace"
cargo test --workspace --locked
echo "== all tests passed in $(( $(date +%s) - start )) s"
