"""A training step with kiln attention beside the same step with SDPA's FlashAttention-2 backend: a small
decoder-only transformer (pre-norm blocks of causal self-attention and an MLP, bf16 autocast over f32 weights)
trained on random tokens with AdamW, both models from the same initial weights and batches. Prints each
model's median step time (forward, backward and the optimizer step, event-timed after warm-up) and the
largest relative difference between the two loss curves. tests/python/gpu/test_training.py imports
`build_model` and `train` from here to check that the curves agree.
    python3 bench/python_training.py [--steps 30] [--layers 4] [--width 1024] [--heads 16] [--seq 2048]
                                     [--batch 4]
Needs torch with CUDA and the installed kiln. KILN_AUTOTUNE defaults to off (the default configs, compiled at
the first step, which the warm-up steps absorb)."""

import argparse
import os
import statistics

import torch
import torch.nn as nn
import torch.nn.functional as F

os.environ.setdefault("KILN_AUTOTUNE", "off")
import kiln  # noqa: E402


def kiln_attention(q, k, v):
    return kiln.attention(q, k, v, causal="top-left")


def sdpa_flash_attention(q, k, v):
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class Block(nn.Module):
    def __init__(self, width, heads, attend):
        super().__init__()
        self.heads, self.attend = heads, attend
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        b, n, w = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
        o = self.attend(q.contiguous(), k.contiguous(), v.contiguous())  # [B, H, N, D]
        x = x + self.proj(o.transpose(1, 2).reshape(b, n, w))
        return x + self.mlp(self.norm2(x))


class Decoder(nn.Module):
    def __init__(self, vocab, width, heads, layers, seq, attend):
        super().__init__()
        self.embed, self.pos = nn.Embedding(vocab, width), nn.Parameter(torch.zeros(seq, width))
        self.blocks = nn.ModuleList(Block(width, heads, attend) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, vocab)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x))


def build_model(attend, *, vocab=512, width=256, heads=4, layers=2, seq=256, device="cuda", seed=0):
    """The decoder with `attend(q, k, v)` as its attention, its weights a function of `seed` alone."""
    torch.manual_seed(seed)
    return Decoder(vocab, width, heads, layers, seq, attend).to(device)


def train(model, *, steps, batch, seq, vocab=512, lr=1e-3, seed=1, timed_from=None):
    """Trains `model` for `steps` AdamW steps on random tokens (next-token loss), the batches a function of
    `seed` alone. Returns the losses, and the step times in ms from step `timed_from` on (when given)."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    g = torch.Generator(device="cuda").manual_seed(seed)
    losses, times = [], []
    for step in range(steps):
        tokens = torch.randint(0, vocab, (batch, seq + 1), generator=g, device="cuda")
        timing = timed_from is not None and step >= timed_from
        if timing:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, vocab), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if timing:
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        losses.append(loss.item())
    return losses, times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=4)
    a = ap.parse_args()
    print(f"kiln {kiln.version()}, torch {torch.__version__}, {torch.cuda.get_device_name()}, "
          f"KILN_AUTOTUNE={os.environ['KILN_AUTOTUNE']}; {a.layers} layers, width {a.width}, {a.heads} heads of "
          f"{a.width // a.heads}, {a.batch} x {a.seq} tokens, bf16 autocast, {a.steps} steps")
    results = {}
    for name, attend in [("SDPA flash", sdpa_flash_attention), ("kiln", kiln_attention)]:
        model = build_model(attend, width=a.width, heads=a.heads, layers=a.layers, seq=a.seq)
        results[name] = train(model, steps=a.steps, batch=a.batch, seq=a.seq, timed_from=a.warmup)
    base = statistics.median(results["SDPA flash"][1])
    print(f"{'attention':<12} {'step ms (median)':>17} {'speed vs SDPA flash':>20} {'final loss':>11}")
    for name, (losses, times) in results.items():
        t = statistics.median(times)
        print(f"{name:<12} {t:>17.2f} {base / t:>19.3f}x {losses[-1]:>11.4f}")
    ref, got = results["SDPA flash"][0], results["kiln"][0]
    print(f"largest relative loss difference over {a.steps} steps: "
          f"{max(abs(x - y) / abs(y) for x, y in zip(got, ref)):.2e}")


if __name__ == "__main__":
    main()
