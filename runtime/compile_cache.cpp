// The compile cache: key derivation, the entry file format, atomic writes, listing and clearing.
#include "runtime/compile_cache.h"

#include "runtime/cache_dir.h"
#include "runtime/dump.h"
#include "runtime/nvrtc.h"
#include "support/atomic_file.h"
#include "support/error.h"
#include "support/hash.h"
#include "support/version.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kiln::rt {

namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'C', 'U', 'B', '\n'};
constexpr uint32_t kFormatVersion = 1;
constexpr uint32_t kFieldCount = 8;  // key, kernel_name, lowered_name, arch, cubin, ptx, log, usage_json
constexpr size_t kHeaderBytes = sizeof(kMagic) + 4 + 4 + 8 * kFieldCount + 8;
constexpr const char* kEntrySuffix = ".kcubin";
constexpr const char* kTempMarker = ".tmp-";
constexpr uint64_t kMaxEntryBytes = uint64_t{1} << 30; // far above any cubin + PTX kiln writes

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_le(std::string_view bytes, size_t at, int width) {
  uint64_t v = 0;
  for (int i = 0; i < width; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return v;
}

std::string compile_dir(const std::string& root) {
  llvm::SmallString<256> p(root);
  llvm::sys::path::append(p, "compile");
  return p.str().str();
}

} // namespace

// ---- entry format: magic, version, field count, 8 field lengths, payload checksum, payload ---------------

std::string serialize_cache_entry(std::string_view key, const CompiledKernel& k) {
  std::string usage = k.usage.to_json();
  std::array<std::string_view, kFieldCount> fields = {key,     k.kernel_name, k.lowered_name, k.arch,
                                                      k.cubin, k.ptx,         k.log,          usage};
  std::string payload;
  for (auto f : fields)
    payload.append(f);
  std::string out(kMagic, sizeof(kMagic));
  put_u32(out, kFormatVersion);
  put_u32(out, kFieldCount);
  for (auto f : fields)
    put_u64(out, f.size());
  put_u64(out, checksum64(payload));
  out += payload;
  return out;
}

std::optional<CompiledKernel> parse_cache_entry(std::string_view bytes, std::string_view expected_key,
                                                std::string* problem) {
  auto reject = [&](std::string why) -> std::optional<CompiledKernel> {
    if (problem)
      *problem = std::move(why);
    return std::nullopt;
  };
  if (bytes.size() < kHeaderBytes)
    return reject(fmt::format("truncated: {} bytes, shorter than the {}-byte header", bytes.size(), kHeaderBytes));
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    return reject("bad magic");
  size_t at = sizeof(kMagic);
  if (uint64_t v = get_le(bytes, at, 4); v != kFormatVersion)
    return reject(fmt::format("format version {}, expected {}", v, kFormatVersion));
  if (uint64_t n = get_le(bytes, at + 4, 4); n != kFieldCount)
    return reject(fmt::format("{} fields, expected {}", n, kFieldCount));
  at += 8;
  std::array<uint64_t, kFieldCount> lengths;
  uint64_t total = 0;
  for (auto& len : lengths) {
    len = get_le(bytes, at, 8);
    at += 8;
    if (len > bytes.size())  // also keeps the sum below from overflowing
      return reject(fmt::format("field length {} exceeds the file size {}", len, bytes.size()));
    total += len;
  }
  uint64_t checksum = get_le(bytes, at, 8);
  if (kHeaderBytes + total != bytes.size())
    return reject(fmt::format("length mismatch: header says {} bytes, file has {}", kHeaderBytes + total,
                              bytes.size()));
  std::string_view payload = bytes.substr(kHeaderBytes);
  if (checksum64(llvm::StringRef(payload.data(), payload.size())) != checksum)
    return reject("payload checksum mismatch");
  std::array<std::string_view, kFieldCount> fields;
  size_t offset = 0;
  for (size_t i = 0; i < kFieldCount; ++i) {
    fields[i] = payload.substr(offset, lengths[i]);
    offset += lengths[i];
  }
  if (!expected_key.empty() && fields[0] != expected_key)
    return reject(fmt::format("entry holds key {}, expected {}", fields[0], expected_key));
  if (fields[4].size() < 4 || fields[4].substr(0, 4) != "\x7f" "ELF")
    return reject("cubin is not an ELF image");
  CompiledKernel k;
  k.cache_key = std::string(fields[0]);
  k.kernel_name = std::string(fields[1]);
  k.lowered_name = std::string(fields[2]);
  k.arch = std::string(fields[3]);
  k.cubin = std::string(fields[4]);
  k.ptx = std::string(fields[5]);
  k.log = std::string(fields[6]);
  try {
    k.usage = ResourceUsage::from_json(fields[7]);
  } catch (const Error& e) {
    return reject(e.what());
  }
  return k;
}

// ---- the cache -----------------------------------------------------------------------------------------

CompileCache::CompileCache(std::string dir) : dir_(std::move(dir)) {}

std::string CompileCache::default_dir() {
  if (const char* d = std::getenv("KILN_CACHE_DIR"); d && *d)
    return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d)
    return std::string(d) + "/kiln";
  if (const char* d = std::getenv("HOME"); d && *d)
    return std::string(d) + "/.cache/kiln";
  return "";
}

