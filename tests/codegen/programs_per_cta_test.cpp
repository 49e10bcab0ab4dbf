// plan_programs_per_cta (codegen/plan_programs_per_cta.h): PROGRAMS_PER_CTA=2 runs two programs a CTA on a
// warp-specialised persistent grid, each on its own num_warps consumer warps, in its own copy of the shared memory
// and ring barriers, meeting at its own named barrier; the one producer fills the copies' rings in turn. Where the
// kernel is not warp-specialised or not persistent, ping-pong turns are asked for, the CTA would pass 1024
// threads, or the switch is off, the kernel is the PROGRAMS_PER_CTA=1 kernel and says why.
#include "codegen/codegen.h"
#include "codegen/planned_kernel.h"
#include "codegen/source_text.h"
#include "dsl/dsl.h"
#include "nvrtc_compile.h"

#include <gtest/gtest.h>

namespace kiln_test {
namespace {

const std::map<std::string, int64_t> kTwoPrograms = {{"BLOCK_M", 128},         {"BLOCK_N", 128},
                                                     {"BLOCK_K", 64},          {"MIN_BLOCKS_PER_SM", 1},
                                                     {"WARP_SPECIALIZE", 1},   {"PERSISTENT", 1},
                                                     {"PROGRAMS_PER_CTA", 2}};

Config matmul_config(std::map<std::string, int64_t> overrides, int warps = 4, int stages = 3) {
  const KernelDef& def = builtin_kernels().find("matmul");
  Config c = def.with_overrides(def.default_config(), overrides);
  c.num_warps = warps;
  c.num_stages = stages;
  return c;
}

GeneratedKernel matmul_at(const Config& c, const std::string& arch = "sm_90a", const CodegenOptions& options = {}) {
  return generate_cuda(builtin_kernels().find("matmul").build(c), Target::parse(arch), options);
}

std::map<std::string, int64_t> with(std::map<std::string, int64_t> m, const std::string& key, int64_t v) {
  m[key] = v;
  return m;
}

// The consumers' branch of a warp-specialised kernel's source, up to the kernel's end.
std::string consumers_branch(const std::string& source) {
  const size_t at = source.find("// the consumers: the program, without its copies");
  return at == std::string::npos ? std::string() : source.substr(at);
}

TEST(ProgramsPerCta, MatmulRunsTwoProgramsACtaEachOnItsOwnWarpsAndSharedMemory) {
  const Config c = matmul_config(kTwoPrograms);
  Planned p = plan_kernel(builtin_kernels().find("matmul").build(c), "sm_90a");
  ASSERT_TRUE(p.plan.programs.on()) << p.plan.programs.why_not;
  EXPECT_EQ(p.plan.programs.count, 2);
  // One copy: three stages of a 128 x 64 and a 64 x 128 f16 tile, rounded up to 1024 bytes.
  EXPECT_EQ(p.plan.programs.stride_bytes % 1024, 0);
  EXPECT_GE(p.plan.programs.stride_bytes, 3 * (128 * 64 + 64 * 128) * 2);
  EXPECT_LT(p.plan.programs.stride_bytes, p.plan.tiles_bytes + p.plan.scratch_bytes + 1024);
  EXPECT_EQ(p.plan.cta_threads(), 2 * 128 + 128);
  // The producer's released registers go to both programs' consumers: the pool balances.
  const WarpSpecialization& ws = p.plan.ws;
  ASSERT_GT(ws.consumer_registers, 0);
  EXPECT_LE(2 * 128 * ws.consumer_registers + 128 * ws.producer_registers, 384 * ws.entry_registers);

  const GeneratedKernel g = matmul_at(c);
  EXPECT_EQ(g.programs_per_cta, 2);
  EXPECT_TRUE(g.why_not_programs_per_cta.empty());
  EXPECT_EQ(g.threads, 384);
  EXPECT_EQ(g.shared_bytes, 2 * p.plan.programs.stride_bytes);
  EXPECT_NE(g.source.find("__launch_bounds__(384, 1)"), std::string::npos);
  // Copy c of the consumers: threads [128 c, 128 c + 128), its shared memory, its ring barriers, its named barrier.
  EXPECT_NE(g.source.find("const int kiln_copy = threadIdx.x < 256 ? threadIdx.x / 128 : 0;"), std::string::npos)
      << g.source;
  EXPECT_NE(g.source.find(fmt::format("kiln_smem = kiln_smem_all + kiln_copy * {};", p.plan.programs.stride_bytes)),
            std::string::npos);
  EXPECT_NE(g.source.find("unsigned long long kiln_full_all0[2][3];"), std::string::npos);
  EXPECT_NE(g.source.find("unsigned long long kiln_empty_all0[2][3];"), std::string::npos);
  EXPECT_NE(g.source.find("if (threadIdx.x >= 256) { // the producer warpgroup"), std::string::npos);
  // Each copy walks every other program of its CTA; the producer walks them all, each into its copy's ring.
  EXPECT_NE(g.source.find("kiln_program = blockIdx.x + kiln_copy * gridDim.x; kiln_program < kiln_programs; "
                          "kiln_program += 2 * gridDim.x"),
            std::string::npos);
  EXPECT_NE(g.source.find("kiln_full0 = kiln_full_all0[kiln_turn], kiln_empty0 = kiln_empty_all0[kiln_turn];"),
            std::string::npos);
  // Inside the consumers, a thread knows itself only by its index within its program.
  const std::string consumers = consumers_branch(g.source);
  ASSERT_FALSE(consumers.empty());
  EXPECT_EQ(occurrences(consumers, "threadIdx.x"), 0) << consumers;
  EXPECT_NE(g.lowered.find("2 programs a CTA"), std::string::npos) << g.lowered;
  if (std::string why; rt::nvrtc_available(&why))
    expect_compiles_without_spills(g, "sm_90a");
}

// Where a program meets its consumers at a barrier (a layout conversion through shared memory here: the
// accumulator stored through a column-major C), the barrier is its copy's, of its own threads.
TEST(ProgramsPerCta, EachCopyMeetsAtItsOwnNamedBarrier) {
  KernelBuilder kb("sum_rows_two_programs",
                   matmul_config(kTwoPrograms).set("BLOCK_M", 64).set("BLOCK_N", 64).set("BLOCK_K", 64));
  // a 64 x 64 tile product per program, its column sums (a cross-warp reduction) stored
  Value a = kb.arg_ptr("A", f16), b = kb.arg_ptr("B", f16), out = kb.arg_ptr("out", f32);
  Value M = kb.arg("M", i32), K = kb.arg("K", i32), stride_am = kb.arg("stride_am", i64);
  Value pid = program_id(0);
  Value a_ptr = make_block_ptr(a, {M, K}, {stride_am, 1}, {pid * 64, 0}, {64, 64}, {1, 0});
  Value b_ptr = make_block_ptr(b, {K, 64}, {64, 1}, {0, 0}, {64, 64}, {1, 0});
  Value acc = zeros({64, 64}, f32);
  for_range(0, K, 64, [&](Value) {
    acc = dot(load(a_ptr, BoundaryCheck{0, 1}), load(b_ptr, BoundaryCheck{0, 1}), acc);
    a_ptr = advance(a_ptr, {0, 64});
    b_ptr = advance(b_ptr, {64, 0});
  });
  store(out + pid * 64 + arange(0, 64), sum(acc, 0)); // column sums: across the warps
  const GeneratedKernel g = generate_cuda(kb.finish(), Target::parse("sm_90a"));
  ASSERT_EQ(g.programs_per_cta, 2) << g.why_not_programs_per_cta << "\n" << g.why_not_warp_specialized;
  const std::string consumers = consumers_branch(g.source);
  EXPECT_GT(occurrences(consumers, "kiln::named_barrier_sync(1 + kiln_copy, 128);"), 0) << consumers;
  EXPECT_EQ(occurrences(consumers, "kiln::named_barrier_sync(1, "), 0);
  EXPECT_EQ(occurrences(consumers, "__syncthreads"), 0);
  EXPECT_EQ(occurrences(consumers, "threadIdx.x"), 0) << consumers;
  expect_nvrtc_compiles(g, "sm_90a");
}

TEST(ProgramsPerCta, RefusedWithTheReasonWhereItCannotApply) {
  struct Case {
    std::map<std::string, int64_t> overrides;
    int warps;
    std::string arch;
    std::string why;
  };
  const Case cases[] = {
      {with(kTwoPrograms, "WARP_SPECIALIZE", 0), 4, "sm_90a", "the kernel is not warp-specialised"},
      {with(kTwoPrograms, "PERSISTENT", 0), 4, "sm_90a", "the grid is not persistent"},
      {kTwoPrograms, 4, "sm_80", "the kernel is not warp-specialised (the programs share a producer warpgroup; sm_80"},
      {with(with(kTwoPrograms, "BLOCK_M", 64), "BLOCK_N", 64), 16, "sm_90a",
       "2 programs of num_warps=16 and a producer warpgroup are 1152 threads; a CTA holds at most 1024"},
  };
  for (const Case& c : cases) {
    const GeneratedKernel g = matmul_at(matmul_config(c.overrides, c.warps), c.arch);
    SCOPED_TRACE(c.why);
    EXPECT_EQ(g.programs_per_cta, 1);
    EXPECT_NE(g.why_not_programs_per_cta.find(c.why), std::string::npos) << g.why_not_programs_per_cta;
    EXPECT_EQ(occurrences(g.source, "kiln_copy"), 0);
    EXPECT_NE(g.lowered.find("one program a CTA (PROGRAMS_PER_CTA>1): " + g.why_not_programs_per_cta),
              std::string::npos)
        << g.lowered;
  }
}

TEST(ProgramsPerCta, SwitchedOffTheKernelIsTheOneProgramKernel) {
  CodegenOptions off;
  off.programs_per_cta = false;
  const GeneratedKernel g = matmul_at(matmul_config(kTwoPrograms), "sm_90a", off);
  EXPECT_EQ(g.programs_per_cta, 1);
  EXPECT_EQ(g.why_not_programs_per_cta, "CodegenOptions::programs_per_cta is off");
  const GeneratedKernel one = matmul_at(matmul_config(with(kTwoPrograms, "PROGRAMS_PER_CTA", 1)));
  EXPECT_TRUE(one.why_not_programs_per_cta.empty());
  // The same code after the header (the config and the lowered plan, which says why).
  auto code = [](const GeneratedKernel& k) { return k.source.substr(k.source.find(k.lowered) + k.lowered.size()); };
  EXPECT_EQ(code(g), code(one));
  EXPECT_EQ(g.threads, one.threads);
  EXPECT_EQ(g.shared_bytes, one.shared_bytes);
}

} // namespace
} // namespace kiln_test
