#!/usr/bin/env python3
"""Joins kiln_bench's and peers.py's JSON (by case key) into one report for the device they ran on:

  <out>/<device-slug>.json               every record of both, plus both headers
  <out>/<device-slug>.md                 tables: attention vs SDPA, matmul vs cuBLAS, memory vs copy, seeds
  <out>/<device-slug>-attention-<dtype>-d<D>.png   TFLOP/s vs N, one line per system (needs matplotlib)

Works with the peers' file missing (or any suite missing): absent figures show as "—". A kiln case whose
output failed its check has no time and shows as "✗"; a peer whose check failed is marked "!".
Standard library only, plus matplotlib when it is there.
"""

import argparse
import json
import math
import os
import re
import sys
from collections import OrderedDict

ATTN_PEERS = [("sdpa_flash", "SDPA flash"), ("sdpa_cudnn", "SDPA cuDNN"), ("sdpa_efficient", "SDPA mem-eff")]
DASH = "—"


def load(path):
    if not path or not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def slug(name):
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown-device"


def index(doc, source):
    out = OrderedDict()
    for rec in (doc or {}).get("cases", []):
        rec = dict(rec, source=source)
        out.setdefault((rec["key"], rec["system"]), rec)
    return out


def rate(rec):
    """The figure a table shows for one record: TFLOP/s (or GB/s) if it ran and passed its check."""
    if rec is None:
        return None
    if rec.get("flops"):
        return rec.get("tflops")
    return rec.get("gbps")


def cell(rec, digits=1):
    if rec is None:
        return DASH
    if rec.get("available") is False:
        return "n/a"
    value = rate(rec)
    if value is None:
        return "✗"
    mark = "" if rec.get("ok", True) else "!"
    return f"{value:.{digits}f}{mark}"


def ratio(a, b, percent=False):
    ra, rb = rate(a), rate(b)
    if not ra or not rb:
        return DASH
    return f"{100 * ra / rb:.0f}%" if percent else f"{ra / rb:.2f}"


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def geomean(values):
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


