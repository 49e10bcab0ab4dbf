#include "kernels/attention/attention_api.h"

#include "jit/jit_kernel.h"
#include "jit/tuned_kernel.h"
#include "kernels/attention/fa1_fwd.h"
#include "kernels/attention/fa2_fwd.h"
#include "runtime/cuda_driver.h"
#include "runtime/device.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>

namespace kiln::attention {

namespace {

// Rows and keys are i32 in the kernels, and a tile's indices run up to one tile past the end: the margin
// covers any tile a config can ask for.
constexpr int64_t kMaxSize = (int64_t{1} << 31) - (int64_t{1} << 16);
constexpr int64_t kMaxGridY = 65535; // CUDA's limit on gridDim.y, which FA2 fills with B * H
constexpr int64_t kMaxHeadDim = 256;
constexpr int64_t kHeadDimMultiple = 8;
constexpr uint64_t kAlignBytes = 16; // rows move as 16-byte vectors (ld/st.v4, cp.async.cg 16)

// Raises the validation error with the caller's line appended.
template <typename... Args>
[[noreturn]] void reject(const std::source_location& where, fmt::format_string<Args...> f, Args&&... args) {
  fail_at(SourceLoc{where.file_name(), static_cast<unsigned>(where.line())}, "attention::forward: {}",
          fmt::format(f, std::forward<Args>(args)...));
}

std::string dims_str(llvm::ArrayRef<int64_t> v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

// The names of the four dims in the chosen layout, for messages.
struct LayoutInfo {
  bool bshd = false;
  int seq_dim = 2, head_dim_index = 1; // where N and H sit in the shape
  const char* names = "[B, H, N, D]";
};

LayoutInfo parse_layout(const std::string& layout, const std::source_location& where) {
  if (layout == "bhsd")
    return LayoutInfo{false, 2, 1, "[B, H, N, D]"};
  if (layout == "bshd")
    return LayoutInfo{true, 1, 2, "[B, N, H, D]"};
  reject(where, "options.layout is \"{}\"; expected \"bhsd\" ([B, H, N, D]) or \"bshd\" ([B, N, H, D])",
         layout);
}

// Byte span of a tensor: the offset of its last element plus one element, or an error when that does not fit
// in 64 bits. Strides are non-negative and dims positive when this runs.
uint64_t extent_bytes(const char* name, const TensorRef& t, const std::source_location& where) {
  int64_t last = 0;
  for (size_t i = 0; i < t.shape.size(); ++i) {
    int64_t step = 0;
    if (__builtin_mul_overflow(t.shape[i] - 1, t.strides[i], &step) ||
        __builtin_add_overflow(last, step, &last))
      reject(where, "{} ({}) spans more than 2^63 elements; its offsets overflow the kernels' 64-bit indices",
             name, t.str());
  }
  int64_t bytes = 0;
  if (__builtin_add_overflow(last, int64_t{1}, &last) ||
      __builtin_mul_overflow(last, int64_t{dtype_bytes(t.dtype)}, &bytes))
    reject(where, "{} ({}) spans more than 2^63 bytes; its offsets overflow the kernels' 64-bit indices",
           name, t.str());
  uint64_t end = 0;
  if (__builtin_add_overflow(t.data, static_cast<uint64_t>(bytes), &end))
    reject(where, "{} ({}) runs past the end of the 64-bit address space", name, t.str());
  return static_cast<uint64_t>(bytes);
}

// Whether distinct indices of `t` always reach distinct elements: walking the dims of size > 1 from the
// smallest stride up, each stride must step past everything the smaller ones reach.
bool elements_distinct(const TensorRef& t) {
  std::vector<size_t> dims;
  for (size_t i = 0; i < t.shape.size(); ++i)
    if (t.shape[i] > 1)
      dims.push_back(i);
  std::sort(dims.begin(), dims.end(), [&](size_t a, size_t b) { return t.strides[a] < t.strides[b]; });
  int64_t reach = 1; // elements spanned by the dims walked so far
  for (size_t i : dims) {
    if (t.strides[i] < reach)
      return false;
    reach = t.strides[i] * (t.shape[i] - 1) + reach;
  }
  return true;
}

struct ByteRange {
  const char* name;
  uint64_t first, end; // [first, end)
};

bool overlaps(const ByteRange& a, const ByteRange& b) { return a.first < b.end && b.first < a.end; }

void check_rank(const char* name, const TensorRef& t, size_t rank, const char* names,
                const std::source_location& where) {
  if (t.shape.size() != rank)
    reject(where, "{} must have rank {} {}, got rank {} with shape {}", name, rank, names, t.shape.size(),
           dims_str(t.shape));
  if (t.strides.size() != t.shape.size())
    reject(where, "{} has {} strides for its {} dims (shape {}, strides {}); expected one stride per dim",
           name, t.strides.size(), t.shape.size(), dims_str(t.shape), dims_str(t.strides));
  for (size_t i = 0; i < rank; ++i) {
    if (t.shape[i] < 0)
      reject(where, "{} has a negative size {} in dim {} (shape {})", name, t.shape[i], i, dims_str(t.shape));
    if (t.strides[i] < 0)
      reject(where, "{} has a negative stride {} in dim {} (strides {}); expected strides >= 0", name,
             t.strides[i], i, dims_str(t.strides));
  }
}

void check_size(const char* what, int64_t v, const std::source_location& where) {
  if (v >= kMaxSize)
    reject(where,
           "{}={} is too large: the kernels index rows, keys and heads in i32, so sizes must be below "
           "2^31 - 2^16 = {}",
           what, v, kMaxSize);
}

void check_alignment(const char* name, const TensorRef& t, const std::source_location& where) {
  if (t.data == 0)
    reject(where, "{} has a null data address; expected a device address", name);
  if (t.data % kAlignBytes != 0)
    reject(where,
           "{}'s address {:#x} is not 16-byte aligned (it is {} bytes past a multiple of 16); the kernels "
           "move rows as 16-byte vectors",
           name, t.data, t.data % kAlignBytes);
  const int64_t elem = dtype_bytes(t.dtype);
  for (size_t i = 0; i + 1 < t.shape.size(); ++i)
    if (t.shape[i] > 1 && (t.strides[i] * elem) % static_cast<int64_t>(kAlignBytes) != 0)
      reject(where,
             "{}'s stride {} in dim {} is {} bytes, not a multiple of 16 (strides {}, {}); every row must "
             "start 16-byte aligned, i.e. strides a multiple of {} elements",
             name, t.strides[i], i, t.strides[i] * elem, dims_str(t.strides), dtype_name(t.dtype),
             static_cast<int64_t>(kAlignBytes) / elem);
}

} // namespace

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
  const LayoutInfo layout = parse_layout(options.layout, where);
  const std::pair<const char*, const TensorRef*> tensors[] = {{"q", &q}, {"k", &k}, {"v", &v}, {"o", &o}};
  for (auto [name, t] : tensors)
    check_rank(name, *t, 4, layout.names, where);
  if (lse)
    check_rank("lse", *lse, 3, "[B, H, N_Q]", where);

