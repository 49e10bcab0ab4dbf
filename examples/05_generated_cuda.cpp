// Tutorial 05: reading what kiln generates, and what a kernel should cost. generate_cuda turns a kernel into
// CUDA C++ for a target (no GPU needed: this is what NVRTC would compile), with a `lowered` summary of the
// code generator's decisions (register layouts, shared-memory tiles, cp.async pipelines, tensor cores).
// estimate_cost reads FLOPs and global bytes off the IR for a launch, and roofline turns them into a time
// bound for given peak rates. docs/tutorials/05_generated_cuda.md.
#include <kiln/kiln.h>

#include "kernels/matmul/matmul.h" // kiln's shipped matmul (the tutorial-03 kernel plus grouped ordering)

#include <cstdio>
#include <string>

using namespace kiln;

Kernel build_add(int64_t block) {
  KernelBuilder kb("add", Config().set("BLOCK", block));
  Value x = kb.arg_ptr("x", f32), y = kb.arg_ptr("y", f32), out = kb.arg_ptr("out", f32);
  Value n = kb.arg("n", i32);
  Value offs = program_id(0) * block + arange(0, block); // (BLOCK,) i32
  Value mask = offs < n;
  store(out + offs, load(x + offs, mask, 0.0f) + load(y + offs, mask, 0.0f), mask);
  return kb.finish();
}

// The generated source is the device prelude (kiln's small tile library) followed by the kernel; the part
// worth reading is the kernel, from its `extern "C" __global__` on.
std::string kernel_part(const std::string& source) {
  size_t at = source.find("extern \"C\" __global__");
  return at == std::string::npos ? source : source.substr(at);
}

int main() {
  const Target target = Target::parse("sm_90a"); // what to generate for; a GPU is not needed
  bool ok = true;

  // ---- 1. vector add: the CUDA for a masked, vectorisable elementwise kernel ----
  const int64_t BLOCK = 1024, n = int64_t{1} << 24;
  Kernel add = build_add(BLOCK);
  GeneratedKernel g = generate_cuda(add, target);
  std::printf(
      "== add: %d threads, %d bytes of dynamic shared memory\n-- lowered:\n%s\n-- CUDA (kernel part):\n%s\n",
      g.threads, g.shared_bytes, g.lowered.c_str(), kernel_part(g.source).c_str());

  // ---- 2. matmul: the lowered summary says where tiles live and how loads are pipelined ----
  Config mm = matmul_def().default_config(); // f16, 128x128x32 tiles, 8 warps, 3 stages
  GeneratedKernel gm = generate_cuda(build_matmul(mm), target);
  std::printf("== matmul %s\n-- lowered:\n%s\n", mm.str().c_str(), gm.lowered.c_str());

  // ---- 3. the performance model: counts from the IR, checked against counting by hand ----
  // Peak rates are inputs, not read from a table: here NVIDIA's published H100 SXM figures (989 TFLOP/s dense
  // f16 tensor core, 3.35 TB/s HBM3). Pass your own device's.
  const double peak_tflops = 989.0, peak_gbps = 3350.0;

  CostEstimate add_cost =
      estimate_cost(add, Grid{n / BLOCK, 1, 1}, ScalarArgs{{"n", static_cast<double>(n)}});
  const double add_bytes_by_hand = 3.0 * 4 * n; // read x and y, write out, 4 bytes each
  Roofline add_roof = roofline(add_cost, peak_tflops, peak_gbps);
  std::printf(
      "== model: add, n = 2^24\n  vector FLOPs %.3e (by hand: n = %.3e), bytes %.3e (by hand: 12n = %.3e)\n"
      "  roofline: %s-bound, %.1f us\n",
      add_cost.total.vector_flops, static_cast<double>(n), add_cost.total.bytes(), add_bytes_by_hand,
      add_roof.compute_bound() ? "compute" : "memory", add_roof.time_s() * 1e6);
  ok = ok && add_cost.total.bytes() == add_bytes_by_hand &&
       add_cost.total.vector_flops == static_cast<double>(n);

  const int64_t M = 4096, N = 4096, K = 4096;
  const SizeArgs sizes{{"M", M}, {"N", N}, {"K", K}};
  CostEstimate mm_cost =
      estimate_cost(build_matmul(mm), matmul_def().grid(mm, sizes), ScalarArgs{{"M", M}, {"N", N}, {"K", K}});
  const double mm_flops_by_hand = 2.0 * M * N * K;
  // Every program reads its A row panel (BM x K) and B column panel (K x BN) once, and writes its C tile:
  // with no cache modelled, A is read N/BN times and B M/BM times.
  const int64_t BM = mm.get("BLOCK_M"), BN = mm.get("BLOCK_N");
  const double mm_bytes_by_hand = 2.0 * (static_cast<double>(M) * K * (N / BN) +
                                         static_cast<double>(K) * N * (M / BM) + static_cast<double>(M) * N);
  Roofline mm_roof = roofline(mm_cost, peak_tflops, peak_gbps);
  std::printf(
      "== model: matmul f16, M = N = K = 4096, %s\n"
      "  matrix FLOPs %.4e (by hand: 2MNK = %.4e), bytes %.4e (by hand: %.4e)\n"
      "  intensity %.0f FLOP/byte, ridge %.0f FLOP/byte: %s-bound, %.1f us (%.0f TFLOP/s at the roofline)\n",
      mm.str().c_str(), mm_cost.total.matrix_flops, mm_flops_by_hand, mm_cost.total.bytes(), mm_bytes_by_hand,
      mm_cost.intensity(), mm_roof.ridge_intensity(), mm_roof.compute_bound() ? "compute" : "memory",
      mm_roof.time_s() * 1e6, mm_cost.total.matrix_flops / mm_roof.time_s() / 1e12);
  ok = ok && mm_cost.total.matrix_flops == mm_flops_by_hand && mm_cost.total.bytes() == mm_bytes_by_hand;
  std::printf("%s\n",
              ok ? "model agrees with the hand counts: ok" : "model disagrees with the hand counts: FAILED");
  return ok ? 0 : 1;
}
