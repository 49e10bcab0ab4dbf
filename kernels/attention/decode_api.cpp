#include "kernels/attention/decode_api.h"

#include "kernels/attention/attention_api_checks.h"
#include "kernels/attention/attention_launch.h"
#include "kernels/attention/decode_combine.h"
#include "kernels/attention/decode_split.h"
#include "jit/occupancy.h"
#include "runtime/device.h"

#include <cmath>
#include <limits>
#include <vector>

namespace kiln::attention {

using detail::ApiSite;
using detail::ByteRange;
using detail::dims_str;
using detail::reject;

namespace {

constexpr int64_t kMaxSplits = 1024;

// An i32 tensor the split kernel reads element by element (block table, seqlens_k): rank, dtype, a non-null
// 4-byte aligned address and a contiguous last dim.
void check_index_tensor(const char* name, const TensorRef& t, llvm::ArrayRef<int64_t> shape,
                        const char* names, const ApiSite& site) {
  detail::check_rank(name, t, shape.size(), names, site);
  if (t.dtype != DType::i32)
    reject(site, "options.{} has dtype {}; expected i32", name, dtype_name(t.dtype));
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] >= 0 && t.shape[i] != shape[i])
      reject(site, "options.{} has shape {}; expected {} with {} = {} in dim {}", name, dims_str(t.shape),
             names, i == 0 ? "B" : "size", shape[i], i);
  if (t.shape.back() > 1 && t.strides.back() != 1)
    reject(site, "options.{} has strides {}; expected its last dim contiguous (stride 1)", name,
           dims_str(t.strides));
  if (t.data == 0)
    reject(site, "options.{} has a null data address; expected a device address", name);
  if (t.data % 4 != 0)
    reject(site, "options.{}'s address {:#x} is not 4-byte aligned; expected an i32 array's address", name,
           t.data);
}

} // namespace

uint64_t decode_workspace_bytes(int64_t B, int64_t H, int64_t N_Q, int64_t D, int64_t num_splits) {
  const int64_t rows = B * H * N_Q; // the partials, then a final LSE for a call that asks for none
  return static_cast<uint64_t>(decode_workspace_floats(rows, D, num_splits) + rows) * sizeof(float);
}