class Report:
    def __init__(self, kiln, peers):
        self.kiln_doc, self.peers_doc = kiln or {}, peers or {}
        self.kiln, self.peers = index(kiln, "kiln"), index(peers, "peers")
        self.all = OrderedDict(list(self.kiln.items()) + list(self.peers.items()))

    def get(self, key, system):
        return self.all.get((key, system))

    def records(self, source=None, **match):
        pool = self.kiln if source == "kiln" else self.peers if source == "peers" else self.all
        for rec in pool.values():
            if all(rec.get(k) == v for k, v in match.items()):
                yield rec

    def device_name(self):
        for doc in (self.kiln_doc, self.peers_doc):
            name = (doc.get("device") or {}).get("name")
            if name:
                return name
        return "unknown device"

    # ------------------------------------------------------------ attention

    def sweep_keys(self):
        """(dtype, D, causal) -> [(N, key)] of the B·N = 16384, H·D = 2048 sweep, in N order."""
        groups = OrderedDict()
        keys = OrderedDict()
        for rec in self.records(op="attention"):
            s = rec["shape"]
            if s["B"] * s["N"] == 16384 and s["H"] * s["D"] == 2048:
                keys[rec["key"]] = (rec["dtype"], s["D"], rec.get("causal", 0), s["N"])
        for key, (dtype, D, causal, N) in sorted(keys.items(), key=lambda kv: (kv[1][0] != "f16", kv[1][1:])):
            groups.setdefault((dtype, D, causal), []).append((N, key))
        return groups

    def headline(self):
        rows = []
        for (dtype, D, causal), items in self.sweep_keys().items():
            ratios = [rate(self.get(k, "kiln_fa2")) / rate(self.get(k, "sdpa_flash"))
                      for _, k in items
                      if rate(self.get(k, "kiln_fa2")) and rate(self.get(k, "sdpa_flash"))]
            N, key = items[-1]
            g = geomean(ratios)
            rows.append([dtype, D, "yes" if causal else "no", N, cell(self.get(key, "kiln_fa2")),
                         cell(self.get(key, "sdpa_flash")), ratio(self.get(key, "kiln_fa2"), self.get(key, "sdpa_flash")),
                         f"{g:.2f}" if g else DASH])
        return table(["dtype", "D", "causal", "N (largest)", "kiln FA2 TFLOP/s", "SDPA flash TFLOP/s",
                      "kiln/flash", "kiln/flash geomean over N"], rows)

    def attention_sweep(self):
        rows = []
        for (dtype, D, causal), items in self.sweep_keys().items():
            for N, key in items:
                k2 = self.get(key, "kiln_fa2")
                rows.append([dtype, D, "yes" if causal else "no", N, 16384 // N, 2048 // D, cell(k2),
                             cell(self.get(key, "kiln_fa1"))]
                            + [cell(self.get(key, s)) for s, _ in ATTN_PEERS]
                            + [ratio(k2, self.get(key, "sdpa_flash")), err(k2)])
        return table(["dtype", "D", "causal", "N", "B", "H", "kiln FA2", "kiln FA1"] + [n for _, n in ATTN_PEERS]
                     + ["FA2/flash", "FA2 check"], rows)

    def other_attention(self):
        sweep = {k for items in self.sweep_keys().values() for _, k in items}
        keys = OrderedDict()
        for rec in self.records(op="attention"):
            if rec["key"] not in sweep and rec.get("suite") == "attention":
                keys[rec["key"]] = None
        rows = []
        for key in keys:
            k2 = self.get(key, "kiln_fa2")
            rows.append([key, cell(k2), cell(self.get(key, "kiln_fa1"))]
                        + [cell(self.get(key, s)) for s, _ in ATTN_PEERS]
                        + [ratio(k2, self.get(key, "sdpa_flash")), err(k2)])
        return table(["case", "kiln FA2", "kiln FA1"] + [n for _, n in ATTN_PEERS] + ["FA2/flash", "FA2 check"],
                     rows) if rows else ""

    def seeds(self):
        rows = []
        for rec in self.records(source="kiln", suite="seeds"):
            key = rec["key"]
            peers = [cell(self.get(key, s), 2) for s, _ in ATTN_PEERS + [("sdpa_math", "")]]
            rows.append([key, rec["system"], rec.get("note", ""), fmt_ms(rec), cell(rec, 2)] + peers + [err(rec)])
        return table(["case", "system", "variant", "time ms", "TFLOP/s"] + [n for _, n in ATTN_PEERS]
                     + ["SDPA math", "check"], rows) if rows else ""

    # ------------------------------------------------------------ matmul, memory

    def matmul(self):
        rows = []
        keys = OrderedDict((r["key"], r) for r in self.records(op="matmul"))
        for key, any_rec in keys.items():
            s = any_rec["shape"]
            k = self.get(key, "kiln_matmul")
            rows.append([any_rec["dtype"], s["M"], s["N"], s["K"], cell(k), cell(self.get(key, "cublas")),
                         ratio(k, self.get(key, "cublas"), percent=True), err(k)])
        return table(["dtype", "M", "N", "K", "kiln TFLOP/s", "cuBLAS TFLOP/s", "kiln % of cuBLAS", "check"],
                     rows) if rows else ""

    def copy_ceiling(self):
        copies = [r for r in self.records(source="peers", op="copy") if rate(r)]
        return max(copies, key=rate) if copies else None

    def memory(self):
        ceiling = self.copy_ceiling()
        rows = []
        peer_of = {"vector_add": "torch_add", "softmax": "torch_softmax"}
        for rec in self.records(source="kiln", suite="memory"):
            peer = self.get(rec["key"], peer_of.get(rec["op"], ""))
            rows.append([rec["key"], cell(rec), cell(peer), ratio(rec, peer, percent=True),
                         ratio(rec, ceiling, percent=True), err(rec)])
        head = ["case", "kiln GB/s", "torch GB/s", "kiln % of torch", "kiln % of copy", "check"]
        text = table(head, rows) if rows else ""
        if ceiling:
            text = (f"Copy ceiling: {rate(ceiling):.0f} GB/s (`{ceiling['key']}`, Tensor.copy_, bytes read + "
                    f"written, L2 flushed).\n\n" + text)
        return text

    def failures(self):
        rows = []
        for rec in self.kiln.values():
            if not rec.get("ok"):
                rows.append([rec["key"], rec["system"], (rec.get("error") or "").replace("|", "/")[:200]])
        return table(["case", "system", "why"], rows) if rows else ""

    # ------------------------------------------------------------ output

    def markdown(self):
        k, p = self.kiln_doc, self.peers_doc
        dev = k.get("device") or p.get("device") or {}
        pv = p.get("versions") or {}
        lines = [f"# kiln benchmark: {self.device_name()}", ""]
        facts = [f"device: {self.device_name()}"]
        if dev.get("sm_count"):
            facts.append(f"{dev['sm_count']} SMs")
        if dev.get("clock_khz"):
            facts.append(f"SM clock {dev['clock_khz'] / 1000:.0f} MHz, memory clock {dev.get('memory_clock_khz', 0) / 1000:.0f} MHz")
        if k:
            facts.append(f"kiln {k.get('kiln_version')}, NVRTC {k.get('nvrtc_version')}, driver {dev.get('driver_version')}")
        if pv:
            facts.append(f"torch {pv.get('torch')} (CUDA {pv.get('cuda')}, cuDNN {pv.get('cudnn')}), triton {pv.get('triton')}")
        if k.get("options"):
            o = k["options"]
            facts.append(f"kiln options: quick={o.get('quick')} reps≤{o.get('reps')} warmup={o.get('warmup')}"
                         + (f" config={o.get('config')}" if o.get("config") else ""))
        lines += ["- " + f for f in facts]
        if not p:
            lines += ["- peers: not measured (no peers JSON)"]
        lines += ["", "Rates are TFLOP/s (attention 4·B·H·N²·D, halved when causal; matmul 2·M·N·K) or GB/s "
                  "(bytes read + written). Each is the median of event-timed launches, taken only after the "
                  "output passed its check against a double-precision reference. ✗: kiln's output failed its "
                  "check (no time); n/a: the backend cannot run the shape; —: not measured; !: a peer's output "
                  "failed the same check. See docs/bench/README.md.", ""]
        sections = [("Headline: kiln FA2 vs SDPA FlashAttention-2", self.headline()),
                    ("Attention sweep (B·N = 16384, H·D = 2048), TFLOP/s", self.attention_sweep()),
                    ("Other attention shapes, TFLOP/s", self.other_attention()),
                    ("Seed experiments", self.seeds()),
                    ("Matmul vs cuBLAS (torch.matmul)", self.matmul()),
                    ("Memory-bound kernels vs copy bandwidth", self.memory()),
                    ("kiln cases without a time", self.failures())]
        for title, body in sections:
            if body:
                lines += [f"## {title}", "", body, ""]
        return "\n".join(lines)

    def merged(self):
        return {"schema": "kiln-bench-report/1", "device": self.device_name(),
                "kiln": {k: v for k, v in self.kiln_doc.items() if k != "cases"},
                "peers": {k: v for k, v in self.peers_doc.items() if k != "cases"},
                "cases": list(self.all.values())}

    def plots(self, out_dir, name):
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("report.py: matplotlib not available, no plots", file=sys.stderr)
            return []
        groups = OrderedDict()
        for (dtype, D, causal), items in self.sweep_keys().items():
            groups.setdefault((dtype, D), {})[causal] = items
        written = []
        systems = [("kiln_fa2", "kiln FA2", "o-"), ("kiln_fa1", "kiln FA1", "s--")] + [
            (s, n, "^:") for s, n in ATTN_PEERS]
        for (dtype, D), by_causal in groups.items():
            fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
            for ax, causal in zip(axes, (0, 1)):
                items = by_causal.get(causal, [])
                for system, label, style in systems:
                    pts = [(N, rate(self.get(k, system))) for N, k in items if rate(self.get(k, system))]
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
            fig.suptitle(f"Attention forward on {self.device_name()}")
            fig.tight_layout()
            path = os.path.join(out_dir, f"{name}-attention-{dtype}-d{D}.png")
            fig.savefig(path, dpi=110)
            plt.close(fig)
            written.append(path)
        return written


