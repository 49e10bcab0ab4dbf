#!/usr/bin/env python3
"""The peers kiln is measured against, on the same shapes and with the same FLOP convention as kiln_bench.

Attention: torch.nn.functional.scaled_dot_product_attention with one backend forced at a time
(FlashAttention-2 "sdpa_flash", cuDNN "sdpa_cudnn", memory-efficient "sdpa_efficient", and the unfused
math path "sdpa_math" for small shapes only), layout [B, H, N, D]. Matmul: torch.matmul (cuBLAS,
"cublas"). Memory: torch.add / torch.softmax on kiln's memory shapes, and a device-to-device copy_
("torch_copy"), the bandwidth ceiling the memory-bound kernels are compared with.

Attention backward (suite "attention_bwd", the forward sweep's shapes): per SDPA backend (flash and cuDNN;
memory-efficient with --bwd-efficient) the backward alone, torch.autograd.grad(o, (q, k, v), dO) on a graph
kept from one forward (op "attention_bwd", 2.5 × the forward's FLOPs), and one training step, forward then
that backward (op "attention_fwd_bwd", 3.5 ×); the gradients of one (b, h) head are checked against the
whole head's gradients computed in double on the GPU. Both attention suites are peers_attention.py's.

Attention mods (suite "mods", peers_mods.py): torch.compile(flex_attention) with the same score and mask
functions as kiln's mods cases, and the SDPA backends that take the case.

Timing follows kiln_bench: CUDA events around each launch, warm-up launches first, the median of the
timed launches, repetitions capped by a per-case time budget, L2 flushed before every launch of the
memory-bound cases only (Timer in peers_harness.py). A backend that cannot run a shape is recorded with
available=false and the reason, never a crash.

Every record carries the same "key" as kiln_bench's (see case_key in peers_harness.py), so report.py can join
the two.
With --kiln-json, the attention and matmul shapes are taken from kiln_bench's output so that the two
cover the same keys; otherwise this script's own lists (which mirror bench/*.cpp) are used.

Runs on the GPU machine (Python 3.12, torch, triton); nothing to install.
"""

import argparse
import json
import math
import os
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers_attention import attention_bwd_shapes, bench_attention, bench_attention_bwd  # noqa: E402
from peers_harness import DTYPES, TOLERANCE, Timer, finish, record, rel_l2, set_check, short  # noqa: E402
from peers_mods import bench_mods  # noqa: E402

SCHEMA = "kiln-bench/1"


# ---------------------------------------------------------------- case lists (mirror bench/*.cpp)


