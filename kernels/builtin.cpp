#include "kernels/builtin.h"

#include "kernels/attention/attention_block_mask.h"
#include "kernels/attention/decode_combine.h"
#include "kernels/attention/decode_split.h"
#include "kernels/attention/fa1_fwd.h"
#include "kernels/attention/fa2_bwd_dkdv.h"
#include "kernels/attention/fa2_bwd_dq.h"
#include "kernels/attention/fa2_bwd_dq_convert.h"
#include "kernels/attention/fa2_bwd_preprocess.h"
#include "kernels/attention/fa2_bwd_varlen.h"
#include "kernels/attention/fa2_fwd.h"
#include "kernels/attention/fa2_fwd_varlen.h"
#include "kernels/matmul/matmul.h"
#include "kernels/matmul/matmul_split_k.h"
#include "kernels/softmax/softmax.h"
#include "kernels/vector_add/vector_add.h"

namespace kiln {

const KernelRegistry& builtin_kernels() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    r.add(vector_add_def());
    r.add(softmax_def());
    r.add(matmul_def());
    r.add(matmul_split_k_def());
    r.add(matmul_split_k_reduce_def());
    r.add(fa2_fwd_def());
    r.add(fa1_fwd_def());
    r.add(attention_block_mask_def());
    r.add(fa2_bwd_preprocess_def());
    r.add(fa2_bwd_dkdv_def());
    r.add(fa2_bwd_dq_def());
    r.add(fa2_bwd_dq_convert_def());
    // Packed variable-length batches (attention_varlen_defs.h): the dense builders with VARLEN=1.
    r.add(fa2_fwd_varlen_def());
    r.add(fa2_bwd_preprocess_varlen_def());
    r.add(fa2_bwd_dkdv_varlen_def());
    r.add(fa2_bwd_dq_varlen_def());
    r.add(fa2_bwd_dq_convert_varlen_def());
    r.add(decode_split_def());
    r.add(decode_combine_def());
    return r;
  }();
  return registry;
}

} // namespace kiln