ValidatedDecode validate_decode_args(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                     const TensorRef& o, const std::optional<TensorRef>& lse,
                                     const DecodeOptions& options, std::source_location where) {
  const ApiSite site{"decode", where};
  const bool paged = options.block_table.has_value();
  const char* cache_names = paged ? "[num_pages, page_size, H_KV, D]" : "[B, N_K, H_KV, D]";
  detail::check_rank("q", q, 4, "[B, N_Q, H, D]", site);
  detail::check_rank("k_cache", k, 4, cache_names, site);
  detail::check_rank("v_cache", v, 4, cache_names, site);
  detail::check_rank("o", o, 4, "[B, N_Q, H, D]", site);
  if (lse)
    detail::check_rank("lse", *lse, 3, "[B, H, N_Q]", site);

  if (q.dtype != DType::f16 && q.dtype != DType::bf16 && q.dtype != DType::f32)
    reject(site, "q has dtype {}; expected f16, bf16 or f32", dtype_name(q.dtype));
  for (auto [name, t] : {std::pair{"k_cache", &k}, {"v_cache", &v}, {"o", &o}})
    if (t->dtype != q.dtype)
      reject(site, "{} has dtype {} but q has {}; q, k_cache, v_cache and o must share one dtype", name,
             dtype_name(t->dtype), dtype_name(q.dtype));
  if (lse && lse->dtype != DType::f32)
    reject(site, "lse has dtype {}; expected f32", dtype_name(lse->dtype));

  DecodeProblem p;
  p.B = q.shape[0], p.N_Q = q.shape[1], p.H = q.shape[2], p.D = q.shape[3];
  p.H_KV = k.shape[2];
  if (k.shape != v.shape)
    reject(site, "v_cache has shape {} but k_cache has {}; expected one shape {}", dims_str(v.shape),
           dims_str(k.shape), cache_names);
  if (k.shape[3] != p.D)
    reject(site, "k_cache has head dim {} but q has {} (q {}, k_cache {}); expected equal head dims",
           k.shape[3], p.D, dims_str(q.shape), dims_str(k.shape));
  if (o.shape != q.shape)
    reject(site, "o has shape {}; expected q's shape {}", dims_str(o.shape), dims_str(q.shape));
  const llvm::SmallVector<int64_t, 3> lse_shape = {p.B, p.H, p.N_Q};
  if (lse && lse->shape != lse_shape)
    reject(site, "lse has shape {}; expected [B, H, N_Q] = {}", dims_str(lse->shape), dims_str(lse_shape));
  if (p.D == 0 || p.D > detail::kMaxHeadDim || p.D % detail::kHeadDimMultiple != 0)
    reject(site, "head dim D={} is not supported; expected a multiple of {} in [{}, {}]", p.D,
           detail::kHeadDimMultiple, detail::kHeadDimMultiple, detail::kMaxHeadDim);
  for (auto [what, n] :
       {std::pair{"H (q heads)", p.H}, {"H_KV (cache heads)", p.H_KV}, {"N_Q (queries)", p.N_Q}})
    if (n == 0)
      reject(site, "{} is 0; expected at least 1", what);
  if (p.H % p.H_KV != 0)
    reject(
        site,
        "q has H={} heads, not a multiple of the cache's H_KV={}; each kv head serves H / H_KV query heads",
        p.H, p.H_KV);

  if (paged) {
    const TensorRef& bt = *options.block_table;
    check_index_tensor("block_table", bt, {p.B, -1}, "[B, max_pages]", site);
    p.page_size = k.shape[1];
    if (p.page_size < 16 || (p.page_size & (p.page_size - 1)) != 0)
      reject(site, "k_cache has pages of {} keys (shape {}); expected a power of two >= 16 as the page size",
             p.page_size, dims_str(k.shape));
    if (bt.shape[1] == 0)
      reject(site, "options.block_table has shape {}: no page a sequence; expected at least one column",
             dims_str(bt.shape));
    if (k.shape[0] == 0)
      reject(site, "k_cache has no page (shape {}); expected at least one", dims_str(k.shape));
    p.N_K = bt.shape[1] * p.page_size; // capacity
  } else {
    if (k.shape[0] != p.B)
      reject(site,
             "k_cache has batch {} but q has {} (q {}, k_cache {}); expected equal batch sizes, or "
             "options.block_table for a paged cache",
             k.shape[0], p.B, dims_str(q.shape), dims_str(k.shape));
    p.N_K = k.shape[1];
  }
  if (p.N_K == 0)
    reject(site, "the cache holds no key (k_cache {}); expected at least 1", dims_str(k.shape));
  if (options.seqlens_k) {
    check_index_tensor("seqlens_k", *options.seqlens_k, {p.B}, "[B]", site);
    p.seqlens_on_device = true;
  }
  for (auto [what, n] : {std::pair{"B", p.B},
                         {"H", p.H},
                         {"N_Q", p.N_Q},
                         {"N_K (cache capacity)", p.N_K},
                         {"B * H * N_Q", p.B * p.H * p.N_Q}})
    detail::check_size(what, n, site);
  if (p.B * p.H_KV > kMaxGridYZ)
    reject(site, "B * H_KV = {} is above {}: the split kernel's grid has one y per sequence and kv head",
           p.B * p.H_KV, kMaxGridYZ);

  if (options.causal == Causal::TopLeft)
    reject(site,
           "options.causal is TopLeft; decoding takes BottomRight (query i of N_Q sees keys j <= n_k - N_Q + "
           "i) or None");
  if (options.causal != Causal::None && options.causal != Causal::BottomRight)
    reject(site, "options.causal={} is not a mode; expected None or BottomRight",
           static_cast<int>(options.causal));
  p.causal = static_cast<int>(options.causal);
  if (!std::isfinite(options.sm_scale) ||
      std::fabs(options.sm_scale) > static_cast<double>(std::numeric_limits<float>::max()))
    reject(site, "options.sm_scale={} is not a finite f32 value; expected a finite scale, or 0 for 1/sqrt(D)",
           options.sm_scale);
  p.sm_scale = options.sm_scale;
  p.dtype = q.dtype;
  if (options.num_splits < 0 || options.num_splits > kMaxSplits)
    reject(site, "options.num_splits={} is outside [0, {}]; expected 0 (chosen) or a split count",
           options.num_splits, kMaxSplits);
  if (options.split_config) {
    try {
      check_decode_split_config(p, *options.split_config);
    } catch (const Error& e) {
      reject(site, "options.split_config: {}", e.what());
    }
  }
  const Config split = options.split_config ? *options.split_config : default_decode_split_config(p);
  if (decode_row_tiles(p, split) > kMaxGridYZ)
    reject(site, "G * N_Q = {} packed rows need {} row tiles of {}, above the grid's {}", p.group() * p.N_Q,
           decode_row_tiles(p, split), split.get("BLOCK_M"), kMaxGridYZ);

  ValidatedDecode r;
  r.problem = p;
  r.empty = p.B == 0;
  if (r.empty)
    return r;

  // Strides, addresses, extents.
  const std::pair<const char*, const TensorRef*> moved[] = {
      {"q", &q}, {"k_cache", &k}, {"v_cache", &v}, {"o", &o}};
  for (auto [name, t] : moved)
    if (t->strides[3] != 1 && t->shape[3] > 1)
      reject(site,
             "{}'s head dim is not contiguous: stride {} (strides {}); expected stride 1 in the last dim",
             name, t->strides[3], dims_str(t->strides));
  std::vector<ByteRange> ranges;
  for (auto [name, t] : moved)
    if (t != &o)
      ranges.push_back(detail::tensor_range(name, *t, site));
  if (paged)
    ranges.push_back(detail::tensor_range("block_table", *options.block_table, site));
  if (options.seqlens_k)
    ranges.push_back(detail::tensor_range("seqlens_k", *options.seqlens_k, site));
  const size_t first_output = ranges.size();
  ranges.push_back(detail::tensor_range("o", o, site));
  for (auto [name, t] : moved)
    detail::check_alignment(name, *t, site);
  if (lse) {
    ranges.push_back(detail::tensor_range("lse", *lse, site));
    if (lse->data == 0 || lse->data % detail::kAlignBytes != 0)
      reject(site,
             "lse's address {:#x} is null or not 16-byte aligned; expected a 16-byte aligned device address",
             lse->data);
    const TensorRef dense = TensorRef::contiguous(lse->data, DType::f32, lse_shape);
    for (size_t i = 0; i < 3; ++i)
      if (lse_shape[i] > 1 && lse->strides[i] != dense.strides[i])
        reject(site, "lse has strides {}; expected the contiguous strides {} of [B, H, N_Q]",
               dims_str(lse->strides), dims_str(dense.strides));
  }
  if (options.workspace) {
    const TensorRef& w = *options.workspace;
    detail::check_rank("workspace", w, 1, "[elements]", site);
    if (w.dtype != DType::f32)
      reject(site, "options.workspace has dtype {}; expected f32", dtype_name(w.dtype));
    if (w.shape[0] > 1 && w.strides[0] != 1)
      reject(site, "options.workspace has stride {}; expected a contiguous f32 array (stride 1)",
             w.strides[0]);
    if (w.data == 0 || w.data % detail::kAlignBytes != 0)
      reject(site, "options.workspace's address {:#x} is null or not 16-byte aligned", w.data);
    // The split count is known only on the device; the largest one the call may use bounds what is needed.
    const int64_t splits = options.num_splits ? options.num_splits : 0;
    if (splits) {
      const uint64_t need = decode_workspace_bytes(p.B, p.H, p.N_Q, p.D, splits);
      if (static_cast<uint64_t>(w.shape[0]) * sizeof(float) < need)
        reject(site,
               "options.workspace holds {} f32 ({} bytes); {} splits need {} bytes (decode_workspace_bytes)",
               w.shape[0], w.shape[0] * 4, splits, need);
    }
    ranges.push_back(detail::tensor_range("workspace", w, site));
    r.workspace = w.data;
  }
  if (!detail::elements_distinct(o))
    reject(site,
           "o's elements overlap each other (shape {}, strides {}); expected every element its own memory",
           dims_str(o.shape), dims_str(o.strides));
  detail::check_outputs_apart(ranges, first_output, site);

  r.stride_qb = q.strides[0], r.stride_qn = q.strides[1], r.stride_qh = q.strides[2];
  r.stride_kb = k.strides[0], r.stride_kn = k.strides[1], r.stride_kh = k.strides[2];
  r.stride_vb = v.strides[0], r.stride_vn = v.strides[1], r.stride_vh = v.strides[2];
  r.stride_ob = o.strides[0], r.stride_on = o.strides[1], r.stride_oh = o.strides[2];
  r.q = q.data, r.k = k.data, r.v = v.data, r.o = o.data;
  if (paged) {
    r.block_table = options.block_table->data;
    r.stride_bt = options.block_table->strides[0];
  }
  if (options.seqlens_k)
    r.seqlens_k = options.seqlens_k->data;
  if (lse)
    r.lse = lse->data;
  return r;
}

