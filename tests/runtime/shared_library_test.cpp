// runtime/shared_library.h, the part the driver's and NVRTC's loaders share: the first candidate that opens and
// why the others did not, required and optional functions, and availability that never throws.
#include "runtime/shared_library.h"

#include <gtest/gtest.h>

#include <cstring>
#include <new>

namespace kiln::rt {
namespace {

constexpr const char* kNoSuchLibrary = "libkiln_no_such_library_for_tests.so.0";
constexpr const char* kLibc = "libc.so.6"; // on the loader path of every glibc machine kiln runs on

TEST(SharedLibrary, OpensTheFirstCandidateThatLoadsAndSaysWhyTheOnesBeforeDidNot) {
  const OpenedLibrary lib = open_first({kNoSuchLibrary, kLibc, kNoSuchLibrary});
  ASSERT_NE(lib.handle, nullptr);
  EXPECT_EQ(lib.path, kLibc);
  ASSERT_EQ(lib.failures.size(), 1u) << "the candidate after the one that opened is not tried";
  EXPECT_EQ(lib.failures[0].candidate, kNoSuchLibrary);
  EXPECT_NE(lib.failures[0].reason.find(kNoSuchLibrary), std::string::npos) << lib.failures[0].reason;
}

TEST(SharedLibrary, NoCandidateOpensEveryFailureKept) {
  const OpenedLibrary lib = open_first({kNoSuchLibrary, "/nonexistent/dir/libkiln_missing.so"});
  EXPECT_EQ(lib.handle, nullptr);
  EXPECT_TRUE(lib.path.empty());
  ASSERT_EQ(lib.failures.size(), 2u);
  EXPECT_EQ(lib.failures[1].candidate, "/nonexistent/dir/libkiln_missing.so");
  EXPECT_FALSE(lib.failures[1].reason.empty());
}

int not_null(int x) { return x; }

TEST(SharedLibrary, RequiredFunctionsMissingAreNamedOptionalOnesAreNot) {
  const OpenedLibrary lib = open_first({kLibc});
  ASSERT_NE(lib.handle, nullptr);
  SymbolResolver resolve(lib.handle);
  size_t (*len)(const char*) = nullptr;
  int (*absent)(int) = &not_null; // each must be overwritten with null
  int (*absent_optional)(int) = &not_null;
  resolve.required("strlen", len);
  EXPECT_TRUE(resolve.complete());
  ASSERT_NE(len, nullptr);
  EXPECT_EQ(len("kiln"), 4u);
  resolve.optional("kiln_no_such_function_optional", absent_optional);
  EXPECT_EQ(absent_optional, nullptr);
  EXPECT_TRUE(resolve.complete()) << "a missing optional function leaves the library complete";
  resolve.required("kiln_no_such_function_a", absent);
  resolve.required("kiln_no_such_function_b", absent);
  EXPECT_EQ(absent, nullptr);
  EXPECT_FALSE(resolve.complete());
  EXPECT_EQ(resolve.missing(), "kiln_no_such_function_a, kiln_no_such_function_b");
}

struct FakeApi {
  int value = 7;
};

const LibraryLoad<FakeApi>& loaded() {
  static const LibraryLoad<FakeApi> load{std::make_unique<FakeApi>(), ""};
  return load;
}
const LibraryLoad<FakeApi>& not_loaded() {
  static const LibraryLoad<FakeApi> load{nullptr, "fake library not found: searched nowhere"};
  return load;
}
const LibraryLoad<FakeApi>& throwing() { throw std::bad_alloc(); }

TEST(SharedLibrary, AvailabilitySaysWhyAndNeverThrows) {
  std::string why = "unchanged";
  EXPECT_TRUE(available(&loaded, &why));
  EXPECT_EQ(why, "unchanged") << "nothing to say when the library is there";
  EXPECT_FALSE(available(&not_loaded, &why));
  EXPECT_EQ(why, "fake library not found: searched nowhere");
  EXPECT_FALSE(available(&not_loaded, nullptr));
  bool result = true;
  EXPECT_NO_THROW(result = available(&throwing, &why));
  EXPECT_FALSE(result);
  EXPECT_FALSE(why.empty());
}

} // namespace
} // namespace kiln::rt
