#!/usr/bin/env python3
"""Joins kiln_bench's and peers.py's JSON (by case key) into one report for the device they ran on:

  <out>/<device-slug>.json               every record of both, plus both headers
  <out>/<device-slug>.md                 tables: attention vs SDPA (forward; backward, forward + backward and
                                         kiln's deterministic vs atomic-dQ backward), matmul vs cuBLAS, memory vs copy, the
                                         tutorials' kernels vs PyTorch (report_user.py), seeds,
                                         the code-generator ablation, compile latency, the autotuner, and the
                                         performance model against measurement
  <out>/<device-slug>-attention-<dtype>-d<D>.png   TFLOP/s vs N, one line per system (needs matplotlib;
                                         report_plots.py)
  <out>/<device-slug>-model.png          the performance model's predicted time vs the measured one

--kiln may be given more than once (bench.sh runs the sweep and the other suites as two kiln_bench
processes): the files' cases are joined, the first file's header is kept and the others' suites added.
--peers likewise (a backward run made apart from the forward's, say).

Works with the peers' file missing (or any suite missing): absent figures show as "—". A kiln case whose
output failed its check has no time and shows as "✗"; a peer whose check failed is marked "!".
Standard library only, plus matplotlib when it is there. A record's cells and the markdown tables are
report_format.py's.
"""

import argparse
import json
import os
import re
import sys
from collections import OrderedDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_plots  # noqa: E402
import report_mods  # noqa: E402
import report_user  # noqa: E402
from report_format import ATTN_PEERS, DASH, cell, err, fmt_ms, geomean, ms, rate, ratio, table, verdict  # noqa: E402


def load(path):
    if not path or not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def slug(name):
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown-device"


def merge_kiln(docs):
    """One kiln_bench document from several (None entries skipped): the first header, every case, the union of
    the suites, and every code generator the documents name (joined by ", " where builds differ)."""
    docs = [d for d in docs if d]
    if not docs:
        return None
    merged = {k: v for k, v in docs[0].items() if k != "cases"}
    merged["cases"] = [c for d in docs for c in d.get("cases", [])]
    suites = []
    for d in docs:
        for name in (d.get("options") or {}).get("suites") or []:
            if name not in suites:
                suites.append(name)
    merged["options"] = dict(merged.get("options") or {}, suites=suites)
    generators = []
    for d in docs:
        if d.get("code_generator") and d["code_generator"] not in generators:
            generators.append(d["code_generator"])
    if generators:
        merged["code_generator"] = ", ".join(generators)
    if not (merged.get("device") or {}).get("available"):
        for d in docs[1:]:
            if (d.get("device") or {}).get("available"):
                merged["device"] = d["device"]
                break
    return merged


