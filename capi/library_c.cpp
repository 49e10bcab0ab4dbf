// The C ABI's library-wide entry points: version, errors, option defaults, devices and caches.
#include "capi/c_boundary.h"
#include "kiln/kiln.h" // gpu_available
#include "runtime/compile_cache.h"
#include "runtime/device.h"
#include "runtime/nvrtc.h"
#include "runtime/tuning_cache.h"
#include "support/version.h"

#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/JSON.h>
#include <llvm/Support/Path.h>

#include <cstring>

using namespace kiln;
using namespace kiln::capi;

namespace {

std::string json_text(llvm::json::Value v) { return llvm::formatv("{0}", v).str(); }

std::string cache_root() {
  const std::string root = rt::CompileCache::default_dir();
  if (root.empty())
    fail("no cache directory: set KILN_CACHE_DIR (or XDG_CACHE_HOME or HOME) to choose one");
  return root;
}

std::string sub_dir(const std::string& root, const char* name) {
  llvm::SmallString<256> p(root);
  llvm::sys::path::append(p, name);
  return p.str().str();
}

} // namespace

extern "C" {

const char* kiln_version(void) { return kiln::version(); }

int32_t kiln_abi_version(void) { return KILN_C_ABI_VERSION; }

const char* kiln_last_error(void) { return last_error_message(); }

const char* kiln_status_name(int32_t status) {
  switch (status) {
  case KILN_OK:
    return "KILN_OK";
  case KILN_ERROR:
    return "KILN_ERROR";
  case KILN_ERROR_INVALID_ARGUMENT:
    return "KILN_ERROR_INVALID_ARGUMENT";
  case KILN_ERROR_UNAVAILABLE:
    return "KILN_ERROR_UNAVAILABLE";
  case KILN_ERROR_OUT_OF_MEMORY:
    return "KILN_ERROR_OUT_OF_MEMORY";
  case KILN_ERROR_INTERNAL:
    return "KILN_ERROR_INTERNAL";
  case KILN_ERROR_UNKNOWN:
    return "KILN_ERROR_UNKNOWN";
  default:
    return "(not a kiln_status)";
  }
}

void kiln_attention_options_init_sized(kiln_attention_options* options, uint32_t struct_size) {
  if (options == nullptr || !known_options_size(struct_size))
    return;
  kiln_attention_options defaults{};
  defaults.struct_size = struct_size;
  defaults.causal = KILN_CAUSAL_NONE;
  defaults.layout = KILN_LAYOUT_BHSD;
  defaults.deterministic = 1;
  defaults.exact_masked_v = 0;
  defaults.autotune = KILN_AUTOTUNE_ENV;
  defaults.mods = nullptr;
  defaults.mod_tensors = nullptr;
  defaults.num_mod_tensors = 0;
  defaults.dsink = nullptr;
  defaults.block_mask = nullptr;
  std::memcpy(options, &defaults, struct_size); // never past the caller's struct
}

// The exported name of ABI version 1 (kiln_c.h's macro of the same name is not applied here: parenthesized).
void(kiln_attention_options_init)(kiln_attention_options* options) {
  kiln_attention_options_init_sized(options, KILN_ATTENTION_OPTIONS_V1_SIZE);
}

kiln_status kiln_device_count(int32_t* count, const char** why_not) {
  return guarded([&] {
    require(count, "count");
    int32_t& n = *count;
    n = 0;
    std::string why;
    if (rt::driver_available(&why)) {
      try {
        n = rt::device_count();
        if (n == 0)
          why = "the CUDA driver reports no device";
      } catch (const Error& e) { // a driver that loads but cannot count devices: none usable
        why = e.what();
      }
    }
    if (why_not)
      *why_not = return_string(why);
  });
}

kiln_status kiln_device_info(int32_t ordinal, const char** json) {
  return guarded([&] {
    require(json, "json");
    std::string why;
    if (!rt::driver_available(&why))
      throw Unavailable("kiln_device_info needs a CUDA driver: " + why);
    const rt::DeviceInfo d = rt::query_device(ordinal);
    *json = return_string(json_text(llvm::json::Object{{"ordinal", d.ordinal},
                                                       {"name", d.name},
                                                       {"arch", d.arch},
                                                       {"cc_major", d.cc_major},
                                                       {"cc_minor", d.cc_minor},
                                                       {"sm_count", d.sm_count},
                                                       {"max_shared_per_block", d.max_shared_per_block},
                                                       {"max_shared_per_block_optin", d.max_shared_per_block_optin},
                                                       {"max_shared_per_sm", d.max_shared_per_sm},
                                                       {"l2_bytes", d.l2_bytes},
                                                       {"total_memory_bytes", d.total_memory_bytes},
                                                       {"driver_version", d.driver_version}}));
  });
}

int32_t kiln_gpu_available(const char** why_not) {
  try {
    std::string why;
    const bool available = gpu_available(&why); // never throws, but may run out of memory building `why`
    if (why_not)
      *why_not = return_string(why);
    return available ? 1 : 0;
  } catch (...) {
    if (why_not)
      *why_not = "";
    return 0;
  }
}

kiln_status kiln_cache_path(const char** json) {
  return guarded([&] {
    require(json, "json");
    const std::string root = cache_root();
    *json = return_string(json_text(
        llvm::json::Object{{"root", root}, {"compile", sub_dir(root, "compile")}, {"tune", sub_dir(root, "tune")}}));
  });
}

kiln_status kiln_cache_clear(int64_t* removed) {
  return guarded([&] {
    const std::string root = cache_root();
    const size_t n = rt::CompileCache(root).clear() + rt::TuningCache(root).clear();
    if (removed)
      *removed = static_cast<int64_t>(n);
  });
}

} // extern "C"
