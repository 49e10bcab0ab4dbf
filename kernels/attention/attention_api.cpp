#include "kernels/attention/attention_api.h"

#include "jit/jit_kernel.h"
#include "kernels/attention/attention_api_checks.h"
#include "kernels/attention/attention_block_mask.h"
#include "kernels/attention/attention_block_mask_api.h"
#include "kernels/attention/attention_forward_prepare.h"
#include "kernels/attention/attention_launch.h"
#include "kernels/attention/fa1_fwd.h"
#include "kernels/attention/fa2_fwd.h"
#include "runtime/cuda_driver.h"
#include "runtime/device.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>

namespace kiln::attention {

using namespace detail;

TensorRef TensorRef::contiguous(uint64_t data, DType dtype, llvm::ArrayRef<int64_t> shape) {
  TensorRef t{data, dtype, {shape.begin(), shape.end()}, {}};
  t.strides.resize(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    t.strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  return t;
}

std::string TensorRef::str() const {
  return fmt::format("{} {} strides {} at {:#x}", dtype_name(dtype), dims_str(shape), dims_str(strides),
                     data);
}

ValidatedAttention validate_attention_args(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                           const TensorRef& o, const std::optional<TensorRef>& lse,
                                           const AttentionOptions& options, std::source_location where) {
  return detail::validate_attention_args(q, k, v, o, lse, options, ApiSite{"forward", where});
}

ValidatedAttention detail::validate_attention_args(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                                   const TensorRef& o, const std::optional<TensorRef>& lse,
                                                   const AttentionOptions& options, const ApiSite& site) {
  const LayoutInfo layout = parse_layout(options.layout, site);
  const std::pair<const char*, const TensorRef*> tensors[] = {{"q", &q}, {"k", &k}, {"v", &v}, {"o", &o}};
  for (auto [name, t] : tensors)
    check_rank(name, *t, 4, layout.names, site);
  if (lse)
    check_rank("lse", *lse, 3, "[B, H, N_Q]", site);

  // Dtypes.
  check_dtypes(q, k, v, o, lse, options, site);

  // Shapes.
  auto dim = [&](const TensorRef& t, char which) {
    switch (which) {
    case 'B':
      return t.shape[0];
    case 'N':
      return t.shape[static_cast<size_t>(layout.seq_dim)];
    case 'H':
      return t.shape[static_cast<size_t>(layout.head_dim_index)];
    default:
      return t.shape[3];
    }
  };
  AttentionProblem p;
  p.B = dim(q, 'B'), p.H = dim(q, 'H'), p.N_Q = dim(q, 'N'), p.D = dim(q, 'D');
  p.H_KV = dim(k, 'H'), p.N_K = dim(k, 'N');
  for (auto [name, t] : {std::pair{"k", &k}, {"v", &v}, {"o", &o}}) {
    if (dim(*t, 'D') != p.D)
      reject(site, "{} has head dim {} but q has {} (q {}, {} {}, layout {}); expected equal head dims", name,
             dim(*t, 'D'), p.D, dims_str(q.shape), name, dims_str(t->shape), layout.names);
    if (dim(*t, 'B') != p.B)
      reject(site, "{} has batch {} but q has {} (q {}, {} {}); expected equal batch sizes", name,
             dim(*t, 'B'), p.B, dims_str(q.shape), name, dims_str(t->shape));
  }
  if (dim(v, 'N') != p.N_K)
    reject(site,
           "v has {} keys but k has {} (k {}, v {}, layout {}); expected equal K and V sequence lengths",
           dim(v, 'N'), p.N_K, dims_str(k.shape), dims_str(v.shape), layout.names);
  if (dim(v, 'H') != p.H_KV)
    reject(site, "v has {} heads but k has {} (k {}, v {}, layout {}); expected equal K and V head counts",
           dim(v, 'H'), p.H_KV, dims_str(k.shape), dims_str(v.shape), layout.names);
  if (o.shape != q.shape)
    reject(site, "o has shape {}; expected q's shape {}", dims_str(o.shape), dims_str(q.shape));
  const llvm::SmallVector<int64_t, 3> lse_shape = {p.B, p.H, p.N_Q};
  if (lse && lse->shape != lse_shape)
    reject(site, "lse has shape {}; expected [B, H, N_Q] = {}", dims_str(lse->shape), dims_str(lse_shape));

  if (p.D == 0 || p.D > kMaxHeadDim || p.D % kHeadDimMultiple != 0)
    reject(site,
           "head dim D={} is not supported; expected a multiple of {} in [{}, {}] (rows are read as "
           "16-byte vectors and the widest tile is {})",
           p.D, kHeadDimMultiple, kHeadDimMultiple, kMaxHeadDim, kMaxHeadDim);
  for (auto [what, n] : {std::pair{"H (q heads)", p.H}, {"H_KV (k/v heads)", p.H_KV}})
    if (n == 0)
      reject(site, "{} is 0; expected at least 1", what);
  if (p.N_K == 0)
    reject(site, "N_K (keys) is 0; expected at least 1 key, since softmax over no keys is undefined");
  if (p.H % p.H_KV != 0)
    reject(site,
           "q has H={} heads, not a multiple of k/v's H_KV={}; each k/v head must serve H / H_KV query "
           "heads",
           p.H, p.H_KV);
  for (auto [what, n] : {std::pair{"B", p.B}, {"H", p.H}, {"H_KV", p.H_KV}, {"N_Q", p.N_Q}, {"N_K", p.N_K}})
    check_size(what, n, site);

  apply_options(p, q.dtype, options, site);
  p.bshd_layout = layout.bshd;

  ValidatedAttention r;
  r.problem = p;
  r.empty = p.B == 0 || p.N_Q == 0;
  if (r.empty) {
    (void)validate_mod_tensors(options, p, nullptr, site);
    (void)validate_block_mask(options, p, site);
    return r; // nothing is read or written: addresses and strides do not matter
  }

  // Strides and addresses.
  for (auto [name, t] : tensors)
    if (t->strides[3] != 1 && t->shape[3] > 1)
      reject(site,
             "{}'s head dim is not contiguous: stride {} (strides {}); expected stride 1 in the last dim",
             name, t->strides[3], dims_str(t->strides));
  // Extents first: they bound every offset, so the checks below compute theirs without overflow.
  std::vector<ByteRange> ranges;
  for (auto [name, t] : tensors)
    ranges.push_back(tensor_range(name, *t, site));
  if (lse)
    ranges.push_back(tensor_range("lse", *lse, site));
  for (auto [name, t] : tensors)
    check_alignment(name, *t, site);
  if (lse) {
    check_address("lse", lse->data, site);
    const TensorRef dense = TensorRef::contiguous(lse->data, DType::f32, lse_shape);
    for (size_t i = 0; i < 3; ++i)
      if (lse_shape[i] > 1 && lse->strides[i] != dense.strides[i])
        reject(site,
               "lse has strides {}; expected the contiguous strides {} of [B, H, N_Q] (the kernels write it "
               "densely)",
               dims_str(lse->strides), dims_str(dense.strides));
  }
  // Outputs must not share memory with inputs (or with each other): the kernels read q/k/v while writing.
  if (!elements_distinct(o))
    reject(site,
           "o's elements overlap each other (shape {}, strides {}): several outputs would be written to one "
           "place; expected strides that give every element its own memory",
           dims_str(o.shape), dims_str(o.strides));
  check_outputs_apart(ranges, 3, site);

  r.strides = AttentionStrides{layout_strides(q, layout), layout_strides(k, layout),
                               layout_strides(v, layout), layout_strides(o, layout)};
  r.q = q.data, r.k = k.data, r.v = v.data, r.o = o.data;
  if (lse)
    r.lse = lse->data;
  r.mod_tensors = validate_mod_tensors(options, p, &ranges, site);
  r.block_mask = validate_block_mask(options, p, site);

  // Whatever the kernels would reject of the problem, reported here rather than at compile time.
  try {
    check_attention_problem(p);
  } catch (const Error& e) {
    reject(site, "{}", e.what());
  }
  if (options.config) {
    for (const char* tile : {"BLOCK_M", "BLOCK_N"})
      if (!options.config->params.count(tile))
        reject(site,
               "options.config ({}) has no {}; expected a full config, e.g. default_fa2_config(problem) "
               "with its tiles changed",
               options.config->str(), tile);
    try {
      check_attention_config(p, *options.config);
    } catch (const Error& e) {
      reject(site, "options.config: {}", e.what());
    }
  }
  return r;
}

// The kernels' argument list (see fa2_fwd.h): Q, K, V, O, LSE, sm_scale, sizes, then strides.
std::vector<LaunchArg> forward_launch_args(const ValidatedAttention& a, uint64_t lse) {
  const AttentionProblem& p = a.problem;
  std::vector<LaunchArg> args = {LaunchArg::pointer(a.q), LaunchArg::pointer(a.k),
                                 LaunchArg::pointer(a.v), LaunchArg::pointer(a.o),
                                 LaunchArg::pointer(lse), LaunchArg::of_float(p.scale())};
  for (int64_t n : {p.B, p.H, p.H_KV, p.N_Q, p.N_K, p.D})
    args.push_back(LaunchArg::of_int(n));
  for (const TensorStrides* t : {&a.strides.q, &a.strides.k, &a.strides.v, &a.strides.o})
    for (int64_t s : {t->b, t->h, t->n})
      args.push_back(LaunchArg::of_int(s));
  append_mod_launch_args(a.mod_tensors, args); // the mods' tensors (FA1 takes none)
  for (uint64_t list : a.block_mask)           // fa2_fwd_block_mask's lists
    args.push_back(LaunchArg::pointer(list));
  return args;
}

namespace {

uint64_t lse_bytes(const AttentionProblem& p) {
  return static_cast<uint64_t>(p.B * p.H * p.N_Q) * sizeof(float);
}

} // namespace

TunedLaunch detail::select_forward(const ValidatedAttention& a, const AttentionOptions& options,
                                   const std::vector<LaunchArg>& args, uint64_t o_bytes,
                                   std::optional<rt::AutotuneMode> mode) {
  const AttentionProblem& p = a.problem;
  // Tuning launches write scratch copies of O and LSE, never the caller's.
  const std::vector<OutputArg> outputs = {
      {3, static_cast<size_t>(o_bytes)},
      {4, static_cast<size_t>(lse_bytes(p))},
  };
  TuneOptions tune;
  tune.mode = mode;
  tune.flops = attention_flops(p);
  // Over a block mask: the configs at its tiles, warp-specialised ones too where its lists are runs.
  const BlockMask* bm = options.block_mask.get();
  const KernelDef& def =
      bm ? fa2_fwd_block_mask_tuning_def(options.mods, bm->layout.block_m, bm->layout.block_n, bm->runs)
         : fa2_fwd_def(options.mods);
  const Config base = bm ? block_mask_default_config(*bm, p) : default_fa2_config(p);
  return attention_tuner().select(def, base, attention_size_args(p), args, outputs, tune);
}

PreparedForward detail::prepare_forward(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                        const TensorRef& o, const std::optional<TensorRef>& lse,
                                        const AttentionOptions& options, std::optional<rt::AutotuneMode> mode,
                                        const ApiSite& site) {
  PreparedForward f{detail::validate_attention_args(q, k, v, o, lse, options, site), {}, {}, 0, {}};
  if (f.a.empty)
    return f;
  const AttentionProblem& p = f.a.problem; // B * H within the grid: check_attention_problem saw to that
  require_driver(site);
  rt::current_device(); // makes the context current before any allocation or launch
  if (!f.a.lse)
    f.lse_scratch.emplace(lse_bytes(p));
  f.args = forward_launch_args(f.a, f.a.lse ? *f.a.lse : f.lse_scratch->ptr());
  f.o_bytes = extent_bytes("o", o, site);
  if (!options.config)
    f.tuned = select_forward(f.a, options, f.args, f.o_bytes, mode);
  return f;
}

ForwardLaunch detail::forward_launch(const PreparedForward& f, const AttentionOptions& options) {
  if (f.tuned)
    return ForwardLaunch{f.tuned->kernel, f.tuned->grid};
  // options.config: over the block mask's lists when there is one, else the mods' (or built-in) kernel.
  const KernelDef& def =
      options.block_mask ? fa2_fwd_block_mask_def(options.mods) : fa2_fwd_def(options.mods);
  const Config& config = *options.config;
  return ForwardLaunch{compiled_for(def, config), def.grid(config, attention_size_args(f.a.problem))};
}

void forward(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
             const std::optional<TensorRef>& lse, const AttentionOptions& options,
             std::source_location where) {
  PreparedForward f = prepare_forward(q, k, v, o, lse, options, options.autotune, ApiSite{"forward", where});
  if (f.a.empty)
    return;
  const rt::Stream stream = rt::Stream::wrap(options.stream);
  const ForwardLaunch launch = forward_launch(f, options);
  launch.kernel->launch(launch.grid, f.args, stream);
  if (f.lse_scratch)
    stream.synchronize(); // the temporary LSE is freed on return
}

TunedLaunch tune_forward(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
                         const std::optional<TensorRef>& lse, const AttentionOptions& options,
                         std::optional<rt::AutotuneMode> mode, std::source_location where) {
  const ApiSite site{"tune_forward", where};
  if (options.config)
    reject(site, "tune_forward chooses the config itself; options.config must be empty, got {}",
           options.config->str());
  PreparedForward f = prepare_forward(q, k, v, o, lse, options, mode, site);
  if (f.a.empty)
    reject(site, "nothing to tune: the problem is empty (B = 0 or N_Q = 0)");
  return *f.tuned;
}

void fa1_forward(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
                 const std::optional<TensorRef>& lse, const AttentionOptions& options,
                 std::source_location where) {
  const ApiSite site{"fa1_forward", where};
  const ValidatedAttention a = detail::validate_attention_args(q, k, v, o, lse, options, site);
  if (a.empty)
    return;
  const AttentionProblem& p = a.problem;
  require_driver(site);
  rt::current_device();

  // f32 scratch the kernel initialises itself: OACC [B, H, N_Q, HEAD_DIM], L and M [B, H, N_Q].
  const uint64_t rows = static_cast<uint64_t>(p.B * p.H * p.N_Q);
  rt::DeviceBuffer oacc(rows * static_cast<uint64_t>(p.head_dim_tile()) * sizeof(float));
  rt::DeviceBuffer l(rows * sizeof(float)), m(rows * sizeof(float));
  std::optional<rt::DeviceBuffer> lse_scratch;
  if (!a.lse)
    lse_scratch.emplace(lse_bytes(p));

  std::vector<LaunchArg> args = forward_launch_args(a, a.lse ? *a.lse : lse_scratch->ptr());
  args.push_back(LaunchArg::pointer(oacc));
  args.push_back(LaunchArg::pointer(l));
  args.push_back(LaunchArg::pointer(m));
  const KernelDef& def = fa1_fwd_def();
  const Config config = options.config ? *options.config : default_fa1_config(p);
  const rt::Stream stream = rt::Stream::wrap(options.stream);
  compiled_for(def, config)->launch(def.grid(config, attention_size_args(p)), args, stream);
  stream.synchronize(); // the scratch is freed on return
}

} // namespace kiln::attention
