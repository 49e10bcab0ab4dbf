#include "kernels/attention/attention_api_checks.h"

#include <limits>

#include <cmath>

#include <fmt/ranges.h>

#include <algorithm>
#include <vector>

namespace kiln::attention::detail {

std::string dims_str(llvm::ArrayRef<int64_t> v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

LayoutInfo parse_layout(const std::string& layout, const ApiSite& site) {
  if (layout == "bhsd")
    return LayoutInfo{false, 2, 1, "[B, H, N, D]"};
  if (layout == "bshd")
    return LayoutInfo{true, 1, 2, "[B, N, H, D]"};
  reject(site, "options.layout is \"{}\"; expected \"bhsd\" ([B, H, N, D]) or \"bshd\" ([B, N, H, D])",
         layout);
}

TensorStrides layout_strides(const TensorRef& t, const LayoutInfo& layout) {
  return TensorStrides{t.strides[0], t.strides[static_cast<size_t>(layout.head_dim_index)],
                       t.strides[static_cast<size_t>(layout.seq_dim)]};
}

uint64_t extent_bytes(const char* name, const TensorRef& t, const ApiSite& site) {
  int64_t last = 0;
  for (size_t i = 0; i < t.shape.size(); ++i) {
    int64_t step = 0;
    if (__builtin_mul_overflow(t.shape[i] - 1, t.strides[i], &step) ||
        __builtin_add_overflow(last, step, &last))
      reject(site, "{} ({}) spans more than 2^63 elements; its offsets overflow the kernels' 64-bit indices",
             name, t.str());
  }
  int64_t bytes = 0;
  if (__builtin_add_overflow(last, int64_t{1}, &last) ||
      __builtin_mul_overflow(last, int64_t{dtype_bytes(t.dtype)}, &bytes))
    reject(site, "{} ({}) spans more than 2^63 bytes; its offsets overflow the kernels' 64-bit indices", name,
           t.str());
  (void)byte_range(name, t.data, static_cast<uint64_t>(bytes), site);
  return static_cast<uint64_t>(bytes);
}

ByteRange byte_range(const char* name, uint64_t data, uint64_t bytes, const ApiSite& site) {
  uint64_t end = 0;
  if (__builtin_add_overflow(data, bytes, &end))
    reject(site, "{} ({} bytes at {:#x}) runs past the end of the 64-bit address space", name, bytes, data);
  return ByteRange{name, data, end};
}

ByteRange tensor_range(const char* name, const TensorRef& t, const ApiSite& site) {
  return ByteRange{name, t.data, t.data + extent_bytes(name, t, site)}; // extent_bytes: the end does not wrap
}

void check_outputs_apart(llvm::ArrayRef<ByteRange> ranges, size_t first_output, const ApiSite& site) {
  for (size_t out = first_output; out < ranges.size(); ++out)
    for (size_t other = 0; other < out; ++other)
      if (overlaps(ranges[out], ranges[other]))
        reject(site,
               "{} (bytes [{:#x}, {:#x})) overlaps {} (bytes [{:#x}, {:#x})); expected outputs in memory of "
               "their own, since {}",
               ranges[out].name, ranges[out].first, ranges[out].end, ranges[other].name, ranges[other].first,
               ranges[other].end,
               other < first_output ? fmt::format("writing {} would overwrite {} while it is read",
                                                  ranges[out].name, ranges[other].name)
                                    : fmt::format("{} and {} would be written to the same memory",
                                                  ranges[out].name, ranges[other].name));
}

// Walking the dims of size > 1 from the smallest stride up, each stride must step past everything the smaller
// ones reach.
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

bool overlaps(const ByteRange& a, const ByteRange& b) { return a.first < b.end && b.first < a.end; }

namespace {
// Whether delta = Σ c_i · strides[i] for integers |c_i| < shape[i], dims sorted by stride and nested (each
// stride past the reach of the smaller ones): at each dim only the two multiples around delta can work.
bool reachable(int64_t delta, const std::vector<std::pair<int64_t, int64_t>>& dims, size_t count) {
  if (count == 0)
    return delta == 0;
  auto [stride, size] = dims[count - 1];
  const int64_t low =
      delta >= 0 ? delta / stride : -((-delta + stride - 1) / stride); // floor(delta / stride)
  for (int64_t c : {low, low + 1})
    if (c > -size && c < size && reachable(delta - c * stride, dims, count - 1))
      return true;
  return false;
}
} // namespace

std::optional<bool> same_layout_views_overlap(const TensorRef& a, const TensorRef& b) {
  if (a.dtype != b.dtype || a.shape != b.shape || a.strides != b.strides || !elements_distinct(a))
    return std::nullopt;
  const uint64_t elem = static_cast<uint64_t>(dtype_bytes(a.dtype));
  const uint64_t gap = a.data > b.data ? a.data - b.data : b.data - a.data;
  if (gap % elem != 0)
    return std::nullopt;
  std::vector<std::pair<int64_t, int64_t>> dims; // (stride, size) of the dims that step, by stride
  for (size_t i = 0; i < a.shape.size(); ++i) {
    if (a.shape[i] == 0)
      return false; // no elements
    if (a.shape[i] > 1)
      dims.emplace_back(a.strides[i], a.shape[i]);
  }
  std::sort(dims.begin(), dims.end());
  return reachable(static_cast<int64_t>(gap / elem), dims, dims.size());
}

void check_dtypes(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
                  const std::optional<TensorRef>& lse, const AttentionOptions& options, const ApiSite& site) {
  if (q.dtype != DType::f16 && q.dtype != DType::bf16 && q.dtype != DType::f32)
    reject(site, "q has dtype {}; expected f16, bf16 or f32", dtype_name(q.dtype));
  const std::pair<const char*, const TensorRef*> tensors[] = {{"k", &k}, {"v", &v}, {"o", &o}};
  for (auto [name, t] : tensors)
    if (t->dtype != q.dtype)
      reject(site, "{} has dtype {} but q has {}; q, k, v and o must share one dtype", name,
             dtype_name(t->dtype), dtype_name(q.dtype));
  if (lse && lse->dtype != DType::f32)
    reject(site, "lse has dtype {}; expected f32", dtype_name(lse->dtype));
  if (options.tf32 && q.dtype != DType::f32)
    reject(site, "options.tf32 applies to f32 inputs, but q, k, v are {}", dtype_name(q.dtype));
}

void apply_options(AttentionProblem& p, DType dtype, const AttentionOptions& options, const ApiSite& site) {
  if (!std::isfinite(options.sm_scale) ||
      std::fabs(options.sm_scale) > static_cast<double>(std::numeric_limits<float>::max()))
    reject(site, "options.sm_scale={} is not a finite f32 value; expected a finite scale, or 0 for 1/sqrt(D)",
           options.sm_scale);
  p.dtype = dtype;
  p.causal = static_cast<int>(options.causal);
  if (p.causal < 0 || p.causal > 2)
    reject(site, "options.causal={} is not a mode; expected None, TopLeft or BottomRight", p.causal);
  p.sm_scale = options.sm_scale;
  p.k_transposed = options.k_transposed;
  p.tf32 = options.tf32;
  p.exact_masked_v = options.exact_masked_v;
}

void check_rank(const char* name, const TensorRef& t, size_t rank, const char* names, const ApiSite& site) {
  if (t.shape.size() != rank)
    reject(site, "{} must have rank {} {}, got rank {} with shape {}", name, rank, names, t.shape.size(),
           dims_str(t.shape));
  if (t.strides.size() != t.shape.size())
    reject(site, "{} has {} strides for its {} dims (shape {}, strides {}); expected one stride per dim",
           name, t.strides.size(), t.shape.size(), dims_str(t.shape), dims_str(t.strides));
  for (size_t i = 0; i < rank; ++i) {
    if (t.shape[i] < 0)
      reject(site, "{} has a negative size {} in dim {} (shape {})", name, t.shape[i], i, dims_str(t.shape));
    if (t.strides[i] < 0)
      reject(site, "{} has a negative stride {} in dim {} (strides {}); expected strides >= 0", name,
             t.strides[i], i, dims_str(t.strides));
  }
}

void check_size(const char* what, int64_t v, const ApiSite& site) {
  if (v >= kMaxAttentionSize)
    reject(site,
           "{}={} is too large: the kernels index rows, keys and heads in i32, so sizes must be below "
           "2^31 - 2^16 = {}",
           what, v, kMaxAttentionSize);
}

void check_address(const char* name, uint64_t data, const ApiSite& site) {
  if (data == 0)
    reject(site, "{} has a null data address; expected a device address", name);
  if (data % kAlignBytes != 0)
    reject(site,
           "{}'s address {:#x} is not 16-byte aligned (it is {} bytes past a multiple of 16); the kernels "
           "move rows as 16-byte vectors",
           name, data, data % kAlignBytes);
}

void check_alignment(const char* name, const TensorRef& t, const ApiSite& site) {
  check_address(name, t.data, site);
  const int64_t elem = dtype_bytes(t.dtype);
  for (size_t i = 0; i + 1 < t.shape.size(); ++i)
    if (t.shape[i] > 1 && (t.strides[i] * elem) % static_cast<int64_t>(kAlignBytes) != 0)
      reject(site,
             "{}'s stride {} in dim {} is {} bytes, not a multiple of 16 (strides {}, {}); every row must "
             "start 16-byte aligned, i.e. strides a multiple of {} elements",
             name, t.strides[i], i, t.strides[i] * elem, dims_str(t.strides), dtype_name(t.dtype),
             static_cast<int64_t>(kAlignBytes) / elem);
}

} // namespace kiln::attention::detail
