// The kernel registry and configs: lookup by name, overrides, defaults, and the properties every
// registered kernel definition must have.
#include "dsl/registry.h"
#include "kernels/builtin.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

using namespace kiln;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a kiln::Error";
  return "";
}

KernelDef toy_def() {
  KernelDef d;
  d.name = "toy";
  d.params = {{"BLOCK_M", 64, "rows"}, {"BLOCK_N", 32, "cols"}};
  d.default_num_warps = 8;
  d.default_num_stages = 3;
  d.build = [](const Config&) -> Kernel { throw InternalError("toy kernels are never built"); };
  return d;
}

TEST(Registry, FindWithAWrongNameListsTheKnownKernels) {
  const KernelRegistry& reg = builtin_kernels();
  std::string msg = error_of([&] { reg.find("vector_ad"); });
  EXPECT_NE(msg.find("no kernel named 'vector_ad'"), std::string::npos) << msg;
  for (const KernelDef& d : reg.all())
    EXPECT_NE(msg.find(d.name), std::string::npos) << "the message lists " << d.name << ": " << msg;
}

TEST(Registry, FindReturnsEachRegisteredKernel) {
  const KernelRegistry& reg = builtin_kernels();
  for (const KernelDef& d : reg.all())
    EXPECT_EQ(&reg.find(d.name), &d);
  EXPECT_EQ(reg.find("vector_add").name, "vector_add");
}

// Users fill registries with their own kernels (kiln/tool_main.h): a bad definition is their mistake, a
// kiln::Error naming the kernel and what was expected.
TEST(Registry, AddingANameTwiceIsAnError) {
  KernelRegistry reg;
  reg.add(toy_def());
  EXPECT_NE(error_of([&] { reg.add(toy_def()); }).find("kernel 'toy' is registered twice"),
            std::string::npos);
  EXPECT_EQ(reg.all().size(), 1u);
}

TEST(Registry, ADefinitionWithoutANameOrBuildFunctionIsAnError) {
  KernelRegistry reg;
  KernelDef unnamed = toy_def();
  unnamed.name.clear();
  EXPECT_NE(error_of([&] { reg.add(unnamed); }).find("needs a name"), std::string::npos);
  KernelDef unbuilt = toy_def();
  unbuilt.build = nullptr;
  EXPECT_NE(error_of([&] { reg.add(unbuilt); }).find("kernel 'toy' has no build function"),
            std::string::npos);
  EXPECT_TRUE(reg.all().empty());
}

TEST(Registry, AParameterDeclaredTwiceOrAKeyThatIsNoSizeIsAnError) {
  KernelRegistry reg;
  KernelDef twice = toy_def();
  twice.params.push_back({"BLOCK_M", 16, "rows again"});
  EXPECT_NE(error_of([&] { reg.add(twice); }).find("kernel 'toy' declares the parameter BLOCK_M twice"),
            std::string::npos);
  KernelDef warps = toy_def();
  warps.params.push_back(ParamDef::power_of_two("num_warps", 4, "warps", 1, 32));
  EXPECT_NE(error_of([&] { reg.add(warps); }).find("declares the parameter num_warps twice"),
            std::string::npos);
  KernelDef key = toy_def();
  key.size_args = {"n_rows", "n_cols"};
  key.tuning_key = {"n"};
  const std::string msg = error_of([&] { reg.add(key); });
  EXPECT_NE(msg.find("tuning key 'n' is not one of its size arguments (n_rows, n_cols)"), std::string::npos)
      << msg;
  EXPECT_TRUE(reg.all().empty());
}

TEST(Registry, TensorDimsMustNameSizesAndTheToleranceMustNotBeNegative) {
  KernelRegistry reg;
  KernelDef dims = toy_def();
  dims.size_args = {"n_rows", "n_cols"};
  dims.tensor_dims = {{"x", {"n_rows", "cols"}}};
  std::string msg = error_of([&] { reg.add(dims); });
  EXPECT_NE(msg.find("kernel 'toy': tensor 'x' has the dim 'cols', which is not one of its size arguments "
                     "(n_rows, n_cols)"),
            std::string::npos)
      << msg;
  KernelDef tol = toy_def();
  tol.reference_tolerance = -1e-3;
  msg = error_of([&] { reg.add(tol); });
  EXPECT_NE(msg.find("reference_tolerance -0.001 is negative"), std::string::npos) << msg;
  EXPECT_TRUE(reg.all().empty());
}

