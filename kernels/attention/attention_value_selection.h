// Exact selection of V in the masked key tiles of the attention forward (docs/guarantees.md, "V"): a key that
// a row does not see contributes exactly nothing to that row's O, whatever its V holds. A tile's P·V on the
// tensor cores multiplies a hidden key's probability 0 by its V, and 0 · NaN = 0 · inf = NaN; so a masked
// tile whose V holds a NaN or ±inf (a scalar test, from a second read of the tile) is multiplied one key at a
// time on the CUDA cores instead, where the keys a row sees are added and the others selected away. Finite
// tiles keep the tensor cores' product with V in shared memory; unmasked tiles, where every row sees every
// key, are not touched. The kernels use this only with EXACT_MASKED_V=1 (an option, off by default: its code
// changes the whole kernel's register allocation, measured 7-18 % slower on every FA2 shape, worklog §25).
#pragma once

#include "dsl/builder.h"
#include "kernels/attention/attention_tiles.h"

namespace kiln {

// The masked (BLOCK_N, HEAD_DIM) V tile at v_ptr, read a second time: into registers, to be checked, so that
// the read the product uses stays a shared-memory operand of the tensor cores.
Value load_values_to_check(const Value& v_ptr, const AttentionTileParams& tp);
// i1 scalar: every element of that copy is finite (no NaN, no ±inf).
Value values_are_finite(const Value& v_copy);

// acc + P·V over the masked key tile [start_n, start_n + BLOCK_N): P (BM, BN) f32 the probabilities (0 at the
// keys a row does not see), v the loaded (BN, HD) tile, v_finite values_are_finite's answer for it. With a
// finite tile (the `then` branch, whose layout the result takes), the tensor cores' product (P in V's dtype);
// otherwise, key by key, p · v for the finite elements and, for the NaN and ±inf of a key the row sees, their
// IEEE sum with the rest (+inf and −inf give NaN).
Value accumulate_masked_values(const AttentionArgs& a, const AttentionHeadBases& b,
                               const AttentionTileParams& tp, const Value& offs_m, const Value& start_n,
                               const Value& p, const Value& v, const Value& v_finite, const Value& acc);

} // namespace kiln
