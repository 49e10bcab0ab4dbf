// Error tests for rand / randn: a seed that is a tile, float or boolean seeds and offsets, fractional literals.
// Each message names the op (rand or randn), what it takes and what came, at the user's line.
#include "dsl/dsl.h"
#include "error/error_test_support.h"

using namespace kiln;
using kiln_test::expect_call_site;
using kiln_test::expect_mentions;
using kiln_test::user_error;

namespace {

TEST(RandomError, SeedTileIsRefused) {
  KernelBuilder kb("bad");
  Value seeds = arange(0, 16);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; kiln::rand(seeds, arange(0, 16)); });
  expect_mentions(msg, {"rand:", "seed must be an integer scalar", "tensor<16xi32>", "vary the offsets"});
  expect_call_site(msg, line);
}

TEST(RandomError, FloatOffsetsAreRefused) {
  KernelBuilder kb("bad");
  Value seed = kb.arg("seed", i32);
  Value offsets = arange(0, 16).to(f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; kiln::randn(seed, offsets); });
  expect_mentions(msg, {"randn:", "offsets must be integers", "f32", ".to(i32)"});
  expect_call_site(msg, line);
}

TEST(RandomError, FloatOrBooleanSeedIsRefused) {
  KernelBuilder kb("bad");
  Value fseed = kb.arg("fseed", f32);
  std::string msg = user_error([&] { kiln::rand(fseed, arange(0, 8)); });
  expect_mentions(msg, {"rand:", "seed must be integers", "f32"});
  Value bseed = kb.arg("n", i32) > 0;
  msg = user_error([&] { kiln::rand(bseed, arange(0, 8)); });
  expect_mentions(msg, {"rand:", "seed must be integers", "i1"});
}

TEST(RandomError, FractionalLiteralIsRefused) {
  KernelBuilder kb("bad");
  std::string msg = user_error([&] { kiln::rand(1.5, arange(0, 8)); });
  expect_mentions(msg, {"rand:", "integers (i32 or i64)", "fractional literal"});
}

} // namespace
