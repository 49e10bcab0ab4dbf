// The refactoring guard of the code generator: every shipped kernel's generated CUDA, on sm_80 and sm_90a, at
// its default config, at samples of its tuning space and (attention) at other problem shapes, hashed and
// compared with the checked-in list tests/codegen/generated_code_hashes.txt. A change that alters generated
// code fails here and must say why in its commit; a change that only moves code around must not.
//
// Comments and blank lines are left out of the hash (the emitter quotes DSL source lines, which move with
// every edit of a kernel file); the code itself, the prelude included, is hashed byte for byte.
// To accept new generated code: KILN_UPDATE_CODEGEN_HASHES=1 build/tests/kiln_codegen_tests
// --gtest_filter='GeneratedCodeHash.*' rewrites the list in the source tree; commit it with the reason.
#include "codegen/codegen.h"
#include "kernels/builtin.h"
#include "shipped_renderings.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace kiln;
using kiln_test::shipped_renderings;

namespace {

const char* kHashFile = KILN_SOURCE_DIR "/tests/codegen/generated_code_hashes.txt";

// FNV-1a over the code lines: stable across compilers and platforms, unlike std::hash.
uint64_t code_hash(const std::string& source) {
  uint64_t h = 1469598103934665603ull;
  std::istringstream in(source);
  std::string line;
  while (std::getline(in, line)) {
    size_t comment = line.find("//");
    if (comment != std::string::npos)
      line.erase(comment);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r'))
      line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos)
      continue;
    for (unsigned char c : line + "\n") {
      h ^= c;
      h *= 1099511628211ull;
    }
  }
  return h;
}

struct Rendering {
  std::string id; // "fa2_fwd sm_90a CAUSAL=1 ... num_warps=4 num_stages=2"
  std::string hash;
};

std::vector<Rendering> render_all() {
  std::vector<Rendering> out;
  std::set<std::string> seen; // a sample of the space may be the default config
  for (const KernelDef& def : builtin_kernels().all())
    for (const std::string arch : {"sm_80", "sm_90a"})
      for (const Config& c : shipped_renderings(def)) {
        Rendering r{def.name + " " + arch + " " + c.str(), ""};
        if (!seen.insert(r.id).second)
          continue;
        try {
          r.hash = fmt::format("{:016x}", code_hash(generate_cuda(def.build(c), Target::parse(arch)).source));
        } catch (const Error& e) { // a config the kernel refuses is recorded as refused, so that stays stable too
          r.hash = "refused";
        }
        out.push_back(r);
      }
  return out;
}

std::map<std::string, std::string> read_list() {
  std::map<std::string, std::string> list;
  std::ifstream in(kHashFile);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#')
      continue;
    size_t sep = line.rfind(' ');
    list[line.substr(0, sep)] = line.substr(sep + 1);
  }
  return list;
}

TEST(GeneratedCodeHash, HashIgnoresCommentsAndTrailingSpace) {
  EXPECT_EQ(code_hash("int a = 1; // x\n\n  // only a comment\nint b;\n"), code_hash("int a = 1;\nint b;   \n"));
  EXPECT_NE(code_hash("int a = 1;\n"), code_hash("int a = 2;\n"));
  EXPECT_NE(code_hash("a\nb\n"), code_hash("b\na\n"));
}

TEST(GeneratedCodeHash, EveryShippedKernelMatchesTheCheckedInList) {
  const std::vector<Rendering> now = render_all();
  if (std::getenv("KILN_UPDATE_CODEGEN_HASHES")) {
    std::ofstream out(kHashFile);
    out << "# kernel arch config hash: FNV-1a of the generated CUDA's code lines (comments and blank lines left "
           "out).\n# Written by KILN_UPDATE_CODEGEN_HASHES=1 kiln_codegen_tests "
           "--gtest_filter='GeneratedCodeHash.*' (tests/codegen/generated_code_hash_test.cpp).\n";
    for (const Rendering& r : now)
      out << r.id << " " << r.hash << "\n";
    GTEST_SKIP() << "rewrote " << kHashFile << " with " << now.size() << " renderings";
  }
  const std::map<std::string, std::string> list = read_list();
  ASSERT_FALSE(list.empty()) << "no hash list at " << kHashFile;
  int changed = 0, missing = 0;
  std::string report;
  for (const Rendering& r : now) {
    auto it = list.find(r.id);
    if (it == list.end()) {
      ++missing;
      report += "  new:     " + r.id + " " + r.hash + "\n";
    } else if (it->second != r.hash) {
      ++changed;
      report += "  changed: " + r.id + " " + it->second + " -> " + r.hash + "\n";
    }
  }
  EXPECT_EQ(changed + missing, 0) << changed << " renderings changed and " << missing
                                  << " are not in the list (if intended, rerun with KILN_UPDATE_CODEGEN_HASHES=1 "
                                     "and say why in the commit):\n"
                                  << report;
  EXPECT_EQ(list.size(), now.size()) << "the list has renderings that no longer exist";
}

} // namespace
