#include "capi/host_decode.h"

#include "capi/host_rows.h"
#include "kernels/attention/attention_api_checks.h"

#include <cstring>

namespace kiln::capi {
namespace {

using attention::detail::ApiSite;
using attention::detail::reject;

int32_t read_i32(uint64_t address, int64_t index) {
  int32_t v = 0;
  std::memcpy(&v, host_bytes(address) + index * static_cast<int64_t>(sizeof(int32_t)), sizeof v);
  return v;
}

// The key counts of options.seqlens_k, each within the cache's capacity (the device path cannot check them).
std::vector<int64_t> checked_seqlens(const attention::ValidatedDecode& a, const ApiSite& site) {
  const DecodeProblem& p = a.problem;
  std::vector<int64_t> out;
  for (int64_t b = 0; b < p.B; ++b) {
    const int64_t n = read_i32(a.seqlens_k, b);
    if (n < 0 || n > p.N_K)
      reject(site, "options.seqlens_k[{}] = {}; expected a key count in [0, {}], the cache's capacity{}", b,
             n, p.N_K, p.paged() ? " (max_pages * page_size)" : "");
    out.push_back(n);
  }
  return out;
}

// The block table as the kernel reads it, [B, max_pages] dense; every page a sequence's keys reach checked to
// be one of the cache's `num_pages`. A contiguous cache gets the kernel's unused table of B zeros.
HostBuffer checked_block_table(const attention::ValidatedDecode& a, int64_t num_pages, const ApiSite& site) {
  const DecodeProblem& p = a.problem;
  HostBuffer table(DType::i32, p.B * p.max_pages(), "BLOCK_TABLE");
  if (!p.paged())
    return table;
  for (int64_t b = 0; b < p.B; ++b) {
    const int64_t reached = (p.seqlen(b) + p.page_size - 1) / p.page_size;
    for (int64_t slot = 0; slot < p.max_pages(); ++slot) {
      const int32_t page = read_i32(a.block_table, b * a.stride_bt + slot);
      if (slot < reached && (page < 0 || page >= num_pages))
        reject(
            site,
            "options.block_table[{}, {}] = {}, a page sequence {} reads (its keys {} to {}); expected a page "
            "of the cache's {} (k_cache's first dim)",
            b, slot, page, b, slot * p.page_size, std::min(p.seqlen(b), (slot + 1) * p.page_size) - 1,
            num_pages);
      table.set_int(b * p.max_pages() + slot, page);
    }
  }
  return table;
}

} // namespace

void decode_host(const attention::TensorRef& q, const attention::TensorRef& k_cache,
                 const attention::TensorRef& v_cache, const attention::TensorRef& o,
                 const std::optional<attention::TensorRef>& lse, const attention::DecodeOptions& options) {
  const ApiSite site{"decode", std::source_location::current()};
  const attention::ValidatedDecode a = attention::validate_decode_args(q, k_cache, v_cache, o, lse, options);
  if (a.empty)
    return;
  DecodeProblem p = a.problem;
  if (options.seqlens_k)
    p.seqlens_k = checked_seqlens(a, site);
  HostBuffer table = checked_block_table(a, k_cache.shape[0], site);
  HostBuffer seqlens(DType::i32, p.B, "SEQLENS_K");
  for (int64_t b = 0; b < p.B; ++b)
    seqlens.set_int(b, p.seqlen(b));

  // q [B, N_Q, H, D]; the cache [B, N_K, H_KV, D] or [num_pages, page_size, H_KV, D]: rows of D elements.
  const RowShape q_rows{{p.B, p.N_Q, p.H}, p.D};
  const RowShape kv_rows{{k_cache.shape[0], k_cache.shape[1], p.H_KV}, p.D};
  const auto q_dense = dense_row_strides(q_rows), kv_dense = dense_row_strides(kv_rows);
  DecodeInputs in{
      gather_rows(a.q, p.dtype, {a.stride_qb, a.stride_qn, a.stride_qh}, q_dense, q_rows, "q"),
      gather_rows(a.k, p.dtype, {a.stride_kb, a.stride_kn, a.stride_kh}, kv_dense, kv_rows, "k_cache"),
      gather_rows(a.v, p.dtype, {a.stride_vb, a.stride_vn, a.stride_vh}, kv_dense, kv_rows, "v_cache"),
      std::move(table), std::move(seqlens)};

  const Config split = options.split_config ? *options.split_config : default_decode_split_config(p);
  const int64_t bn = split.get("BLOCK_N");
  const int64_t num_splits = options.num_splits > 0
                                 ? options.num_splits
                                 : choose_num_splits(p.B * p.H_KV * decode_row_tiles(p, split),
                                                     (p.N_K + bn - 1) / bn, kInterpreterDecodeSlots);
  const AttentionResult r = run_decode(p, split, default_decode_combine_config(p), num_splits, in);

  // O in logical order [B, H, N_Q, D], the kernel's values exactly: rows (b, i, h) at (b·H + h)·N_Q + i.
  const HostBuffer out = buffer_of(p.dtype, r.o, "o");
  scatter_rows(out, {p.H * p.N_Q * p.D, p.D, p.N_Q * p.D}, a.o, {a.stride_ob, a.stride_on, a.stride_oh},
               q_rows);
  if (a.lse) { // f32 [B, H, N_Q], contiguous (validated)
    const HostBuffer l = buffer_of(DType::f32, r.lse, "lse");
    std::memcpy(host_bytes(*a.lse), l.bytes.data(), l.bytes.size());
  }
}

} // namespace kiln::capi
