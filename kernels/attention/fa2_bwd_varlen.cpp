#include "kernels/attention/fa2_bwd_varlen.h"

#include "kernels/attention/attention_varlen_defs.h"
#include "kernels/attention/fa2_bwd_dkdv.h"
#include "kernels/attention/fa2_bwd_dq.h"
#include "kernels/attention/fa2_bwd_dq_convert.h"
#include "kernels/attention/fa2_bwd_preprocess.h"

namespace kiln {

const KernelDef& fa2_bwd_preprocess_varlen_def() {
  static const KernelDef def =
      make_varlen_def(fa2_bwd_preprocess_def(), "fa2_bwd_preprocess_varlen",
                      "attention backward over packed sequences: Delta = rowsum(dO * O)");
  return def;
}

const KernelDef& fa2_bwd_dkdv_varlen_def() {
  static const KernelDef def =
      make_varlen_def(fa2_bwd_dkdv_def(), "fa2_bwd_dkdv_varlen",
                      "attention backward over packed sequences: dK and dV of one key tile");
  return def;
}

const KernelDef& fa2_bwd_dq_varlen_def() {
  static const KernelDef def =
      make_varlen_def(fa2_bwd_dq_def(), "fa2_bwd_dq_varlen",
                      "attention backward over packed sequences: dQ of one query tile");
  return def;
}

const KernelDef& fa2_bwd_dq_convert_varlen_def() {
  static const KernelDef def =
      make_varlen_def(fa2_bwd_dq_convert_def(), "fa2_bwd_dq_convert_varlen",
                      "attention backward over packed sequences (atomic dQ): the f32 accumulator to dQ");
  return def;
}

} // namespace kiln
