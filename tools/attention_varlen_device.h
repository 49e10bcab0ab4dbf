// Device copies of a packed (varlen) problem's tensors and the host API's calls over them, for `kiln attention
// --varlen` on the GPU: forward_varlen (its O and LSE read back in logical order) and backward_varlen (its
// gradients likewise), which --check holds to the reference and --bench times as they are (tuned as the API
// tunes).
#pragma once

#include "kernels/attention/attention_bwd_problem.h"
#include "kernels/attention/attention_varlen_api.h"
#include "kernels/attention/attention_varlen_problem.h"
#include "runtime/device.h"

#include <optional>

namespace kiln::cli {

class DeviceVarlen {
public:
  // Uploads the inputs (and dO, for the backward) and the offsets; O, LSE and the gradients start as NaN.
  DeviceVarlen(const VarlenProblem& p, const AttentionInputs& in, const HostBuffer* dout = nullptr);

  // forward_varlen at `config` (none: the API's pick) into the device O and LSE.
  void forward(const std::optional<Config>& config) const;
  // backward_varlen from the device O and LSE (the last forward's) into dQ, dK, dV; `deterministic` as
  // BackwardOptions::deterministic (false: the faster pair as the tuner times them).
  void backward(bool deterministic) const;
  // O and LSE of the last forward, in logical order.
  AttentionResult outputs() const;
  // dQ, dK and dV of the last backward, in logical order.
  AttentionGrads gradients() const;

private:
  DeviceVarlen(const VarlenProblem& p, const AttentionInputs& in, const HostBuffer* dout,
               const AttentionOutputs& poisoned); // O and LSE start as make_varlen_outputs' NaN
  const VarlenProblem& p_;
  rt::DeviceBuffer q_, k_, v_, o_, lse_, dout_, dq_, dk_, dv_, cu_q_, cu_k_;
  attention::VarlenBatch batch_;
  attention::TensorRef packed(const rt::DeviceBuffer& b, const PackedStrides& strides, bool kv) const;
  attention::TensorRef lse() const;
  attention::AttentionOptions options() const;
};

} // namespace kiln::cli
