"""The attention-mods peers (suite "mods", bench/mods_bench.cpp's cases): PyTorch's flex_attention compiled by
torch.compile, with the same score and mask functions and a block mask from create_block_mask, and each SDPA
backend that takes the case (a boolean attn_mask where the mask is not causal; none takes a softcap). Every
output is checked on sampled rows against a double-precision reference with the same mods; a backend that
cannot run a case is recorded unavailable with the reason. peers.py runs them."""

import math

import torch
import torch.nn.functional as F

from peers_harness import TOLERANCE, check_sample, finish, record, rel_l2, set_check, short

try:
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:
    SDPBackend = sdpa_kernel = None


def mods_cases(quick):
    """(op, note, score(s, b, h, q, kv) or None, mask(b, h, q, kv) or None, causal, visible(i)) mirroring
    bench/mods_bench.cpp's table at its N; `causal` is the SDPA is_causal a case reduces to, or None when it
    needs an explicit mask."""
    N = 4096 if quick else 16384
    window, docs = min(4096, N // 4), 8
    doc_len = N // docs

    def causal_mask(b, h, q, kv):
        return kv <= q

    def window_mask(b, h, q, kv):
        return (kv <= q) & (q - kv < window)

    def document_mask(b, h, q, kv):
        return (kv <= q) & (q // doc_len == kv // doc_len)

    def softcap(s, b, h, q, kv):
        return 30.0 * torch.tanh(s / 30.0)

    def identity(s, b, h, q, kv):
        return s

    return N, [
        ("mods_noop", "flex_attention, score_mod identity", identity, None, False, lambda i: N),
        ("mods_causal", "flex_attention, mask_mod causal", None, causal_mask, True, lambda i: i + 1),
        ("mods_window", f"flex_attention, mask_mod sliding window of {window}, causal", None, window_mask, None,
         lambda i: min(i + 1, window)),
        ("mods_document", f"flex_attention, mask_mod {docs} documents of {doc_len}, causal", None, document_mask,
         None, lambda i: i % doc_len + 1),
        ("mods_softcap", "flex_attention, score_mod softcap(30), mask_mod causal", softcap, causal_mask, True,
         lambda i: i + 1),
    ]


def reference_rows(q, k, v, score, mask, rows, bh):
    """Double softmax(mods(q kᵀ / √D)) v for the query rows `rows` of the (b, h) pairs `bh`."""
    N = k.shape[2]
    kv = torch.arange(N, device=q.device)
    outs = []
    for b, h in bh:
        s = q[b, h, rows].double() @ k[b, h].double().T / math.sqrt(q.shape[-1])
        qi = rows[:, None]
        if score is not None:
            s = score(s, b, h, qi, kv[None, :])
        if mask is not None:
            s = s.masked_fill(~mask(b, h, qi, kv[None, :]), float("-inf"))
        outs.append(torch.softmax(s, dim=-1) @ v[b, h].double())
    return torch.stack(outs)


def _systems(N, score, mask, causal):
    """(system, note, make_run) per peer that can run the case; make_run(q, k, v) -> a no-argument callable."""
    out = []
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        compiled = torch.compile(flex_attention, dynamic=False)

        def flex(q, k, v):
            bm = create_block_mask(mask, None, None, N, N, device=q.device) if mask is not None else None
            return lambda: compiled(q, k, v, score_mod=score, block_mask=bm)

        out.append(("flex", "torch.compile(flex_attention)", flex))
    except ImportError as e:
        out.append(("flex", f"unavailable: {e}", None))
    if score is not None and score.__name__ != "identity" or SDPBackend is None:
        return out  # no SDPA backend applies a score function
    backends = [("sdpa_flash", SDPBackend.FLASH_ATTENTION), ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION),
                ("sdpa_efficient", SDPBackend.EFFICIENT_ATTENTION)]
    for system, backend in backends:
        def sdpa(q, k, v, backend=backend):
            if causal is None:  # an explicit boolean mask, broadcast over batch and heads
                idx = torch.arange(N, device=q.device)
                attn_mask = mask(0, 0, idx[:, None], idx[None, :])
                return lambda: _forced(backend, lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask))
            return lambda: _forced(backend, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
        note = "boolean attn_mask" if causal is None else ("is_causal" if causal else "no mask")
        out.append((system, note, sdpa))
    return out


def _forced(backend, fn):
    with sdpa_kernel([backend]):
        return fn()


def bench_mods(quick, timer, log):
    N, cases = mods_cases(quick)
    B, H, D = 16384 // N, 16, 128
    gen = torch.Generator(device="cuda").manual_seed(4321)
    q, k, v = ((torch.rand(B, H, N, D, device="cuda", generator=gen) * 2 - 1).to(torch.float16) for _ in range(3))
    rows, bh = check_sample(B, H, N)
    shape = [("B", B), ("H", H), ("N", N), ("D", D)]
    out = []
    for op, note, score, mask, causal, visible in cases:
        flops = 4.0 * B * H * D * sum(visible(i) for i in range(N))
        want = reference_rows(q, k, v, score, mask, rows, bh)
        for system, sys_note, make_run in _systems(N, score, mask, causal):
            rec = record("mods", op, system, "f16", shape, flops=flops, note=f"{sys_note}; {note}")
            try:
                if make_run is None:
                    raise RuntimeError(sys_note)
                run = make_run(q, k, v)
                o = run()
                torch.cuda.synchronize()
                got = torch.stack([o[b, h, rows] for b, h in bh])
                err, nonfinite = rel_l2(got, want)
                set_check(rec, "sampled", got.numel(), err, TOLERANCE["f16"], nonfinite)
                del o
                finish(rec, *timer(run), False)
            except Exception as e:  # a backend that does not take the mask, the shape or the dtype
                rec["available"], rec["error"] = False, short(e)
            out.append(rec)
            log(rec)
        torch.cuda.empty_cache()
    return out
