// Launch plans read off a kernel's IR: scalar values given or derived as dense block-pointer strides, and the
// element range every pointer reaches. The strongest check is running the kernel in the interpreter on
// buffers of exactly the planned sizes: the interpreter rejects any access outside a buffer.
#include "analysis/launch_plan.h"
#include "dsl/dsl.h"
#include "kernels/attention/attention_problem.h"
#include "kernels/attention/fa1_fwd.h"
#include "kernels/attention/fa2_fwd.h"
#include "kernels/matmul/matmul.h"
#include "kernels/softmax/softmax.h"
#include "kernels/vector_add/vector_add.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace kiln {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Buffers of the plan's sizes (random contents) and the interpreter's arguments for them. Every plan here
// has lo == 0: the interpreter takes a buffer's first element as the address.
struct PlannedRun {
  std::vector<HostBuffer> buffers;
  std::vector<InterpArg> args;
};

PlannedRun planned_args(const LaunchPlan& plan, uint64_t seed) {
  PlannedRun r;
  r.buffers.reserve(plan.args.size());
  for (const PlannedArg& a : plan.args) {
    if (!a.is_buffer())
      continue;
    EXPECT_EQ(a.lo, 0) << a.name;
    r.buffers.push_back(random_buffer(a, seed++));
  }
  size_t next = 0;
  for (const PlannedArg& a : plan.args) {
    if (a.is_buffer())
      r.args.push_back(InterpArg::ptr(r.buffers[next++]));
    else if (a.kind == PlannedArg::Kind::Int)
      r.args.push_back(InterpArg::of_int(static_cast<int64_t>(a.value)));
    else
      r.args.push_back(InterpArg::of_float(a.value));
  }
  return r;
}

TEST(LaunchPlan, VectorAddReachesEveryProgramsBlock) {
  Config c = vector_add_def().default_config();
  c.set("BLOCK", 256);
  const Kernel k = build_vector_add(c);
  const Grid grid = vector_add_def().grid(c, {{"n", 1000}});
  const LaunchPlan plan = plan_launch(k, grid, {{"n", 1000}});
  ASSERT_EQ(plan.args.size(), 4u);
  for (const char* name : {"x", "y", "out"}) {
    const PlannedArg& a = plan.arg(name);
    EXPECT_TRUE(a.is_buffer());
    EXPECT_EQ(a.dtype, DType::f32);
    // Masks are not analysed: 4 programs of 256 reach offsets [0, 1024), of which the first 1000 are used.
    EXPECT_EQ(a.lo, 0);
    EXPECT_EQ(a.hi, 1024) << name;
  }
  EXPECT_TRUE(plan.arg("x").read && !plan.arg("x").written);
  EXPECT_TRUE(plan.arg("out").written && !plan.arg("out").read);
  EXPECT_EQ(plan.arg("n").value, 1000);
  EXPECT_EQ(plan.arg("n").origin, "given");
  EXPECT_EQ(plan.bytes_read(), 2 * 1024 * 4);
  EXPECT_EQ(plan.bytes_written(), 1024 * 4);

  PlannedRun run = planned_args(plan, 7);
  const HostBuffer x = run.buffers[0], y = run.buffers[1];
  for (int64_t i = 0; i < run.buffers[2].numel(); ++i)
    run.buffers[2].set(i, std::nan(""));
  interpret(k, grid, run.args);
  for (int64_t i = 0; i < 1000; ++i)
    ASSERT_EQ(run.buffers[2].get(i), static_cast<float>(x.get(i) + y.get(i))) << i;
}

