#include "kernels/attention/attention_varlen_api.h"

#include "jit/jit_kernel.h"
#include "kernels/attention/attention_api_checks.h"
#include "kernels/attention/attention_launch.h"
#include "kernels/attention/fa2_fwd_varlen.h"
#include "runtime/cuda_driver.h"
#include "runtime/device.h"

#include <cmath>
#include <limits>
#include <string_view>

namespace kiln::attention {

using namespace detail;

namespace {

constexpr const char* kPacked = "[total, heads, D]";

int64_t numel(const TensorRef& t) {
  int64_t n = 1;
  for (int64_t d : t.shape)
    n *= d;
  return n;
}

// A cu_seqlens array: i32, rank 1, contiguous, at a non-null 4-byte-aligned address.
void check_offsets_tensor(const char* name, const TensorRef& t, const ApiSite& site) {
  check_rank(name, t, 1, "[B + 1]", site);
  if (t.dtype != DType::i32)
    reject(site, "{} has dtype {}; expected i32 offsets (FlashAttention's cu_seqlens)", name,
           dtype_name(t.dtype));
  if (t.shape[0] == 0)
    reject(site, "{} is empty; expected B + 1 offsets (at least the leading 0)", name);
  if (t.shape[0] > 1 && t.strides[0] != 1)
    reject(site, "{} has stride {}; expected a contiguous array (stride 1)", name, t.strides[0]);
  if (t.data == 0)
    reject(site, "{} has a null data address; expected a device address", name);
  if (t.data % sizeof(int32_t) != 0)
    reject(site, "{}'s address {:#x} is not 4-byte aligned; expected the address of an i32 array", name,
           t.data);
}

// The shape rules of q, k, v, o and lse, and the problem they describe.
AttentionProblem check_shapes(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
                              const std::optional<TensorRef>& lse, const AttentionOptions& options,
                              const ApiSite& site) {
  const std::pair<const char*, const TensorRef*> tensors[] = {{"q", &q}, {"k", &k}, {"v", &v}, {"o", &o}};
  for (auto [name, t] : tensors)
    check_rank(name, *t, 3, kPacked, site);
  if (lse)
    check_rank("lse", *lse, 2, "[H, total_q]", site);
  check_dtypes(q, k, v, o, lse, options, site);

  AttentionProblem p;
  p.H = q.shape[1], p.D = q.shape[2], p.H_KV = k.shape[1];
  for (auto [name, t] : {std::pair{"k", &k}, {"v", &v}})
    if (t->shape[2] != p.D)
      reject(site, "{} has head dim {} but q has {} (q {}, {} {}); expected equal head dims", name,
             t->shape[2], p.D, dims_str(q.shape), name, dims_str(t->shape));
  if (v.shape != k.shape)
    reject(site, "v has shape {} but k has {}; expected equal K and V shapes [total_k, H_KV, D]",
           dims_str(v.shape), dims_str(k.shape));
  if (o.shape != q.shape)
    reject(site, "o has shape {}; expected q's shape {}", dims_str(o.shape), dims_str(q.shape));
  const llvm::SmallVector<int64_t, 2> lse_shape = {p.H, q.shape[0]};
  if (lse && lse->shape != lse_shape)
    reject(site, "lse has shape {}; expected [H, total_q] = {} (FlashAttention's varlen LSE layout)",
           dims_str(lse->shape), dims_str(lse_shape));
  if (p.D == 0 || p.D > kMaxHeadDim || p.D % kHeadDimMultiple != 0)
    reject(site,
           "head dim D={} is not supported; expected a multiple of {} in [{}, {}] (rows are read as "
           "16-byte vectors and the widest tile is {})",
           p.D, kHeadDimMultiple, kHeadDimMultiple, kMaxHeadDim, kMaxHeadDim);
  for (auto [what, n] : {std::pair{"H (q heads)", p.H}, {"H_KV (k/v heads)", p.H_KV}})
    if (n == 0)
      reject(site, "{} is 0; expected at least 1", what);
  if (p.H % p.H_KV != 0)
    reject(site,
           "q has H={} heads, not a multiple of k/v's H_KV={}; each k/v head must serve H / H_KV query heads",
           p.H, p.H_KV);
  apply_options(p, q.dtype, options, site);
  return p;
}

} // namespace

ValidatedVarlen validate_varlen_args(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                     const TensorRef& o, const std::optional<TensorRef>& lse,
                                     const VarlenBatch& batch, const AttentionOptions& options,
                                     std::source_location where) {
  return detail::validate_varlen_args(q, k, v, o, lse, batch, options, ApiSite{"forward_varlen", where});
}

ValidatedVarlen detail::validate_varlen_args(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                             const TensorRef& o, const std::optional<TensorRef>& lse,
                                             const VarlenBatch& batch, const AttentionOptions& options,
                                             const ApiSite& site) {
  if (options.layout != AttentionOptions{}.layout)
    reject(site,
           "options.layout is \"{}\", but packed tensors have one layout, {}; leave options.layout at its "
           "default",
           options.layout, kPacked);
  if (options.block_mask)
    reject(site, "block masks are not built for variable-length batches yet; expected no options.block_mask "
                 "(forward() takes one on dense batches)");
  AttentionProblem p = check_shapes(q, k, v, o, lse, options, site);
  check_offsets_tensor("batch.cu_seqlens_q", batch.cu_seqlens_q, site);
  check_offsets_tensor("batch.cu_seqlens_k", batch.cu_seqlens_k, site);
  if (batch.cu_seqlens_q.shape != batch.cu_seqlens_k.shape)
    reject(site, "batch.cu_seqlens_q has {} offsets but batch.cu_seqlens_k has {}; expected B + 1 of each",
           batch.cu_seqlens_q.shape[0], batch.cu_seqlens_k.shape[0]);

  ValidatedVarlen r;
  VarlenSizes& s = r.sizes;
  s.B = batch.cu_seqlens_q.shape[0] - 1;
  s.H = p.H, s.H_KV = p.H_KV, s.D = p.D;
  s.total_q = q.shape[0], s.total_k = k.shape[0];
  s.max_seqlen_q = batch.max_seqlen_q, s.max_seqlen_k = batch.max_seqlen_k;
  for (auto [what, n] : {std::pair{"B (sequences)", s.B},
                         {"H", s.H},
                         {"H_KV", s.H_KV},
                         {"total_q", s.total_q},
                         {"total_k", s.total_k},
                         {"batch.max_seqlen_q", s.max_seqlen_q},
                         {"batch.max_seqlen_k", s.max_seqlen_k}})
    check_size(what, n, site);
  for (auto [what, n] : {std::pair{"max_seqlen_q", s.max_seqlen_q}, {"max_seqlen_k", s.max_seqlen_k}})
    if (n < 0)
      reject(site, "batch.{} is {}; expected the longest sequence's length (>= 0)", what, n);
  if (s.B * s.H > kMaxAttentionGridY)
    reject(site,
           "B * H = {} * {} = {} exceeds {}: the kernel runs one program row per (sequence, head) and CUDA's "
           "grid "
           "holds at most {} in y",
           s.B, s.H, s.B * s.H, kMaxAttentionGridY, kMaxAttentionGridY);
  if (s.B > 0 && s.total_q > 0 && s.max_seqlen_q == 0)
    reject(
        site,
        "batch.max_seqlen_q is 0 but q holds {} rows; expected the longest query sequence's length (the grid "
        "has cdiv(max_seqlen_q, BLOCK_M) tiles a sequence)",
        s.total_q);

  p.B = std::max<int64_t>(s.B, 1);
  p.N_Q = std::max<int64_t>(s.max_seqlen_q, 1);
  p.N_K = std::max<int64_t>(s.max_seqlen_k, 1);
  r.shape = p;
  r.check_offsets = batch.check_offsets;
  r.empty = s.B == 0 || s.total_q == 0;
  // The mods' tensors are indexed per sequence (attention_varlen_mods.h): dims N_Q and N_K run along
  // max_seqlen_q and max_seqlen_k, B along the sequences; `p` holds those sizes.
  if (r.empty) {
    (void)validate_mod_tensors(options, p, nullptr, site);
    return r; // nothing is read or written
  }

  // Strides, addresses, overlaps. k and v without tokens are never read.
  const bool has_keys = s.total_k > 0;
  const std::pair<const char*, const TensorRef*> tensors[] = {{"q", &q}, {"k", &k}, {"v", &v}, {"o", &o}};
  for (auto [name, t] : tensors)
    if (t->strides[2] != 1 && t->shape[2] > 1)
      reject(site,
             "{}'s head dim is not contiguous: stride {} (strides {}); expected stride 1 in the last dim",
             name, t->strides[2], dims_str(t->strides));
  std::vector<ByteRange> inputs, outputs; // inputs are read while outputs are written
  for (auto [name, t] : {std::pair{"q", &q},
                         {"k", &k},
                         {"v", &v},
                         {"cu_seqlens_q", &batch.cu_seqlens_q},
                         {"cu_seqlens_k", &batch.cu_seqlens_k}})
    if (numel(*t) > 0)
      inputs.push_back(tensor_range(name, *t, site));
  for (auto [name, t] : tensors)
    if (numel(*t) > 0)
      check_alignment(name, *t, site);
  outputs.push_back(tensor_range("o", o, site));
  if (lse) {
    check_address("lse", lse->data, site);
    const TensorRef dense = TensorRef::contiguous(lse->data, DType::f32, lse->shape);
    for (size_t i = 0; i < 2; ++i)
      if (lse->shape[i] > 1 && lse->strides[i] != dense.strides[i])
        reject(site,
               "lse has strides {}; expected the contiguous strides {} of [H, total_q] (the kernel writes it "
               "densely)",
               dims_str(lse->strides), dims_str(dense.strides));
    outputs.push_back(tensor_range("lse", *lse, site));
  }
  if (!elements_distinct(o))
    reject(site,
           "o's elements overlap each other (shape {}, strides {}): several outputs would be written to one "
           "place; "
           "expected strides that give every element its own memory",
           dims_str(o.shape), dims_str(o.strides));
  std::vector<ByteRange> ranges = inputs;
  ranges.insert(ranges.end(), outputs.begin(), outputs.end());
  check_outputs_apart(ranges, inputs.size(), site);

  // The mods' tensors, apart from the forward's outputs (the backward, where o and lse are read, checks them
  // against the gradients instead).
  std::vector<ByteRange> mod_ranges(3); // validate_mod_tensors checks the ranges from the fourth on
  if (site.entry != std::string_view("backward_varlen"))
    mod_ranges.insert(mod_ranges.end(), outputs.begin(), outputs.end());
  r.mod_tensors = validate_mod_tensors(options, p, &mod_ranges, site);

  auto packed = [](const TensorRef& t) { return PackedStrides{t.strides[0], t.strides[1]}; };
  r.strides = VarlenStrides{packed(q), packed(k), packed(v), packed(o)};
  r.q = q.data, r.k = has_keys ? k.data : 0, r.v = has_keys ? v.data : 0, r.o = o.data;
  r.cu_seqlens_q = batch.cu_seqlens_q.data, r.cu_seqlens_k = batch.cu_seqlens_k.data;
  if (lse)
    r.lse = lse->data;
  try {
    check_attention_problem(p);
  } catch (const Error& e) {
    reject(site, "{}", e.what());
  }
  if (options.config) {
    try {
      fa2_fwd_varlen_def(options.mods).check(*options.config);
      check_attention_config(p, *options.config);
    } catch (const Error& e) {
      reject(site,
             "options.config: {}; expected an fa2_fwd_varlen config, e.g. default_fa2_varlen_config with its "
             "tiles changed",
             e.what());
    }
    for (const char* tile : {"BLOCK_M", "BLOCK_N", "VARLEN"})
      if (!options.config->params.count(tile))
        reject(site, "options.config ({}) has no {}; expected a full fa2_fwd_varlen config",
               options.config->str(), tile);
  }
  return r;
}

namespace {
void check_offsets_contents(const ValidatedVarlen& v, const std::vector<int32_t>& cu_seqlens_q,
                            const std::vector<int32_t>& cu_seqlens_k, const ApiSite& site) {
  const VarlenSizes& s = v.sizes;
  for (auto [name, cu, total, longest, longest_name, tensor] :
       {std::tuple{"cu_seqlens_q", &cu_seqlens_q, s.total_q, s.max_seqlen_q, "max_seqlen_q", "q holds"},
        {"cu_seqlens_k", &cu_seqlens_k, s.total_k, s.max_seqlen_k, "max_seqlen_k", "k and v hold"}}) {
    if (static_cast<int64_t>(cu->size()) != s.B + 1)
      reject(site, "{} holds {} offsets; expected B + 1 = {}", name, cu->size(), s.B + 1);
    if ((*cu)[0] != 0)
      reject(site, "{}[0] is {}; expected 0 (the first sequence starts at the first token)", name, (*cu)[0]);
    for (int64_t b = 0; b < s.B; ++b) {
      const int64_t lo = (*cu)[static_cast<size_t>(b)], hi = (*cu)[static_cast<size_t>(b + 1)];
      if (hi < lo)
        reject(site, "{}[{}] = {} is below {}[{}] = {}; expected non-decreasing offsets", name, b + 1, hi,
               name, b, lo);
      if (hi - lo > longest)
        reject(
            site,
            "sequence {} has {} tokens ({}[{}] - {}[{}]) but batch.{} is {}; expected {} >= every sequence's "
            "length (the grid and the tuning are sized by it)",
            b, hi - lo, name, b + 1, name, b, longest_name, longest, longest_name);
    }
    if ((*cu)[static_cast<size_t>(s.B)] != total)
      reject(site,
             "{}[B] = {} but {} {} tokens; expected the last offset to be the token count (pass a view of "
             "the first {}[B] tokens of a larger buffer)",
             name, (*cu)[static_cast<size_t>(s.B)], tensor, total, name);
  }
}

} // namespace

void check_varlen_offsets(const ValidatedVarlen& v, const std::vector<int32_t>& cu_seqlens_q,
                          const std::vector<int32_t>& cu_seqlens_k, std::source_location where) {
  check_offsets_contents(v, cu_seqlens_q, cu_seqlens_k, ApiSite{"forward_varlen", where});
}

void detail::check_varlen_offsets(const ValidatedVarlen& v, const std::vector<int32_t>& cu_seqlens_q,
                                  const std::vector<int32_t>& cu_seqlens_k, const ApiSite& site) {
  check_offsets_contents(v, cu_seqlens_q, cu_seqlens_k, site);
}

std::vector<LaunchArg> varlen_launch_args(const ValidatedVarlen& v, uint64_t lse) {
  const VarlenSizes& s = v.sizes;
  std::vector<LaunchArg> args = {LaunchArg::pointer(v.q), LaunchArg::pointer(v.k),
                                 LaunchArg::pointer(v.v), LaunchArg::pointer(v.o),
                                 LaunchArg::pointer(lse), LaunchArg::of_float(v.shape.scale())};
  for (int64_t n : {s.B, s.H, s.H_KV, s.total_q, s.total_k, s.D})
    args.push_back(LaunchArg::of_int(n));
  for (const PackedStrides* t : {&v.strides.q, &v.strides.k, &v.strides.v, &v.strides.o})
    for (int64_t stride : {int64_t{0}, t->head, t->token}) // (batch: unused, head, sequence)
      args.push_back(LaunchArg::of_int(stride));
  args.push_back(LaunchArg::pointer(v.cu_seqlens_q));
  args.push_back(LaunchArg::pointer(v.cu_seqlens_k));
  append_mod_launch_args(v.mod_tensors, args);
  return args;
}

namespace {

std::vector<int32_t> offsets_to_host(uint64_t device, int64_t count) {
  std::vector<int32_t> host(static_cast<size_t>(count));
  KILN_CU_CHECK(cuMemcpyDtoH, "copying cu_seqlens to the host", host.data(), device,
                host.size() * sizeof(int32_t));
  return host;
}

} // namespace

detail::OffsetsOnHost detail::read_checked_offsets(const ValidatedVarlen& v, void* stream, const char* entry,
                                                   std::source_location where) {
  OffsetsOnHost h;
  if (!v.check_offsets)
    return h;
  rt::Stream::wrap(stream).synchronize(); // offsets written on the caller's stream are complete
  h.cu_seqlens_q = offsets_to_host(v.cu_seqlens_q, v.sizes.B + 1);
  h.cu_seqlens_k = offsets_to_host(v.cu_seqlens_k, v.sizes.B + 1);
  check_offsets_contents(v, h.cu_seqlens_q, h.cu_seqlens_k, ApiSite{entry, where});
  return h;
}

double detail::varlen_flops(const ValidatedVarlen& v, const OffsetsOnHost& host) {
  const VarlenSizes& s = v.sizes;
  const std::vector<int32_t>&cu_q = host.cu_seqlens_q, &cu_k = host.cu_seqlens_k;
  double pairs = 0; // query-key pairs of one head
  if (!cu_q.empty()) {
    for (int64_t b = 0; b < s.B; ++b)
      pairs += static_cast<double>(cu_q[static_cast<size_t>(b + 1)] - cu_q[static_cast<size_t>(b)]) *
               static_cast<double>(cu_k[static_cast<size_t>(b + 1)] - cu_k[static_cast<size_t>(b)]);
  } else {
    pairs = static_cast<double>(s.total_q) * static_cast<double>(s.max_seqlen_k);
  }
  const double f = 4.0 * static_cast<double>(s.H) * pairs * static_cast<double>(s.D);
  return v.shape.causal != 0 ? f / 2 : f;
}

namespace {

} // namespace

void forward_varlen(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
                    const std::optional<TensorRef>& lse, const VarlenBatch& batch,
                    const AttentionOptions& options, std::source_location where) {
  const ApiSite site{"forward_varlen", where};
  const ValidatedVarlen a = validate_varlen_args(q, k, v, o, lse, batch, options, where);
  if (a.empty)
    return;
  require_driver(site);
  rt::current_device(); // makes the context current before any copy, allocation or launch
  const rt::Stream stream = rt::Stream::wrap(options.stream);
  const detail::OffsetsOnHost host = detail::read_checked_offsets(a, options.stream, "forward_varlen", where);
  std::optional<rt::DeviceBuffer> lse_scratch;
  const uint64_t lse_bytes = static_cast<uint64_t>(a.sizes.H * a.sizes.total_q) * sizeof(float);
  if (!a.lse)
    lse_scratch.emplace(lse_bytes);
  const std::vector<LaunchArg> args = varlen_launch_args(a, a.lse ? *a.lse : lse_scratch->ptr());
  const KernelDef& def = fa2_fwd_varlen_def(options.mods);
  const SizeArgs sizes = varlen_size_args(a.sizes);
  if (options.config) {
    compiled_for(def, *options.config)->launch(def.grid(*options.config, sizes), args, stream);
  } else {
    // Tuning launches write scratch copies of O and LSE, never the caller's.
    const std::vector<OutputArg> outputs = {{3, static_cast<size_t>(extent_bytes("o", o, site))},
                                            {4, static_cast<size_t>(lse_bytes)}};
    TuneOptions tune;
    tune.mode = options.autotune;
    tune.flops = detail::varlen_flops(a, host);
    const TunedLaunch t =
        attention_tuner().select(def, varlen_config(default_fa2_config(a.shape)), sizes, args, outputs, tune);
    t.kernel->launch(t.grid, args, stream);
  }
  if (lse_scratch)
    stream.synchronize(); // the temporary LSE is freed on return
}

} // namespace kiln::attention