def err(rec):
    if rec is None:
        return DASH
    c = rec.get("check") or {}
    if c.get("error") is None:
        return (rec.get("error") or DASH)[:40]
    return f"{c['error']:.1e} {c.get('method', '')}" + ("" if c.get("ok") else " FAIL")


def fmt_ms(rec):
    return f"{rec['time_ms']:.4f}" if rec and rec.get("time_ms") is not None else DASH


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", help="kiln_bench's JSON")
    ap.add_argument("--peers", help="peers.py's JSON (optional)")
    ap.add_argument("--out-dir", default="docs/bench")
    ap.add_argument("--headline", action="store_true", help="print the headline table to stdout")
    args = ap.parse_args(argv)
    kiln, peers = load(args.kiln), load(args.peers)
    if kiln is None and peers is None:
        ap.error("neither --kiln nor --peers names a readable file")
    report = Report(kiln, peers)
    name = slug(report.device_name())
    os.makedirs(args.out_dir, exist_ok=True)
    md_path = os.path.join(args.out_dir, f"{name}.md")
    json_path = os.path.join(args.out_dir, f"{name}.json")
    with open(json_path, "w") as f:
        json.dump(report.merged(), f, indent=2)
    with open(md_path, "w") as f:
        f.write(report.markdown())
    written = [json_path, md_path]
    try:
        written += report.plots(args.out_dir, name)
    except Exception as e:  # a plot is a convenience: never lose the tables over it
        print(f"report.py: plots failed: {e}", file=sys.stderr)
    for path in written:
        print(f"report.py: wrote {path}", file=sys.stderr)
    if args.headline:
        print(f"## kiln FA2 vs SDPA FlashAttention-2 on {report.device_name()} (TFLOP/s)\n")
        print(report.headline())
    return 0


if __name__ == "__main__":
    sys.exit(main())