  // Dtypes.
  if (q.dtype != DType::f16 && q.dtype != DType::bf16 && q.dtype != DType::f32)
    reject(where, "q has dtype {}; expected f16, bf16 or f32", dtype_name(q.dtype));
  for (auto [name, t] : tensors)
    if (t->dtype != q.dtype)
      reject(where, "{} has dtype {} but q has {}; q, k, v and o must share one dtype", name,
             dtype_name(t->dtype), dtype_name(q.dtype));
  if (lse && lse->dtype != DType::f32)
    reject(where, "lse has dtype {}; expected f32", dtype_name(lse->dtype));
  if (options.tf32 && q.dtype != DType::f32)
    reject(where, "options.tf32 applies to f32 inputs, but q, k, v are {}", dtype_name(q.dtype));

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
      reject(where, "{} has head dim {} but q has {} (q {}, {} {}, layout {}); expected equal head dims",
             name, dim(*t, 'D'), p.D, dims_str(q.shape), name, dims_str(t->shape), layout.names);
    if (dim(*t, 'B') != p.B)
      reject(where, "{} has batch {} but q has {} (q {}, {} {}); expected equal batch sizes", name,
             dim(*t, 'B'), p.B, dims_str(q.shape), name, dims_str(t->shape));
  }
  if (dim(v, 'N') != p.N_K)
    reject(where,
           "v has {} keys but k has {} (k {}, v {}, layout {}); expected equal K and V sequence lengths",
           dim(v, 'N'), p.N_K, dims_str(k.shape), dims_str(v.shape), layout.names);
  if (dim(v, 'H') != p.H_KV)
    reject(where, "v has {} heads but k has {} (k {}, v {}, layout {}); expected equal K and V head counts",
           dim(v, 'H'), p.H_KV, dims_str(k.shape), dims_str(v.shape), layout.names);
  if (o.shape != q.shape)
    reject(where, "o has shape {}; expected q's shape {}", dims_str(o.shape), dims_str(q.shape));
  const llvm::SmallVector<int64_t, 3> lse_shape = {p.B, p.H, p.N_Q};
  if (lse && lse->shape != lse_shape)
    reject(where, "lse has shape {}; expected [B, H, N_Q] = {}", dims_str(lse->shape), dims_str(lse_shape));

