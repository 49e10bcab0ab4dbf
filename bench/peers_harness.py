"""What every peer measurement in peers.py shares with kiln_bench: the case key (bench/bench_record.cpp), the
record's fields, the check against a double reference with kernels/compare.h's tolerances, and the timing
policy (Timer: runtime/timing.cpp + bench/bench_session.cpp)."""

import math

import torch

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
# Relative L2 error each dtype may show against a double reference: kernels/compare.h's rule
# (8 unit roundoffs for 16-bit inputs, 128 for exact f32).
TOLERANCE = {"f16": 8 * 2.0**-11, "bf16": 8 * 2.0**-8, "f32": 128 * 2.0**-24}


def case_key(op, dtype, shape, causal=-1):
    """kiln_bench's key: "<op>:<dtype>:<name><value>:...[:causal<c>]" (bench/bench_record.cpp)."""
    key = f"{op}:{dtype}" + "".join(f":{name}{value}" for name, value in shape)
    if causal >= 0:
        key += f":causal{causal}"
    return key


# ---------------------------------------------------------------- timing


class Timer:
    """CUDA-event timing with kiln_bench's policy (runtime/timing.cpp + bench/bench_session.cpp)."""

    def __init__(self, reps, warmup, budget_ms):
        self.reps, self.warmup, self.budget_ms = reps, warmup, budget_ms
        l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 64 << 20)
        # Twice the L2, written before each launch of a memory-bound case (kiln's L2Flusher).
        self.flush_buffer = torch.empty(max(2 * l2, 1 << 20), dtype=torch.uint8, device="cuda")

    def _time(self, fn, warmup, reps, flush):
        for _ in range(warmup):
            fn()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for i in range(reps):
            if flush:
                self.flush_buffer.fill_(i & 0xFF)
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        ms = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
        n = len(ms)
        return ms[n // 2] if n % 2 else 0.5 * (ms[n // 2 - 1] + ms[n // 2])

    def __call__(self, fn, flush=False):
        once = self._time(fn, 0, 1, flush)
        reps = self.reps
        if once > 0:
            reps = int(min(max(math.floor(self.budget_ms / once), 3), self.reps))
        reps = min(reps, self.reps)
        warmup = min(1 if once > self.budget_ms / 3 else self.warmup, reps)
        return self._time(fn, warmup, reps, flush), reps, warmup


# ---------------------------------------------------------------- records


def record(suite, op, system, dtype, shape, causal=-1, flops=0.0, nbytes=0.0, note=""):
    return {
        "key": case_key(op, dtype, shape, causal),
        "suite": suite,
        "op": op,
        "system": system,
        "dtype": dtype,
        "shape": dict(shape),
        "note": note,
        "flops": flops,
        "bytes": nbytes,
        "config": "",
        "check": {"method": "", "elements": 0, "error": None, "lse_error": None, "tolerance": None,
                  "nonfinite_mismatches": 0, "ok": False},
        "time_ms": None,
        "tflops": None,
        "gbps": None,
        "reps": 0,
        "warmup": 0,
        "l2_flushed": False,
        "available": True,
        "ok": False,
        "error": None,
        **({"causal": causal} if causal >= 0 else {}),
    }


def finish(rec, ms, reps, warmup, flushed):
    rec["time_ms"], rec["reps"], rec["warmup"], rec["l2_flushed"] = ms, reps, warmup, flushed
    rec["ok"] = bool(rec["check"]["ok"])
    if rec["flops"]:
        rec["tflops"] = rec["flops"] / (ms * 1e-3) / 1e12
    if rec["bytes"]:
        rec["gbps"] = rec["bytes"] / (ms * 1e-3) / 1e9


def set_check(rec, method, elements, err, tol, nonfinite=0):
    rec["check"].update(method=method, elements=int(elements), error=float(err), tolerance=tol,
                        nonfinite_mismatches=int(nonfinite), ok=bool(nonfinite == 0 and err <= tol))


def check_sample(B, H, N):
    """The attention checks' sample: up to two (b, h) pairs, the first and the last, and of each the query rows 0
    and N - 1 and 30 random ones (seeded by N): (rows on the GPU, sorted pairs)."""
    picks = torch.randint(0, N, (30,), generator=torch.Generator().manual_seed(N))
    rows = torch.unique(torch.cat([torch.tensor([0, N - 1]), picks])).cuda()
    return rows, sorted({(0, 0), (B - 1, H - 1)})


def rel_l2(got, want):
    got, want = got.double(), want.double()
    nonfinite = int((~torch.isfinite(got)).sum().item())
    den = torch.linalg.vector_norm(want).item()
    num = torch.linalg.vector_norm(torch.nan_to_num(got) - want).item()
    return (num / den if den else num), nonfinite


def short(err):
    text = str(err).strip().splitlines()
    return text[0][:300] if text else type(err).__name__