def index(doc, source):
    out = OrderedDict()
    for rec in (doc or {}).get("cases", []):
        rec = dict(rec, source=source)
        out.setdefault((rec["key"], rec["system"]), rec)
    return out


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
        for rec in self.records(op="attention", suite="attention"):
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
                      "kiln/flash", "kiln/flash geomean over N"], rows) if rows else ""

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
                     + ["FA2/flash", "FA2 check"], rows) if rows else ""

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

    # ------------------------------------------------------------ attention backward

    def bwd_groups(self, op):
        """(dtype, D) -> [(causal, N, key)] of `op`'s records (attention_bwd, attention_fwd_bwd) on the sweep's
        shapes, f16 first, then by D, causal, N."""
        keys = OrderedDict()
        for rec in self.records(op=op):
            s = rec.get("shape") or {}
            if s.get("B", 0) * s.get("N", 0) == 16384 and s.get("H", 0) * s.get("D", 0) == 2048:
                keys[rec["key"]] = (rec["dtype"] != "f16", rec["dtype"], s["D"], rec.get("causal", 0), s["N"])
        groups = OrderedDict()
        for key, (_, dtype, D, causal, N) in sorted(keys.items(), key=lambda kv: kv[1]):
            groups.setdefault((dtype, D), []).append((causal, N, key))
        return groups

    def bwd_tables(self, op, kiln_system, label):
        parts = []
        for (dtype, D), items in self.bwd_groups(op).items():
            rows = []
            for causal, N, key in items:
                k = self.get(key, kiln_system)
                flash, cudnn = self.get(key, "sdpa_flash"), self.get(key, "sdpa_cudnn")
                rows.append(["yes" if causal else "no", N, 16384 // N, 2048 // D, cell(k), fmt_ms(k, 3)]
                            + [cell(self.get(key, s)) for s, _ in ATTN_PEERS]
                            + [ratio(k, flash), ratio(k, cudnn), err(k)])
            parts.append(f"**{dtype}, D = {D}**\n\n" + table(
                ["causal", "N", "B", "H", label, "kiln ms"] + [n for _, n in ATTN_PEERS]
                + ["kiln/flash", "kiln/cuDNN", "kiln check"], rows))
        return "\n\n".join(parts)

    def attention_bwd(self):
        text = self.bwd_tables("attention_bwd", "kiln_fa2_bwd", "kiln bwd")
        if not text:
            return ""
        return ("Backward alone, TFLOP/s at 2.5 × the forward's FLOPs. kiln: the deterministic backward "
                "(preprocess, dK/dV, dQ; `BackwardOptions::deterministic`, the default) after its own forward; SDPA: "
                "`torch.autograd.grad` of one forward's output with the backend forced. kiln's check: the largest "
                "relative error of dQ, dK, dV on the sampled elements.\n\n" + text)

    def attention_fwd_bwd(self):
        text = self.bwd_tables("attention_fwd_bwd", "kiln_fa2", "kiln fwd+bwd")
        if not text:
            return ""
        return ("One training step, forward then backward, TFLOP/s at 3.5 × the forward's FLOPs.\n\n" + text)

    def bwd_atomic(self):
        rows = []
        for (dtype, D), items in self.bwd_groups("attention_bwd").items():
            for causal, N, key in items:
                det, atomic = self.get(key, "kiln_fa2_bwd"), self.get(key, "kiln_fa2_bwd_atomic")
                if det is None and atomic is None:
                    continue
                speedup = (f"{det['time_ms'] / atomic['time_ms']:.2f}×" if rate(det) and rate(atomic) else DASH)
                rows.append([dtype, D, "yes" if causal else "no", N, fmt_ms(det, 3), cell(det), fmt_ms(atomic, 3),
                             cell(atomic), speedup, err(atomic)])
        if not rows:
            return ""
        return ("kiln's backward with dQ from its own kernel (deterministic) against dQ accumulated by f32 atomics "
                "in the dK/dV kernel, then cast (`ATOMIC_DQ=1`, what `deterministic = false` may pick). "
                "\"atomic speedup\" is the deterministic time over the atomic one.\n\n"
                + table(["dtype", "D", "causal", "N", "deterministic ms", "TFLOP/s", "atomic ms", "TFLOP/s",
                         "atomic speedup", "atomic check"], rows))

    def bwd_any_order(self, key):
        """kiln's backward as `deterministic = false` runs it: the faster of the deterministic and the fused
        (atomic dQ) record of `key`, or whichever of them has a rate."""
        timed = [r for r in (self.get(key, "kiln_fa2_bwd"), self.get(key, "kiln_fa2_bwd_atomic")) if rate(r)]
        return max(timed, key=rate) if timed else None

    def bwd_headline(self):
        rows = []

        def geo(kiln_of, keys, peer):
            return geomean([rate(kiln_of(k)) / rate(self.get(k, peer)) for _, k in keys
                            if rate(kiln_of(k)) and rate(self.get(k, peer))])

        def det(k):
            return self.get(k, "kiln_fa2_bwd")

        for (dtype, D), items in self.bwd_groups("attention_bwd").items():
            for causal in (0, 1):
                keys = [(N, key) for c, N, key in items if c == causal]
                if not keys:
                    continue
                N, key = keys[-1]
                gf, gc = geo(det, keys, "sdpa_flash"), geo(det, keys, "sdpa_cudnn")
                ga = geo(self.bwd_any_order, keys, "sdpa_cudnn")
                rows.append([dtype, D, "yes" if causal else "no", N, cell(det(key)), cell(self.bwd_any_order(key)),
                             cell(self.get(key, "sdpa_flash")), cell(self.get(key, "sdpa_cudnn")),
                             f"{gf:.2f}" if gf else DASH, f"{gc:.2f}" if gc else DASH, f"{ga:.2f}" if ga else DASH])
        if not rows:
            return ""
        return ("kiln's deterministic backward (the default) recomputes the scores in its dQ kernel: seven "
                "products where an order-free backward computes five. SDPA's cuDNN backward adds dQ in no fixed "
                "order (PyTorch refuses it under `torch.use_deterministic_algorithms`), so the like-for-like "
                "comparison is kiln's `deterministic = false`, which runs the faster of kiln's two backwards (the "
                "deterministic one or the fused dQ adds, `ATOMIC_DQ=1`).\n\n"
                + table(["dtype", "D", "causal", "N (largest)", "kiln deterministic TFLOP/s",
                         "kiln deterministic = false", "SDPA flash bwd", "SDPA cuDNN bwd",
                         "kiln deterministic/flash geomean over N", "kiln deterministic/cuDNN geomean over N",
                         "kiln deterministic = false/cuDNN geomean over N"], rows))

    # ------------------------------------------------------------ matmul, memory

    def matmul(self):
        rows = []
        keys = OrderedDict((r["key"], r) for r in self.records(op="matmul", suite="matmul"))
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

    def same_size_copy(self, rec):
        """The copy that moved as many bytes as `rec` (None when the peers measured none)."""
        for c in self.records(source="peers", op="copy"):
            if rate(c) and rec.get("bytes") and c.get("bytes") == rec["bytes"]:
                return c
        return None

    def memory(self):
        ceiling = self.copy_ceiling()
        rows = []
        peer_of = {"vector_add": "torch_add", "softmax": "torch_softmax"}
        for rec in self.records(source="kiln", suite="memory"):
            peer = self.get(rec["key"], peer_of.get(rec["op"], ""))
            rows.append([rec["key"], cell(rec), cell(peer), ratio(rec, peer, percent=True),
                         ratio(rec, ceiling, percent=True), ratio(rec, self.same_size_copy(rec), percent=True),
                         err(rec)])
        head = ["case", "kiln GB/s", "torch GB/s", "kiln % of torch", "kiln % of copy",
                "kiln % of a copy of its bytes", "check"]
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

    # ------------------------------------------------------------ ablation, compile, autotune, model

    def ablation(self):
        """Per workload: each code-generator switch off in turn, timed against all switches on."""
        groups = OrderedDict()
        for rec in self.records(source="kiln", suite="ablation"):
            base = rec["system"].split("/")[0]
            extra = rec.get("extra") or {}
            groups.setdefault((extra.get("workload") or rec["key"], rec["key"], base), []).append(rec)
        parts = []
        for (workload, key, base), recs in groups.items():
            on = next((r for r in recs if (r.get("extra") or {}).get("variant") == "all_on"), None)
            rows = []
            for r in recs:
                extra = r.get("extra") or {}
                variant = extra.get("variant") or r.get("note", "")
                vs = DASH
                if rate(r) and rate(on) and r is not on:
                    vs = f"{r['time_ms'] / on['time_ms']:.2f}×"
                elif r is on and rate(on):
                    vs = "1.00×"
                same = "same code" if extra.get("same_code_as_all_on") and r is not on else ""
                rows.append([variant.replace("_", " "), fmt_ms(r) if rate(r) else "✗", cell(r), vs, same, err(r)])
            peer = self.get(key, {"attention": "sdpa_flash", "matmul": "cublas", "softmax": "torch_softmax"}.get(
                key.split(":")[0], ""))
            note = ""
            if rate(peer):
                unit = "TFLOP/s" if peer.get("flops") else "GB/s"
                note = (f"\n\nSame shape: {peer['system']} {rate(peer):.1f} {unit}"
                        + (f" (all on is {rate(on) / rate(peer):.2f} of it)." if rate(on) else "."))
            parts.append(f"**{workload}** (`{key}`, {base})\n\n"
                         + table(["variant", "time ms", "GB/s" if any(r.get("bytes") and not r.get("flops")
                                                                     for r in recs) else "TFLOP/s",
                                  "time vs all on", "", "check"], rows) + note)
        if not parts:
            return ""
        intro = ("The same kernel and config (the defaults, never the tuner's pick) with one code-generator "
                 "switch (`CodegenOptions`) off at a time. \"time vs all on\" above 1 is what the optimisation "
                 "saves; \"same code\" marks a switch that does not change this kernel's generated CUDA (its "
                 "ratio is run-to-run noise).")
        return intro + "\n\n" + "\n\n".join(parts)

    def compile_latency(self):
        rows = []
        for rec in self.records(source="kiln", suite="compile"):
            x = rec.get("extra") or {}
            what = {"kiln_compile_cold": "cold (empty cache, NVRTC)",
                    "kiln_compile_warm": "warm (entry on disk, nothing in memory)"}.get(rec["system"], rec["system"])
            phases = " + ".join(f"{name} {ms(x.get(field))}" for name, field in
                                (("IR", "build_ir_ms"), ("codegen", "generate_ms"),
                                 ("NVRTC" if x.get("cache") == "miss" else "cache read", "cache_ms"),
                                 ("load", "load_ms")))
            target = x.get("target_ms")
            rows.append([what, fmt_ms(rec, 1) if rec.get("ok") else "✗", ms(target) if target else DASH,
                         verdict(rec, x.get("meets_target")), phases,
                         ", ".join(ms(v) for v in x.get("samples_ms") or []),
                         f"context {ms(x.get('context_ms'))}, NVRTC dlopen {ms(x.get('nvrtc_load_ms'))}"])
        if not rows:
            return ""
        return ("FA2 forward's default config (f16, D = 64), from nothing in memory to a loaded function, each "
                "sample a new process (median shown). Outside the figure, paid once per process whatever kiln "
                "does: creating the CUDA context and opening NVRTC.\n\n"
                + table(["start", "median ms", "target", "meets", "phases (median ms)", "samples ms",
                         "once per process (ms)"], rows))

    def autotune(self):
        rows, exhaustive = [], None
        names = {"kiln_tune_cold": "tune, compile cache cold", "kiln_tune_warm_compile": "tune, compile cache warm",
                 "kiln_tune_cached_start": "cached start (result on disk)"}
        for rec in self.records(source="kiln", suite="autotune"):
            x = rec.get("extra") or {}
            if rec["system"] == "kiln_tune_vs_exhaustive":
                exhaustive = rec
                continue
            counts = (f"{x.get('candidates', DASH)} / {x.get('timed', DASH)} / {x.get('pruned', DASH)} / "
                      f"{x.get('failed', DASH)}")
            rows.append([names.get(rec["system"], rec["system"]), fmt_ms(rec, 1) if rec.get("ok") else "✗",
                         ms(x.get("target_ms")), verdict(rec, x.get("meets_target")), counts,
                         x.get("compiles", DASH), x.get("source", DASH), rec.get("config") or DASH])
        text = ""
        if rows:
            some = next(self.records(source="kiln", suite="autotune"))
            text = (f"FA2 forward on `{some['key']}`, its whole config space, each run in a new process over a "
                    "fresh cache directory; the tuned kernel's output is checked every time.\n\n"
                    + table(["run", "ms", "target ms", "meets", "candidates / timed / pruned / failed", "compiles",
                             "source", "pick"], rows))
        if exhaustive:
            x = exhaustive.get("extra") or {}
            ratio = x.get("pick_over_best")
            summary = table(["pick", "pick ms", "best (exhaustive)", "best ms", "pick / best", "within 3 %"],
                            [[exhaustive.get("config") or DASH, ms(x.get("pick_ms"), 4), x.get("best_config") or DASH,
                              ms(x.get("best_ms"), 4), f"{ratio:.3f}" if ratio else DASH,
                              verdict(exhaustive, x.get("meets_target"))]])
            detail = []
            for row in x.get("table") or []:
                detail.append([row.get("id", ""), ms(row.get("tuner_ms"), 4), ms(row.get("ms"), 4),
                               f"{row['tflops']:.1f}" if row.get("tflops") else DASH,
                               "" if row.get("status") == "ok" else (row.get("reason") or "")[:80].replace("|", "/")])
            text += ("\n\nThe tuner's pick against every config of the space timed here "
                     f"({x.get('reps_per_config', DASH)} launches each, median):\n\n" + summary)
            if detail:
                text += "\n\n" + table(["config", "tuner ms", "bench ms", "TFLOP/s", "why not timed"], detail)
            if not exhaustive.get("ok"):
                text += f"\n\n✗ {exhaustive.get('error') or 'failed'}"
        return text

    def model_records(self):
        return [r for r in self.records(source="kiln", suite="model")]

    def measured_ceilings(self):
        """The best f16 cuBLAS TFLOP/s and copy GB/s the peers measured in this run (None when absent)."""
        mm = [rate(r) for r in self.records(source="peers", system="cublas", dtype="f16") if rate(r)]
        cp = self.copy_ceiling()
        return (max(mm) if mm else None), (rate(cp) if cp else None)

    def model(self):
        recs = self.model_records()
        if not recs:
            return ""
        peak_mm, peak_copy = self.measured_ceilings()
        rows, best = [], OrderedDict()
        for r in recs:
            x = r.get("extra") or {}
            pred = x.get("predicted_ms")
            ceil_ms = None
            if peak_mm and peak_copy and x.get("matrix_flops") is not None:
                bytes_ = (x.get("bytes_loaded") or 0) + (x.get("bytes_stored") or 0)
                ceil_ms = max(x["matrix_flops"] / (peak_mm * 1e9), bytes_ / (peak_copy * 1e6))
            measured = r.get("time_ms") if r.get("ok") else None
            N = r["shape"]["N"]
            rows.append([N, f"{x.get('block_m', '?')}×{x.get('block_n', '?')}", ms(pred, 3), x.get("bound", DASH),
                         ms(ceil_ms, 3), ms(measured, 3) if measured else "✗", cell(r),
                         f"{pred / measured:.2f}" if pred and measured else DASH,
                         f"{ceil_ms / measured:.2f}" if ceil_ms and measured else DASH])
            entry = best.setdefault(N, {"measured": None, "predicted": None})
            tile = f"{x.get('block_m')}×{x.get('block_n')}"
            if measured and (entry["measured"] is None or measured < entry["measured"][1]):
                entry["measured"] = (tile, measured)
            if pred and (entry["predicted"] is None or pred < entry["predicted"][1]):
                entry["predicted"] = (tile, pred)
        x0 = recs[0].get("extra") or {}
        text = ("FA2 forward, f16, D = 64, not causal (B·N = 16384, H = 32), 4 warps, 2 stages; the model "
                "(analysis/perf_model.h) reads FLOPs and bytes off the IR, every access counted as DRAM traffic "
                f"(no cache reuse). Roofline against the nominal peaks ({x0.get('peak_tflops', 0):.0f} TFLOP/s, "
                f"{x0.get('peak_gbps', 0):.0f} GB/s from {x0.get('peaks_from', '?')})"
                + (f" and against the ceilings measured in this run (cuBLAS f16 {peak_mm:.0f} TFLOP/s, copy "
                   f"{peak_copy:.0f} GB/s)" if peak_mm and peak_copy else "")
                + ". predicted / measured: 1 is a perfect model, below 1 the kernel is slower than its roofline.\n\n")
        text += table(["N", "BLOCK_M×BLOCK_N", "predicted ms (nominal)", "bound", "predicted ms (measured ceilings)",
                       "measured ms", "TFLOP/s", "predicted / measured", "ceilings / measured"], rows)
        agree = [[N, e["measured"][0] if e["measured"] else DASH, e["predicted"][0] if e["predicted"] else DASH,
                  "yes" if e["measured"] and e["predicted"] and e["measured"][0] == e["predicted"][0] else "no"]
                 for N, e in best.items()]
        text += "\n\nFastest tile per N, measured and as the model ranks them:\n\n" + table(
            ["N", "fastest measured", "fastest predicted", "same"], agree)
        return text

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
            generator = f" (code generator {k['code_generator']})" if k.get("code_generator") else ""
            facts.append(f"kiln {k.get('kiln_version')}{generator}, NVRTC {k.get('nvrtc_version')}, "
                         f"driver {dev.get('driver_version')}")
        if pv:
            facts.append(f"torch {pv.get('torch')} (CUDA {pv.get('cuda')}, cuDNN {pv.get('cudnn')}), triton {pv.get('triton')}")
        if k.get("options"):
            o = k["options"]
            facts.append(f"kiln options: quick={o.get('quick')} reps≤{o.get('reps')} warmup={o.get('warmup')}"
                         + (f" config={o.get('config')}" if o.get("config") else ""))
        lines += ["- " + f for f in facts]
        if not p:
            lines += ["- peers: not measured (no peers JSON)"]
        lines += ["", "Rates are TFLOP/s (attention 4·B·H·N²·D, halved when causal, its backward 2.5 × that and a "
                  "forward + backward step 3.5 ×; matmul 2·M·N·K) or GB/s "
                  "(bytes read + written). Each is the median of event-timed launches, taken only after the "
                  "output passed its check against a double-precision reference. ✗: kiln's output failed its "
                  "check (no time); n/a: the backend cannot run the shape; —: not measured; !: a peer's output "
                  "failed the same check. See docs/bench/README.md.", ""]
        sections = [("Headline: kiln FA2 vs SDPA FlashAttention-2", self.headline),
                    ("Attention sweep (B·N = 16384, H·D = 2048), TFLOP/s", self.attention_sweep),
                    ("Other attention shapes, TFLOP/s", self.other_attention),
                    ("Headline: kiln attention backward vs SDPA flash and cuDNN", self.bwd_headline),
                    ("Attention backward (B·N = 16384, H·D = 2048), TFLOP/s", self.attention_bwd),
                    ("Attention forward + backward step, TFLOP/s", self.attention_fwd_bwd),
                    ("kiln backward: deterministic vs atomic dQ", self.bwd_atomic),
                    ("Seed experiments", self.seeds),
                    ("Matmul vs cuBLAS (torch.matmul)", self.matmul),
                    ("Memory-bound kernels vs copy bandwidth", self.memory),
                    ("The tutorials' kernels (user suite) vs PyTorch",
                     lambda: report_user.user_kernels(self)),
                    ("Attention mods (mods suite) vs flex_attention and SDPA", lambda: report_mods.mods_section(self)),
                    ("What each code-generator optimisation is worth (automatic worklog)", self.ablation),
                    ("Compile latency", self.compile_latency),
                    ("Autotuner", self.autotune),
                    ("Performance model vs measurement", self.model),
                    ("kiln cases without a time", self.failures)]
        for title, make in sections:
            try:
                body = make()
            except Exception as e:  # one malformed record must not cost the rest of the report
                print(f"report.py: section '{title}' failed: {e!r}", file=sys.stderr)
                body = f"(this section could not be written: {e!r}; the records are in the JSON file)"
            if body:
                lines += [f"## {title}", "", body, ""]
        return "\n".join(lines)

    def merged(self):
        return {"schema": "kiln-bench-report/1", "device": self.device_name(),
                "kiln": {k: v for k, v in self.kiln_doc.items() if k != "cases"},
                "peers": {k: v for k, v in self.peers_doc.items() if k != "cases"},
                "cases": list(self.all.values())}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", action="append", default=[],
                    help="kiln_bench's JSON (repeatable: the cases of every file are joined)")
    ap.add_argument("--peers", action="append", default=[],
                    help="peers.py's JSON (optional; repeatable like --kiln)")
    ap.add_argument("--out-dir", default="docs/bench")
    ap.add_argument("--headline", action="store_true", help="print the headline table to stdout")
    args = ap.parse_args(argv)
    kiln, peers = merge_kiln([load(path) for path in args.kiln]), merge_kiln([load(path) for path in args.peers])
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
    # A plot is a convenience: never lose the tables (or the other plots) over one.
    try:
        written += report_plots.plot_attention(report, args.out_dir, name)
    except Exception as e:
        print(f"report.py: attention plots failed: {e}", file=sys.stderr)
    try:
        plt = report_plots.pyplot()
        path = report_plots.plot_model(report, plt, args.out_dir, name) if plt else None
        if path:
            written.append(path)
    except Exception as e:
        print(f"report.py: model plot failed: {e}", file=sys.stderr)
    for path in written:
        print(f"report.py: wrote {path}", file=sys.stderr)
    if args.headline:
        if report.sweep_keys() or not report.bwd_groups("attention_bwd"):
            print(f"## kiln FA2 vs SDPA FlashAttention-2 on {report.device_name()} (TFLOP/s)\n")
            print(report.headline())
        if report.bwd_groups("attention_bwd"):
            print(f"\n## kiln attention backward vs SDPA on {report.device_name()} (TFLOP/s, 2.5 × forward FLOPs)\n")
            print(report.bwd_headline())
    return 0


if __name__ == "__main__":
    sys.exit(main())