  if (p.D == 0 || p.D > kMaxHeadDim || p.D % kHeadDimMultiple != 0)
    reject(where,
           "head dim D={} is not supported; expected a multiple of {} in [{}, {}] (rows are read as "
           "16-byte vectors and the widest tile is {})",
           p.D, kHeadDimMultiple, kHeadDimMultiple, kMaxHeadDim, kMaxHeadDim);
  for (auto [what, n] : {std::pair{"H (q heads)", p.H}, {"H_KV (k/v heads)", p.H_KV}})
    if (n == 0)
      reject(where, "{} is 0; expected at least 1", what);
  if (p.N_K == 0)
    reject(where, "N_K (keys) is 0; expected at least 1 key, since softmax over no keys is undefined");
  if (p.H % p.H_KV != 0)
    reject(where,
           "q has H={} heads, not a multiple of k/v's H_KV={}; each k/v head must serve H / H_KV query "
           "heads",
           p.H, p.H_KV);
  for (auto [what, n] : {std::pair{"B", p.B}, {"H", p.H}, {"H_KV", p.H_KV}, {"N_Q", p.N_Q}, {"N_K", p.N_K}})
    check_size(what, n, where);

  if (!std::isfinite(options.sm_scale) ||
      std::fabs(options.sm_scale) > static_cast<double>(std::numeric_limits<float>::max()))
    reject(where,
           "options.sm_scale={} is not a finite f32 value; expected a finite scale, or 0 for 1/sqrt(D)",
           options.sm_scale);

  p.dtype = q.dtype;
  p.causal = static_cast<int>(options.causal);
  if (p.causal < 0 || p.causal > 2)
    reject(where, "options.causal={} is not a mode; expected None, TopLeft or BottomRight", p.causal);
  p.bshd_layout = layout.bshd;
  p.sm_scale = options.sm_scale;
  p.k_transposed = options.k_transposed;
  p.tf32 = options.tf32;

  ValidatedAttention r;
  r.problem = p;
  r.empty = p.B == 0 || p.N_Q == 0;
  if (r.empty)
    return r; // nothing is read or written: addresses and strides do not matter

  // Strides and addresses.
  for (auto [name, t] : tensors)
    if (t->strides[3] != 1 && t->shape[3] > 1)
      reject(where,
             "{}'s head dim is not contiguous: stride {} (strides {}); expected stride 1 in the last dim",
             name, t->strides[3], dims_str(t->strides));
  // Extents first: they bound every offset, so the checks below compute theirs without overflow.
  std::vector<ByteRange> ranges;
  for (auto [name, t] : tensors)
    ranges.push_back(ByteRange{name, t->data, t->data + extent_bytes(name, *t, where)});
  if (lse)
    ranges.push_back(ByteRange{"lse", lse->data, lse->data + extent_bytes("lse", *lse, where)});
  for (auto [name, t] : tensors)
    check_alignment(name, *t, where);
  if (lse) {
    if (lse->data == 0)
      reject(where, "lse has a null data address; expected a device address (or no lse at all)");
    if (lse->data % kAlignBytes != 0)
      reject(where, "lse's address {:#x} is not 16-byte aligned (it is {} bytes past a multiple of 16)",
             lse->data, lse->data % kAlignBytes);
    const TensorRef dense = TensorRef::contiguous(lse->data, DType::f32, lse_shape);
    for (size_t i = 0; i < 3; ++i)
      if (lse_shape[i] > 1 && lse->strides[i] != dense.strides[i])
        reject(where,
               "lse has strides {}; expected the contiguous strides {} of [B, H, N_Q] (the kernels write it "
               "densely)",
               dims_str(lse->strides), dims_str(dense.strides));
  }
  // Outputs must not share memory with inputs (or with each other): the kernels read q/k/v while writing.
  if (!elements_distinct(o))
    reject(where,
           "o's elements overlap each other (shape {}, strides {}): several outputs would be written to one "
           "place; expected strides that give every element its own memory",
           dims_str(o.shape), dims_str(o.strides));
  for (size_t out = 3; out < ranges.size(); ++out)
    for (size_t other = 0; other < out; ++other)
      if (overlaps(ranges[out], ranges[other]))
        reject(where,
               "{} (bytes [{:#x}, {:#x})) overlaps {} (bytes [{:#x}, {:#x})); expected outputs in memory of "
               "their own, since {}",
               ranges[out].name, ranges[out].first, ranges[out].end, ranges[other].name, ranges[other].first,
               ranges[other].end,
               other < 3 ? fmt::format("writing {} would overwrite {} while it is read", ranges[out].name,
                                       ranges[other].name)
                         : fmt::format("{} and {} would be written to the same memory", ranges[out].name,
                                       ranges[other].name));

