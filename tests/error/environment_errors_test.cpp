// kiln's environment variables hold a value they do not accept: a kiln::Error naming the variable, the
// accepted values and what it holds, never a silent fallback (support/env.h).
#include "codegen/codegen.h"
#include "dsl/interpreter.h"
#include "error/error_test_support.h"
#include "kernels/vector_add/vector_add.h"
#include "runtime/autotuner.h"
#include "runtime/device.h"
#include "scoped_env.h"

#include <gtest/gtest.h>

using namespace kiln;
using kiln::testing_support::ScopedEnv;
using kiln_test::expect_mentions;
using kiln_test::user_error;

TEST(EnvironmentErrors, KilnInterpretTakesZeroOrOne) {
  for (const char* bad : {"2", "yes please", "TRUE"}) {
    ScopedEnv env("KILN_INTERPRET", bad);
    expect_mentions(user_error([] { (void)interpret_requested(); }),
                    {"KILN_INTERPRET", std::string("'") + bad + "'", "0, 1"});
  }
  {
    ScopedEnv env("KILN_INTERPRET", "1");
    EXPECT_TRUE(interpret_requested());
  }
  {
    ScopedEnv env("KILN_INTERPRET", "0");
    EXPECT_FALSE(interpret_requested());
  }
  ScopedEnv unset("KILN_INTERPRET", nullptr);
  EXPECT_FALSE(interpret_requested());
}

TEST(EnvironmentErrors, KilnLogTakesPasses) {
  ScopedEnv env("KILN_LOG", "everything");
  const Kernel k = vector_add_def().build(vector_add_def().default_config());
  expect_mentions(user_error([&] { (void)generate_cuda(k, Target::parse("sm_80")); }),
                  {"KILN_LOG", "'everything'", "passes"});
}

TEST(EnvironmentErrors, KilnAutotuneTakesItsModes) {
  ScopedEnv env("KILN_AUTOTUNE", "sometimes");
  expect_mentions(user_error([] { (void)rt::autotune_mode_from_env(); }),
                  {"KILN_AUTOTUNE", "'sometimes'", "off, cached, on, force"});
}

TEST(EnvironmentErrors, KilnDeviceTakesABaseTenOrdinal) {
  for (const char* bad : {"abc", "-1", "0x1", "1.5"}) {
    ScopedEnv env("KILN_DEVICE", bad);
    expect_mentions(user_error([] { (void)rt::selected_device_ordinal(); }),
                    {"KILN_DEVICE", std::string("'") + bad + "'", "device ordinal", "base-10"});
  }
  ScopedEnv env("KILN_DEVICE", "01");
  EXPECT_EQ(rt::selected_device_ordinal(), 1);
}
