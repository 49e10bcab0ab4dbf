// The attention entry points of the C ABI: kiln::attention::forward / backward on device pointers and
// capi/host_attention.h's interpreter path on host pointers, over the same conversions of the C structs (and
// of options->block_mask, a device one for the *_cuda calls, a host one for the *_host calls); and the
// forward plans over attention::ForwardPlan.
#include "capi/block_mask_c.h"
#include "capi/c_boundary.h"
#include "capi/host_attention.h"
#include "kernels/attention/attention_forward_plan.h"

// The handle behind kiln_c.h's opaque type: the plan itself.
struct kiln_attention_plan : kiln::attention::ForwardPlan {
  using ForwardPlan::ForwardPlan;
};

namespace kiln::capi {
namespace {

using attention::TensorRef;

struct ForwardArgs {
  TensorRef q, k, v, o;
  std::optional<TensorRef> lse;
  attention::BackwardOptions options; // with a *_cuda call's block mask
  std::shared_ptr<const HostBlockMask> host_block_mask; // a *_host call's
};

// Where a call runs, which decides the kind of block mask it takes (capi/block_mask_c.h).
enum class Memory { Cuda, Host };

// `entry` names the call in errors; `backward`: the call is a backward one, which options->dsink belongs to.
ForwardArgs forward_args(const kiln_tensor* q, const kiln_tensor* k, const kiln_tensor* v, const kiln_tensor* o,
                         const kiln_tensor* lse, const kiln_attention_options* options, const char* entry,
                         Memory memory, bool backward = false) {
  ForwardArgs a{tensor_ref(require(q, "q"), "q"), tensor_ref(require(k, "k"), "k"), tensor_ref(require(v, "v"), "v"),
                tensor_ref(require(o, "o"), "o"), std::nullopt, attention_options(options), nullptr};
  if (memory == Memory::Cuda)
    a.options.block_mask = cuda_block_mask(options, entry);
  else
    a.host_block_mask = host_block_mask(options, entry);
  if (lse != nullptr)
    a.lse = tensor_ref(*lse, "lse");
  if (!backward && a.options.dsink)
    fail("kiln_attention_options.dsink is given to a forward call; expected NULL (the sink's gradient is the "
         "backward's output)");
  return a;
}

struct BackwardArgs {
  ForwardArgs fwd;
  TensorRef dout, dq, dk, dv;
};

BackwardArgs backward_args(const kiln_tensor* q, const kiln_tensor* k, const kiln_tensor* v, const kiln_tensor* o,
                           const kiln_tensor* lse, const kiln_tensor* dout, const kiln_tensor* dq,
                           const kiln_tensor* dk, const kiln_tensor* dv, const kiln_attention_options* options,
                           const char* entry, Memory memory) {
  require(lse, "lse (the backward needs the forward's LSE)");
  return {forward_args(q, k, v, o, lse, options, entry, memory, /*backward=*/true),
          tensor_ref(require(dout, "dout"), "dout"),
          tensor_ref(require(dq, "dq"), "dq"), tensor_ref(require(dk, "dk"), "dk"),
          tensor_ref(require(dv, "dv"), "dv")};
}

} // namespace
} // namespace kiln::capi

using namespace kiln;
using namespace kiln::capi;

