// The verifier: every shipped kernel verifies and prints; IR corrupted by hand (as a broken pass
// would) raises InternalError, never a user Error.
#include "dsl/dsl.h"
#include "dsl/printer.h"
#include "dsl/verifier.h"
#include "kernels/builtin.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

// Verify, expecting an InternalError (a kiln bug), and return its message.
std::string internal_error_of(const Kernel& k) {
  try {
    verify(k);
  } catch (const InternalError& e) {
    return e.what();
  } catch (const Error& e) {
    ADD_FAILURE() << "corrupted IR must raise InternalError, got a user Error: " << e.what();
    return "";
  }
  ADD_FAILURE() << "verify accepted corrupted IR:\n" << print_kernel(k);
  return "";
}

// A kernel with a loop carrying `acc` (f32) and a block pointer, and an if inside the loop.
Kernel loop_kernel() {
  KernelBuilder kb("loop");
  Value p = kb.arg_ptr("p", f32), n = kb.arg("n", i32);
  Value bp = make_block_ptr(p, {n}, {1}, {0}, {16}, {0});
  Value acc = zeros({16}, f32).named("acc");
  Value scale = full({16}, 2.0, f16).named("scale");
  for_range(0, n, 16, [&](Value i) {
    acc = acc + load(bp, {0});
    if_(i > 32, [&] { acc = acc * 0.5f; });
    bp = advance(bp, {16});
  });
  store(p + arange(0, 16), acc + scale.to(f32));
  return kb.finish();
}

Op* first_op(Region& r, OpKind kind) {
  for (auto& op : r.ops) {
    if (op->kind == kind)
      return op.get();
    for (Region& sub : op->regions)
      if (Op* found = first_op(sub, kind))
        return found;
  }
  return nullptr;
}

TEST(Verifier, EveryRegisteredKernelVerifiesAndPrints) {
  const KernelRegistry& reg = builtin_kernels();
  ASSERT_FALSE(reg.all().empty());
  for (const KernelDef& def : reg.all()) {
    SCOPED_TRACE(def.name);
    Kernel k = def.build(def.default_config());
    EXPECT_NO_THROW(verify(k));
    std::string ir = print_kernel(k);
    EXPECT_NE(ir.find("kernel @"), std::string::npos);
    EXPECT_FALSE(k.body.ops.empty());
    EXPECT_EQ(k.config, def.default_config()) << "the kernel records the config it was built with";
  }
}

TEST(Verifier, EveryConfigOfTheSpaceBuildsOrRejectsCleanly) {
  // A config space may contain configs a kernel refuses (static_check); that must be a user Error,
  // never an InternalError or a crash. Most must build.
  for (const KernelDef& def : builtin_kernels().all()) {
    SCOPED_TRACE(def.name);
    if (!def.config_space)
      continue;
    int built = 0, refused = 0;
    for (const Config& c : def.config_space()) {
      Config full = def.with_overrides(def.default_config(), {});
      for (const auto& [name, v] : c.params)
        full.params[name] = v;
      full.num_warps = c.num_warps;
      full.num_stages = c.num_stages;
      try {
        Kernel k = def.build(full);
        verify(k);
        ++built;
      } catch (const Error&) {
        ++refused;
      }
    }
    EXPECT_GT(built, 0) << refused << " configs refused, none built";
  }
}

TEST(Verifier, BuilderKernelsWithControlFlowVerify) {
  Kernel k = loop_kernel();
  EXPECT_NO_THROW(verify(k));
  Op* loop = first_op(k.body, OpKind::For);
  ASSERT_NE(loop, nullptr);
  EXPECT_EQ(loop->results.size(), 2u) << "acc and the block pointer are carried; scale is not\n" << print_kernel(k);
}

TEST(Verifier, UseBeforeDefinitionIsInternal) {
  Kernel k = loop_kernel();
  std::swap(k.body.ops[1], k.body.ops[2]); // an op now uses a value defined after it
  std::string msg = internal_error_of(k);
  EXPECT_NE(msg.find("before it is defined"), std::string::npos) << msg;
}

