// Problem sizes the kernels cannot index or memory cannot hold: refused up front, naming the size, instead of
// a product that wraps ("buffer holds 0 elements") or a bare "out of host memory".
#include "dsl/host_buffer.h"
#include "error/error_test_support.h"
#include "kernels/attention/attention_problem.h"

#include <gtest/gtest.h>

#include <cstdint>

using namespace kiln;
using kiln_test::expect_mentions;
using kiln_test::user_error;

namespace {
AttentionProblem small_problem() {
  AttentionProblem p;
  p.B = 1, p.H = 1, p.H_KV = 1, p.N_Q = 16, p.N_K = 16, p.D = 16;
  return p;
}
} // namespace

TEST(ProblemSizeErrors, SizesWhoseProductOverflowsAreRefusedNamingThem) {
  AttentionProblem p = small_problem();
  p.B = 1073741824, p.H = 1073741824, p.H_KV = 1;
  expect_mentions(user_error([&] { check_attention_problem(p); }),
                  {"B * H = 1073741824 * 1073741824", "exceeds 65535", "grid"});
}

TEST(ProblemSizeErrors, SizesBeyondTheKernelsI32IndicesAreRefused) {
  AttentionProblem p = small_problem();
  p.N_Q = int64_t{1} << 40;
  expect_mentions(user_error([&] { check_attention_problem(p); }), {"N_Q=1099511627776", "too large", "i32"});
}

// AddressSanitizer aborts on an allocation this large instead of throwing std::bad_alloc.
#if defined(__SANITIZE_ADDRESS__)
#define KILN_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_ASAN 1
#endif
#endif

TEST(ProblemSizeErrors, HostBufferTooLargeForMemorySaysItsSize) {
  expect_mentions(user_error([] { HostBuffer b(DType::f32, int64_t{1} << 61, "Q"); }),
                  {"'Q'", "2305843009213693952 elements of f32", "64-bit"});
#ifdef KILN_ASAN
  GTEST_SKIP() << "AddressSanitizer aborts on a 2^60-byte allocation rather than throwing std::bad_alloc";
#endif
  expect_mentions(user_error([] { HostBuffer b(DType::f32, int64_t{1} << 58, "K"); }),
                  {"out of host memory", "'K'", "1152921504606846976 bytes"});
}
