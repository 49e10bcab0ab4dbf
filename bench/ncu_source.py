#!/usr/bin/env python3
"""What a kernel's SASS spends, from Nsight Compute's source page: instructions executed by opcode, where the
warps stalled and why, the hottest instructions; and, given a second kernel, which opcodes the first executes more
of (per unit of work: CTA steps, tiles). How worklog §101 found the fused backward's extra stores.

    ncu --section SourceCounters --section WarpStateStats -k regex:NAME -o R <command>
    ncu --import R.ncu-rep --page source --csv --print-source sass > R.csv
    python3 bench/ncu_source.py R.csv [BASE.csv] [--units N] [--top K]

Standard library only (Python 3.11 and 3.12)."""

import argparse
import collections
import csv
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def number(text):
    """ncu writes thousands with commas and leaves empty cells; both read as numbers."""
    try:
        return float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return 0.0


def opcode(sass):
    """The opcode of one SASS line without its modifiers or predicate: '@!P0 BRA 0x10' -> 'BRA',
    'HGMMA.64x32x16.F32 R152, ...' -> 'HGMMA'."""
    words = sass.split()
    if not words:
        return ""
    word = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
    return word.split(".")[0]


def load(path_or_file):
    """(kernel name, rows): one dict a SASS instruction, keyed by the CSV's header. The export starts with a
    'Kernel Name' line, then the header, then the instructions."""
    f = open(path_or_file, newline="") if isinstance(path_or_file, str) else path_or_file
    with f:
        lines = list(csv.reader(f))
    kernel = ""
    start = 0
    if lines and lines[0] and lines[0][0] == "Kernel Name":
        kernel = lines[0][1] if len(lines[0]) > 1 else ""
        start = 1
    if len(lines) <= start or "Source" not in lines[start]:
        raise ValueError(f"{getattr(f, 'name', 'input')}: expected ncu's source page as CSV (a header with "
                         f"'Source'), got {lines[start][:3] if len(lines) > start else 'nothing'}")
    header = lines[start]
    rows = [dict(zip(header, r)) for r in lines[start + 1:] if len(r) == len(header)]
    return kernel, rows


def stall_columns(rows):
    return [k for k in (rows[0] if rows else {}) if k.startswith("stall_") and "Not Issued" not in k]


def summary(rows):
    """Totals: instructions executed, stall samples, each stall reason's share, instructions by opcode."""
    stalls = stall_columns(rows)
    by_reason = {s[len("stall_"):]: sum(number(r[s]) for r in rows) for s in stalls}
    samples = sum(by_reason.values())
    by_opcode = collections.Counter()
    for r in rows:
        op = opcode(r.get("Source", ""))
        if op:
            by_opcode[op] += number(r.get(EXECUTED, "0"))
    return {"executed": sum(by_opcode.values()), "samples": samples,
            "reasons": {k: v / samples for k, v in by_reason.items()} if samples else {},
            "opcodes": by_opcode}


def hottest(rows, top):
    """The `top` instructions with the most stall samples: (index, share of samples, SASS, two leading reasons)."""
    stalls = stall_columns(rows)
    total = sum(number(r.get(SAMPLES, "0")) for r in rows) or 1.0
    ranked = sorted(range(len(rows)), key=lambda i: -number(rows[i].get(SAMPLES, "0")))[:top]
    out = []
    for i in sorted(ranked):
        r = rows[i]
        reasons = sorted(((number(r[s]), s[len("stall_"):]) for s in stalls), reverse=True)[:2]
        out.append((i, number(r.get(SAMPLES, "0")) / total, r.get("Source", "").strip(),
                    [name for value, name in reasons if value > 0]))
    return out


def opcode_differences(a, b, units):
    """Per opcode, (a's count, b's count, a - b), each divided by `units`, largest difference first."""
    ops = set(a["opcodes"]) | set(b["opcodes"])
    rows = [(op, a["opcodes"][op] / units, b["opcodes"][op] / units, (a["opcodes"][op] - b["opcodes"][op]) / units)
            for op in ops]
    return sorted(rows, key=lambda x: -abs(x[3]))


def report(name, s, units, out):
    print(f"{name}: {s['executed']:.4g} instructions executed ({s['executed'] / units:.1f} a unit), "
          f"{s['samples']:.0f} stall samples", file=out)
    reasons = sorted(s["reasons"].items(), key=lambda x: -x[1])
    print("  stalls: " + ", ".join(f"{k} {100 * v:.1f}%" for k, v in reasons[:8]), file=out)
    ops = s["opcodes"].most_common(12)
    print("  opcodes a unit: " + ", ".join(f"{op} {n / units:.1f}" for op, n in ops), file=out)


def main(argv=None, out=sys.stdout):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("csv", help="ncu --page source --csv --print-source sass of the kernel")
    p.add_argument("base", nargs="?", help="the same of a kernel to compare with")
    p.add_argument("--units", type=float, default=1.0,
                   help="divide counts by this (e.g. CTAs x loop steps) to read them per unit of work")
    p.add_argument("--top", type=int, default=20, help="hottest instructions to list (default 20)")
    args = p.parse_args(argv)
    if args.units <= 0:
        p.error(f"--units must be positive, got {args.units}")
    try:
        kernel, rows = load(args.csv)
        base_kernel, base_rows = load(args.base) if args.base else ("", [])
    except (OSError, ValueError) as e:
        p.error(str(e))
    s = summary(rows)
    report(f"{args.csv} ({kernel})", s, args.units, out)
    print("  hottest instructions (index, share of samples, SASS, leading stalls):", file=out)
    for i, share, sass, reasons in hottest(rows, args.top):
        print(f"    {i:6d} {100 * share:5.2f}%  {sass[:70]:70s} {' '.join(reasons)}", file=out)
    if args.base:
        b = summary(base_rows)
        report(f"{args.base} ({base_kernel})", b, args.units, out)
        print(f"  opcodes a unit, {args.csv} against {args.base} (largest differences):", file=out)
        for op, x, y, d in opcode_differences(s, b, args.units)[:args.top]:
            print(f"    {op:10s} {x:9.1f} {y:9.1f} {d:+9.1f}", file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
