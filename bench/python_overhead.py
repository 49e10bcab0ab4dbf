"""Host overhead per call of kiln.attention from PyTorch (the torch custom op, and libkiln's C entry point
called directly through ctypes) beside F.scaled_dot_product_attention, on shapes small enough that the launch,
not the kernel, bounds the rate. Each figure is the host time to enqueue one call (median of `--rounds`
rounds of `--calls` calls, no synchronisation inside a round). Needs torch with CUDA and the installed kiln:
    python3 bench/python_overhead.py [--calls 2000] [--rounds 7]
"""

import argparse
import ctypes
import os
import statistics
import time

import torch
import torch.nn.functional as F

os.environ.setdefault("KILN_AUTOTUNE", "cached")
import kiln  # noqa: E402
from kiln import _lib  # noqa: E402
from kiln._tensor import describe  # noqa: E402


def per_call_us(fn, calls, rounds):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    dev = torch.device("cuda", int(os.environ.get("KILN_DEVICE", "0") or 0))
    print(f"kiln {kiln.version()}, torch {torch.__version__}, {torch.cuda.get_device_name(dev)}")
    print(f"{'shape':<28} {'kiln.attention':>15} {'C ABI (ctypes)':>15} {'SDPA':>8}   (host us per call)")
    for b, h, n, d in [(1, 1, 128, 64), (1, 8, 256, 64), (4, 16, 128, 128)]:
        q, k, v = (torch.randn(b, h, n, d, device=dev, dtype=torch.float16) for _ in range(3))
        o = torch.empty_like(q)
        lse = torch.empty(b, h, n, device=dev, dtype=torch.float32)
        lib = _lib.lib()
        stream = torch.cuda.current_stream(dev).cuda_stream
        refs = [ctypes.byref(describe(t, "t")) for t in (q, k, v, o, lse)]
        opts = ctypes.byref(_lib.attention_options(1, _lib.LAYOUT_BHSD, 0.0, stream=stream))

        def c_abi():
            _lib.check(lib.kiln_attention_forward_cuda(*refs, opts))

        row = [per_call_us(lambda: kiln.attention(q, k, v, causal="top-left"), args.calls, args.rounds),
               per_call_us(c_abi, args.calls, args.rounds),
               per_call_us(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), args.calls, args.rounds)]
        print(f"{f'B{b} H{h} N{n} D{d} f16 causal':<28} {row[0]:>15.1f} {row[1]:>15.1f} {row[2]:>8.1f}")


if __name__ == "__main__":
    main()
