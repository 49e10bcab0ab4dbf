// The block-mask entry points of the C ABI: kiln_block_mask_create_cuda over attention::make_block_mask,
// kiln_block_mask_create_host over make_host_block_mask on the caller's host mod tensors (validated by the
// same validate_block_mask_args), destroy and info; and the per-call lookup of options->block_mask.
#include "capi/block_mask_c.h"

#include "capi/c_boundary.h"
#include "capi/host_attention.h"

#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/JSON.h>

namespace kiln::capi {
namespace {

const char* causal_name(int causal) {
  return causal == 0 ? "none" : causal == 1 ? "top-left" : "bottom-right";
}

// options->block_mask of a version-4 struct, else null (struct_size checked first).
const kiln_block_mask* block_mask_field(const kiln_attention_options* options) {
  if (options == nullptr)
    return nullptr;
  check_struct_size(*options);
  return options->struct_size >= sizeof(kiln_attention_options) ? options->block_mask : nullptr;
}

struct CreateArgs {
  attention::BlockMaskSizes sizes;
  attention::AttentionOptions options;
};

CreateArgs create_args(int64_t B, int64_t H, int64_t H_KV, int64_t N_Q, int64_t N_K,
                       const kiln_attention_options* options, kiln_block_mask** block_mask) {
  require(block_mask, "block_mask");
  *block_mask = nullptr;
  CreateArgs a{{B, H, H_KV, N_Q, N_K}, attention_options(options)};
  if (block_mask_field(options) != nullptr)
    fail("kiln_attention_options.block_mask is set; expected NULL (a block mask is built from the mods, not "
         "from another block mask)");
  return a;
}

} // namespace

std::shared_ptr<const attention::BlockMask> cuda_block_mask(const kiln_attention_options* options,
                                                            const char* entry) {
  const kiln_block_mask* bm = block_mask_field(options);
  if (bm == nullptr)
    return nullptr;
  if (!bm->device)
    fail(
        "{}: kiln_attention_options.block_mask was made by kiln_block_mask_create_host (host memory, for the "
        "*_host calls); expected one from kiln_block_mask_create_cuda",
        entry);
  return bm->device;
}

std::shared_ptr<const HostBlockMask> host_block_mask(const kiln_attention_options* options,
                                                     const char* entry) {
  const kiln_block_mask* bm = block_mask_field(options);
  if (bm == nullptr)
    return nullptr;
  if (!bm->host)
    fail("{}: kiln_attention_options.block_mask was made by kiln_block_mask_create_cuda (device memory, for "
         "the "
         "*_cuda calls); expected one from kiln_block_mask_create_host",
         entry);
  return bm->host;
}

} // namespace kiln::capi

using namespace kiln;
using namespace kiln::capi;

extern "C" {

kiln_status kiln_block_mask_create_cuda(int64_t B, int64_t H, int64_t H_KV, int64_t N_Q, int64_t N_K,
                                        int64_t block_m, int64_t block_n,
                                        const kiln_attention_options* options, kiln_block_mask** block_mask) {
  return guarded([&] {
    const CreateArgs a = create_args(B, H, H_KV, N_Q, N_K, options, block_mask);
    auto handle = std::make_unique<kiln_block_mask>();
    on_gpu("kiln_block_mask_create_cuda",
           [&] { handle->device = attention::make_block_mask(a.sizes, a.options, block_m, block_n); });
    *block_mask = handle.release();
  });
}

kiln_status kiln_block_mask_create_host(int64_t B, int64_t H, int64_t H_KV, int64_t N_Q, int64_t N_K,
                                        int64_t block_m, int64_t block_n,
                                        const kiln_attention_options* options, kiln_block_mask** block_mask) {
  return guarded([&] {
    const CreateArgs a = create_args(B, H, H_KV, N_Q, N_K, options, block_mask);
    const attention::ValidatedBlockMask v =
        attention::validate_block_mask_args(a.sizes, a.options, block_m, block_n);
    const ModTensorValues tensors = host_mod_tensors(a.options, v.mask_tensors);
    auto handle = std::make_unique<kiln_block_mask>();
    handle->host = std::make_shared<const HostBlockMask>(
        make_host_block_mask(v.problem, a.options.mods, tensors, block_m, block_n, Executor::Interpreter));
    *block_mask = handle.release();
  });
}

void kiln_block_mask_destroy(kiln_block_mask* block_mask) { delete block_mask; } // frees never throw

kiln_status kiln_block_mask_info(const kiln_block_mask* block_mask, const char** json) {
  return guarded([&] {
    require(json, "json");
    *json = nullptr;
    const kiln_block_mask& bm = require(block_mask, "block_mask");
    const BlockMaskLayout& l = bm.device ? bm.device->layout : bm.host->layout;
    const bool runs = bm.device ? bm.device->runs : bm.host->runs;
    llvm::json::Object info{{"memory", bm.device ? "cuda" : "host"},
                            {"B", l.B},
                            {"H", l.H},
                            {"H_KV", l.H_KV},
                            {"N_Q", l.N_Q},
                            {"N_K", l.N_K},
                            {"block_m", l.block_m},
                            {"block_n", l.block_n},
                            {"causal", causal_name(l.causal)},
                            {"mask_mods", l.mask_mods},
                            {"runs", runs}};
    *json = return_string(llvm::formatv("{0}", llvm::json::Value(std::move(info))).str());
  });
}

} // extern "C"