int64_t decode_slots(const Config& split_config) {
  const rt::DeviceInfo& device = rt::current_device();
  return device.sm_count * resident_ctas_per_sm(*detail::compiled_for(decode_split_def(), split_config), device);
}

int64_t decode_num_splits(const ValidatedDecode& a, const Config& split_config, int64_t requested) {
  if (requested > 0)
    return requested;
  const DecodeProblem& p = a.problem;
  const int64_t bn = split_config.get("BLOCK_N");
  return choose_num_splits(p.B * p.H_KV * decode_row_tiles(p, split_config), (p.N_K + bn - 1) / bn,
                           decode_slots(split_config));
}

void decode(const TensorRef& q, const TensorRef& k_cache, const TensorRef& v_cache, const TensorRef& o,
            const std::optional<TensorRef>& lse, const DecodeOptions& options, std::source_location where) {
  const ApiSite site{"decode", where};
  const ValidatedDecode a = validate_decode_args(q, k_cache, v_cache, o, lse, options, where);
  if (a.empty)
    return;
  const DecodeProblem& p = a.problem;
  detail::require_driver(site);
  rt::current_device(); // makes the context current before any allocation or launch

  const Config base = options.split_config ? *options.split_config : default_decode_split_config(p);
  const int64_t num_splits = decode_num_splits(a, base, options.num_splits);
  const int64_t rows = p.B * p.H * p.N_Q;
  const uint64_t workspace_bytes = decode_workspace_bytes(p.B, p.H, p.N_Q, p.D, num_splits);
  if (options.workspace &&
      static_cast<uint64_t>(options.workspace->shape[0]) * sizeof(float) < workspace_bytes)
    reject(site,
           "options.workspace holds {} f32 ({} bytes); the {} splits chosen need {} bytes "
           "(decode_workspace_bytes, or set options.num_splits)",
           options.workspace->shape[0], options.workspace->shape[0] * 4, num_splits, workspace_bytes);
  std::optional<rt::DeviceBuffer> owned;
  if (!a.workspace)
    owned.emplace(workspace_bytes);
  const uint64_t o_part = a.workspace ? *a.workspace : owned->ptr();
  const uint64_t lse_part = o_part + static_cast<uint64_t>(num_splits * rows * p.D) * sizeof(float);
  const uint64_t lse_out =
      a.lse ? *a.lse : lse_part + static_cast<uint64_t>(num_splits * rows) * sizeof(float);

  std::vector<LaunchArg> split_args = {LaunchArg::pointer(a.q),         LaunchArg::pointer(a.k),
                                       LaunchArg::pointer(a.v),         LaunchArg::pointer(a.block_table),
                                       LaunchArg::pointer(a.seqlens_k), LaunchArg::pointer(o_part),
                                       LaunchArg::pointer(lse_part),    LaunchArg::of_float(p.scale())};
  for (int64_t n : {p.B, p.H, p.H_KV, p.N_Q, p.N_K, p.D, std::max<int64_t>(p.page_size, 1), num_splits})
    split_args.push_back(LaunchArg::of_int(n));
  for (int64_t s : {a.stride_qb, a.stride_qn, a.stride_qh, a.stride_kb, a.stride_kn, a.stride_kh, a.stride_vb,
                    a.stride_vn, a.stride_vh, a.stride_bt})
    split_args.push_back(LaunchArg::of_int(s));
  const SizeArgs sizes = decode_size_args(p, num_splits);
  const rt::Stream stream = rt::Stream::wrap(options.stream);
  if (options.split_config) {
    detail::compiled_for(decode_split_def(), base)
        ->launch(decode_split_def().grid(base, sizes), split_args, stream);
  } else {
    // Tuning launches write a scratch copy of the partials, never the caller's memory.
    const std::vector<OutputArg> outputs = {{5, static_cast<size_t>(num_splits * rows * p.D) * sizeof(float)},
                                            {6, static_cast<size_t>(num_splits * rows) * sizeof(float)}};
    TuneOptions tune;
    tune.mode = options.autotune;
    tune.bytes =
        2.0 * static_cast<double>(p.B * p.N_K * p.H_KV * p.D * dtype_bytes(p.dtype)); // K and V, full
    detail::attention_tuner().launch(decode_split_def(), base, sizes, split_args, outputs, tune, stream);
  }

  std::vector<LaunchArg> combine_args = {LaunchArg::pointer(o_part), LaunchArg::pointer(lse_part),
                                         LaunchArg::pointer(a.o), LaunchArg::pointer(lse_out)};
  for (int64_t n : {p.B, p.H, p.N_Q, p.D, num_splits})
    combine_args.push_back(LaunchArg::of_int(n));
  for (int64_t s : {a.stride_ob, a.stride_on, a.stride_oh})
    combine_args.push_back(LaunchArg::of_int(s));
  const Config combine = default_decode_combine_config(p);
  detail::compiled_for(decode_combine_def(), combine)
      ->launch(decode_combine_def().grid(combine, sizes), combine_args, stream);
  if (owned)
    stream.synchronize(); // the workspace is freed on return
}

} // namespace kiln::attention
