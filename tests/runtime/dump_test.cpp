// KILN_DUMP_DIR artifacts: names, contents, and the dumps a cached compile writes.
#include "runtime/compile_cache.h"
#include "runtime/dump.h"
#include "runtime_test_support.h"
#include "support/error.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>

#include <fstream>

namespace kiln::rt {
namespace {

std::string slurp(const std::string& path) {
  auto b = llvm::MemoryBuffer::getFile(path, false, false, true);
  return b ? (*b)->getBuffer().str() : "<missing " + path + ">";
}

TEST(Dump, WritesOneFilePerArtifactUnderAStemSharedThroughTheCudaSource) {
  testing::ScratchDir dir;
  std::string out = dir.path() + "/nested/dumps";
  auto paths = dump_artifacts_to(out, "flash fwd<64>", {{"cu", "source"}, {"ir", "the ir"}});
  ASSERT_EQ(paths.size(), 2u);
  std::string stem = dump_stem("flash fwd<64>", {{"cu", "source"}});
  EXPECT_EQ(stem.size(), std::string("flash_fwd_64_-").size() + 8);
  EXPECT_EQ(stem.rfind("flash_fwd_64_-", 0), 0u) << stem;
  EXPECT_EQ(slurp(out + "/" + stem + ".cu"), "source");
  EXPECT_EQ(slurp(out + "/" + stem + ".ir"), "the ir");
  EXPECT_EQ(dump_stem("flash fwd<64>", {{"cu", "source"}, {"ptx", "other"}}), stem)
      << "runtime and codegen dumps of one kernel share a stem";
  EXPECT_NE(dump_stem("flash fwd<64>", {{"cu", "source2"}}), stem);
}

TEST(Dump, UnwritableDirectoryIsAnError) {
  testing::ScratchDir dir;
  std::string file = dir.path() + "/file";
  std::ofstream(file) << "x";
  try {
    dump_artifacts_to(file + "/sub", "k", {{"cu", "x"}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create dump directory"), std::string::npos) << e.what();
  }
}

TEST(Dump, CachedCompileDumpsEveryArtifact) {
  KILN_SKIP_WITHOUT_NVRTC();
  testing::ScratchDir cache_dir, dump_dir;
  ::setenv("KILN_DUMP_DIR", dump_dir.path().c_str(), 1);
  CompileRequest req;
  req.source = testing::kVecAddSource;
  req.kernel_name = "vec_add";
  req.arch = "sm_80";
  CompileCache cache(cache_dir.path());
  CompiledKernel k = cache.get(req);
  ::unsetenv("KILN_DUMP_DIR");
  std::string base = dump_dir.path() + "/" + dump_stem("vec_add", {{"cu", req.source}});
  EXPECT_EQ(slurp(base + ".cu"), req.source);
  EXPECT_EQ(slurp(base + ".cubin"), k.cubin);
  EXPECT_NE(slurp(base + ".ptx").find(".entry vec_add"), std::string::npos) << "dumping asks for PTX";
  EXPECT_EQ(slurp(base + ".log"), k.log);
  EXPECT_EQ(ResourceUsage::from_json(slurp(base + ".usage.json")), k.usage);
}

} // namespace
} // namespace kiln::rt