TEST(Registry, AReferenceAsksForInputsByNameAndNamesWhatTheRunHas) {
  ReferenceInputs in;
  in.sizes = {{"n", 4}};
  in.scalars = {{"eps", 0.5}};
  in.tensors = {{"x", {1, 2}}, {"y", {0, 0}}};
  EXPECT_EQ(in.size("n"), 4);
  EXPECT_EQ(in.scalar("eps"), 0.5);
  EXPECT_EQ(in.tensor("x")[1], 2);
  const std::string msg = error_of([&] { (void)in.tensor("w"); });
  EXPECT_NE(msg.find("the reference asks for the tensor 'w'; the run has x, y"), std::string::npos) << msg;
}

TEST(Registry, FindInAnEmptyRegistrySaysNoneAreRegistered) {
  const std::string msg = error_of([] { KernelRegistry().find("layernorm"); });
  EXPECT_NE(msg.find("no kernel named 'layernorm'; no kernels are registered"), std::string::npos) << msg;
}

TEST(Registry, ACopyOfTheBuiltinsTakesMoreKernels) {
  KernelRegistry mine = builtin_kernels();
  mine.add(toy_def());
  EXPECT_EQ(mine.all().size(), builtin_kernels().all().size() + 1);
  EXPECT_EQ(mine.find("toy").name, "toy");
  EXPECT_NE(mine.names().find("vector_add"), std::string::npos);
  EXPECT_THROW(builtin_kernels().find("toy"), Error); // kiln's own registry is untouched
}

TEST(Registry, DefaultConfig) {
  Config c = toy_def().default_config();
  EXPECT_EQ(c.get("BLOCK_M"), 64);
  EXPECT_EQ(c.get("BLOCK_N"), 32);
  EXPECT_EQ(c.params.size(), 2u);
  EXPECT_EQ(c.num_warps, 8);
  EXPECT_EQ(c.num_stages, 3);
  EXPECT_EQ(c.str(), "BLOCK_M=64 BLOCK_N=32 num_warps=8 num_stages=3");
}

TEST(Registry, WithOverridesSetsKnownParameters) {
  KernelDef d = toy_def();
  Config c = d.with_overrides(d.default_config(), {{"BLOCK_N", 128}, {"num_warps", 2}, {"num_stages", 4}});
  EXPECT_EQ(c.get("BLOCK_M"), 64);
  EXPECT_EQ(c.get("BLOCK_N"), 128);
  EXPECT_EQ(c.num_warps, 2);
  EXPECT_EQ(c.num_stages, 4);
}

TEST(Registry, WithOverridesRejectsAnUnknownParameterNamingTheParameters) {
  KernelDef d = toy_def();
  std::string msg = error_of([&] { d.with_overrides(d.default_config(), {{"BLOCK_K", 16}}); });
  EXPECT_NE(msg.find("kernel 'toy' has no parameter 'BLOCK_K'"), std::string::npos) << msg;
  for (const char* p : {"BLOCK_M", "BLOCK_N", "num_warps", "num_stages"})
    EXPECT_NE(msg.find(p), std::string::npos) << p << " in: " << msg;
}

TEST(Registry, WithOverridesRejectsBadLaunchKnobs) {
  KernelDef d = toy_def();
  for (int64_t w : {0, 3, 64, -4})
    EXPECT_NE(error_of([&] { d.with_overrides(d.default_config(), {{"num_warps", w}}); }).find("num_warps"),
              std::string::npos)
        << w;
  EXPECT_NE(error_of([&] { d.with_overrides(d.default_config(), {{"num_stages", 0}}); }).find("num_stages"),
            std::string::npos);
}