std::string CompileCache::key_for(const CompileRequest& req) const {
  HashBuilder h;
  h.add("kiln-compile-cache").add(int64_t{kFormatVersion});
  h.add(kiln::version()).add(nvrtc().version_string());
  h.add(req.kernel_name).add(req.arch);
  std::vector<std::string> options = nvrtc_options(req);
  h.add(static_cast<int64_t>(options.size()));
  for (const auto& o : options)
    h.add(o);
  h.add(req.source);
  return h.hex();
}

std::string CompileCache::entry_path(std::string_view key) const {
  if (dir_.empty())
    return "";
  llvm::SmallString<256> p(compile_dir(dir_));
  llvm::sys::path::append(p, std::string(key) + kEntrySuffix);
  return p.str().str();
}

std::optional<CompiledKernel> CompileCache::read_disk(const std::string& key) {
  std::string path = entry_path(key);
  if (path.empty())
    return std::nullopt;
  std::string problem;
  std::optional<CompiledKernel> k;
  try {
    std::optional<std::string> bytes = read_cache_file(path, kMaxEntryBytes);
    if (!bytes)
      return std::nullopt;
    k = parse_cache_entry(*bytes, key, &problem);
  } catch (const Error&) { // not a regular file, or too large: a corrupt entry, rewritten after the compile
  }
  if (!k) {
    std::lock_guard lock(mutex_);
    ++stats_.corrupt_entries;
  }
  return k;
}

void CompileCache::write_disk(const std::string& key, const CompiledKernel& kernel) {
  if (dir_.empty())
    return;
  std::string final_path = entry_path(key);
  std::string dir = compile_dir(dir_);
  std::string bytes = serialize_cache_entry(key, kernel);
  std::string problem = write_file_atomically(dir, final_path, bytes, dir + "/" + key + kTempMarker + "%%%%%%%%%%%%");
  if (problem.empty())
    return;
  std::lock_guard lock(mutex_);
  ++stats_.write_failures;
  if (!warned_write_failure_) {
    // A cache that cannot be written costs time, not correctness; say so once and go on.
    std::fprintf(stderr, "kiln: warning: compile cache entry not saved (set KILN_CACHE_DIR to a writable "
                         "directory): %s\n", problem.c_str());
    warned_write_failure_ = true;
  }
}

CompiledKernel CompileCache::get(const CompileRequest& request) {
  CompileRequest req = request;
  bool dumping = !dump_dir_from_env().empty();
  if (dumping)
    req.want_ptx = true;
  std::string key = key_for(req);
  auto usable = [&](const CompiledKernel& k) { return !req.want_ptx || !k.ptx.empty(); };
  auto dump = [&](const CompiledKernel& k) {
    if (dumping)
      dump_artifacts(k.kernel_name, {{"cu", req.source},
                                     {"ptx", k.ptx},
                                     {"cubin", k.cubin},
                                     {"log", k.log},
                                     {"usage.json", k.usage.to_json()}});
    return k;
  };

  {
    std::lock_guard lock(mutex_);
    if (auto it = memory_.find(key); it != memory_.end() && usable(it->second)) {
      ++stats_.memory_hits;
      return dump(it->second);
    }
  }
  if (std::optional<CompiledKernel> k = read_disk(key); k && usable(*k)) {
    std::lock_guard lock(mutex_);
    ++stats_.disk_hits;
    memory_[key] = *k;
    return dump(*k);
  }

  CompiledKernel k = compile_cuda(req);  // outside the lock: compiles take long and may run in parallel
  k.cache_key = key;
  write_disk(key, k);
  {
    std::lock_guard lock(mutex_);
    ++stats_.misses;
    memory_[key] = k;
  }
  return dump(k);
}

void CompileCache::clear_memory() {
  std::lock_guard lock(mutex_);
  memory_.clear();
}

std::vector<CacheEntryInfo> CompileCache::list() const {
  std::vector<CacheEntryInfo> out;
  if (dir_.empty())
    return out;
  for (const CacheFile& file : list_cache_dir(compile_dir(dir_))) {
    llvm::StringRef name = llvm::sys::path::filename(file.path);
    if (!name.endswith(kEntrySuffix))
      continue;
    CacheEntryInfo info;
    info.path = file.path;
    info.key = name.drop_back(std::strlen(kEntrySuffix)).str();
    info.size_bytes = file.size_bytes;
    info.age_seconds = file.age_seconds;
    try {
      if (std::optional<std::string> bytes = read_cache_file(file.path, kMaxEntryBytes))
        if (auto k = parse_cache_entry(*bytes, info.key, &info.problem)) {
          info.valid = true;
          info.kernel_name = k->kernel_name;
          info.arch = k->arch;
        }
    } catch (const Error& e) {
      info.problem = e.what();
    }
    out.push_back(std::move(info));
  }
  return out;
}

size_t CompileCache::clear() {
  clear_memory();
  if (dir_.empty())
    return 0;
  size_t removed = 0;
  for (const CacheFile& file : list_cache_dir(compile_dir(dir_))) {
    llvm::StringRef name = llvm::sys::path::filename(file.path);
    if ((name.endswith(kEntrySuffix) || name.contains(kTempMarker)) && remove_cache_file(file.path))
      ++removed;
  }
  return removed;
}

CacheStats CompileCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CompileCache::reset_stats() {
  std::lock_guard lock(mutex_);
  stats_ = CacheStats{};
}

CompileCache& default_compile_cache() {
  static CompileCache cache(CompileCache::default_dir());
  return cache;
}

CompiledKernel compile_cached(const CompileRequest& req) { return default_compile_cache().get(req); }

} // namespace kiln::rt
