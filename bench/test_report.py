#!/usr/bin/env python3
"""report.py on small fake results (no GPU): the sections of the new suites show the right figures, records
of one suite never leak into another's table, several --kiln files join, and main() writes the files (the
plots too where matplotlib is installed). Run: python3 bench/test_report.py"""

import copy
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402

DEVICE = {"available": True, "name": "NVIDIA Fake GPU", "sm_count": 132, "clock_khz": 1980000,
          "memory_clock_khz": 2619000, "driver_version": 13000}


def case(suite, system, key, shape, time_ms, flops=0.0, ok=True, dtype="f16", op="attention", causal=0,
         extra=None, config="", note=""):
    tflops = flops / (time_ms * 1e-3) / 1e12 if ok and flops else None
    rec = {"key": key, "suite": suite, "op": op, "system": system, "dtype": dtype, "shape": shape, "note": note,
           "flops": flops, "bytes": 0, "config": config,
           "check": {"method": "sampled", "elements": 64, "error": 3e-4, "lse_error": 1e-7, "tolerance": 3.9e-3,
                     "nonfinite_mismatches": 0, "ok": ok},
           "time_ms": time_ms if ok else None, "tflops": tflops, "gbps": None, "reps": 20, "warmup": 3,
           "l2_flushed": False, "wall_seconds": 1.0, "ok": ok, "error": None if ok else "wrong output"}
    if causal >= 0:
        rec["causal"] = causal
    if extra is not None:
        rec["extra"] = extra
    return rec


SWEEP_KEY = "attention:f16:B4:H32:N4096:D64:causal0"
SWEEP_SHAPE = {"B": 4, "H": 32, "N": 4096, "D": 64}
SWEEP_FLOPS = 4.0 * 4 * 32 * 4096 * 4096 * 64


def sweep_doc():
    return {"schema": "kiln-bench/1", "tool": "kiln_bench", "kiln_version": "0.1.0", "nvrtc_version": "13.0",
            "device": DEVICE, "options": {"suites": ["attention"], "quick": False, "reps": 20, "warmup": 3},
            "cases": [case("attention", "kiln_fa2", SWEEP_KEY, SWEEP_SHAPE, 2.0, SWEEP_FLOPS),
                      case("attention", "kiln_fa1", SWEEP_KEY, SWEEP_SHAPE, 12.0, SWEEP_FLOPS),
                      memory_case("kiln_softmax", SOFTMAX_KEY, SOFTMAX_SHAPE, SOFTMAX_BYTES, 0.025)]}


# A memory-bound case: 64 MiB moved in 25 us is 2684 GB/s.
SOFTMAX_KEY = "softmax:f16:rows16384:cols1024"
SOFTMAX_SHAPE = {"rows": 16384, "cols": 1024}
SOFTMAX_BYTES = 2 * 2 * 16384 * 1024


def memory_case(system, key, shape, nbytes, time_ms, op="softmax", dtype="f16"):
    rec = case("memory", system, key, shape, time_ms, op=op, dtype=dtype, causal=-1)
    rec.update(bytes=nbytes, gbps=nbytes / (time_ms * 1e-3) / 1e9)
    return rec


