// Error tests of attention::ForwardPlan that need no GPU: the rechecks a run makes of new addresses
// (detail::check_forward_addresses, one bad address each), and a plan's creation (validation as forward()'s,
// the mods and block masks it refuses, the answer without a GPU, an empty problem's plan that runs nothing).
#include "error/error_test_support.h"
#include "kernels/attention/attention_block_mask_api.h"
#include "kernels/attention/attention_forward_plan.h"
#include "kernels/attention/attention_forward_prepare.h"
#include "kernels/attention/attention_mod_library.h"
#include "runtime/cuda_driver.h"

#include <gtest/gtest.h>

#include <limits>
#include <memory>

using namespace kiln;
using namespace kiln::attention;
using kiln_test::expect_call_site;
using kiln_test::expect_mentions;
using kiln_test::user_error;

namespace {

// A valid call's addresses and extents: B=2, H=4, H_KV=2, N_Q=64, N_K=80, D=64, f16, far apart.
ForwardAddresses valid_addresses() { return {0x10000000, 0x20000000, 0x30000000, 0x40000000, 0x50000000}; }
detail::ForwardExtents extents() {
  return {2 * 4 * 64 * 64 * 2, 2 * 2 * 80 * 64 * 2, 2 * 2 * 80 * 64 * 2, 2 * 4 * 64 * 64 * 2, 2 * 4 * 64 * 4};
}

std::string address_error(const ForwardAddresses& at) {
  return user_error([&] { detail::check_forward_addresses(at, extents(), {"ForwardPlan::run", {}}); });
}

TEST(ForwardPlanAddressErrors, ValidAddressesPass) {
  EXPECT_NO_THROW(detail::check_forward_addresses(valid_addresses(), extents(), {"ForwardPlan::run", {}}));
}

TEST(ForwardPlanAddressErrors, NullAddress) {
  ForwardAddresses at = valid_addresses();
  at.v = 0;
  expect_mentions(address_error(at),
                  {"attention::ForwardPlan::run: v has a null data address", "expected a device address"});
}

TEST(ForwardPlanAddressErrors, MisalignedInput) {
  ForwardAddresses at = valid_addresses();
  at.k += 8;
  expect_mentions(address_error(at), {"k's address 0x20000008 is not 16-byte aligned", "8 bytes past"});
}

TEST(ForwardPlanAddressErrors, MisalignedLse) {
  ForwardAddresses at = valid_addresses();
  at.lse += 4;
  expect_mentions(address_error(at), {"lse's address 0x50000004 is not 16-byte aligned"});
}

TEST(ForwardPlanAddressErrors, OutputOverInput) {
  ForwardAddresses at = valid_addresses();
  at.o = at.q + 1024; // inside q's 64 KiB
  expect_mentions(address_error(at), {"o (bytes [0x10000400, 0x10010400)) overlaps q",
                                      "writing o would overwrite q while it is read"});
}

TEST(ForwardPlanAddressErrors, LseOverO) {
  ForwardAddresses at = valid_addresses();
  at.lse = at.o + 64;
  expect_mentions(address_error(at), {"lse (bytes", "overlaps o", "would be written to the same memory"});
}

TEST(ForwardPlanAddressErrors, PastTheAddressSpace) {
  ForwardAddresses at = valid_addresses();
  at.o = std::numeric_limits<uint64_t>::max() - 0xff; // 16-byte aligned, its 64 KiB past the end
  expect_mentions(address_error(at), {"o (65536 bytes at 0xffffffffffffff00) runs past the end"});
}

// The creation's tensors: as the addresses above.
struct Call {
  TensorRef q, k, v, o, lse;
  AttentionOptions options;
};

Call valid_call(int64_t B = 2) {
  const ForwardAddresses at = valid_addresses();
  return {TensorRef::contiguous(at.q, DType::f16, {B, 4, 64, 64}),
          TensorRef::contiguous(at.k, DType::f16, {B, 2, 80, 64}),
          TensorRef::contiguous(at.v, DType::f16, {B, 2, 80, 64}),
          TensorRef::contiguous(at.o, DType::f16, {B, 4, 64, 64}),
          TensorRef::contiguous(at.lse, DType::f32, {B, 4, 64}),
          {}};
}

std::string creation_error(const Call& c) {
  return user_error([&] { ForwardPlan plan(c.q, c.k, c.v, c.o, c.lse, c.options); });
}

TEST(ForwardPlanErrors, ValidatesAsForwardDoesAndNamesTheCallersLine) {
  Call c = valid_call();
  c.k.shape[3] = 32;
  const unsigned line = __LINE__ + 1;
  const std::string msg = user_error([&] { ForwardPlan plan(c.q, c.k, c.v, c.o, c.lse, c.options); });
  expect_mentions(msg, {"attention::ForwardPlan: k has head dim 32 but q has 64"});
  expect_call_site(msg, line);
}

TEST(ForwardPlanErrors, AMisalignedCreationAddress) {
  Call c = valid_call();
  c.o.data += 2;
  expect_mentions(creation_error(c),
                  {"attention::ForwardPlan: o's address 0x40000002 is not 16-byte aligned"});
}

TEST(ForwardPlanErrors, ModsAreRefused) {
  Call c = valid_call();
  c.options.mods.mask = {sliding_window(16, 0)};
  expect_mentions(creation_error(c), {"options.mods or options.mod_tensors is set",
                                      "a plan runs the plain forward", "call forward()"});
}

TEST(ForwardPlanErrors, BlockMasksAreRefused) {
  Call c = valid_call();
  c.options.block_mask = std::make_shared<const BlockMask>();
  expect_mentions(creation_error(c), {"options.block_mask is set", "call forward()"});
}

TEST(ForwardPlanErrors, AValidPlanNeedsAGpu) {
  if (rt::driver_available())
    GTEST_SKIP() << "checks the answer where there is no GPU";
  const Call c = valid_call();
  try {
    ForwardPlan plan(c.q, c.k, c.v, c.o, c.lse, c.options);
    ADD_FAILURE() << "a plan was made without a GPU";
  } catch (const rt::NoGpuError& e) {
    expect_mentions(e.what(), {"attention::ForwardPlan: no GPU is available"});
  }
}

TEST(ForwardPlanErrors, AnEmptyProblemsPlanRunsNothing) {
  // B = 0: validation accepts it without looking at addresses, no GPU is needed and a run checks nothing.
  const Call c = valid_call(/*B=*/0);
  ForwardPlan plan(c.q, c.k, c.v, c.o, c.lse, c.options);
  EXPECT_TRUE(plan.empty());
  EXPECT_EQ(plan.problem().B, 0);
  EXPECT_TRUE(plan.config().params.empty());
  EXPECT_NO_THROW(plan.run(ForwardAddresses{}, nullptr, rt::AutotuneMode::Cached));
}

} // namespace