TEST(LaunchPlan, MatmulStridesAreDerivedFromTheBlockPointers) {
  for (const bool a_col_major : {false, true}) {
    Config c = matmul_def().default_config();
    c.set("BLOCK_M", 16)
        .set("BLOCK_N", 16)
        .set("BLOCK_K", 16)
        .set("DTYPE", 2)
        .set("A_COL_MAJOR", a_col_major);
    const int64_t M = 40, N = 24, K = 20;
    const Kernel k = build_matmul(c);
    const Grid grid = matmul_def().grid(c, {{"M", M}, {"N", N}, {"K", K}});
    const LaunchPlan plan = plan_launch(k, grid, {{"M", M}, {"N", N}, {"K", K}});
    EXPECT_EQ(plan.arg("stride_am").value, a_col_major ? 1 : K);
    EXPECT_EQ(plan.arg("stride_ak").value, a_col_major ? M : 1);
    EXPECT_EQ(plan.arg("stride_bk").value, N);
    EXPECT_EQ(plan.arg("stride_bn").value, 1);
    EXPECT_EQ(plan.arg("stride_cm").value, N);
    EXPECT_EQ(plan.arg("stride_cn").value, 1);
    EXPECT_NE(plan.arg("stride_am").origin.find("dense stride"), std::string::npos)
        << plan.arg("stride_am").origin;
    EXPECT_NE(plan.arg("stride_am").origin.find("'A'"), std::string::npos) << plan.arg("stride_am").origin;
    // A block pointer reaches the tensor it declares, exactly.
    EXPECT_EQ(plan.arg("A").elements(), M * K);
    EXPECT_EQ(plan.arg("B").elements(), K * N);
    EXPECT_EQ(plan.arg("C").elements(), M * N);
    EXPECT_TRUE(plan.arg("A").read && !plan.arg("A").written);
    EXPECT_TRUE(plan.arg("C").written && !plan.arg("C").read);

    PlannedRun run = planned_args(plan, 11);
    HostBuffer& a = run.buffers[0];
    HostBuffer& b = run.buffers[1];
    HostBuffer& out = run.buffers[2];
    for (int64_t i = 0; i < out.numel(); ++i)
      out.set(i, std::nan(""));
    interpret(k, grid, run.args);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double want = 0;
        for (int64_t kk = 0; kk < K; ++kk)
          want += a.get(a_col_major ? kk * M + m : m * K + kk) * b.get(kk * N + n);
        ASSERT_NEAR(out.get(m * N + n), want, 1e-4) << m << "," << n;
      }
  }
}

TEST(LaunchPlan, StridesOfPointerTensorsMustBeGiven) {
  Config c = softmax_def().default_config();
  c.set("BLOCK", 128);
  const Kernel k = build_softmax(c);
  const Grid grid = softmax_def().grid(c, {{"n_rows", 6}, {"n_cols", 100}});
  const std::string msg = error_of([&] { plan_launch(k, grid, {{"n_rows", 6}, {"n_cols", 100}}); });
  EXPECT_NE(
      msg.find("kernel 'softmax' needs a value for its integer arguments in_row_stride, out_row_stride"),
      std::string::npos)
      << msg;
  EXPECT_NE(msg.find("NAME=VALUE"), std::string::npos) << msg;

  const LaunchPlan plan =
      plan_launch(k, grid, {{"n_rows", 6}, {"n_cols", 100}, {"in_row_stride", 112}, {"out_row_stride", 100}});
  // Rows at 112 apart, each reaching BLOCK = 128 columns (the mask keeps 100): 5 * 112 + 128.
  EXPECT_EQ(plan.arg("in").elements(), 5 * 112 + 128);
  EXPECT_EQ(plan.arg("out").elements(), 5 * 100 + 128);
  EXPECT_TRUE(plan.arg("in").read && !plan.arg("in").written);
  EXPECT_TRUE(plan.arg("out").written && !plan.arg("out").read);
  PlannedRun run = planned_args(plan, 3);
  EXPECT_NO_THROW(interpret(k, grid, run.args));
}

