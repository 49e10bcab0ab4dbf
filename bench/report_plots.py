"""The report's figures, drawn with matplotlib where it is installed (report.py writes the tables without it):
<name>-attention-<dtype>-d<D>.png, TFLOP/s of the forward sweep against N, one line per system, and
<name>-model.png, the performance model's predicted time against the measured one."""

import math
import os
import sys
from collections import OrderedDict

from report_format import ATTN_PEERS, rate


def pyplot():
    """matplotlib.pyplot on the Agg backend, or None (with a note on stderr) where matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("report.py: matplotlib not available, no plots", file=sys.stderr)
        return None
    return plt


def plot_attention(report, out_dir, name):
    """<name>-attention-<dtype>-d<D>.png for each (dtype, D) of the forward sweep of `report` (a report.Report),
    causal and not side by side; the paths written ([] without matplotlib)."""
    plt = pyplot()
    if plt is None:
        return []
    groups = OrderedDict()
    for (dtype, D, causal), items in report.sweep_keys().items():
        groups.setdefault((dtype, D), {})[causal] = items
    written = []
    systems = [("kiln_fa2", "kiln FA2", "o-"), ("kiln_fa1", "kiln FA1", "s--")] + [
        (s, n, "^:") for s, n in ATTN_PEERS]
    for (dtype, D), by_causal in groups.items():
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
        for ax, causal in zip(axes, (0, 1)):
            items = by_causal.get(causal, [])
            for system, label, style in systems:
                pts = [(N, rate(report.get(k, system))) for N, k in items if rate(report.get(k, system))]
                if pts:
                    ax.plot([n for n, _ in pts], [v for _, v in pts], style, label=label)
            ax.set_xscale("log", base=2)
            ax.set_xticks([n for n, _ in items], [str(n) for n, _ in items])
            ax.minorticks_off()
            ax.set_xlabel("sequence length N (B·N = 16384, H·D = 2048)")
            ax.set_title(f"{dtype}, D={D}, {'causal' if causal else 'not causal'}")
            ax.grid(True, alpha=0.3)
        axes[0].set_ylabel("TFLOP/s")
        axes[0].legend(loc="lower right", fontsize=8)
        fig.suptitle(f"Attention forward on {report.device_name()}")
        fig.tight_layout()
        path = os.path.join(out_dir, f"{name}-attention-{dtype}-d{D}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def plot_model(report, plt, out_dir, name):
    """<name>-model.png: time against N per tile, measured and predicted; and predicted against measured."""
    tiles = OrderedDict()
    for r in report.model_records():
        x = r.get("extra") or {}
        if x.get("predicted_ms") is None:
            continue
        tiles.setdefault(f"{x.get('block_m')}×{x.get('block_n')}", []).append(
            (r["shape"]["N"], x["predicted_ms"], r.get("time_ms") if r.get("ok") else None))
    if not tiles:
        return None
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.4))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    lo, hi = math.inf, 0.0
    for i, (tile, pts) in enumerate(tiles.items()):
        color = colors[i % len(colors)]
        pts.sort()
        left.plot([n for n, _, _ in pts], [p for _, p, _ in pts], "--", color=color, label=f"{tile} predicted")
        measured = [(n, p, m) for n, p, m in pts if m]
        if measured:
            left.plot([n for n, _, _ in measured], [m for _, _, m in measured], "o-", color=color,
                      label=f"{tile} measured")
            right.scatter([m for _, _, m in measured], [p for _, p, _ in measured], color=color, label=tile)
            lo = min([lo] + [v for _, p, m in measured for v in (p, m)])
            hi = max([hi] + [v for _, p, m in measured for v in (p, m)])
    left.set_xscale("log", base=2)
    lengths = sorted({n for pts in tiles.values() for n, _, _ in pts})
    left.set_xticks(lengths, [str(n) for n in lengths])
    left.minorticks_off()
    left.set_yscale("log")
    left.set_xlabel("sequence length N (B·N = 16384, H = 32, D = 64, f16)")
    left.set_ylabel("ms")
    left.set_title("FA2 time per tile (BLOCK_M×BLOCK_N)")
    left.grid(True, alpha=0.3)
    left.legend(fontsize=7)
    if hi > 0:
        right.plot([lo, hi], [lo, hi], "k:", label="predicted = measured")
        right.set_xscale("log")
        right.set_yscale("log")
    right.set_xlabel("measured ms")
    right.set_ylabel("predicted ms (roofline, nominal peaks)")
    right.set_title("model vs GPU")
    right.grid(True, alpha=0.3)
    right.legend(fontsize=7)
    fig.suptitle(f"Performance model vs measurement on {report.device_name()}")
    fig.tight_layout()
    path = os.path.join(out_dir, f"{name}-model.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
