"""Host overhead per call of kiln.attention from PyTorch beside F.scaled_dot_product_attention, on a shape small
enough that the launch, not the kernel, bounds the rate. Each figure is the host time to enqueue one forward
(median over rounds of a fixed number of calls, the stream synchronised between rounds, never inside one):
  kiln.attention   the public function: argument checks, the torch custom op's dispatch, kiln's marshalling,
                   the C call
  torch op         torch.ops.kiln.attention_fwd called directly (no kiln.attention argument parsing)
  C ABI            kiln_attention_forward_cuda through ctypes on prebuilt structs and preallocated O and LSE:
                   libkiln's own cost (validation, the config lookup, the launch) plus ctypes' call
  C plan           kiln_attention_plan_forward through ctypes on a prebuilt plan (kiln_attention_forward_plan),
                   preallocated O and LSE, the addresses as ints: the address rechecks and the launch, plus
                   ctypes' call; what kiln.attention's eager path calls per call
  SDPA             F.scaled_dot_product_attention (its own dispatch and launch)
"over C ABI" is what the Python side adds over libkiln's one-shot call (the issue asks <= 10 us), "over C plan" what
it adds over the call it makes. --pieces adds, for the first shape, the per-call cost of each piece of
kiln.attention's eager path, one by one (allocations, the signature key, the stream and capture queries, the
addresses, the plan's call, the torch-side checks), to show where that difference goes. Bounded: --calls x --rounds
per row (default 200 x 5) after one warm-up call, and the whole run stops adding rows after --budget seconds
(default 20).
KILN_AUTOTUNE defaults to off here (the default config, compiled once), so no tuning run hides in the first call.
Needs torch with CUDA and the installed kiln:
    python3 bench/python_overhead.py [--calls 200] [--rounds 5] [--budget 20] [--pieces]
"""

import argparse
import ctypes
import os
import statistics
import time

import torch
import torch.nn.functional as F

os.environ.setdefault("KILN_AUTOTUNE", "off")
import kiln  # noqa: E402
from kiln import _lib  # noqa: E402
from kiln._tensor import describe  # noqa: E402


def per_call_us(fn, calls, rounds):
    fn()  # warm-up: compiles the kernel on first use
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times)


def print_pieces(q, plan_call, calls, rounds):
    """The eager forward path's pieces (python/kiln/torch_ops.py), each timed alone on q's signature; plan_call:
    the C plan's call through ctypes on prebuilt arguments."""
    from kiln import torch_ops as ops
    shape = (q.shape[0], q.shape[1], q.shape[2])
    key = ops._forward_key(q, q, q, 1, 0.0, "bhsd", False, True, False)
    dev = q.get_device()
    pieces = [
        ("torch.empty_like(q)", lambda: torch.empty_like(q)),
        ("q.new_empty(lse shape, f32)", lambda: q.new_empty(shape, dtype=torch.float32)),
        ("signature key (_forward_key)", lambda: ops._forward_key(q, q, q, 1, 0.0, "bhsd", False, True, False)),
        ("cached-call lookup (built key)", lambda: ops._cached_call(key)),
        ("current stream handle", lambda: ops._raw_stream(dev)),
        ("capture query", lambda: ops._capturing()),
        ("data_ptr x5", lambda: (q.data_ptr(), q.data_ptr(), q.data_ptr(), q.data_ptr(), q.data_ptr())),
        ("plan run through ctypes", plan_call),
        ("fast-path checks", lambda: (ops._is_compiling(), type(q) is torch.Tensor, ops._dispatch_modes(),
                                      ops._functorch_active(), torch.is_grad_enabled(), q.requires_grad)),
        ("empty Python call", lambda: None),
    ]
    for name, fn in pieces:
        print(f"  {name:<32} {per_call_us(fn, calls, rounds):>7.2f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--budget", type=float, default=20.0, help="seconds after which no further row starts")
    ap.add_argument("--pieces", action="store_true", help="time the eager path's pieces one by one")
    args = ap.parse_args()
    start = time.perf_counter()
    dev = torch.device("cuda", int(os.environ.get("KILN_DEVICE", "0") or 0))
    print(f"kiln {kiln.version()}, torch {torch.__version__}, {torch.cuda.get_device_name(dev)}, "
          f"KILN_AUTOTUNE={os.environ['KILN_AUTOTUNE']}, {args.calls} calls x {args.rounds} rounds")
    print(f"{'shape':<24} {'kiln.attention':>14} {'torch op':>9} {'C ABI':>7} {'C plan':>7} {'SDPA':>7} "
          f"{'over C ABI':>11} {'over C plan':>12}   (host us per call)")
    for b, h, n, d in [(1, 1, 128, 64), (1, 8, 256, 64)]:
        if time.perf_counter() - start > args.budget:
            print(f"(budget of {args.budget:.0f} s spent: further shapes skipped)")
            break
        q, k, v = (torch.randn(b, h, n, d, device=dev, dtype=torch.float16) for _ in range(3))
        o = torch.empty_like(q)
        lse = torch.empty(b, h, n, device=dev, dtype=torch.float32)
        lib = _lib.lib()
        stream = torch.cuda.current_stream(dev).cuda_stream
        structs = [describe(t, "t") for t in (q, k, v, o, lse)]
        opts = _lib.attention_options(_lib.CAUSAL_TOP_LEFT, _lib.LAYOUT_BHSD, 0.0, stream=stream)
        op = torch.ops.kiln.attention_fwd

        def c_abi():
            _lib.check(lib.kiln_attention_forward_cuda(*structs, opts))

        plan = _lib.AttentionPlan(structs, opts, dev.index)
        addresses = [t.data_ptr() for t in (q, k, v, o, lse)]

        def c_plan():
            _lib.check(plan.run(plan.handle, *addresses, stream, _lib.AUTOTUNE_ENV))

        row = [per_call_us(lambda: kiln.attention(q, k, v, causal="top-left"), args.calls, args.rounds),
               per_call_us(lambda: op(q, k, v, 1, 0.0, "bhsd", False, True, False, "", "", [], None, 0), args.calls,
                           args.rounds),
               per_call_us(c_abi, args.calls, args.rounds),
               per_call_us(c_plan, args.calls, args.rounds),
               per_call_us(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), args.calls, args.rounds)]
        print(f"{f'B{b} H{h} N{n} D{d} f16 causal':<24} {row[0]:>14.1f} {row[1]:>9.1f} {row[2]:>7.1f} {row[3]:>7.1f} "
              f"{row[4]:>7.1f} {row[0] - row[2]:>11.1f} {row[0] - row[3]:>12.1f}")
        if args.pieces:
            print_pieces(q, c_plan, args.calls, args.rounds)
            args.pieces = False
    print(f"total {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