extern "C" {

kiln_status kiln_attention_forward_cuda(const kiln_tensor* q, const kiln_tensor* k, const kiln_tensor* v,
                                        const kiln_tensor* o, const kiln_tensor* lse,
                                        const kiln_attention_options* options) {
  return guarded([&] {
    const ForwardArgs a = forward_args(q, k, v, o, lse, options, "kiln_attention_forward_cuda", Memory::Cuda);
    on_gpu("kiln_attention_forward_cuda", [&] { attention::forward(a.q, a.k, a.v, a.o, a.lse, a.options); });
  });
}

kiln_status kiln_attention_backward_cuda(const kiln_tensor* q, const kiln_tensor* k, const kiln_tensor* v,
                                         const kiln_tensor* o, const kiln_tensor* lse, const kiln_tensor* dout,
                                         const kiln_tensor* dq, const kiln_tensor* dk, const kiln_tensor* dv,
                                         const kiln_attention_options* options) {
  return guarded([&] {
    const BackwardArgs a =
        backward_args(q, k, v, o, lse, dout, dq, dk, dv, options, "kiln_attention_backward_cuda", Memory::Cuda);
    const ForwardArgs& f = a.fwd;
    on_gpu("kiln_attention_backward_cuda",
           [&] { attention::backward(f.q, f.k, f.v, f.o, *f.lse, a.dout, a.dq, a.dk, a.dv, f.options); });
  });
}

kiln_status kiln_attention_backward_workspace_size(const kiln_tensor* q, const kiln_attention_options* options,
                                                   uint64_t* bytes) {
  return guarded([&] {
    require(bytes, "bytes");
    *bytes = 0;
    const TensorRef tq = tensor_ref(require(q, "q"), "q");
    attention::BackwardOptions o = attention_options(options);
    o.block_mask = cuda_block_mask(options, "kiln_attention_backward_workspace_size");
    *bytes = attention::backward_workspace_bytes(tq, o);
  });
}

kiln_status kiln_attention_backward_cuda_workspace(const kiln_tensor* q, const kiln_tensor* k, const kiln_tensor* v,
                                                   const kiln_tensor* o, const kiln_tensor* lse,
                                                   const kiln_tensor* dout, const kiln_tensor* dq,
                                                   const kiln_tensor* dk, const kiln_tensor* dv, void* workspace,
                                                   uint64_t workspace_bytes, const kiln_attention_options* options) {
  return guarded([&] {
    const BackwardArgs a = backward_args(q, k, v, o, lse, dout, dq, dk, dv, options,
                                         "kiln_attention_backward_cuda_workspace", Memory::Cuda);
    const ForwardArgs& f = a.fwd;
    const attention::BackwardWorkspace ws{reinterpret_cast<uint64_t>(workspace), workspace_bytes};
    on_gpu("kiln_attention_backward_cuda_workspace", [&] {
      attention::backward_with_workspace(f.q, f.k, f.v, f.o, *f.lse, a.dout, a.dq, a.dk, a.dv, ws, f.options);
    });
  });
}

kiln_status kiln_tune_attention_cuda(const kiln_tensor* q, const kiln_tensor* k, const kiln_tensor* v,
                                     const kiln_tensor* o, const kiln_tensor* lse,
                                     const kiln_attention_options* options, const char** json) {
  return guarded([&] {
    require(json, "json");
    *json = nullptr;
    ForwardArgs a = forward_args(q, k, v, o, lse, options, "kiln_tune_attention_cuda", Memory::Cuda);
    // KILN_AUTOTUNE_ENV tunes now (force), as `kiln tune` does; another mode is taken as given.
    const std::optional<rt::AutotuneMode> mode = a.options.autotune ? a.options.autotune : rt::AutotuneMode::Force;
    a.options.autotune.reset();
    TunedLaunch chosen;
    on_gpu("kiln_tune_attention_cuda",
           [&] { chosen = attention::tune_forward(a.q, a.k, a.v, a.o, a.lse, a.options, mode); });
    *json = return_string(tuned_launch_json("fa2_fwd", chosen));
  });
}

kiln_status kiln_attention_forward_plan(const kiln_tensor* q, const kiln_tensor* k, const kiln_tensor* v,
                                        const kiln_tensor* o, const kiln_tensor* lse,
                                        const kiln_attention_options* options, kiln_attention_plan** plan) {
  return guarded([&] {
    require(plan, "plan");
    *plan = nullptr;
    require(lse, "lse (a plan always writes LSE)");
    const ForwardArgs a = forward_args(q, k, v, o, lse, options, "kiln_attention_forward_plan", Memory::Cuda);
    on_gpu("kiln_attention_forward_plan",
           [&] { *plan = new kiln_attention_plan(a.q, a.k, a.v, a.o, *a.lse, a.options); });
  });
}

kiln_status kiln_attention_plan_forward(kiln_attention_plan* plan, const void* q, const void* k, const void* v,
                                        void* o, void* lse, void* stream, int32_t autotune) {
  return guarded([&] {
    require(plan, "plan");
    const std::optional<rt::AutotuneMode> mode = autotune_mode(autotune, "autotune");
    auto address = [](const void* p) { return reinterpret_cast<uint64_t>(p); };
    on_gpu("kiln_attention_plan_forward",
           [&] { plan->run({address(q), address(k), address(v), address(o), address(lse)}, stream, mode); });
  });
}

void kiln_attention_plan_destroy(kiln_attention_plan* plan) { delete plan; }

kiln_status kiln_attention_forward_host(const kiln_tensor* q, const kiln_tensor* k, const kiln_tensor* v,
                                        const kiln_tensor* o, const kiln_tensor* lse,
                                        const kiln_attention_options* options) {
  return guarded([&] {
    const ForwardArgs a = forward_args(q, k, v, o, lse, options, "kiln_attention_forward_host", Memory::Host);
    attention_forward_host(a.q, a.k, a.v, a.o, a.lse, a.options, a.host_block_mask.get());
  });
}

kiln_status kiln_attention_backward_host(const kiln_tensor* q, const kiln_tensor* k, const kiln_tensor* v,
                                         const kiln_tensor* o, const kiln_tensor* lse, const kiln_tensor* dout,
                                         const kiln_tensor* dq, const kiln_tensor* dk, const kiln_tensor* dv,
                                         const kiln_attention_options* options) {
  return guarded([&] {
    const BackwardArgs a =
        backward_args(q, k, v, o, lse, dout, dq, dk, dv, options, "kiln_attention_backward_host", Memory::Host);
    const ForwardArgs& f = a.fwd;
    attention_backward_host(f.q, f.k, f.v, f.o, *f.lse, a.dout, a.dq, a.dk, a.dv, f.options,
                            f.host_block_mask.get());
  });
}

} // extern "C"