TEST(Verifier, YieldOfWrongTypeIsInternal) {
  Kernel k = loop_kernel();
  Op* loop = first_op(k.body, OpKind::For);
  ASSERT_NE(loop, nullptr);
  ValueId f16_tile = kNoValue;
  for (const auto& op : k.body.ops)
    if (op->kind == OpKind::Constant && k.type(op->result()) == Type::tensor(f16, {16}))
      f16_tile = op->result();
  ASSERT_NE(f16_tile, kNoValue);
  Op* yield = loop->regions[0].ops.back().get();
  ASSERT_EQ(yield->kind, OpKind::Yield);
  for (ValueId& v : yield->operands)
    if (k.type(v) == Type::tensor(f32, {16}))
      v = f16_tile; // the carried f32 acc now yields an f16 tile
  std::string msg = internal_error_of(k);
  EXPECT_NE(msg.find("f16"), std::string::npos) << msg;
}

TEST(Verifier, IfYieldOfWrongTypeIsInternal) {
  Kernel k = loop_kernel();
  Op* branch = first_op(k.body, OpKind::If);
  ASSERT_NE(branch, nullptr);
  Op* loop = first_op(k.body, OpKind::For);
  Op* yield = branch->regions[1].ops.back().get();
  ASSERT_EQ(yield->operands.size(), 1u);
  yield->operands[0] = loop->regions[0].args[0]; // the i32 induction variable, not the f32 acc
  internal_error_of(k);
}

TEST(Verifier, ResultTypeThatDisagreesWithItsOpIsInternal) {
  Kernel k = loop_kernel();
  Op* add = first_op(k.body, OpKind::Binary);
  ASSERT_NE(add, nullptr);
  k.values[add->result()].type = Type::tensor(f16, {16});
  std::string msg = internal_error_of(k);
  EXPECT_FALSE(msg.empty());
}

TEST(Verifier, ValueDefinedTwiceIsInternal) {
  Kernel k = loop_kernel();
  std::vector<Op*> constants;
  for (auto& op : k.body.ops)
    if (op->kind == OpKind::Constant)
      constants.push_back(op.get());
  ASSERT_GE(constants.size(), 2u);
  constants[1]->results[0] = constants[0]->result();
  std::string msg = internal_error_of(k);
  EXPECT_NE(msg.find("defined twice"), std::string::npos) << msg;
}

TEST(Verifier, ValueEscapingItsLoopIsInternal) {
  Kernel k = loop_kernel();
  Op* loop = first_op(k.body, OpKind::For);
  ValueId inner = loop->regions[0].ops.front()->result(); // defined inside the loop body
  ASSERT_NE(inner, kNoValue);
  Op* last = k.body.ops.back().get(); // the final store
  ASSERT_EQ(last->kind, OpKind::Store);
  last->operands[0] = inner;
  internal_error_of(k);
}

TEST(Verifier, MissingYieldIsInternal) {
  Kernel k = loop_kernel();
  Op* loop = first_op(k.body, OpKind::For);
  loop->regions[0].ops.pop_back();
  internal_error_of(k);
}

TEST(Verifier, YieldInTheMiddleIsInternal) {
  Kernel k = loop_kernel();
  Op* loop = first_op(k.body, OpKind::For);
  auto early = std::make_unique<Op>();
  early->kind = OpKind::Yield;
  Region& body = loop->regions[0];
  body.ops.insert(body.ops.begin(), std::move(early));
  internal_error_of(k);
}

TEST(Verifier, OperandThatIsNoValueIsInternal) {
  Kernel k = loop_kernel();
  k.body.ops.back()->operands[1] = static_cast<ValueId>(k.values.size() + 5);
  internal_error_of(k);
}

TEST(Verifier, BadAttributeFromAPassIsInternal) {
  Kernel k = loop_kernel();
  Op* load_block = first_op(k.body, OpKind::LoadBlock);
  ASSERT_NE(load_block, nullptr);
  load_block->ints = {3}; // boundary_check of a dim the block does not have
  std::string msg = internal_error_of(k);
  EXPECT_NE(msg.find("boundary_check"), std::string::npos) << "the user-facing reason is kept: " << msg;
}

TEST(Verifier, PowerOfTwo) {
  for (int64_t x : {int64_t{1}, int64_t{2}, int64_t{16}, int64_t{1024}, int64_t{1} << 40})
    EXPECT_TRUE(is_power_of_two(x)) << x;
  for (int64_t x : std::initializer_list<int64_t>{0, -4, 3, 6, 48, 1023, (int64_t{1} << 40) + 1})
    EXPECT_FALSE(is_power_of_two(x)) << x;
}

} // namespace
