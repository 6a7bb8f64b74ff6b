"""PyTorch reference for `qkv bench`: the same GPT, the same recipe, the same step, timed alike.

A nanoGPT-style model written here from the shapes QKV Lab trains (pre-LN blocks, LayerNorm
without bias, tied embeddings, exact-erf GELU, causal scaled-dot-product attention), or with
`--image` the ViT QKV Lab builds from the same blocks (patches of P x P pixels through one linear
map, a class token, learned positions, attention both ways, biases, the class token's last state
through the final norm to a class head, `--mlp-hidden` wide MLPs), in two variants: `standard`
(W_Q, W_K, W_V) and `wq-identity` (no W_Q: head h's query is channels [h*d_k, (h+1)*d_k) of the
block input, scale 1/(2*sqrt(d_k))). One training step is what QKV Lab's
step is: forward, cross-entropy, backward, global-norm clipping to 1.0, AdamW (decay on matrices
and embeddings only), and the loss read back to the host: every step, or every K steps with
`--read-back-every K` as `qkv bench --read-back-every K` does (each window of timed steps ends
with one, so every step is finished within the time). `--adamw` picks PyTorch's update: one
parameter at a time (QKV Lab's CPU path), `foreach` (PyTorch's default on CUDA) or `fused`, or
several, comma-separated, timed in one process (one start of PyTorch and its device, not three).

It prints one JSON object per variant (and update) on stdout, read by `bench/vs-pytorch.sh`. With
`--count-ops` it times nothing and prints instead what one step asks of the device, counted with
torch.profiler: the compute ops PyTorch eager runs (leaf aten ops, views and allocations
excluded), and on CUDA the kernels it launches (`bench/kernels.sh` sets them beside QKV Lab's
launch counts). `--device cuda` runs on a GPU. Not a test: it never runs in CI.
"""

import argparse
import json
import math
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, n_embd, n_head, variant, bias=False, causal=True):
        super().__init__()
        self.n_head, self.head_dim, self.variant, self.causal = n_head, n_embd // n_head, variant, causal
        # The query projection exists only in the standard variant.
        self.c_q = nn.Linear(n_embd, n_embd, bias=bias) if variant == "standard" else None
        self.c_kv = nn.Linear(n_embd, 2 * n_embd, bias=bias)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)
        self.scale = 1 / math.sqrt(self.head_dim) if variant == "standard" else 1 / (2 * math.sqrt(self.head_dim))

    def forward(self, x):
        b, t, c = x.shape
        q = self.c_q(x) if self.c_q is not None else x
        k, v = self.c_kv(x).split(c, dim=2)
        heads = lambda y: y.view(b, t, self.n_head, self.head_dim).transpose(1, 2)
        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=self.causal, scale=self.scale)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, variant, dropout, bias=False, causal=True, mlp_hidden=None):
        super().__init__()
        mlp_hidden = mlp_hidden or 4 * n_embd
        self.ln_1 = nn.LayerNorm(n_embd, bias=bias)
        self.attn = Attention(n_embd, n_head, variant, bias, causal)
        self.ln_2 = nn.LayerNorm(n_embd, bias=bias)
        self.mlp = nn.Sequential(
            nn.Linear(n_embd, mlp_hidden, bias=bias),
            nn.GELU(),
            nn.Linear(mlp_hidden, n_embd, bias=bias),
            nn.Dropout(dropout),
        )
        self.attn_dropout = nn.Dropout(dropout)

    def forward(self, x):
        x = x + self.attn_dropout(self.attn(self.ln_1(x)))
        return x + self.mlp(self.ln_2(x))


def normal_matrices(model):
    """GPT-2's initialisation, which both models take: every matrix from N(0, 0.02²)."""
    for p in model.parameters():
        if p.dim() >= 2:
            nn.init.normal_(p, 0.0, 0.02)