  auto strides_of = [&](const TensorRef& t) {
    return TensorStrides{t.strides[0], t.strides[static_cast<size_t>(layout.head_dim_index)],
                         t.strides[static_cast<size_t>(layout.seq_dim)]};
  };
  r.strides = AttentionStrides{strides_of(q), strides_of(k), strides_of(v), strides_of(o)};
  r.q = q.data, r.k = k.data, r.v = v.data, r.o = o.data;
  if (lse)
    r.lse = lse->data;

  // Whatever the kernels would reject of the problem, reported here rather than at compile time.
  try {
    check_attention_problem(p);
  } catch (const Error& e) {
    reject(where, "{}", e.what());
  }
  if (options.config) {
    for (const char* tile : {"BLOCK_M", "BLOCK_N"})
      if (!options.config->params.count(tile))
        reject(where,
               "options.config ({}) has no {}; expected a full config, e.g. default_fa2_config(problem) "
               "with its tiles changed",
               options.config->str(), tile);
    try {
      check_attention_config(p, *options.config);
    } catch (const Error& e) {
      reject(where, "options.config: {}", e.what());
    }
  }
  return r;
}

namespace {

// The kernels' argument list (see fa2_fwd.h): Q, K, V, O, LSE, sm_scale, sizes, then strides.
std::vector<LaunchArg> launch_args(const ValidatedAttention& a, uint64_t lse) {
  const AttentionProblem& p = a.problem;
  std::vector<LaunchArg> args = {LaunchArg::pointer(a.q), LaunchArg::pointer(a.k),
                                 LaunchArg::pointer(a.v), LaunchArg::pointer(a.o),
                                 LaunchArg::pointer(lse), LaunchArg::of_float(p.scale())};
  for (int64_t n : {p.B, p.H, p.H_KV, p.N_Q, p.N_K, p.D})
    args.push_back(LaunchArg::of_int(n));
  for (const TensorStrides* t : {&a.strides.q, &a.strides.k, &a.strides.v, &a.strides.o})
    for (int64_t s : {t->b, t->h, t->n})
      args.push_back(LaunchArg::of_int(s));
  return args;
}

// Kernels compiled for explicit configs (options.config, FA1), kept for the process's life so that repeated
// calls neither rebuild the IR nor regenerate code.
std::shared_ptr<JitKernel> compiled_for(const KernelDef& def, const Config& config) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<JitKernel>> kernels;
  const std::string key = def.name + " " + rt::current_device().arch + " " + config.str();
  std::lock_guard<std::mutex> lock(mutex);
  std::shared_ptr<JitKernel>& k = kernels[key];
  if (!k)
    k = JitKernel::compile(def.build(config));
  return k;
}

KernelTuner& attention_tuner() {
  static KernelTuner tuner;
  return tuner;
}

void require_driver(const std::source_location& where) {
  std::string why;
  if (!rt::driver_available(&why))
    reject(where, "no GPU is available to run on: {}", why);
}

uint64_t lse_bytes(const AttentionProblem& p) {
  return static_cast<uint64_t>(p.B * p.H * p.N_Q) * sizeof(float);
}

} // namespace

