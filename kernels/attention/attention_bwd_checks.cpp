#include "kernels/attention/attention_bwd_checks.h"

#include "kernels/attention/attention_bwd_steps.h"

namespace kiln::attention::detail {

void check_gradient_shapes(llvm::ArrayRef<GradientLike> grads, size_t rank, const char* names, DType dtype,
                           const ApiSite& site) {
  for (const GradientLike& g : grads) {
    check_rank(g.name, *g.t, rank, names, site);
    if (g.t->dtype != dtype)
      reject(site, "{} has dtype {} but q has {}; expected the inputs' dtype", g.name, dtype_name(g.t->dtype),
             dtype_name(dtype));
    if (g.t->shape != g.like->shape)
      reject(site, "{} has shape {}; expected {}'s shape {}", g.name, dims_str(g.t->shape), g.like_name,
             dims_str(g.like->shape));
  }
}

void check_bwd_variant(const BackwardOptions& options, const ApiSite& site) {
  const bool atomic_config = atomic_pair_given(options);
  if (options.deterministic && atomic_config)
    reject(site,
           "options.config has ATOMIC_DQ=1 (dQ added up by f32 atomics, in an order that varies from run to "
           "run) but options.deterministic is true; set ATOMIC_DQ=0, or deterministic = false to allow it");
  if (atomic_config && options.dq_config)
    reject(
        site,
        "options.dq_config ({}) is given, but options.config has ATOMIC_DQ=1, which computes dQ in the dK/dV "
        "kernel and never runs the dQ kernel; drop one of them",
        options.dq_config->str());
}

void check_gradient_rows(const char* name, const TensorRef& t, const ApiSite& site) {
  if (t.strides.back() != 1 && t.shape.back() > 1)
    reject(site, "{}'s head dim is not contiguous: stride {} (strides {}); expected stride 1 in the last dim",
           name, t.strides.back(), dims_str(t.strides));
  check_alignment(name, t, site);
}

void check_elements_distinct(const char* name, const TensorRef& t, const ApiSite& site) {
  if (!elements_distinct(t))
    reject(
        site,
        "{}'s elements overlap each other (shape {}, strides {}): several gradients would be written to one "
        "place; expected strides that give every element its own memory",
        name, dims_str(t.shape), dims_str(t.strides));
}

void check_gradient_overlaps(llvm::ArrayRef<TensorRange> inputs, llvm::ArrayRef<TensorRange> outputs,
                             const ApiSite& site) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const TensorRange& out = outputs[i];
    auto clash = [&](const TensorRange& other, bool written) {
      const ByteRange& a = out.range;
      const ByteRange& b = other.range;
      if (overlaps(a, b) && same_layout_views_overlap(*out.t, *other.t).value_or(true))
        reject(
            site,
            "{} (bytes [{:#x}, {:#x})) overlaps {} (bytes [{:#x}, {:#x})); expected gradients in memory of "
            "their own, since {}",
            a.name, a.first, a.end, b.name, b.first, b.end,
            written ? fmt::format("{} and {} would be written to the same memory", a.name, b.name)
                    : fmt::format("writing {} would overwrite {} while it is read", a.name, b.name));
    };
    for (const TensorRange& in : inputs)
      clash(in, false);
    for (size_t j = 0; j < i; ++j)
      clash(outputs[j], true);
  }
}

namespace {
constexpr uint64_t kAccAlignment = 256;
} // namespace

WorkspaceLayout workspace_layout(int64_t B, int64_t H, int64_t N_Q, int64_t D, bool accumulate,
                                 const ApiSite& site) {
  uint64_t rows = 0, delta = 0, acc = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(B), static_cast<uint64_t>(H), &rows) ||
      __builtin_mul_overflow(rows, static_cast<uint64_t>(N_Q), &rows) ||
      __builtin_mul_overflow(rows, sizeof(float), &delta) ||
      __builtin_mul_overflow(delta, static_cast<uint64_t>(D), &acc) || delta > (uint64_t{1} << 62) ||
      acc > (uint64_t{1} << 62))
    reject(site,
           "the workspace for B={} H={} N_Q={} D={} does not fit in 64 bits; expected a smaller problem", B,
           H, N_Q, D);
  WorkspaceLayout w;
  w.total = delta;
  if (accumulate && acc > 0) {
    w.acc_offset = (delta + kAccAlignment - 1) / kAccAlignment * kAccAlignment;
    w.total = w.acc_offset + acc;
  }
  return w;
}

void check_workspace(const BackwardWorkspace& ws, uint64_t needed, const char* size_fn,
                     const std::vector<ByteRange>& tensors, const ApiSite& site) {
  if (ws.bytes < needed)
    reject(site, "the workspace has {} bytes; expected at least {}() = {}", ws.bytes, size_fn, needed);
  if (needed == 0)
    return;
  if (ws.data == 0 || ws.data % 16 != 0)
    reject(site, "the workspace's address {:#x} is {}; expected a 16-byte aligned device address", ws.data,
           ws.data == 0 ? "null" : "not 16-byte aligned");
  const ByteRange mine{"the workspace", ws.data, ws.data + needed};
  for (const ByteRange& theirs : tensors)
    if (overlaps(mine, theirs))
      reject(site,
             "the workspace (bytes [{:#x}, {:#x})) overlaps {} (bytes [{:#x}, {:#x})); expected scratch "
             "memory of its own",
             mine.first, mine.end, theirs.name, theirs.first, theirs.end);
}

} // namespace kiln::attention::detail
