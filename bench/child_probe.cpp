#include "bench/child_probe.h"

#include "support/error.h"
#include "support/output_set.h"

#include <llvm/ADT/Optional.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/Program.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cmath>
#include <limits>

extern char** environ;

namespace kiln::bench {

namespace {
std::string& self_path() {
  static std::string path;
  return path;
}
} // namespace

void set_self_executable(const char* argv0) {
  static int anchor = 0; // any address inside this executable
  self_path() = llvm::sys::fs::getMainExecutable(argv0, &anchor);
  if (self_path().empty())
    self_path() = argv0;
}

const std::string& self_executable() {
  if (self_path().empty())
    throw InternalError("kiln_bench: set_self_executable was not called before a probe");
  return self_path();
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

ScratchDir::ScratchDir(const std::string& prefix) {
  llvm::SmallString<256> model;
  llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, model);
  llvm::sys::path::append(model, prefix);
  llvm::SmallString<256> out;
  if (std::error_code ec = llvm::sys::fs::createUniqueDirectory(model, out))
    fail("cannot create a scratch directory '{}-*': {}", model.str().str(), ec.message());
  path_ = out.str().str();
}

ScratchDir::~ScratchDir() {
  if (!path_.empty())
    (void)llvm::sys::fs::remove_directories(path_, /*IgnoreErrors=*/true);
}

llvm::json::Object run_probe(const ProbeRequest& request) {
  ScratchDir out_dir("kiln-bench-probe");
  const std::string out_path = out_dir.path() + "/result.json";

  std::vector<std::string> args = {self_executable(), "--probe=" + request.name, "--probe-dir=" + request.dir,
                                   "--probe-out=" + out_path};
  args.insert(args.end(), request.args.begin(), request.args.end());
  std::vector<llvm::StringRef> arg_refs(args.begin(), args.end());

  // The parent's environment, with the cache root replaced and the driver's JIT cache and dumps off.
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    llvm::StringRef entry(*e);
    llvm::StringRef name = entry.split('=').first;
    if (name == "KILN_CACHE_DIR" || name == "CUDA_CACHE_DISABLE" || name == "KILN_DUMP_DIR")
      continue;
    env.push_back(entry.str());
  }
  env.push_back("KILN_CACHE_DIR=" + request.dir);
  env.push_back("CUDA_CACHE_DISABLE=1");
  std::vector<llvm::StringRef> env_refs(env.begin(), env.end());

  std::string why;
  bool failed_to_start = false;
  const int status = llvm::sys::ExecuteAndWait(args[0], arg_refs, llvm::ArrayRef<llvm::StringRef>(env_refs),
                                               {}, request.timeout_s, 0, &why, &failed_to_start);
  if (failed_to_start)
    fail("probe '{}': could not start '{}': {}", request.name, args[0], why);

  auto buffer = llvm::MemoryBuffer::getFile(out_path);
  if (status != 0) {
    std::string detail = why.empty() ? "" : ": " + why;
    if (status == -2)
      detail = fmt::format(" (it crashed, or ran past its {} s limit and was killed{})", request.timeout_s,
                           detail);
    // The child writes {"error": ...} before exiting non-zero when it can.
    if (buffer)
      if (auto parsed = llvm::json::parse((*buffer)->getBuffer()))
        if (auto* o = parsed->getAsObject())
          if (auto e = o->getString("error"))
            detail += ": " + e->str();
    fail("probe '{}' (in a child process, cache dir {}) exited with status {}{}", request.name, request.dir,
         status, detail);
  }
  if (!buffer)
    fail("probe '{}' exited normally but wrote no result to '{}': {}", request.name, out_path,
         buffer.getError().message());
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse((*buffer)->getBuffer());
  if (!parsed)
    fail("probe '{}' wrote invalid JSON: {}", request.name, llvm::toString(parsed.takeError()));
  llvm::json::Object* object = parsed->getAsObject();
  if (!object)
    fail("probe '{}' wrote JSON that is not an object", request.name);
  return std::move(*object);
}

namespace {

void write_probe_result(const std::string& path, const llvm::json::Object& result) {
  write_output_file({"--probe-out", path},
                    llvm::formatv("{0:2}", llvm::json::Value(llvm::json::Object(result))).str() + "\n");
}

} // namespace

int answer_probe(const ProbeArgs& a, const std::function<llvm::json::Object()>& body) {
  if (a.out.empty())
    fail("--probe={} needs --probe-out=FILE", a.name);
  std::string error;
  try {
    write_probe_result(a.out, body());
    return 0;
  } catch (const Error& e) {
    error = e.what();
  } catch (const InternalError& e) {
    error = e.what();
  } catch (const std::exception& e) {
    error = e.what();
  }
  fmt::print(stderr, "kiln_bench probe '{}': {}\n", a.name, error);
  write_probe_result(a.out, llvm::json::Object{{"error", error}});
  return 1;
}

double json_number(const llvm::json::Object& o, const std::string& field, const std::string& probe) {
  if (auto v = o.getNumber(field))
    return *v;
  fail("probe '{}' gave no number '{}'", probe, field);
}

std::string json_string(const llvm::json::Object& o, const std::string& field, const std::string& probe) {
  if (auto v = o.getString(field))
    return v->str();
  fail("probe '{}' gave no string '{}'", probe, field);
}

} // namespace kiln::bench