namespace {

// What forward() and tune_forward() share: validation, the GPU check, the launch arguments (with a
// temporary LSE when the caller gave none) and, unless a config was given, the tuner's choice.
struct PreparedForward {
  ValidatedAttention a;
  std::optional<rt::DeviceBuffer> lse_scratch;
  std::vector<LaunchArg> args;
  std::optional<TunedLaunch> tuned; // empty when options.config was given
};

PreparedForward prepare_forward(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
                                const std::optional<TensorRef>& lse, const AttentionOptions& options,
                                std::optional<rt::AutotuneMode> mode, std::source_location where) {
  PreparedForward f{validate_attention_args(q, k, v, o, lse, options, where), {}, {}, {}};
  if (f.a.empty)
    return f;
  const AttentionProblem& p = f.a.problem;
  if (p.B * p.H > kMaxGridY)
    reject(where,
           "B * H = {} * {} = {} exceeds {}: FA2 runs one program row per (batch, head) and CUDA's grid "
           "holds at most {} in y",
           p.B, p.H, p.B * p.H, kMaxGridY, kMaxGridY);
  require_driver(where);
  rt::current_device(); // makes the context current before any allocation or launch
  if (!f.a.lse)
    f.lse_scratch.emplace(lse_bytes(p));
  f.args = launch_args(f.a, f.a.lse ? *f.a.lse : f.lse_scratch->ptr());
  if (!options.config) {
    // Tuning launches write scratch copies of O and LSE, never the caller's.
    const std::vector<OutputArg> outputs = {
        {3, static_cast<size_t>(extent_bytes("o", o, where))},
        {4, static_cast<size_t>(lse_bytes(p))},
    };
    TuneOptions tune;
    tune.mode = mode;
    tune.flops = attention_flops(p);
    f.tuned = attention_tuner().select(fa2_fwd_def(), default_fa2_config(p), attention_size_args(p), f.args,
                                       outputs, tune);
  }
  return f;
}

} // namespace

void forward(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
             const std::optional<TensorRef>& lse, const AttentionOptions& options,
             std::source_location where) {
  PreparedForward f = prepare_forward(q, k, v, o, lse, options, std::nullopt, where);
  if (f.a.empty)
    return;
  const rt::Stream stream = rt::Stream::wrap(options.stream);
  if (f.tuned) {
    f.tuned->kernel->launch(f.tuned->grid, f.args, stream);
  } else {
    const KernelDef def = fa2_fwd_def();
    compiled_for(def, *options.config)->launch(def.grid(*options.config, attention_size_args(f.a.problem)), f.args,
                                               stream);
  }
  if (f.lse_scratch)
    stream.synchronize(); // the temporary LSE is freed on return
}

TunedLaunch tune_forward(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
                         const std::optional<TensorRef>& lse, const AttentionOptions& options,
                         std::optional<rt::AutotuneMode> mode, std::source_location where) {
  if (options.config)
    reject(where, "tune_forward chooses the config itself; options.config must be empty, got {}",
           options.config->str());
  PreparedForward f = prepare_forward(q, k, v, o, lse, options, mode, where);
  if (f.a.empty)
    reject(where, "nothing to tune: the problem is empty (B = 0 or N_Q = 0)");
  return *f.tuned;
}

void fa1_forward(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
                 const std::optional<TensorRef>& lse, const AttentionOptions& options,
                 std::source_location where) {
  const ValidatedAttention a = validate_attention_args(q, k, v, o, lse, options, where);
  if (a.empty)
    return;
  const AttentionProblem& p = a.problem;
  require_driver(where);
  rt::current_device();

  // f32 scratch the kernel initialises itself: OACC [B, H, N_Q, HEAD_DIM], L and M [B, H, N_Q].
  const uint64_t rows = static_cast<uint64_t>(p.B * p.H * p.N_Q);
  rt::DeviceBuffer oacc(rows * static_cast<uint64_t>(p.head_dim_tile()) * sizeof(float));
  rt::DeviceBuffer l(rows * sizeof(float)), m(rows * sizeof(float));
  std::optional<rt::DeviceBuffer> lse_scratch;
  if (!a.lse)
    lse_scratch.emplace(lse_bytes(p));

  std::vector<LaunchArg> args = launch_args(a, a.lse ? *a.lse : lse_scratch->ptr());
  args.push_back(LaunchArg::pointer(oacc));
  args.push_back(LaunchArg::pointer(l));
  args.push_back(LaunchArg::pointer(m));
  const KernelDef def = fa1_fwd_def();
  const Config config = options.config ? *options.config : default_fa1_config(p);
  const rt::Stream stream = rt::Stream::wrap(options.stream);
  compiled_for(def, config)->launch(def.grid(config, attention_size_args(p)), args, stream);
  stream.synchronize(); // the scratch is freed on return
}

} // namespace kiln::attention
