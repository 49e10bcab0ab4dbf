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

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace kiln;

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

// The configs each kernel is rendered at: the default, the first, middle and last of its tuning space, and
// for kernels with attention params a few other problems (causal modes, bf16, f32, wider heads, the K variant).
std::vector<Config> configs_of(const KernelDef& def) {
  std::vector<Config> cs = {def.default_config()};
  if (def.config_space) {
    const std::vector<Config> space = def.config_space();
    for (size_t i : {size_t{0}, space.size() / 2, space.size() - 1})
      if (i < space.size())
        cs.push_back(space[i]);
  }
  const Config base = def.default_config();
  auto has = [&](const char* p) { return base.params.count(p) > 0; };
  if (has("CAUSAL") && has("HEAD_DIM")) {
    const std::vector<std::map<std::string, int64_t>> problems = {
        {{"CAUSAL", 1}, {"K_TRANSPOSED", 0}},
        {{"CAUSAL", 2}, {"DTYPE", 1}},
        {{"HEAD_DIM", 128}, {"BLOCK_N", 32}},
        {{"HEAD_DIM", 128}, {"EVEN_D", 0}, {"CAUSAL", 1}},
        {{"DTYPE", 2}, {"BLOCK_N", 32}},
        {{"DTYPE", 2}, {"TF32", 1}, {"BLOCK_N", 32}}};
    for (const auto& overrides : problems)
      cs.push_back(def.with_overrides(base, overrides));
  }
  if (has("CAUSAL") && has("WARP_SPECIALIZE")) // FA2's two key loops filled by one producer (sm_90a)
    cs.push_back(def.with_overrides(base, {{"WARP_SPECIALIZE", 1}, {"CAUSAL", 1}, {"HEAD_DIM", 128}}));
  if (has("CAUSAL") && has("PINGPONG")) // ... with its two consumer warpgroups taking turns at the products
    cs.push_back(
        def.with_overrides(base, {{"WARP_SPECIALIZE", 1}, {"PINGPONG", 1}, {"CAUSAL", 1}, {"HEAD_DIM", 128}}));
  if (has("CAUSAL") && has("PRODUCT_AHEAD")) // ... with Q K_{j+1}ᵀ issued before the softmax of S_j
    cs.push_back(def.with_overrides(base, {{"WARP_SPECIALIZE", 1},
                                           {"PRODUCT_AHEAD", 1},
                                           {"CAUSAL", 1},
                                           {"HEAD_DIM", 128},
                                           {"BLOCK_N", 64},
                                           {"num_stages", 3}}));
  if (has("SPLIT_D")) // D = 96 over two head-dim tiles (forward, dK/dV, dQ)
    cs.push_back(def.with_overrides(base, {{"SPLIT_D", 1}, {"HEAD_DIM", 128}}));
  if (has("SPLIT_D") && has("LAST_PRODUCT_LATE")) // ... their products issued late (sm_90a)
    cs.push_back(def.with_overrides(base, {{"WARP_SPECIALIZE", 1},
                                           {"LAST_PRODUCT_LATE", 1},
                                           {"SPLIT_D", 1},
                                           {"HEAD_DIM", 128},
                                           {"BLOCK_N", 128},
                                           {"num_stages", 3}}));
  if (has("LAZY_RESCALE") && has("LAST_PRODUCT_LATE")) // O's rescale skipped where its factors are 1 (sm_90a: late)
    cs.push_back(def.with_overrides(base, {{"WARP_SPECIALIZE", 1},
                                           {"LAST_PRODUCT_LATE", 1},
                                           {"LAZY_RESCALE", 1},
                                           {"HEAD_DIM", 128},
                                           {"BLOCK_N", 128},
                                           {"num_stages", 3}}));
  if (has("EXP2_ON_FMA") && has("WARP_SPECIALIZE")) // one of every 4 exponentials of a tile on the FMA pipe (the 64-row warp-specialised tile)
    cs.push_back(def.with_overrides(base, {{"WARP_SPECIALIZE", 1},
                                           {"EXP2_ON_FMA", 4},
                                           {"BLOCK_M", 64},
                                           {"BLOCK_N", 128},
                                           {"num_warps", 4},
                                           {"MIN_BLOCKS_PER_SM", 2}}));
  if (has("PERSISTENT") && has("LAST_PRODUCT_LATE")) // a persistent grid that prefetches the next program's Q
    cs.push_back(def.with_overrides(base, {{"WARP_SPECIALIZE", 1},
                                           {"LAST_PRODUCT_LATE", 1},
                                           {"PERSISTENT", 1},
                                           {"HEAD_DIM", 128},
                                           {"BLOCK_N", 128},
                                           {"num_stages", 3}}));
  if (has("PERSISTENT")) // a dynamic persistent grid: with a producer (the kernel's own warps where none) and without
    for (int ws : {0, 1})
      cs.push_back(def.with_overrides(base, {{"WARP_SPECIALIZE", ws}, {"PERSISTENT", 2}, {"MIN_BLOCKS_PER_SM", 1}}));
  if (has("ATOMIC_DQ")) // dQ added through a block pointer: staged and reduced in bulk on sm_90a
    cs.push_back(def.with_overrides(base, {{"ATOMIC_DQ", 1}, {"BLOCK_M", 64}}));
  if (has("ATOMIC_DQ") && has("WARP_SPECIALIZE")) // ... by the warp-specialised 128-key tile's consumers (at D = 64
    cs.push_back(def.with_overrides(base, {{"ATOMIC_DQ", 1},     // K's tile in 64-byte lines, dQ's product on wgmma)
                                           {"BLOCK_M", 64},
                                           {"BLOCK_N", 128},
                                           {"num_warps", 8},
                                           {"WARP_SPECIALIZE", 1}}));
  return cs;
}

std::vector<Rendering> render_all() {
  std::vector<Rendering> out;
  std::set<std::string> seen; // a sample of the space may be the default config
  for (const KernelDef& def : builtin_kernels().all())
    for (const std::string arch : {"sm_80", "sm_90a"})
      for (const Config& c : configs_of(def)) {
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