def extra_doc():
    cases = []
    # Ablation: all on 2 ms, no tensor cores 8 ms (4.00×), no vectorize the same code (2.02 ms).
    for variant, ms, same in (("all_on", 2.0, True), ("no_tensor_cores", 8.0, False), ("no_vectorize", 2.02, True)):
        cases.append(case("ablation", f"kiln_fa2/{variant}", SWEEP_KEY, SWEEP_SHAPE, ms, SWEEP_FLOPS, note=variant,
                          extra={"workload": "FA2 f16, B4 H32 N4096 D64", "variant": variant,
                                 "same_code_as_all_on": same}))
    cases.append(case("ablation", "kiln_fa2/no_swizzle", SWEEP_KEY, SWEEP_SHAPE, 0, SWEEP_FLOPS, ok=False,
                      note="no_swizzle", extra={"workload": "FA2 f16, B4 H32 N4096 D64", "variant": "no_swizzle",
                                                "same_code_as_all_on": False}))
    ckey, cshape = "compile:f16:D64:causal0", {"D": 64}
    cases.append(case("compile", "kiln_compile_cold", ckey, cshape, 1234.5, op="compile",
                      extra={"timer": "host", "samples_ms": [1200.0, 1234.5, 1300.0], "build_ir_ms": 0.3,
                             "generate_ms": 1.1, "cache_ms": 1100.0, "load_ms": 3.0, "nvrtc_load_ms": 9.0,
                             "context_ms": 250.0, "cache": "miss", "target_ms": 1500, "meets_target": True}))
    cases.append(case("compile", "kiln_compile_warm", ckey, cshape, 25.5, op="compile",
                      extra={"timer": "host", "samples_ms": [25.5], "build_ir_ms": 0.3, "generate_ms": 1.0,
                             "cache_ms": 0.6, "load_ms": 23.0, "nvrtc_load_ms": 9.0, "context_ms": 250.0,
                             "cache": "disk", "target_ms": 20, "meets_target": False}))
    tkey = "autotune:f16:B4:H32:N4096:D64:causal0"
    table = [{"id": "BLOCK_M=128 BLOCK_N=128 num_warps=4", "status": "ok", "ms": 1.90, "tflops": 289.0,
              "tuner_ms": 1.91, "reason": ""},
             {"id": "BLOCK_M=128 BLOCK_N=64 num_warps=4", "status": "ok", "ms": 1.95, "tflops": 281.0,
              "tuner_ms": 1.89, "reason": ""},
             {"id": "BLOCK_M=64 BLOCK_N=32 num_warps=8", "status": "not timed", "ms": None, "tflops": None,
              "reason": "BLOCK_M=64 needs 16-row warps"}]
    for system, ms, target, meets in (("kiln_tune_cold", 9000.0, 30000, True),
                                      ("kiln_tune_warm_compile", 4000.0, 30000, True),
                                      ("kiln_tune_cached_start", 12.0, 20, True)):
        cases.append(case("autotune", system, tkey, SWEEP_SHAPE, ms, config="BLOCK_M=128 BLOCK_N=64 num_warps=4",
                          extra={"timer": "host", "target_ms": target, "meets_target": meets, "candidates": 26,
                                 "timed": 24, "pruned": 2, "failed": 0, "compiles": 24 if system == "kiln_tune_cold"
                                 else 0, "source": "disk" if "cached" in system else "tuned"}))
    cases.append(case("autotune", "kiln_tune_vs_exhaustive", tkey, SWEEP_SHAPE, 1.95, SWEEP_FLOPS,
                      config="BLOCK_M=128 BLOCK_N=64 num_warps=4",
                      extra={"timer": "events", "reps_per_config": 50, "best_config": table[0]["id"],
                             "best_ms": 1.90, "pick_ms": 1.95, "pick_over_best": 1.95 / 1.90, "tolerance": 1.03,
                             "meets_target": True, "table": table}))
    # Model: two tiles at two lengths; 128×128 is fastest measured at both, the model prefers 128×64 at 1024.
    for N, tiles in ((1024, ((128, 64, 0.40, 0.50), (128, 128, 0.45, 0.45))),
                     (4096, ((128, 64, 1.50, 2.10), (128, 128, 1.40, 1.95)))):
        shape = {"B": 16384 // N, "H": 32, "N": N, "D": 64}
        flops = 4.0 * shape["B"] * 32 * N * N * 64
        for bm, bn, pred, meas in tiles:
            cases.append(case("model", f"kiln_fa2_m{bm}_n{bn}", f"attention:f16:B{shape['B']}:H32:N{N}:D64:causal0",
                              shape, meas, flops, note=f"BLOCK_M={bm} BLOCK_N={bn}",
                              extra={"block_m": bm, "block_n": bn, "predicted_ms": pred, "compute_ms": pred,
                                     "memory_ms": pred / 2, "bound": "compute", "matrix_flops": flops,
                                     "bytes_loaded": 1e9, "bytes_stored": 1e7, "peak_tflops": 1070.0,
                                     "peak_gbps": 4800.0, "peaks_from": "NVIDIA Fake GPU"}))
    return {"schema": "kiln-bench/1", "tool": "kiln_bench", "kiln_version": "0.1.0", "device": DEVICE,
            "options": {"suites": ["ablation", "compile", "autotune", "model"], "quick": False}, "cases": cases}


def peers_doc():
    flash = case("attention", "sdpa_flash", SWEEP_KEY, SWEEP_SHAPE, 1.8, SWEEP_FLOPS)
    flash["available"] = True
    mm = case("matmul", "cublas", "matmul:f16:M8192:N8192:K8192", {"M": 8192, "N": 8192, "K": 8192}, 1.5,
              2.0 * 8192 ** 3, op="matmul", causal=-1)
    mm["available"] = True
    copy_rec = memory_case("torch_copy", "copy:f32:n268435456", {"n": 1 << 28}, 2.0 * 4 * (1 << 28), 0.5,
                           op="copy", dtype="f32")
    # A copy of the softmax's 64 MiB, in 20 us: 3355 GB/s (short copies do not reach the ceiling either).
    short_copy = memory_case("torch_copy", "copy:f32:n8388608", {"n": 1 << 23}, 2.0 * 4 * (1 << 23), 0.02,
                             op="copy", dtype="f32")
    for rec in (copy_rec, short_copy):
        rec["available"] = True
    return {"schema": "kiln-bench/1", "tool": "peers", "device": DEVICE, "versions": {"torch": "2.x"},
            "cases": [flash, mm, copy_rec, short_copy]}


# The backward at the sweep key's shape: fwd FLOPs 5.4976e11, backward 2.5 ×, a step 3.5 ×.
BWD_KEY = "attention_bwd:f16:B4:H32:N4096:D64:causal0"
STEP_KEY = "attention_fwd_bwd:f16:B4:H32:N4096:D64:causal0"
BWD_FLOPS, STEP_FLOPS = 2.5 * SWEEP_FLOPS, 3.5 * SWEEP_FLOPS


def bwd_doc():
    cases = [case("attention_bwd", "kiln_fa2_bwd", BWD_KEY, SWEEP_SHAPE, 5.0, BWD_FLOPS, op="attention_bwd",
                  extra={"dq_error": 1e-3, "dk_error": 2e-3, "dv_error": 5e-4}),
             case("attention_bwd", "kiln_fa2_bwd_atomic", BWD_KEY, SWEEP_SHAPE, 4.0, BWD_FLOPS, op="attention_bwd"),
             case("attention_bwd", "kiln_fa2", STEP_KEY, SWEEP_SHAPE, 7.0, STEP_FLOPS, op="attention_fwd_bwd"),
             # bf16 D = 128 at N = 1024: the atomic variant failed its check (no time, no speedup).
             case("attention_bwd", "kiln_fa2_bwd", "attention_bwd:bf16:B16:H16:N1024:D128:causal1",
                  {"B": 16, "H": 16, "N": 1024, "D": 128}, 1.0, 2.5 * 4.0 * 16 * 16 * 1024 * 1024 * 128 / 2,
                  op="attention_bwd", dtype="bf16", causal=1),
             case("attention_bwd", "kiln_fa2_bwd_atomic", "attention_bwd:bf16:B16:H16:N1024:D128:causal1",
                  {"B": 16, "H": 16, "N": 1024, "D": 128}, 1.0, 2.5 * 4.0 * 16 * 16 * 1024 * 1024 * 128 / 2,
                  ok=False, op="attention_bwd", dtype="bf16", causal=1)]
    return {"schema": "kiln-bench/1", "tool": "kiln_bench", "kiln_version": "0.1.0", "device": DEVICE,
            "options": {"suites": ["attention_bwd"], "quick": False}, "cases": cases}


def bwd_peers():
    out = []
    for system, bwd_ms, step_ms in (("sdpa_flash", 6.25, 8.75), ("sdpa_cudnn", 4.0, 5.6)):
        for key, op, flops, ms in ((BWD_KEY, "attention_bwd", BWD_FLOPS, bwd_ms),
                                   (STEP_KEY, "attention_fwd_bwd", STEP_FLOPS, step_ms)):
            rec = case("attention_bwd", system, key, SWEEP_SHAPE, ms, flops, op=op)
            rec["available"] = True
            out.append(rec)
    return out


# The user suite: LayerNorm at 0.120 ms beside torch at 0.120 and a copy at 0.093; the fused matmul at 0.2085 ms
# beside kiln's matmul at 0.1913 (the matmul suite) and torch's three ops at 0.2496.
LN_KEY, LN_SHAPE, LN_BYTES = "layernorm_fwd:f16:n_rows16384:n_cols4096", {"n_rows": 16384, "n_cols": 4096}, 2.0 ** 28
MM_SHAPE, MM_FLOPS = {"M": 4096, "N": 4096, "K": 4096}, 2.0 * 4096 ** 3


def user_doc():
    cases = [memory_case("kiln_layernorm_fwd", LN_KEY, LN_SHAPE, LN_BYTES, 0.12, op="layernorm_fwd"),
             case("user", "kiln_matmul_bias_gelu", "matmul_bias_gelu:f16:M4096:N4096:K4096", MM_SHAPE, 0.2085,
                  MM_FLOPS, op="matmul_bias_gelu", causal=-1),
             case("matmul", "kiln_matmul", "matmul:f16:M4096:N4096:K4096", MM_SHAPE, 0.1913, MM_FLOPS,
                  op="matmul", causal=-1)]
    cases[0]["suite"] = "user"
    return {"schema": "kiln-bench/1", "tool": "kiln_bench", "device": DEVICE,
            "options": {"suites": ["user", "matmul"], "quick": False}, "cases": cases}


def user_peers():
    out = [memory_case("torch_layer_norm", LN_KEY, LN_SHAPE, LN_BYTES, 0.12, op="layernorm_fwd"),
           memory_case("torch_copy", LN_KEY, LN_SHAPE, LN_BYTES, 0.0932, op="layernorm_fwd"),
           case("user", "torch_matmul_bias_gelu", "matmul_bias_gelu:f16:M4096:N4096:K4096", MM_SHAPE, 0.2496,
                MM_FLOPS, op="matmul_bias_gelu", causal=-1)]
    for rec in out:
        rec["suite"], rec["available"] = "user", True
    return out


class ReportTest(unittest.TestCase):
    def setUp(self):
        self.kiln = report.merge_kiln([sweep_doc(), extra_doc(), bwd_doc(), user_doc()])
        peers = peers_doc()
        peers["cases"] += bwd_peers() + user_peers()
        self.report = report.Report(self.kiln, peers)
        self.md = self.report.markdown()

    def section(self, title):
        start = self.md.index(f"## {title}")
        end = self.md.find("\n## ", start + 1)
        return self.md[start:end if end >= 0 else len(self.md)]

    def test_merge_keeps_every_case_and_suite(self):
        self.assertEqual(len(self.kiln["cases"]),
                         len(sweep_doc()["cases"]) + len(extra_doc()["cases"]) + len(bwd_doc()["cases"]) +
                         len(user_doc()["cases"]))
        self.assertEqual(self.kiln["options"]["suites"],
                         ["attention", "ablation", "compile", "autotune", "model", "attention_bwd", "user", "matmul"])
        self.assertIsNone(report.merge_kiln([None, None]))

    def test_header_names_the_code_generators_the_runs_were_built_with(self):
        first, second = sweep_doc(), bwd_doc()
        first["code_generator"], second["code_generator"] = "0123456789abcdef", "fedcba9876543210"
        text = report.Report(report.merge_kiln([first, sweep_doc(), second]), None).markdown()
        self.assertIn("kiln 0.1.0 (code generator 0123456789abcdef, fedcba9876543210), NVRTC 13.0", text)
        self.assertIn("kiln 0.1.0, NVRTC 13.0", self.md)  # documents without one, as before

    def test_merged_json_keeps_records_that_share_a_key(self):
        systems = {(c["key"], c["system"]) for c in self.report.merged()["cases"]}
        self.assertIn((SWEEP_KEY, "kiln_fa2"), systems)
        self.assertIn((SWEEP_KEY, "kiln_fa2/all_on"), systems)
        self.assertEqual(len(self.report.merged()["cases"]),
                         len(self.kiln["cases"]) + len(peers_doc()["cases"]) + len(bwd_peers()) + len(user_peers()))

    def test_sweep_shows_fa1_and_only_the_sweep_suite(self):
        sweep = self.section("Attention sweep")
        self.assertIn("| f16 | 64 | no | 4096 | 4 | 32 | 274.9 | 45.8 |", sweep)  # FA2 2 ms, FA1 12 ms
        self.assertEqual(sweep.count("| f16 | 64 | no | 4096 |"), 1)
        self.assertNotIn("autotune:", self.md.split("## What each")[0])

    def test_backward_against_flash_and_cudnn(self):
        text = self.section("Attention backward")
        # kiln 5 ms = 274.9 TFLOP/s at 2.5 × the FLOPs; flash 6.25 ms (219.9), cuDNN 4 ms (343.6).
        self.assertIn("**f16, D = 64**", text)
        self.assertIn("| no | 4096 | 4 | 32 | 274.9 | 5.000 | 219.9 | 343.6 | — | 1.25 | 0.80 |", text)
        self.assertIn("**bf16, D = 128**", text)
        self.assertLess(text.index("**f16, D = 64**"), text.index("**bf16, D = 128**"))
        # Backward records stay out of the forward's tables.
        self.assertNotIn("attention_bwd", self.section("Other attention shapes") if "## Other attention" in self.md
                         else "")
        self.assertEqual(self.section("Attention sweep").count("| f16 | 64 | no | 4096 |"), 1)

    def test_forward_backward_step(self):
        text = self.section("Attention forward + backward step")
        # kiln 7 ms at 3.5 × = 274.9; flash 8.75 ms (219.9), cuDNN 5.6 ms (343.6).
        self.assertIn("| no | 4096 | 4 | 32 | 274.9 | 7.000 | 219.9 | 343.6 | — | 1.25 | 0.80 |", text)

    def test_deterministic_vs_atomic(self):
        text = self.section("kiln backward: deterministic vs atomic dQ")
        self.assertIn("| f16 | 64 | no | 4096 | 5.000 | 274.9 | 4.000 | 343.6 | 1.25× |", text)
        self.assertIn("| bf16 | 128 | yes | 1024 | 1.000 |", text)
        self.assertIn("| 171.8 | — | ✗ | — | 3.0e-04 sampled FAIL |", text)

    def test_backward_headline(self):
        # deterministic = false is the faster of kiln's two (the fused 4 ms here), compared with cuDNN like for
        # like; a fused record that failed its check is not a candidate (bf16: the deterministic 171.8).
        text = self.section("Headline: kiln attention backward")
        self.assertIn("| f16 | 64 | no | 4096 | 274.9 | 343.6 | 219.9 | 343.6 | 1.25 | 0.80 | 1.00 |", text)
        self.assertIn("| bf16 | 128 | yes | 1024 | 171.8 | 171.8 | — | — | — | — | — |", text)
        self.assertIn("`torch.use_deterministic_algorithms`", text)

    def test_ablation_ratios_and_same_code(self):
        text = self.section("What each code-generator optimisation is worth")
        self.assertIn("| no tensor cores | 8.0000 | 68.7 | 4.00× |  |", text)
        self.assertIn("| no vectorize | 2.0200 | 272.2 | 1.01× | same code |", text)
        self.assertIn("| all on | 2.0000 | 274.9 | 1.00× |  |", text)
        self.assertIn("| no swizzle | ✗ | ✗ |", text)
        self.assertIn("sdpa_flash 305.4 TFLOP/s (all on is 0.90 of it)", text)

    def test_compile_latency_targets(self):
        text = self.section("Compile latency")
        self.assertIn("| cold (empty cache, NVRTC) | 1234.5 | 1500.0 | yes |", text)
        self.assertIn("| warm (entry on disk, nothing in memory) | 25.5 | 20.0 | **no** |", text)
        self.assertIn("cache read 0.6", text)

    def test_autotune_pick_against_exhaustive(self):
        text = self.section("Autotuner")
        self.assertIn("| tune, compile cache cold | 9000.0 | 30000.0 | yes | 26 / 24 / 2 / 0 | 24 | tuned |", text)
        self.assertIn("| cached start (result on disk) | 12.0 | 20.0 | yes |", text)
        self.assertIn("| 1.9500 | BLOCK_M=128 BLOCK_N=128 num_warps=4 | 1.9000 | 1.026 | yes |", text)
        self.assertIn("BLOCK_M=64 needs 16-row warps", text)

    def test_model_table_and_ranking(self):
        text = self.section("Performance model vs measurement")
        self.assertIn("| 1024 | 128×64 | 0.400 | compute |", text)
        self.assertIn("0.80 |", text)  # predicted 0.40 / measured 0.50
        # Measured ceilings: cuBLAS f16 8192³ at 1.5 ms and copy at 0.5 ms.
        self.assertIn("cuBLAS f16 733 TFLOP/s, copy 4295 GB/s", text)
        self.assertIn("| 1024 | 128×128 | 128×64 | no |", text)
        self.assertIn("| 4096 | 128×128 | 128×128 | yes |", text)

    def test_memory_cases_against_the_ceiling_and_a_copy_of_their_bytes(self):
        text = self.section("Memory-bound kernels vs copy bandwidth")
        self.assertIn("Copy ceiling: 4295 GB/s", text)
        # 2684 GB/s: 63 % of the 1 GiB copy's rate, 80 % of the 64 MiB copy's.
        self.assertIn("| softmax:f16:rows16384:cols1024 | 2684.4 | — | — | 63% | 80% |", text)

    def test_user_kernels_against_torch_copy_and_kilns_matmul(self):
        text = self.section("The tutorials' kernels (user suite) vs PyTorch")
        # 2^28 bytes in 0.12 ms: 2237.0 GB/s, 1.00x torch, 78 % of the copy of its bytes.
        self.assertIn(f"| {LN_KEY} | 2237.0 GB/s | 2237.0 | 1.00 | 78% | — | — |", text)
        # 659.2 TFLOP/s: 1.20x torch's three ops, 0.92x kiln's matmul (718.4).
        self.assertIn("| matmul_bias_gelu:f16:M4096:N4096:K4096 | 659.2 TFLOP/s | 550.6 | 1.20 | — | 718.4 | 0.92 |",
                      text)
        self.assertNotIn(LN_KEY, self.section("Memory-bound kernels vs copy bandwidth"))

    def test_fused_matmul_against_the_plain_matmul_timed_beside_it(self):
        # The user suite's own timing of the plain matmul (L2 flushed, 0.1950 ms: 704.8 TFLOP/s) is the one the
        # fused kernel is compared with, not the matmul suite's 0.1913.
        doc = user_doc()
        plain = case("user", "kiln_plain_matmul", "matmul:f16:M4096:N4096:K4096", MM_SHAPE, 0.195, MM_FLOPS,
                     op="matmul", causal=-1)
        plain["suite"] = "user"
        doc["cases"].append(plain)
        text = report.Report(report.merge_kiln([doc]), {"cases": user_peers()}).markdown()
        self.assertIn("| matmul_bias_gelu:f16:M4096:N4096:K4096 | 659.2 TFLOP/s | 550.6 | 1.20 | — | 704.8 | 0.94 |",
                      text)
        self.assertNotIn("| matmul:f16:M4096:N4096:K4096 | 704.8", text)  # not a row of the user table

    def test_mods_against_builtin_flex_and_the_best_sdpa(self):
        key, shape = "mods_causal:f16:B1:H16:N16384:D128", {"B": 1, "H": 16, "N": 16384, "D": 128}
        flops = 4.0 * 128 * 16 * 16384 * 16385 / 2
        kiln_doc = {"schema": "kiln-bench/1", "tool": "kiln_bench", "device": DEVICE,
                    "options": {"suites": ["mods"], "quick": False},
                    "cases": [case("mods", "kiln", key, shape, 2.0, flops, op="mods_causal", causal=-1,
                                   note="mask_mod causal (top-left)"),
                              case("mods", "kiln_builtin", key, shape, 1.96, flops, op="mods_causal", causal=-1)]}
        peers = []
        for system, ms, ok in (("flex", 3.0, True), ("sdpa_cudnn", 1.9, False), ("sdpa_flash", 2.5, True)):
            rec = case("mods", system, key, shape, ms, flops, ok=ok, op="mods_causal", causal=-1)
            rec["available"] = True
            peers.append(rec)
        text = report.Report(report.merge_kiln([kiln_doc]), dict(peers_doc(), cases=peers)).markdown()
        section = text[text.index("## Attention mods"):]
        # kiln 2 ms: 0.98x the built-in (1.96 ms), 1.50x flex (3 ms); cuDNN failed its check, so the best SDPA
        # is flash (2.5 ms): 1.25x.
        self.assertIn("| mask_mod causal (top-left) | 549.8 | — | 561.0 | 0.98 | 366.5 | 1.50 | 439.8 (sdpa_flash) | "
                      "1.25 |", section)

    def test_failures_list_the_failed_variant(self):
        self.assertIn("kiln_fa2/no_swizzle", self.section("kiln cases without a time"))

    def test_broken_record_costs_one_section_only(self):
        kiln = copy.deepcopy(self.kiln)
        for c in kiln["cases"]:
            if c["suite"] == "model":
                c["extra"]["predicted_ms"] = "not a number"
        md = report.Report(kiln, peers_doc()).markdown()
        self.assertIn("this section could not be written", md)
        self.assertIn("## Compile latency", md)

    def test_main_writes_the_files(self):
        with tempfile.TemporaryDirectory() as tmp:
            paths = []
            bwd_peers_doc = dict(peers_doc(), cases=bwd_peers())
            for i, doc in enumerate((sweep_doc(), extra_doc(), peers_doc(), bwd_doc(), bwd_peers_doc)):
                paths.append(os.path.join(tmp, f"in{i}.json"))
                with open(paths[-1], "w") as f:
                    json.dump(doc, f)
            out = os.path.join(tmp, "out")
            # The backward measured apart from the forward (bench.sh --kiln-json / --peers-json): both joined.
            self.assertEqual(report.main(["--kiln", paths[0], "--kiln", paths[1], "--peers", paths[2],
                                          "--kiln", paths[3], "--peers", paths[4], "--out-dir", out]), 0)
            names = set(os.listdir(out))
            self.assertIn("nvidia-fake-gpu.md", names)
            self.assertIn("nvidia-fake-gpu.json", names)
            with open(os.path.join(out, "nvidia-fake-gpu.md")) as f:
                md = f.read()
            self.assertIn("| no | 4096 | 4 | 32 | 274.9 | 5.000 | 219.9 | 343.6 | — | 1.25 | 0.80 |", md)
            self.assertIn("| f16 | 64 | no | 4096 | 274.9 | 305.4 | 0.90 | 0.90 |", md)  # the forward peers too
            try:
                import matplotlib  # noqa: F401
            except ImportError:
                return
            self.assertIn("nvidia-fake-gpu-model.png", names)
            self.assertIn("nvidia-fake-gpu-attention-f16-d64.png", names)


if __name__ == "__main__":
    unittest.main()
