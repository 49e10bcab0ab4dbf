"""The attention peers: torch's scaled_dot_product_attention with one backend forced at a time, forward
(bench_attention) and backward (bench_attention_bwd, with its shape list), each checked against a double
reference computed on the GPU. peers.py runs them."""

import contextlib
import math

import torch
import torch.nn.functional as F

from peers_harness import DTYPES, TOLERANCE, check_sample, finish, record, rel_l2, set_check, short

try:
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:  # very old torch: no per-call backend selection
    SDPBackend = None
    sdpa_kernel = None

# The unfused math backend materialises B*H*N*N scores: only where that stays small.
MATH_MAX_SCORES = 1 << 28


def attention_reference_rows(q, k, v, causal, rows, bh):
    """Double-precision softmax(QKᵀ/√D)V for the query rows `rows` of the (b, h) pairs `bh`."""
    outs = []
    for b, h in bh:
        qs = q[b, h, rows].double()  # (R, D)
        s = qs @ k[b, h].double().T / math.sqrt(q.shape[-1])  # (R, N_K)
        if causal:
            j = torch.arange(k.shape[2], device=q.device)
            s = s.masked_fill(j[None, :] > rows[:, None], float("-inf"))
        outs.append(torch.softmax(s, dim=-1) @ v[b, h].double())
    return torch.stack(outs)  # (pairs, R, D)


def attention_backends(B, H, N, dtype):
    if SDPBackend is None:
        return [("sdpa_default", None)]
    out = [("sdpa_flash", SDPBackend.FLASH_ATTENTION), ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION),
           ("sdpa_efficient", SDPBackend.EFFICIENT_ATTENTION)]
    if B * H * N * N <= MATH_MAX_SCORES:
        out.append(("sdpa_math", SDPBackend.MATH))
    return out


def bench_attention(shapes, timer, log):
    out = []
    gen = torch.Generator(device="cuda")
    for suite, dtype, B, H, N, D, causal in shapes:
        gen.manual_seed(1234 + N + D)
        dt = DTYPES[dtype]
        q, k, v = ((torch.rand(B, H, N, D, device="cuda", dtype=torch.float32, generator=gen) * 2 - 1).to(dt)
                   for _ in range(3))
        flops = 4.0 * B * H * N * N * D / (2.0 if causal else 1.0)
        shape = [("B", B), ("H", H), ("N", N), ("D", D)]
        rows, bh = check_sample(B, H, N)
        want = attention_reference_rows(q, k, v, causal, rows, bh)
        for system, backend in attention_backends(B, H, N, dtype):
            rec = record(suite, "attention", system, dtype, shape, causal, flops=flops)
            # The backend is forced around the check and the timing both, not inside the timed call, so
            # that the context manager's host time stays out of the events' interval.
            try:
                with sdpa_kernel([backend]) if backend is not None else contextlib.nullcontext():
                    run = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))  # noqa: E731
                    o = run()
                    torch.cuda.synchronize()
                    got = torch.stack([o[b, h, rows] for b, h in bh])
                    err, nonfinite = rel_l2(got, want)
                    set_check(rec, "sampled", got.numel(), err, TOLERANCE[dtype], nonfinite)
                    del o
                    ms, reps, warmup = timer(run)
                finish(rec, ms, reps, warmup, False)
            except Exception as e:  # unsupported dtype/shape/arch for this backend, or out of memory
                rec["available"] = False
                rec["error"] = short(e)
            out.append(rec)
            log(rec)
    return out


