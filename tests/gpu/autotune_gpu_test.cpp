// The autotuner on a GPU, end to end: FA2 forward tuned over its whole config space, the tuning runs kept off
// the caller's output buffers, the winner checked against the double-precision reference, and a second tuner
// (a new process, in effect: fresh compile cache and tuning cache objects over the same directory) finding
// the result on disk without compiling any config, loading only the winner.
#include "temp_dir.h"
#include "gpu/gpu_skip.h"
#include "jit/tuned_kernel.h"
#include "kernels/attention/attention_problem.h"
#include "kernels/attention/fa2_fwd.h"
#include "kernels/compare.h"
#include "runtime/cuda_driver.h"

#include <gtest/gtest.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>

#include <cmath>
#include <cstring>

using namespace kiln;

namespace {

using kiln::testing_support::TempDir;



// The interpreter's argument list on the device: buffers copied up, scalars typed by the kernel's params.
struct DeviceArgs {
  std::vector<rt::DeviceBuffer> buffers; // in argument order, one per pointer argument
  std::vector<size_t> buffer_arg;        // the argument index of each buffer
  std::vector<LaunchArg> args;
};

DeviceArgs to_device(const Kernel& k, const std::vector<InterpArg>& interp) {
  DeviceArgs d;
  d.buffers.reserve(interp.size());
  for (size_t i = 0; i < interp.size(); ++i) {
    const Type& t = k.type(k.params.at(i).value);
    if (t.is_pointer()) {
      d.buffers.push_back(rt::DeviceBuffer(interp[i].buffer->bytes.size()));
      d.buffers.back().copy_from_host(interp[i].buffer->bytes.data(), interp[i].buffer->bytes.size());
      d.buffer_arg.push_back(i);
      d.args.push_back(LaunchArg::pointer(d.buffers.back()));
    } else if (is_float(t.elem)) {
      d.args.push_back(LaunchArg::of_float(interp[i].f));
    } else {
      d.args.push_back(LaunchArg::of_int(interp[i].i));
    }
  }
  return d;
}

TEST(GpuAutotune, Fa2ForwardTunedWinnerIsCorrectAndRememberedAcrossTuners) {
  KILN_REQUIRE_GPU();
  AttentionProblem p;
  p.B = 1, p.H = 4, p.H_KV = 4, p.N_Q = 1024, p.N_K = 1024, p.D = 64, p.dtype = DType::f16;
  const KernelDef def = fa2_fwd_def();
  const Config base = default_fa2_config(p);
  const SizeArgs sizes = attention_size_args(p);

  AttentionInputs in = make_inputs(p, 4242, 2.0);
  AttentionOutputs out = make_outputs(p); // NaN-poisoned
  std::vector<InterpArg> interp = fa2_interp_args(p, in, out);
  DeviceArgs dev = to_device(def.build(base), interp);
  rt::DeviceBuffer& o_dev = dev.buffers[3]; // Q, K, V, O, LSE
  rt::DeviceBuffer& lse_dev = dev.buffers[4];
  const std::vector<OutputArg> outputs = {{dev.buffer_arg[3], o_dev.bytes()},
                                          {dev.buffer_arg[4], lse_dev.bytes()}};

  TempDir dir{"kiln-autotune-gpu-test"};
  TuneOptions options;
  options.mode = rt::AutotuneMode::On;
  options.flops = 4.0 * p.B * p.H * p.N_Q * p.N_K * p.D; // two GEMMs
  options.timing.warmup = 2;
  options.timing.reps = 10;

  rt::CompileCache cache(dir.path());
  rt::AutotunerOptions quiet;
  quiet.progress_after_s = -1;
  KernelTuner tuner(cache, quiet);
  TunedLaunch tuned = tuner.select(def, base, sizes, dev.args, outputs, options);
  const rt::TuneResult& result = *tuned.result;
  ASSERT_EQ(result.source, rt::TuneSource::Tuned);
  ASSERT_TRUE(result.best.has_value());
  EXPECT_EQ(result.table.size(), def.config_space().size());
  std::cout << rt::format_tune_table(result.table, tuned.config.str());
  // The winner is the fastest of the finalists, each scored by the median of its timings; a candidate timed once
  // (outside the finalists' margin or count) keeps its first pass, which may be lower than that median.
  int ok = 0;
  for (const rt::CandidateResult& r : result.table) {
    if (r.status != rt::CandidateStatus::Ok)
      continue;
    ++ok;
    EXPECT_GE(r.samples, 1) << r.id;
    if (r.samples > 1) {
      EXPECT_GE(r.ms, result.best_ms) << r.id;
      EXPECT_GT(result.table[*result.best].samples, 1) << "the winner is one of the finalists";
    }
    EXPECT_GT(r.tflops, 0) << r.id;
  }
  EXPECT_GT(ok, 0);
  EXPECT_EQ(tuned.config.str(), result.table[*result.best].id);
  EXPECT_EQ(tuned.config.get("HEAD_DIM"), 64);
  size_t unpruned = 0;
  for (const rt::CandidateResult& r : result.table)
    unpruned += r.status != rt::CandidateStatus::Pruned;
  EXPECT_GE(cache.stats().misses, static_cast<uint64_t>(ok));
  EXPECT_LE(cache.stats().misses, unpruned) << "a pruned config was compiled, or one was compiled twice";

  // Tuning wrote scratch copies only: the caller's outputs still hold their NaN poison.
  {
    AttentionOutputs untouched = make_outputs(p);
    o_dev.copy_to_host(out.o.bytes.data(), out.o.bytes.size());
    lse_dev.copy_to_host(out.lse.bytes.data(), out.lse.bytes.size());
    EXPECT_EQ(out.o.bytes, untouched.o.bytes) << "tuning wrote the caller's O";
    EXPECT_EQ(out.lse.bytes, untouched.lse.bytes) << "tuning wrote the caller's LSE";
  }

  // The winner, launched on the caller's buffers, matches the reference.
  tuned.kernel->launch(tuned.grid, dev.args);
  o_dev.copy_to_host(out.o.bytes.data(), out.o.bytes.size());
  lse_dev.copy_to_host(out.lse.bytes.data(), out.lse.bytes.size());
  AttentionResult got = gather_outputs(p, out);
  AttentionResult ref = reference(p, in);
  Comparison o = compare_to_reference(got.o, ref.o), lse = compare_to_reference(got.lse, ref.lse);
  EXPECT_TRUE(o.ok(tolerance(p.dtype))) << "O " << o.str() << " with " << tuned.config.str();
  EXPECT_TRUE(lse.ok(tolerance(p.dtype))) << "LSE " << lse.str() << " with " << tuned.config.str();

  // The same tuner again, sizes in the same bucket: no tuning, no compiling, and no pick stored (what callers
  // keep from the picks, as the attention backward's plans, stays valid).
  const uint64_t misses = cache.stats().misses;
  const uint64_t picks_version = tuner.picks_version();
  EXPECT_GT(picks_version, 0u) << "the tuning stored its pick";
  AttentionProblem near = p;
  near.N_Q = near.N_K = 1000;
  TunedLaunch again =
      tuner.select(def, default_fa2_config(near), attention_size_args(near), dev.args, outputs, options);
  EXPECT_EQ(again.config, tuned.config);
  EXPECT_EQ(again.grid[0], (1000 + tuned.config.get("BLOCK_M") - 1) / tuned.config.get("BLOCK_M"));
  EXPECT_EQ(cache.stats().misses, misses);
  EXPECT_EQ(tuner.picks_version(), picks_version);

  // A second tuner with fresh caches over the same directory: the pick comes from disk and only the winner
  // is fetched from the compile cache; no config is compiled.
  rt::CompileCache cache2(dir.path());
  KernelTuner tuner2(cache2, quiet);
  TunedLaunch remembered = tuner2.select(def, base, sizes, dev.args, outputs, options);
  EXPECT_EQ(remembered.result->source, rt::TuneSource::Disk);
  EXPECT_EQ(remembered.config, tuned.config);
  EXPECT_EQ(remembered.result->table.size(), result.table.size());
  EXPECT_EQ(cache2.stats().misses, 0u);
  EXPECT_EQ(cache2.stats().disk_hits, 1u);
  EXPECT_EQ(tuner2.autotuner().cache().stats().disk_hits, 1u);

  // KILN_AUTOTUNE=off semantics: the base config itself.
  TuneOptions off = options;
  off.mode = rt::AutotuneMode::Off;
  TunedLaunch by_default = tuner2.select(def, base, sizes, dev.args, outputs, off);
  EXPECT_EQ(by_default.result->source, rt::TuneSource::Default);
  EXPECT_EQ(by_default.config, base);

  // KILN_AUTOTUNE=cached with nothing remembered (an empty directory): the default, loaded once; a repeated call
  // (as a CUDA-graph capture makes) finds it in the tuner without generating code or asking the compile cache.
  TempDir empty("kiln-autotune-cached");
  rt::CompileCache cache3(empty.path());
  KernelTuner tuner3(cache3, quiet);
  TuneOptions cached = options;
  cached.mode = rt::AutotuneMode::Cached;
  TunedLaunch first = tuner3.select(def, base, sizes, dev.args, outputs, cached);
  EXPECT_EQ(first.result->source, rt::TuneSource::Default);
  const uint64_t cached_version = tuner3.picks_version();
  const auto lookups = cache3.stats().misses + cache3.stats().disk_hits + cache3.stats().memory_hits;
  TunedLaunch second = tuner3.select(def, base, sizes, dev.args, outputs, cached);
  EXPECT_EQ(second.kernel.get(), first.kernel.get());
  EXPECT_EQ(cache3.stats().misses + cache3.stats().disk_hits + cache3.stats().memory_hits, lookups);
  EXPECT_EQ(tuner3.picks_version(), cached_version);
  EXPECT_EQ(second.result.get(), first.result.get()) << "the remembered result is shared, not copied";
}

} // namespace
