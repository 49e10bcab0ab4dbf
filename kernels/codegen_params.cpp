#include "kernels/codegen_params.h"

namespace kiln {

ParamDef min_blocks_per_sm_param(int64_t default_value) {
  // 32 is the most CTAs any supported arch keeps resident on one SM; the target's own limits (resident CTAs and
  // threads an SM) are checked when code is generated for it (codegen/target.h).
  return ParamDef::count("MIN_BLOCKS_PER_SM", default_value,
                         "CTAs that must fit on one SM (caps registers; see codegen.h)", 1, 32);
}

ParamDef warp_specialize_param(int64_t default_value) {
  return ParamDef::flag("WARP_SPECIALIZE", default_value,
                        "1: a producer warpgroup issues the main loop's TMA copies (sm_90a; see codegen.h)");
}

ParamDef pingpong_param(int64_t default_value) {
  return ParamDef::flag("PINGPONG", default_value,
                        "1: the consumer warpgroups of a warp-specialised kernel issue their products in turn "
                        "(see codegen.h)");
}

ParamDef product_ahead_param(int64_t default_value) {
  return ParamDef::flag("PRODUCT_AHEAD", default_value,
                        "1: a warp-specialised kernel's loops issue their first product one iteration ahead "
                        "(see codegen.h)");
}

ParamDef products_in_order_param(int64_t default_value) {
  return ParamDef::flag("PRODUCTS_IN_ORDER", default_value,
                        "1: each loop's tensor-core products are issued where the program computes them, not as "
                        "early as their operands allow (see codegen/schedule_products.h)");
}

ParamDef last_product_late_param(int64_t default_value) {
  return ParamDef::flag("LAST_PRODUCT_LATE", default_value,
                        "1: a warp-specialised kernel's loops issue their last product after the next iteration's "
                        "first (see codegen.h)");
}

ParamDef persistent_param(int64_t default_value) {
  return ParamDef::choice("PERSISTENT", default_value,
                          "1: one wave of CTAs walks the program ids, each CTA every gridDim.x-th; 2: each CTA "
                          "draws its next program id from a counter (a persistent grid; see codegen_params.h)",
                          0, 2);
}

ParamDef static_persistent_param(int64_t default_value) {
  return ParamDef::choice("PERSISTENT", default_value,
                          "1: one wave of CTAs walks the program ids, each CTA every gridDim.x-th (a static "
                          "persistent grid; see codegen_params.h)",
                          0, 1);
}

ParamDef lazy_rescale_param(int64_t default_value) {
  return ParamDef::flag("LAZY_RESCALE", default_value,
                        "1: the running max moves only when a row's max grows by more than 2^8, and the "
                        "accumulator's rescale is skipped where its factors are 1 (see codegen_params.h)");
}

ParamDef exp2_on_fma_param(int64_t default_value) {
  return ParamDef::choice("EXP2_ON_FMA", default_value,
                          "K: one of every K registers of an f32 exp2 tile computed by a polynomial on the FMA "
                          "pipe (1: all; 0: none; see codegen_params.h)",
                          0, 16);
}

ParamDef tile_barriers_param(int64_t default_value) {
  return ParamDef::flag("TILE_BARRIERS", default_value,
                        "1: a full and an empty mbarrier per tile of a warp-specialised ring slot, each tile handed "
                        "back once its own readers are done (see codegen_params.h)");
}

} // namespace kiln