def attention_shapes(quick):
    """(suite, dtype, B, H, N, D, causal) of bench/attention_bench.cpp's sweep and seeds."""
    out = []
    for dtype in ("f16", "bf16"):
        if quick and dtype == "bf16":
            continue
        for D in (64, 128):
            for causal in (0, 1):
                for N in (1024, 2048, 4096, 8192, 16384):
                    if quick and N not in (1024, 4096):
                        continue
                    out.append(("attention", dtype, 16384 // N, 2048 // D, N, D, causal))
    if quick:
        out.append(("attention", "bf16", 4, 16, 4096, 128, 0))
    for causal in (0, 1):
        if quick and causal:
            continue
        out.append(("attention", "f16", 1, 1, 16384, 64, causal))
    for D in (96, 192, 256):
        for causal in (0, 1):
            if quick and (D != 96 or causal):
                continue
            out.append(("attention", "f16", 1, 16, 8192, D, causal))
    for N in (64, 128, 256, 512, 1024, 2048):
        if quick and N not in (128, 1024):
            continue
        out.append(("seeds", "f16", 1, 1, N, 64, 0))
    for H in (1, 32):
        if quick and H != 32:
            continue
        out.append(("seeds", "f16", 1, H, 16384, 64, 0))
    out.append(("seeds", "f32", 1, 1, 8192, 32, 0))
    return out


def matmul_shapes(quick):
    """(dtype, M, N, K) of bench/matmul_bench.cpp, plus the 4096³ / 8192³ ceilings (already in the squares)."""
    out = []
    for dtype in ("f16", "bf16"):
        if quick and dtype == "bf16":
            continue
        for n in (1024, 2048, 4096, 8192):
            if not quick or n in (1024, 4096):
                out.append((dtype, n, n, n))
        for M, N, K in ((16384, 1024, 1024), (1024, 16384, 1024), (1024, 1024, 16384)):
            if not quick or M == 16384:
                out.append((dtype, M, N, K))
    return out


def memory_shapes(quick):
    """vector_add n and softmax (dtype, rows, cols) of bench/memory_bench.cpp; copies (f32 element counts) that
    move as many bytes as each of them, plus one of 1 GiB (the ceiling): a short kernel is compared with a
    copy as short as itself as well as with the longest."""
    adds = [1 << 24] if quick else [1 << 24, 1 << 27]
    softmaxes = [("f16", 16384, 1024)] if quick else [
        (dt, 16384, cols) for dt in ("f32", "f16") for cols in (1024, 4096)]
    elem = {"f32": 4, "f16": 2}
    same_bytes = [3 * n // 2 for n in adds]  # a + b -> c: 12 bytes an element, a copy moves 8
    same_bytes += [rows * cols * elem[dt] // 4 for dt, rows, cols in softmaxes]  # read and written once
    copies = sorted(set(adds + same_bytes + [1 << 28]))
    return adds, softmaxes, copies


def shapes_from_kiln(path):
    """The attention and matmul shapes kiln_bench measured, so that the peers cover the same keys."""
    with open(path) as f:
        doc = json.load(f)
    attn, mm, bwd = [], [], []
    seen = set()
    for c in doc.get("cases", []):
        if c.get("suite") == "attention_bwd":  # the backward's shapes, each once (three records a shape)
            s = c.get("shape", {})
            item = ("attention_bwd", c["dtype"], s["B"], s["H"], s["N"], s["D"], c.get("causal", 0))
            if item not in seen:
                seen.add(item)
                bwd.append(item)
            continue
        # Only the suites that have peers: kiln_bench's other suites (ablation, model, autotune, ...) reuse
        # these shapes, and the first record of a shape decides which suite the peers' record joins.
        if c.get("suite", "attention") not in ("attention", "seeds", "matmul"):
            continue
        s = c.get("shape", {})
        if c.get("op") == "attention":
            item = (c.get("suite", "attention"), c["dtype"], s["B"], s["H"], s["N"], s["D"], c.get("causal", 0))
            if item[1:] not in seen:
                seen.add(item[1:])
                attn.append(item)
        elif c.get("op") == "matmul":
            item = (c["dtype"], s["M"], s["N"], s["K"])
            if item not in seen:
                seen.add(item)
                mm.append(item)
    return attn, mm, bwd


# ---------------------------------------------------------------- matmul


def bench_matmul(shapes, timer, log):
    out = []
    gen = torch.Generator(device="cuda")
    for dtype, M, N, K in shapes:
        gen.manual_seed(99 + M + N + K)
        dt = DTYPES[dtype]
        a = (torch.rand(M, K, device="cuda", generator=gen) * 2 - 1).to(dt)
        b = (torch.rand(K, N, device="cuda", generator=gen) * 2 - 1).to(dt)
        c = torch.empty(M, N, device="cuda", dtype=dt)
        rec = record("matmul", "matmul", "cublas", dtype, [("M", M), ("N", N), ("K", K)],
                     flops=2.0 * M * N * K, note="torch.matmul")
        try:
            run = lambda: torch.matmul(a, b, out=c)  # noqa: E731
            run()
            torch.cuda.synchronize()
            r = torch.randint(0, M, (16,), device="cuda")
            s = torch.randint(0, N, (32,), device="cuda")
            want = a[r].double() @ b[:, s].double()
            err, nonfinite = rel_l2(c[r][:, s], want)
            set_check(rec, "sampled", want.numel(), err, TOLERANCE[dtype], nonfinite)
            ms, reps, warmup = timer(run)
            finish(rec, ms, reps, warmup, False)
        except Exception as e:
            rec["available"] = False
            rec["error"] = short(e)
        out.append(rec)
        log(rec)
    return out


# ---------------------------------------------------------------- memory


def bench_memory(quick, timer, log):
    adds, softmaxes, copies = memory_shapes(quick)
    out = []
    for n in copies:
        x = torch.rand(n, device="cuda")
        y = torch.empty_like(x)
        rec = record("memory", "copy", "torch_copy", "f32", [("n", n)], nbytes=2.0 * 4 * n,
                     note="Tensor.copy_ (device to device)")
        run = lambda: y.copy_(x)  # noqa: E731
        run()
        torch.cuda.synchronize()
        set_check(rec, "exact", n, 0.0 if torch.equal(x, y) else math.inf, 0.0)
        finish(rec, *timer(run, flush=True), True)
        out.append(rec)
        log(rec)
    for n in adds:
        x, y = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
        z = torch.empty_like(x)
        rec = record("memory", "vector_add", "torch_add", "f32", [("n", n)], nbytes=3.0 * 4 * n, note="torch.add")
        run = lambda: torch.add(x, y, out=z)  # noqa: E731
        run()
        torch.cuda.synchronize()
        set_check(rec, "exact", n, 0.0 if torch.equal(z, x + y) else math.inf, 0.0)
        finish(rec, *timer(run, flush=True), True)
        out.append(rec)
        log(rec)
    for dtype, rows, cols in softmaxes:
        dt = DTYPES[dtype]
        x = ((torch.rand(rows, cols, device="cuda") * 2 - 1) * 8).to(dt)
        rec = record("memory", "softmax", "torch_softmax", dtype, [("rows", rows), ("cols", cols)],
                     nbytes=2.0 * rows * cols * x.element_size(), note="torch.softmax")
        run = lambda: torch.softmax(x, dim=-1)  # noqa: E731
        got = run()
        torch.cuda.synchronize()
        err, nonfinite = rel_l2(got[:64], torch.softmax(x[:64].double(), dim=-1))
        set_check(rec, "sampled", 64 * cols, err, TOLERANCE[dtype], nonfinite)
        finish(rec, *timer(run, flush=True), True)
        out.append(rec)
        log(rec)
    return out


# ---------------------------------------------------------------- user kernels


def user_shapes(quick):
    """The tutorials' kernels of bench/user_kernels_bench.cpp: (op, shape) with kiln's size names."""
    rows = 4096 if quick else 16384
    n = 2048 if quick else 4096
    return [("layernorm_fwd", [("n_rows", rows), ("n_cols", 4096)]),
            ("matmul_bias_gelu", [("M", n), ("N", n), ("K", n)]),
            ("online_logsumexp", [("n_rows", rows), ("n_cols", 32768)])]


def bench_user(quick, timer, log):
    """torch's layer_norm, matmul + bias add + GELU (unfused, as a user writes it) and logsumexp on kiln's
    "user" shapes, checked on 64 sampled rows against float64; plus kiln's copy ceiling at the LayerNorm's and
    the logsumexp's bytes."""
    out = []
    dt = torch.float16
    for op, shape in user_shapes(quick):
        s = dict(shape)
        if op == "layernorm_fwd":
            x = (torch.rand(s["n_rows"], s["n_cols"], device="cuda") * 4 - 2).to(dt)
            w = torch.rand(s["n_cols"], device="cuda").to(dt)
            b = torch.rand(s["n_cols"], device="cuda").to(dt)
            rec = record("user", op, "torch_layer_norm", "f16", shape, nbytes=2.0 * 2 * x.numel(),
                         note="torch.nn.functional.layer_norm")
            run = lambda: torch.nn.functional.layer_norm(x, (s["n_cols"],), w, b, 1e-5)  # noqa: E731
            want = torch.nn.functional.layer_norm(x[:64].double(), (s["n_cols"],), w.double(), b.double(), 1e-5)
            sample = lambda got: got[:64]  # noqa: E731
        elif op == "matmul_bias_gelu":
            a = (torch.rand(s["M"], s["K"], device="cuda") * 2 - 1).to(dt)
            bm = (torch.rand(s["K"], s["N"], device="cuda") * 2 - 1).to(dt)
            bias = (torch.rand(s["N"], device="cuda") * 2 - 1).to(dt)
            rec = record("user", op, "torch_matmul_bias_gelu", "f16", shape, flops=2.0 * s["M"] * s["N"] * s["K"],
                         note="torch.matmul, + bias, torch.nn.functional.gelu")
            run = lambda: torch.nn.functional.gelu(torch.matmul(a, bm) + bias)  # noqa: E731
            want = torch.nn.functional.gelu(a[:64].double() @ bm.double() + bias.double())
            sample = lambda got: got[:64]  # noqa: E731
        else:
            x = ((torch.rand(s["n_rows"], s["n_cols"], device="cuda") * 2 - 1) * 8).to(dt)
            rec = record("user", op, "torch_logsumexp", "f16", shape, nbytes=2.0 * x.numel() + 4.0 * s["n_rows"],
                         note="torch.logsumexp(x.float(), -1)")
            run = lambda: torch.logsumexp(x.float(), dim=-1)  # noqa: E731
            want = torch.logsumexp(x[:64].double(), dim=-1)
            sample = lambda got: got[:64]  # noqa: E731
        try:
            got = run()
            torch.cuda.synchronize()
            err, nonfinite = rel_l2(sample(got), want)
            set_check(rec, "sampled", want.numel(), err, TOLERANCE["f16"], nonfinite)
            finish(rec, *timer(run, flush=True), True)
        except Exception as e:  # out of memory, or an op this torch lacks
            rec["available"], rec["error"] = False, short(e)
        out.append(rec)
        log(rec)
        if rec["bytes"]:  # the copy ceiling for the same bytes, half read and half written
            n = int(rec["bytes"] // 8)
            src = torch.rand(n, device="cuda")
            dst = torch.empty_like(src)
            crec = record("user", op, "torch_copy", "f16", shape, nbytes=8.0 * n,
                          note="Tensor.copy_ of the same bytes (the bandwidth ceiling)")
            copy = lambda: dst.copy_(src)  # noqa: E731
            copy()
            torch.cuda.synchronize()
            set_check(crec, "exact", n, 0.0 if torch.equal(src, dst) else math.inf, 0.0)
            finish(crec, *timer(copy, flush=True), True)
            out.append(crec)
            log(crec)
            del src, dst
        torch.cuda.empty_cache()
    return out


# ---------------------------------------------------------------- main


def device_info():
    p = torch.cuda.get_device_properties(0)
    return {
        "available": True,
        "name": torch.cuda.get_device_name(0),
        "compute_capability": f"{p.major}.{p.minor}",
        "sm_count": p.multi_processor_count,
        "l2_bytes": getattr(p, "L2_cache_size", None),
        "total_memory_bytes": p.total_memory,
    }


def versions():
    out = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0]}
    try:
        out["cudnn"] = torch.backends.cudnn.version()
    except Exception:
        out["cudnn"] = None
    try:
        import triton

        out["triton"] = triton.__version__
    except ImportError:
        out["triton"] = None
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suites", nargs="*", default=[],
                    help="attention, attention_bwd, matmul, memory, mods, seeds, user, all (default all)")
    ap.add_argument("--json", required=True, help="output file")
    ap.add_argument("--quick", action="store_true", help="the --quick subset of kiln_bench")
    ap.add_argument("--kiln-json", help="take attention/matmul shapes from kiln_bench's output")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--case-budget-ms", type=float, default=1500)
    ap.add_argument("--bwd-efficient", action="store_true",
                    help="attention_bwd: time SDPA's memory-efficient backward too (slow; off to keep the run short)")
    args = ap.parse_args(argv)
    suites = set(args.suites) or {"all"}
    known = {"attention", "attention_bwd", "matmul", "memory", "mods", "seeds", "user"}
    if "all" in suites:
        suites = set(known)
    unknown = suites - known
    if unknown:
        ap.error(f"unknown suite(s) {sorted(unknown)}; expected {', '.join(sorted(known))} or all")
    # A forced backend that cannot run a shape warns before it raises; the raise is what gets recorded.
    warnings.filterwarnings("ignore", category=UserWarning)
    if not torch.cuda.is_available():
        print("peers.py: no CUDA device visible to torch", file=sys.stderr)
        return 2

    if args.kiln_json and os.path.exists(args.kiln_json):
        attn, mm, bwd = shapes_from_kiln(args.kiln_json)
        with open(args.kiln_json) as f:  # measure only the suites kiln_bench ran
            suites &= set((json.load(f).get("options") or {}).get("suites") or suites)
    else:
        attn, mm, bwd = attention_shapes(args.quick), matmul_shapes(args.quick), attention_bwd_shapes(args.quick)
    attn = [s for s in attn if s[0] in suites]
    if "attention_bwd" not in suites:
        bwd = []
    if "matmul" not in suites:
        mm = []

    timer = Timer(args.reps, args.warmup, args.case_budget_ms)
    doc = {
        "schema": SCHEMA,
        "tool": "peers",
        "versions": versions(),
        "device": device_info(),
        "options": {"suites": sorted(suites), "quick": args.quick, "reps": args.reps, "warmup": args.warmup,
                    "case_budget_ms": args.case_budget_ms, "bwd_efficient": args.bwd_efficient},
        "cases": [],
    }
    start = time.time()

    def write():
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=2)
        os.replace(tmp, args.json)

    def log(rec):
        doc["cases"].append(rec)
        if rec["available"]:
            rate = f"{rec['tflops']:8.1f} TFLOP/s" if rec["tflops"] else f"{rec['gbps']:8.1f} GB/s"
            status = f"{rec['time_ms']:9.4f} ms {rate}  err {rec['check']['error']:.1e}" + (
                "" if rec["ok"] else "  CHECK FAILED")
        else:
            status = "unavailable: " + rec["error"]
        print(f"[peers {time.time() - start:6.1f}s] {rec['key']:44} {rec['system']:15} {status}", file=sys.stderr,
              flush=True)
        write()

    if "memory" in suites:
        bench_memory(args.quick, timer, log)
    if "user" in suites:
        bench_user(args.quick, timer, log)
    if "mods" in suites:
        bench_mods(args.quick, timer, log)
    if mm:
        bench_matmul(mm, timer, log)
    if attn:
        bench_attention(attn, timer, log)
    if bwd:
        bench_attention_bwd(bwd, timer, log, efficient=args.bwd_efficient)
    write()
    print(f"peers.py: {len(doc['cases'])} records in {time.time() - start:.0f} s -> {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