def attention_bwd_shapes(quick):
    """(suite, dtype, B, H, N, D, causal) of bench/attention_bwd_bench.cpp: the forward's sweep."""
    out = []
    for dtype in ("f16", "bf16"):
        if quick and dtype == "bf16":
            continue
        for D in (64, 128):
            for causal in (0, 1):
                for N in (1024, 2048, 4096, 8192, 16384):
                    if quick and (N not in (1024, 4096) or (D == 128 and causal)):
                        continue
                    out.append(("attention_bwd", dtype, 16384 // N, 2048 // D, N, D, causal))
    return out


def attention_head_grads(q, k, v, dout, causal):
    """dQ, dK, dV of one head ([N, D] each) in double: P = softmax(S), dV = Pᵀ dO, dP = dO Vᵀ,
    dS = P ∘ (dP − rowsum(P ∘ dP)), dQ = scale · dS K, dK = scale · dSᵀ Q."""
    q, k, v, dout = (t.double() for t in (q, k, v, dout))
    scale = 1.0 / math.sqrt(q.shape[-1])
    s = q @ k.T * scale
    if causal:
        n = s.shape[0]
        s.masked_fill_(torch.ones(n, n, dtype=torch.bool, device=s.device).triu_(1), float("-inf"))
    p = torch.softmax(s, dim=-1)
    del s
    dv = p.T @ dout
    dp = dout @ v.T
    dp -= (p * dp).sum(dim=-1, keepdim=True)
    dp *= p  # dS
    del p
    return dp @ k * scale, dp.T @ q * scale, dv


def bwd_backends():
    if SDPBackend is None:
        return [("sdpa_default", None)]
    return [("sdpa_flash", SDPBackend.FLASH_ATTENTION), ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION),
            ("sdpa_efficient", SDPBackend.EFFICIENT_ATTENTION)]


def bench_attention_bwd(shapes, timer, log, efficient=False):
    """Per shape and backend: the backward alone (autograd.grad on a graph kept from one forward) and the
    forward + backward step, both checked through one head's gradients against attention_head_grads."""
    out = []
    gen = torch.Generator(device="cuda")
    for suite, dtype, B, H, N, D, causal in shapes:
        gen.manual_seed(4321 + N + D)
        dt = DTYPES[dtype]
        q, k, v, dout = ((torch.rand(B, H, N, D, device="cuda", dtype=torch.float32, generator=gen) * 2 - 1).to(dt)
                         for _ in range(4))
        for t in (q, k, v):
            t.requires_grad_(True)
        fwd_flops = 4.0 * B * H * N * N * D / (2.0 if causal else 1.0)
        shape = [("B", B), ("H", H), ("N", N), ("D", D)]
        b, h = B - 1, H - 1  # the checked head
        want = attention_head_grads(q[b, h].detach(), k[b, h].detach(), v[b, h].detach(), dout[b, h], causal)
        for system, backend in bwd_backends():
            if system == "sdpa_efficient" and not efficient:
                continue
            bwd = record(suite, "attention_bwd", system, dtype, shape, causal, flops=2.5 * fwd_flops,
                         note="torch.autograd.grad of the SDPA output")
            step = record(suite, "attention_fwd_bwd", system, dtype, shape, causal, flops=3.5 * fwd_flops,
                          note="SDPA forward + torch.autograd.grad")
            try:
                with sdpa_kernel([backend]) if backend is not None else contextlib.nullcontext():
                    o = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
                    grads = torch.autograd.grad(o, (q, k, v), dout, retain_graph=True)
                    torch.cuda.synchronize()
                    errs, nonfinite, n = [], 0, 0
                    for g, w in zip(grads, want):
                        e, nf = rel_l2(g[b, h], w)
                        errs.append(e)
                        nonfinite += nf
                        n += w.numel()
                    # The kernels' gradient tolerance: twice the forward's (tests/interp/attention_bwd_test_cases.h).
                    for rec in (bwd, step):
                        set_check(rec, "head", n, max(errs), 2 * TOLERANCE[dtype], nonfinite)
                        rec["extra"] = {"dq_error": errs[0], "dk_error": errs[1], "dv_error": errs[2]}
                    del grads
                    run_bwd = lambda: torch.autograd.grad(o, (q, k, v), dout, retain_graph=True)  # noqa: E731
                    finish(bwd, *timer(run_bwd), False)

                    def run_step():
                        torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal)),
                                            (q, k, v), dout)

                    del o
                    finish(step, *timer(run_step), False)
            except Exception as e:  # the backend cannot run this shape's backward, or out of memory
                for rec in (bwd, step):
                    if rec["time_ms"] is None:
                        rec["available"] = False
                        rec["error"] = short(e)
            for rec in (bwd, step):
                out.append(rec)
                log(rec)
        del want
    return out