TEST(LaunchPlan, AttentionNeedsItsHeadStridesAndThenReachesWholeTensors) {
  AttentionProblem p;
  p.B = 2, p.H = 4, p.H_KV = 2, p.N_Q = 100, p.N_K = 70, p.D = 64;
  Config c = default_fa2_config(p);
  c.set("BLOCK_M", 32).set("BLOCK_N", 32);
  const Kernel k = build_fa2_fwd(c);
  const Grid grid = fa2_fwd_def().grid(c, attention_size_args(p));
  ArgValues values;
  for (const auto& [name, v] : attention_size_args(p))
    values[name] = static_cast<double>(v);
  const std::string msg = error_of([&] { plan_launch(k, grid, values); });
  EXPECT_NE(msg.find("stride_qb, stride_qh, stride_kb"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("stride_qn"), std::string::npos) << "a block pointer's stride is derived: " << msg;

  const AttentionStrides s = attention_strides(p);
  for (auto [t, name] : {std::pair{&s.q, "q"}, {&s.k, "k"}, {&s.v, "v"}, {&s.o, "o"}}) {
    values[fmt::format("stride_{}b", name)] = static_cast<double>(t->b);
    values[fmt::format("stride_{}h", name)] = static_cast<double>(t->h);
  }
  const LaunchPlan plan = plan_launch(k, grid, values);
  EXPECT_EQ(plan.arg("stride_qn").value, p.D);
  EXPECT_EQ(plan.arg("stride_kn").value, p.D);
  EXPECT_EQ(plan.arg("Q").elements(), p.B * p.H * p.N_Q * p.D);
  EXPECT_EQ(plan.arg("O").elements(), p.B * p.H * p.N_Q * p.D);
  EXPECT_EQ(plan.arg("K").elements(), p.B * p.H_KV * p.N_K * p.D);
  EXPECT_EQ(plan.arg("V").elements(), p.B * p.H_KV * p.N_K * p.D);
  // LSE rows are masked to N_Q; the last program's tile reaches 4 * 32 rows.
  EXPECT_EQ(plan.arg("LSE").elements(), (p.B * p.H - 1) * p.N_Q + 4 * 32);
  EXPECT_EQ(plan.arg("sm_scale").origin, "default");
  for (const char* in : {"Q", "K", "V"})
    EXPECT_TRUE(plan.arg(in).read && !plan.arg(in).written) << in;
  for (const char* out : {"O", "LSE"})
    EXPECT_TRUE(plan.arg(out).written && !plan.arg(out).read) << out;
  PlannedRun run = planned_args(plan, 5);
  EXPECT_NO_THROW(interpret(k, grid, run.args));
}

// FA1 adds f32 scratch (OACC, L, M) that it both reads and writes: planned like any other buffer.
TEST(LaunchPlan, Fa1ScratchIsReadAndWritten) {
  AttentionProblem p;
  p.B = 1, p.H = 2, p.H_KV = 1, p.N_Q = 40, p.N_K = 56, p.D = 32, p.causal = 2;
  Config c = default_fa1_config(p);
  c.set("BLOCK_M", 16).set("BLOCK_N", 16);
  const Kernel k = build_fa1_fwd(c);
  const Grid grid = fa1_fwd_def().grid(c, attention_size_args(p));
  ArgValues values;
  for (const auto& [name, v] : attention_size_args(p))
    values[name] = static_cast<double>(v);
  const AttentionStrides s = attention_strides(p);
  for (auto [t, name] : {std::pair{&s.q, "q"}, {&s.k, "k"}, {&s.v, "v"}, {&s.o, "o"}}) {
    values[fmt::format("stride_{}b", name)] = static_cast<double>(t->b);
    values[fmt::format("stride_{}h", name)] = static_cast<double>(t->h);
  }
  const LaunchPlan plan = plan_launch(k, grid, values);
  for (const char* scratch : {"OACC", "L", "M"}) {
    EXPECT_TRUE(plan.arg(scratch).read && plan.arg(scratch).written) << scratch;
    EXPECT_GE(plan.arg(scratch).elements(), p.B * p.H * p.N_Q) << scratch;
  }
  PlannedRun run = planned_args(plan, 13);
  EXPECT_NO_THROW(interpret(k, grid, run.args));
}

// Pointers carried through a loop are widened by their step per trip, times the trip count.
TEST(LaunchPlan, LoopCarriedPointersAreBoundedByTheirStep) {
  KernelBuilder kb("row_sums");
  Value x = kb.arg_ptr("x", f32), out = kb.arg_ptr("out", f32), chunks = kb.arg("chunks", i32);
  Value ptrs = x + (program_id(0) * 8) * chunks + arange(0, 8); // (8,) ptr<f32>
  Value acc = zeros({8}, f32);
  for_range(0, chunks, 1, [&](Value) {
    acc = acc + load(ptrs);
    ptrs = ptrs + 8;
  });
  store(out + program_id(0) * 8 + arange(0, 8), acc);
  const Kernel k = kb.finish();
  const Grid grid{3, 1, 1};
  const LaunchPlan plan = plan_launch(k, grid, {{"chunks", 5}});
  // Program 2 starts at 2 * 8 * 5 = 80 and reads 5 chunks of 8; the widening may reach one step further.
  EXPECT_GE(plan.arg("x").hi, 3 * 8 * 5);
  EXPECT_LE(plan.arg("x").hi, 3 * 8 * 5 + 8);
  EXPECT_EQ(plan.arg("out").hi, 24);
  PlannedRun run = planned_args(plan, 9);
  EXPECT_NO_THROW(interpret(k, grid, run.args));
}

TEST(LaunchPlan, AddressesFromLoadedDataAreAnErrorNamingTheArgument) {
  KernelBuilder kb("gather");
  Value idx = kb.arg_ptr("idx", i32), src = kb.arg_ptr("src", f32), out = kb.arg_ptr("out", f32);
  Value i = load(idx + arange(0, 16), arange(0, 16) < 16); // (16,) i32, data
  store(out + arange(0, 16), load(src + i, i >= 0), arange(0, 16) < 16);
  const Kernel k = kb.finish();
  const std::string msg = error_of([&] { plan_launch(k, Grid{1, 1, 1}, {}); });
  EXPECT_NE(msg.find("cannot bound the elements of 'src'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("launch_plan_test.cpp"), std::string::npos) << "names the access's line: " << msg;
}

TEST(LaunchPlan, GivenValuesAreChecked) {
  Config c = vector_add_def().default_config();
  const Kernel k = build_vector_add(c);
  std::string msg = error_of([&] { plan_launch(k, Grid{1, 1, 1}, {{"n", 10}, {"m", 3}}); });
  EXPECT_NE(msg.find("has no scalar argument 'm'; its scalar arguments are: n"), std::string::npos) << msg;
  msg = error_of([&] { plan_launch(k, Grid{1, 1, 1}, {{"n", 2.5}}); });
  EXPECT_NE(msg.find("argument 'n' is i32"), std::string::npos) << msg;
  msg = error_of([&] { plan_launch(k, Grid{1, 1, 1}, {{"n", 1e12}}); });
  EXPECT_NE(msg.find("takes integers in [-2147483648, 2147483647]; got 1000000000000"), std::string::npos)
      << msg;
  msg = error_of([&] { plan_launch(k, Grid{1, 1, 1}, {}); });
  EXPECT_NE(msg.find("needs a value for its integer argument n:"), std::string::npos) << msg;
}

TEST(LaunchPlan, MergedPlansCoverEveryConfig) {
  std::vector<LaunchPlan> plans;
  for (int64_t block : {256, 4096}) {
    Config c = vector_add_def().default_config();
    c.set("BLOCK", block);
    plans.push_back(plan_launch(build_vector_add(c), vector_add_def().grid(c, {{"n", 5000}}), {{"n", 5000}}));
  }
  EXPECT_EQ(plans[0].arg("x").hi, 5120);
  EXPECT_EQ(plans[1].arg("x").hi, 8192);
  const LaunchPlan merged = merge_plans(plans);
  EXPECT_EQ(merged.arg("x").hi, 8192);
  EXPECT_EQ(merged.arg("n").value, 5000);
}

TEST(LaunchPlan, RandomBuffersAreNotAllZeroAndStayInRange) {
  PlannedArg f;
  f.kind = PlannedArg::Kind::Buffer;
  f.name = "f";
  f.dtype = DType::f16;
  f.hi = 1000;
  const HostBuffer b = random_buffer(f, 1);
  ASSERT_EQ(b.numel(), 1000);
  int nonzero = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    EXPECT_LE(std::fabs(b.get(i)), 1.0);
    nonzero += b.get(i) != 0;
  }
  EXPECT_GT(nonzero, 900);
  EXPECT_NE(random_buffer(f, 2).bytes, b.bytes) << "seeds differ";
  PlannedArg n = f;
  n.dtype = DType::i32;
  const HostBuffer ints = random_buffer(n, 3);
  int64_t lo = 100, hi = -1;
  for (int64_t i = 0; i < ints.numel(); ++i) {
    lo = std::min(lo, ints.get_int(i));
    hi = std::max(hi, ints.get_int(i));
  }
  EXPECT_EQ(lo, 0);
  EXPECT_EQ(hi, 15);
}

} // namespace
} // namespace kiln