TEST(Registry, EveryBuiltinDefinitionIsComplete) {
  std::set<std::string> names;
  for (const KernelDef& d : builtin_kernels().all()) {
    SCOPED_TRACE(d.name);
    EXPECT_TRUE(names.insert(d.name).second) << "names are unique";
    EXPECT_FALSE(d.summary.empty());
    EXPECT_TRUE(static_cast<bool>(d.build));
    EXPECT_TRUE(static_cast<bool>(d.grid));
    ASSERT_TRUE(static_cast<bool>(d.config_space));
    std::vector<Config> space = d.config_space();
    EXPECT_FALSE(space.empty());
    std::set<std::string> params;
    for (const ParamDef& p : d.params)
      EXPECT_TRUE(params.insert(p.name).second) << "parameter " << p.name << " is declared once";
    for (const Config& c : space)
      for (const auto& [name, v] : c.params)
        EXPECT_TRUE(params.count(name)) << "config " << c.str() << " sets the undeclared parameter " << name;
    for (const ParamDef& p : d.params)
      EXPECT_NE(p.expected(), "any integer") << "parameter " << p.name << " declares the values it takes";
    EXPECT_NO_THROW(d.check(d.default_config()));
    for (const Config& c : space)
      EXPECT_NO_THROW(d.check(c)) << c.str();
    for (const std::string& k : d.tuning_key)
      EXPECT_NE(std::find(d.size_args.begin(), d.size_args.end(), k), d.size_args.end())
          << "tuning key " << k << " is one of the size args";
  }
}

TEST(ParamDef, EachKindAcceptsItsValuesAndSaysWhichTheyAre) {
  const ParamDef flag = ParamDef::flag("F", 0, "a flag");
  EXPECT_TRUE(flag.accepts(0) && flag.accepts(1));
  EXPECT_FALSE(flag.accepts(5) || flag.accepts(-1));
  EXPECT_EQ(flag.expected(), "0 or 1");
  const ParamDef tile = ParamDef::power_of_two("T", 64, "a tile", 16, 256);
  EXPECT_TRUE(tile.accepts(16) && tile.accepts(256));
  EXPECT_FALSE(tile.accepts(0) || tile.accepts(48) || tile.accepts(8) || tile.accepts(512) || tile.accepts(-16));
  EXPECT_EQ(tile.expected(), "a power of two from 16 to 256");
  const ParamDef count = ParamDef::count("C", 1, "a count", 1, 32);
  EXPECT_TRUE(count.accepts(3));
  EXPECT_FALSE(count.accepts(0) || count.accepts(33));
  EXPECT_EQ(count.expected(), "an integer from 1 to 32");
  const ParamDef choice = ParamDef::choice("M", 0, "0 none, 1 some", 0, 1);
  EXPECT_EQ(choice.expected(), "one of the codes 0 to 1 (0 none, 1 some)");
  EXPECT_TRUE((ParamDef{"ANY", 3, "undeclared"}.accepts(-1000000)));
}

TEST(Registry, AKernelWhoseDefaultIsOutsideItsRangeIsAnError) {
  KernelDef d = toy_def();
  d.params.push_back(ParamDef::flag("BAD", 2, "a flag with a default it does not take"));
  KernelRegistry reg;
  const std::string msg = error_of([&] { reg.add(d); });
  EXPECT_NE(msg.find("parameter BAD has the default 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("BAD takes 0 or 1"), std::string::npos) << msg;
}

TEST(Config, GetOrAndEquality) {
  Config a;
  a.set("X", 3);
  EXPECT_EQ(a.get_or("X", 9), 3);
  EXPECT_EQ(a.get_or("Y", 9), 9);
  Config b = a;
  EXPECT_EQ(a, b);
  b.num_stages = 3;
  EXPECT_FALSE(a == b);
  EXPECT_EQ(Config().str(), "num_warps=4 num_stages=2");
}

TEST(Config, GetOfAMissingParameterIsAUserError) {
  Config c;
  c.set("BLOCK", 128);
  std::string msg = error_of([&] { c.get("BLOKC"); });
  EXPECT_NE(msg.find("no parameter 'BLOKC'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("it has BLOCK"), std::string::npos) << msg;
  EXPECT_NE(msg.find("registry_test.cpp:"), std::string::npos) << msg;
  EXPECT_NE(error_of([] { Config().get("X"); }).find("no parameters"), std::string::npos);
}

} // namespace