class Gpt(nn.Module):
    def __init__(self, vocab, context, n_layer, n_head, n_embd, variant, dropout):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(context, n_embd)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(n_embd, n_head, variant, dropout) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd, bias=False)
        normal_matrices(self)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.drop(self.wte(idx) + self.wpe(torch.arange(t, device=idx.device)))
        for block in self.blocks:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


class Vit(nn.Module):
    def __init__(self, image, classes, n_layer, n_head, n_embd, mlp_hidden, variant, dropout):
        super().__init__()
        self.height, self.width, self.channels, self.patch = image
        patches = (self.height // self.patch) * (self.width // self.patch)
        self.patch_embedding = nn.Linear(self.patch * self.patch * self.channels, n_embd)
        self.class_token = nn.Parameter(torch.zeros(1, 1, n_embd))
        self.positions = nn.Parameter(torch.zeros(1, 1 + patches, n_embd))
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            Block(n_embd, n_head, variant, dropout, bias=True, causal=False, mlp_hidden=mlp_hidden) for _ in range(n_layer)
        )
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, classes)
        normal_matrices(self)

    def forward(self, pixels, labels):
        b, h, w, c, p = pixels.shape[0], self.height, self.width, self.channels, self.patch
        # Row of patches by row, each patch's P*P*C values in HWC order, as QKV Lab cuts them.
        patches = pixels.view(b, h // p, p, w // p, p * c).transpose(2, 3).reshape(b, -1, p * p * c)
        x = torch.cat([self.class_token.expand(b, -1, -1), self.patch_embedding(patches)], dim=1)
        x = self.drop(x + self.positions)
        for block in self.blocks:
            x = block(x)
        return F.cross_entropy(self.head(self.ln_f(x[:, 0])), labels)


# Ops that move no data: views, allocations and bookkeeping, which a GPU does not launch for.
NOT_COMPUTE = {
    "aten::view", "aten::_unsafe_view", "aten::reshape", "aten::transpose", "aten::t", "aten::permute",
    "aten::expand", "aten::as_strided", "aten::slice", "aten::select", "aten::unsqueeze", "aten::squeeze",
    "aten::split", "aten::split_with_sizes", "aten::unbind", "aten::narrow", "aten::alias", "aten::detach",
    "aten::detach_", "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::resize_", "aten::lift_fresh",
    "aten::result_type", "aten::is_nonzero", "aten::item", "aten::_local_scalar_dense", "aten::set_",
    "aten::_has_compatible_shallow_copy_type", "aten::is_same_size", "aten::contiguous", "aten::numpy_T",
    "aten::resolve_conj", "aten::resolve_neg", "aten::to", "aten::_to_copy",
}


def count_ops(step, device):
    """What one call of `step` asks of the device: the compute ops that call no other (the ones that
    run a kernel) and, on CUDA, the kernels launched."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        step()
    events = prof.events()
    compute = lambda e: e.name.startswith("aten::") and e.name not in NOT_COMPUTE
    # An op that calls compute ops of its own (linear calls mm, to calls copy_) is counted in them.
    calls_compute = lambda e: any(compute(c) or calls_compute(c) for c in e.cpu_children)
    ops = [e.name for e in events if compute(e) and not calls_compute(e)]
    kernels = sum(1 for e in events if e.device_type.name == "CUDA") if device == "cuda" else None
    by_op = {}
    for name in ops:
        by_op[name] = by_op.get(name, 0) + 1
    return {"compute_ops": len(ops), "cuda_kernels": kernels, "by_op": dict(sorted(by_op.items(), key=lambda kv: -kv[1]))}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--corpus", help="the text a GPT trains on (not with --image)")
    p.add_argument("--image", help="a ViT on images of HxWxC cut in PxP patches, written H,W,C,P (e.g. 8,8,1,2)")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--mlp-hidden", type=int, help="the ViT's MLP width [default: 4 x embd]")
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--embd", type=int, required=True)
    p.add_argument("--context", type=int, help="tokens per row (a ViT's are its patches and class token)")
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--variants", default="standard,wq-identity")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--count-ops", action="store_true", help="count one step's ops instead of timing")
    p.add_argument(
        "--adamw",
        default="per-parameter",
        help="AdamW's update: per-parameter (as QKV Lab's on the CPU), foreach (multi-tensor) or fused"
        " (CUDA); several comma-separated",
    )
    p.add_argument("--read-back-every", type=int, default=1, help="read the loss back every K steps (default 1)")
    args = p.parse_args()
    updates = args.adamw.split(",")
    for update in updates:
        if update not in ("per-parameter", "foreach", "fused"):
            p.error(f"--adamw takes per-parameter, foreach or fused (comma-separated), not {update!r}")

    torch.manual_seed(1337)
    # One fixed batch, as `qkv bench` uses: the figure is the step's cost, not the data pipeline's.
    if args.image:
        image = tuple(int(n) for n in args.image.split(","))
        height, width, channels, patch = image
        context = 1 + (height // patch) * (width // patch)
        # Pixel values do not change what a step costs: random ones stand in for the digits.
        x = torch.rand(args.batch, height * width * channels).to(args.device)
        y = torch.randint(args.classes, (args.batch,)).to(args.device)
        new_model = lambda variant: Vit(
            image, args.classes, args.layers, args.heads, args.embd, args.mlp_hidden, variant, args.dropout
        )
    else:
        if not (args.corpus and args.context):
            p.error("a GPT needs --corpus and --context")
        context = args.context
        text = open(args.corpus, encoding="utf-8").read()
        chars = sorted(set(text))
        data = torch.tensor([chars.index(c) for c in text[:200_000]], dtype=torch.long)
        starts = torch.randint(len(data) - context - 1, (args.batch,))
        x = torch.stack([data[s : s + context] for s in starts]).to(args.device)
        y = torch.stack([data[s + 1 : s + 1 + context] for s in starts]).to(args.device)
        new_model = lambda variant: Gpt(len(chars), context, args.layers, args.heads, args.embd, variant, args.dropout)

    runs = []
    for variant, update in ((v, u) for u in updates for v in args.variants.split(",")):
        model = new_model(variant).to(args.device)
        model.train()
        decay = [p for p in model.parameters() if p.dim() >= 2]
        no_decay = [p for p in model.parameters() if p.dim() < 2]
        wd = 0.1 if variant == "standard" else 2**-5
        opt = torch.optim.AdamW(
            [{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}],
            lr=1e-3,
            betas=(0.9, 0.99),
            foreach=update == "foreach",
            fused=update == "fused",
        )
        runs.append((variant, update, model, opt))

    def step(model, opt, read_back=True):
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        # `.item()` waits for the device, as QKV Lab's read-back does.
        return loss.item() if read_back else loss

    def window(model, opt):
        """`args.steps` steps, reading the loss back every `--read-back-every` and after the last."""
        for i in range(args.steps):
            step(model, opt, read_back=(i + 1) % args.read_back_every == 0 or i + 1 == args.steps)

    for _, _, model, opt in runs:
        for _ in range(args.warmup):
            step(model, opt)
    if args.count_ops:
        for variant, update, model, opt in runs:
            counts = count_ops(lambda: step(model, opt), args.device)
            print(json.dumps({"variant": variant, "adamw": update, "torch": torch.__version__, **counts}))
        return
    rates = {(variant, update): [] for variant, update, _, _ in runs}
    tokens = args.batch * context * args.steps
    # Rounds interleave the runs, as `qkv bench` interleaves its variants, so that drift hits all
    # alike.
    for _ in range(args.rounds):
        for variant, update, model, opt in runs:
            started = time.perf_counter()
            window(model, opt)
            rates[(variant, update)].append(tokens / (time.perf_counter() - started))
    for (variant, update), values in rates.items():
        print(
            json.dumps(
                {
                    "variant": variant,
                    "train_tokens_per_sec": statistics.median(values),
                    "torch": torch.__version__,
                    "threads": torch.get_num_threads(),
                    "adamw": update,
                    "read_back_every": args.read_back_every,
                }
            )
        )


if __name__ == "__main__":
    main()
