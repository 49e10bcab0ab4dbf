#!/usr/bin/env python3
"""kiln beside SDPA's cuDNN backend, timed in alternating rounds on the same tensors (the attention sweep's points,
forward and backward): a paired comparison.

kiln_bench times every kiln case and then bench/peers.py every peer, minutes apart; on an H200 a kernel's clock
moves with the GPU's power and temperature (worklog §112: 1.39–1.56 GHz over four runs of one forward shape), so a
point's ratio moved by ±3 % from run to run (§93, §98, §99). Here each round times kiln and then cuDNN (the next round cuDNN first) on
the same inputs, each the median of up to --reps event-timed launches (bench/peers_harness.py's Timer); a point
reports the median of its rounds' ratios and their range (bench/paired_stats.py).

kiln runs through its Python package (kiln.attention, kiln.attention_backward: the tuned pick, as an application
gets it; the first call of a shape tunes, outside the timing). The backward compares like with like: cuDNN adds
dQ in no fixed order, so kiln runs `deterministic=False` (the faster of its two backwards); --deterministic runs
kiln's deterministic backward instead. Before timing, each system's output is checked against a double
reference (sampled rows of the forward, one head's gradients), with the bench's tolerances; a point whose check
fails is not timed.

Runs on the GPU machine with the kiln package importable (installed, or PYTHONPATH=<build>/python):
    python3 bench/paired.py --suite fwd|bwd [--rounds 7] [--reps 20] [--filter 'f16 D64'] [--json F] [--md F]
"""

import argparse
import contextlib
import json
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kiln  # noqa: E402
from paired_stats import alternating_orders, markdown, matches, point_label, summarize  # noqa: E402
from peers_attention import attention_bwd_shapes, attention_head_grads, attention_reference_rows  # noqa: E402
from peers_harness import DTYPES, TOLERANCE, Timer, check_sample, rel_l2  # noqa: E402


def sweep_points():
    """The attention sweep's points (B·N = 16384, H·D = 2048), forward's and backward's alike: peers_attention's
    list of the backward's shapes."""
    return [{"dtype": dtype, "D": D, "causal": causal, "N": N, "B": B, "H": H}
            for _, dtype, B, H, N, D, causal in attention_bwd_shapes(quick=False)]


def inputs(p, count, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed + p["N"] + p["D"])
    dt = DTYPES[p["dtype"]]
    return [(torch.rand(p["B"], p["H"], p["N"], p["D"], device="cuda", dtype=torch.float32, generator=gen) * 2 - 1)
            .to(dt) for _ in range(count)]


def forced(name):
    """The context a system's calls run in: cuDNN forced as SDPA's backend (entered around the check and the
    timing, not inside the timed call, so that its host time stays out of the events' interval), nothing for kiln."""
    return sdpa_kernel([SDPBackend.CUDNN_ATTENTION]) if name == "cudnn" else contextlib.nullcontext()


def kiln_causal(p):
    return "top-left" if p["causal"] else None  # PyTorch's is_causal; N_Q = N_K here


def verdicts(systems, error, tolerance):
    """Each system run once (in its context) and its output's (error, non-finite count) from `error`: 'name err,
    ...' (FAILED after one past `tolerance` or not finite) and whether all passed."""
    notes, ok = [], True
    for name, run in systems["runs"]:
        with forced(name):
            out = run()
        torch.cuda.synchronize()
        err, nonfinite = error(out)
        passed = nonfinite == 0 and err <= tolerance
        ok &= passed
        notes.append(f"{name} {err:.1e}{'' if passed else ' FAILED'}")
    return ", ".join(notes), ok


def check_forward(p, systems):
    """Each system's O on sampled rows of the first and last head against the double reference: 'name err, ...'
    and whether all passed."""
    q, k, v = systems["inputs"]
    rows, bh = check_sample(p["B"], p["H"], p["N"])
    want = attention_reference_rows(q, k, v, p["causal"], rows, bh)
    return verdicts(systems, lambda o: rel_l2(torch.stack([o[b, h, rows] for b, h in bh]), want),
                    TOLERANCE[p["dtype"]])


def check_backward(p, systems):
    """Each system's dQ, dK, dV of the last head against attention_head_grads (twice the forward's tolerance)."""
    q, k, v, dout = systems["inputs"]
    b, h = p["B"] - 1, p["H"] - 1
    want = attention_head_grads(q[b, h], k[b, h], v[b, h], dout[b, h], p["causal"])

    def error(grads):  # the largest of dQ's, dK's and dV's errors, and their non-finite values together
        errs = [rel_l2(g[b, h], w) for g, w in zip(grads, want)]
        return max(e for e, _ in errs), sum(nf for _, nf in errs)

    return verdicts(systems, error, 2 * TOLERANCE[p["dtype"]])


