// The public header kiln/kiln.h: a user's kernel written with it alone; launch arguments checked against the
// kernel's signature without a GPU (a missing argument, a scalar for a pointer and the reverse, an
// out-of-range i32 are each an Error naming the parameter); gpu_available answers without throwing;
// version().
#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <algorithm>

using namespace kiln;

namespace {

Kernel saxpy(int64_t block) {
  KernelBuilder kb("saxpy", Config().set("BLOCK", block));
  Value x = kb.arg_ptr("x", f32), y = kb.arg_ptr("y", f32), a = kb.arg("a", f32), n = kb.arg("n", i32);
  Value offs = program_id(0) * block + arange(0, block); // (BLOCK,) i32
  Value mask = offs < n;
  store(y + offs, a * load(x + offs, mask, 0.0f) + load(y + offs, mask, 0.0f), mask);
  return kb.finish();
}

std::string launch_error(const Kernel& k, const std::vector<LaunchArg>& args) {
  try {
    check_launch_args(k, args);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(PublicApi, CorrectArgumentsPass) {
  Kernel k = saxpy(128);
  EXPECT_NO_THROW(check_launch_args(k, {LaunchArg::pointer(0x1000), LaunchArg::pointer(0x2000),
                                        LaunchArg::of_float(2.5), LaunchArg::of_int(77)}));
}

TEST(PublicApi, MissingArgumentIsNamed) {
  Kernel k = saxpy(128);
  std::string msg =
      launch_error(k, {LaunchArg::pointer(0x1000), LaunchArg::pointer(0x2000), LaunchArg::of_float(2)});
  EXPECT_NE(msg.find("missing 'n'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("takes 4 arguments (x, y, a, n), got 3"), std::string::npos) << msg;
  msg = launch_error(k, {LaunchArg::pointer(0x1000)});
  EXPECT_NE(msg.find("missing 'y'"), std::string::npos) << msg;
}

TEST(PublicApi, ExtraArgumentsAreCounted) {
  Kernel k = saxpy(64);
  std::string msg = launch_error(k, {LaunchArg::pointer(1), LaunchArg::pointer(2), LaunchArg::of_float(2),
                                     LaunchArg::of_int(3), LaunchArg::of_int(4), LaunchArg::of_int(5)});
  EXPECT_NE(msg.find("got 6: 2 extra"), std::string::npos) << msg;
}

TEST(PublicApi, WrongKindNamesTheParameter) {
  Kernel k = saxpy(64);
  std::string msg = launch_error(
      k, {LaunchArg::pointer(1), LaunchArg::of_int(2), LaunchArg::of_float(2), LaunchArg::of_int(3)});
  EXPECT_NE(msg.find("argument 'y' is a pointer to f32, got a scalar"), std::string::npos) << msg;
  msg = launch_error(
      k, {LaunchArg::pointer(1), LaunchArg::pointer(2), LaunchArg::pointer(3), LaunchArg::of_int(3)});
  EXPECT_NE(msg.find("argument 'a' is a scalar f32, got a pointer"), std::string::npos) << msg;
  msg = launch_error(k, {LaunchArg::pointer(1), LaunchArg::pointer(2), LaunchArg::of_float(1),
                         LaunchArg::of_int(int64_t{1} << 40)});
  EXPECT_NE(msg.find("argument 'n' is an i32, got 1099511627776 (out of range)"), std::string::npos) << msg;
}

TEST(PublicApi, GpuAvailableNeverThrowsAndSaysWhyNot) {
  std::string why = "unset";
  bool available = false;
  EXPECT_NO_THROW(available = gpu_available(&why));
  if (available)
    EXPECT_TRUE(why.empty()) << why;
  else
    EXPECT_FALSE(why.empty());
}

TEST(PublicApi, VersionIsTheProjectVersion) {
  std::string v = version();
  EXPECT_EQ(std::count(v.begin(), v.end(), '.'), 2) << v;
}

} // namespace
