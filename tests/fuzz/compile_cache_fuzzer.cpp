// Fuzzes the compile cache's entry reader (runtime/compile_cache.h): parse_cache_entry on arbitrary bytes, on
// entries serialized from fuzzed kernels (which must read back unchanged) and on such entries with one byte
// changed or the tail cut off; and ResourceUsage::from_json, the entry's usage field, which a raw entry only
// reaches past its checksum. A bad entry must be rejected (nullopt with a reason), bad JSON must be a
// kiln::Error; any other exception, a crash or a sanitizer report is a bug.
#include "runtime/compile_cache.h"
#include "support/error.h"

#include "tests/fuzz/fuzz_input.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace {

enum class Mode : uint8_t { RawEntry, RoundTrip, DamagedEntry, UsageJson, kLast = UsageJson };

kiln::rt::CompiledKernel fuzzed_kernel(kiln::fuzz::FuzzInput& in) {
  kiln::rt::CompiledKernel k;
  k.kernel_name = in.string(64);
  k.lowered_name = in.string(64);
  k.arch = in.string(16);
  k.cubin = "\x7f" "ELF" + in.string(256); // the reader checks the ELF magic
  k.ptx = in.string(256);
  k.log = in.string(256);
  k.usage.registers = in.any<int>();
  k.usage.shared_bytes = in.any<int64_t>();
  k.usage.stack_frame_bytes = in.any<int64_t>();
  k.usage.spill_store_bytes = in.any<int64_t>();
  k.usage.spill_load_bytes = in.any<int64_t>();
  k.usage.constant_bytes = in.any<int64_t>();
  k.usage.local_bytes = in.any<int64_t>();
  k.usage.max_threads_per_block = in.any<int>();
  return k;
}

bool same_kernel(const kiln::rt::CompiledKernel& a, const kiln::rt::CompiledKernel& b) {
  return a.kernel_name == b.kernel_name && a.lowered_name == b.lowered_name && a.arch == b.arch &&
         a.cubin == b.cubin && a.ptx == b.ptx && a.log == b.log && a.usage == b.usage;
}

// An entry must be accepted whole or rejected with a reason.
void parse_any(std::string_view bytes, std::string_view key) {
  std::string problem;
  const auto k = kiln::rt::parse_cache_entry(bytes, key, &problem);
  if (!k && problem.empty())
    std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::FuzzInput in(data, size);
  switch (in.choice<Mode>()) {
  case Mode::RawEntry: {
    const std::string bytes = in.rest();
    parse_any(bytes, "");
    parse_any(bytes, "0123456789abcdef");
    break;
  }
  case Mode::RoundTrip: {
    const std::string key = in.string(64);
    const kiln::rt::CompiledKernel k = fuzzed_kernel(in);
    std::string problem;
    const auto back = kiln::rt::parse_cache_entry(kiln::rt::serialize_cache_entry(key, k), key, &problem);
    if (!back || !same_kernel(*back, k) || back->cache_key != key)
      std::abort();
    break;
  }
  case Mode::DamagedEntry: {
    const std::string key = in.string(64);
    std::string bytes = kiln::rt::serialize_cache_entry(key, fuzzed_kernel(in));
    const size_t at = in.integer<size_t>(0, bytes.size() - 1);
    if (in.boolean())
      bytes[at] = static_cast<char>(bytes[at] ^ (1 + in.any<uint8_t>() % 255));
    else
      bytes.resize(at);
    parse_any(bytes, key);
    break;
  }
  case Mode::UsageJson:
    try {
      const kiln::rt::ResourceUsage usage = kiln::rt::ResourceUsage::from_json(in.rest());
      if (!(kiln::rt::ResourceUsage::from_json(usage.to_json()) == usage))
        std::abort();
    } catch (const kiln::Error&) {
    }
    break;
  }
  return 0;
}