def forward_systems(p):
    q, k, v = inputs(p, 3, 1234)
    causal = bool(p["causal"])

    def cudnn():
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return {"inputs": (q, k, v), "runs": [("kiln", lambda: kiln.attention(q, k, v, causal=kiln_causal(p))),
                                          ("cudnn", cudnn)]}


def backward_systems(p, deterministic):
    q, k, v, dout = inputs(p, 4, 4321)
    o, lse = kiln.attention(q, k, v, causal=kiln_causal(p), return_lse=True)
    qg, kg, vg = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        o_cudnn = F.scaled_dot_product_attention(qg, kg, vg, is_causal=bool(p["causal"]))

    def cudnn():  # the backward alone, on a graph kept from one forward (as bench/peers_attention.py times it)
        return torch.autograd.grad(o_cudnn, (qg, kg, vg), dout, retain_graph=True)

    def kiln_bwd():
        return kiln.attention_backward(dout, q, k, v, o, lse, causal=kiln_causal(p), deterministic=deterministic)

    return {"inputs": (q, k, v, dout), "runs": [("kiln", kiln_bwd), ("cudnn", cudnn)]}


def time_point(p, systems, check, timer, rounds):
    runs = dict(systems["runs"])
    for name, run in runs.items():  # the first call tunes and compiles (kiln) or picks its plan (cuDNN)
        with forced(name):
            run()
    torch.cuda.synchronize()
    p["checks"], ok = check(p, systems)
    if not ok:
        p["error"] = "a check failed: " + p["checks"]
        return
    times = {"kiln": [], "peer": []}
    for order in alternating_orders(rounds):
        for who in order:
            name = "kiln" if who == "kiln" else "cudnn"
            with forced(name):
                ms, _, _ = timer(runs[name])
            times[who].append(ms)
    p["summary"] = summarize(times["kiln"], times["peer"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", choices=("fwd", "bwd"), required=True)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=20, help="timed launches per system and round, at most")
    ap.add_argument("--budget-ms", type=float, default=200.0, help="fewer launches (at least 3) past this")
    ap.add_argument("--filter", default="",
                    help="only points whose label has each of these words, e.g. 'f16 D64' or 'bf16 causal N4096'")
    ap.add_argument("--deterministic", action="store_true",
                    help="bwd: kiln's deterministic backward instead of deterministic=False")
    ap.add_argument("--budget-s", type=float, default=540.0, help="start no point past this many seconds")
    ap.add_argument("--json", help="write the points, every round's times, to this file")
    ap.add_argument("--md", help="write the table to this file")
    args = ap.parse_args()
    if args.rounds < 1 or args.reps < 1:  # before any GPU work
        ap.error(f"--rounds and --reps must be at least 1, got {args.rounds} and {args.reps}")
    if not torch.cuda.is_available():
        sys.exit("bench/paired.py needs a CUDA GPU")
    timer = Timer(args.reps, 3, args.budget_ms)
    points = [p for p in sweep_points() if matches(p, args.filter)]
    start = time.monotonic()
    for p in points:
        if time.monotonic() - start > args.budget_s:
            p["error"] = f"not timed: the run's {args.budget_s:.0f} s budget was spent"
            continue
        if args.suite == "fwd":
            time_point(p, forward_systems(p), check_forward, timer, args.rounds)
        else:
            time_point(p, backward_systems(p, args.deterministic), check_backward, timer, args.rounds)
        torch.cuda.empty_cache()
        s = p.get("summary")
        print(f"{point_label(p)}: " + (f"cudnn/kiln {s['ratio']:.3f} [{s['ratio_lo']:.3f}, {s['ratio_hi']:.3f}]"
                                       if s else p["error"]), flush=True)
    what = {"fwd": "forward", "bwd": "backward, kiln deterministic" if args.deterministic
            else "backward, kiln deterministic = false"}[args.suite]
    table = (f"Paired rounds ({what}; {torch.cuda.get_device_name(0)}; {args.rounds} rounds of at most "
             f"{args.reps} launches a system):\n\n" + markdown(points, "cuDNN"))
    print(table)
    if args.md:
        with open(args.md, "w") as f:
            f.write(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"schema": "kiln-paired/1", "suite": args.suite, "deterministic": args.deterministic,
                       "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                       "kiln": kiln.version(), "rounds": args.rounds, "reps": args.reps, "points": points}, f,
                      indent=1)
    return 0 if all(p.get("summary") for p in points) else 1


if __name__ == "__main__":
    sys.exit(main())
