#!/usr/bin/env bash
# Do PyTorch and QKV Lab read each other's GPT-2 weights as meant? Both ways, comparing the
# greedy continuation of one prompt (the checkpoint's own character vocabulary encodes it for
# PyTorch):
#   out: a model trained by `qkv`, exported in Hugging Face's layout, loaded by transformers'
#        GPT2LMHeadModel;
#   in:  a GPT2LMHeadModel that transformers made and saved (`save_pretrained`), read by
#        `qkv import`.
# Identical text means the names, shapes, the fused c_attn, tying and config.json all arrived.
#
# Installs torch and transformers into bench/.venv on first use (several GB from PyPI). Not a
# test: CI never runs it. `QKV=path/to/qkv` uses a qkv already built instead of building one.
#
#   bash bench/vs-transformers.sh
set -euo pipefail
cd "$(dirname "$0")/.."

venv=bench/.venv
if ! "$venv/bin/python" -c "import torch, transformers" 2> /dev/null; then
  echo "== installing torch and transformers into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip
  "$venv/bin/pip" install --quiet "torch==2.15.0" "transformers>=4.40" safetensors
fi
py="$venv/bin/python"

if [ -z "${QKV:-}" ]; then
  echo "== cargo build --release -p qkv-cli"
  cargo build --release --locked -p qkv-cli --quiet
  QKV="${CARGO_TARGET_DIR:-target}/release/qkv"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prompt="ROMEO:"
tokens=40

# transformers' greedy continuation of the prompt: checkpoint.qkv (for its vocabulary), model folder.
greedy() {
  CHECKPOINT="$1" MODEL="$2" PROMPT="$prompt" TOKENS="$tokens" "$py" - << 'PY'
import json, os, struct, torch
from transformers import GPT2LMHeadModel
from transformers.utils import logging
logging.set_verbosity_error()
logging.disable_progress_bar()
raw = open(os.environ["CHECKPOINT"], "rb").read()
at = len(b"QKV-LAB CHECKPOINT\n") + 4
length = struct.unpack("<Q", raw[at:at + 8])[0]
chars = json.loads(raw[at + 8:at + 8 + length])["tokenizer"]["chars"]
prompt = os.environ["PROMPT"]
model = GPT2LMHeadModel.from_pretrained(os.environ["MODEL"]).eval()
ids = torch.tensor([[chars.index(c) for c in prompt]])
with torch.no_grad():
    out = model.generate(ids, max_new_tokens=int(os.environ["TOKENS"]), do_sample=False, pad_token_id=0)
# Ids past the vocabulary are left out, as qkv sample leaves them out.
print(prompt + "".join(chars[i] for i in out[0, ids.shape[1]:].tolist() if i < len(chars)))
PY
}

failed=0
compare() { # what, ours, theirs
  echo "$1"
  echo "  qkv:          $(printf %q "$2")"
  echo "  transformers: $(printf %q "$3")"
  if [ "$2" = "$3" ]; then echo "  greedy continuation: identical"; else echo "  greedy continuation: DIFFERENT"; failed=1; fi
}

echo "== qkv train --preset classroom --steps 150, then qkv export --layout huggingface"
"$QKV" train --preset classroom --steps 150 --out "$work/run" > /dev/null 2>&1
"$QKV" export --checkpoint "$work/run/checkpoint.qkv" --layout huggingface --out "$work/hf/model.safetensors"
ours=$("$QKV" sample --checkpoint "$work/run/checkpoint.qkv" --prompt "$prompt" --temperature 0 --tokens "$tokens")
# The classroom model has no biases (nanoGPT's recipe); GPT2LMHeadModel gives the missing ones
# their initial zeros, which change nothing.
compare "out: qkv's export read by transformers" "$ours" "$(greedy "$work/run/checkpoint.qkv" "$work/hf")"

echo "== a GPT2LMHeadModel made by transformers (biases, tied, exact GELU), then qkv import"
"$py" - "$work/made" << 'PY'
import sys, torch
from transformers import GPT2Config, GPT2LMHeadModel
from transformers.utils import logging
logging.set_verbosity_error()
logging.disable_progress_bar()
torch.manual_seed(0)
# Weights larger than the usual 0.02 make the untrained model say something other than one
# character over and over, so that the comparison has something to compare.
config = GPT2Config(vocab_size=80, n_positions=64, n_embd=64, n_layer=2, n_head=4, activation_function="gelu", initializer_range=0.3)
GPT2LMHeadModel(config).save_pretrained(sys.argv[1])
PY
"$QKV" import "$work/made/model.safetensors" --preset classroom --out "$work/made.qkv"
ours=$("$QKV" sample --checkpoint "$work/made.qkv" --prompt "$prompt" --temperature 0 --tokens "$tokens")
compare "in: transformers' model read by qkv import" "$ours" "$(greedy "$work/made.qkv" "$work/made")"
exit "$failed"
