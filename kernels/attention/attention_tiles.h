// The DSL pieces FA1 and FA2 forward share: their compile-time parameters, their argument list, the
// per-(batch, head) base pointers (GQA), the block pointers over Q/K/V/O, the key-visibility mask
// (N_K tail, causal top-left / bottom-right), the key range a Q tile visits, and the final
// normalisation into O and LSE. Both kernels are written in terms of these, so that the two
// algorithms differ only in their loop structure.
#pragma once

#include "dsl/builder.h"
#include "dsl/registry.h"

#include <limits>
#include <span>
#include <string>
#include <vector>

namespace kiln {

inline constexpr double kLog2e = 1.4426950408889634;
inline constexpr double kLn2 = 0.6931471805599453;
inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

// CAUSAL parameter values.
enum class CausalMode : int64_t { None = 0, TopLeft = 1, BottomRight = 2 };

// A slice of the head dim that one tile covers: columns [start, start + width), `checked` against D when the
// slice may reach past it.
struct HeadDimPiece {
  int64_t start = 0, width = 0;
  bool checked = false;
};

struct AttentionTileParams {
  int64_t block_m = 0, block_n = 0, head_dim = 0;
  bool even_d = true;
  // SPLIT_D (fa2_fwd): the head dim is covered by two tiles, HEAD_DIM/2 and HEAD_DIM/4 wide, instead of one
  // HEAD_DIM wide, so that D = 96 or 192 multiplies no quarter of padding (head_dim_pieces).
  bool split_d = false;
  CausalMode causal = CausalMode::None;
  bool k_transposed = true;
  DType dtype = DType::f16;
  bool tf32 = false;
  // EXACT_MASKED_V: masked tiles select hidden keys out of P·V instead of multiplying their V by p = 0
  // (attention_value_selection.h); 0 leaves the kernels' code exactly as without the option.
  bool exact_masked_v = false;

  // The tiles along the head dim: one of HEAD_DIM columns, or with SPLIT_D [0, HEAD_DIM/2) and
  // [HEAD_DIM/2, 3·HEAD_DIM/4); each checked against D unless EVEN_D (D then fills them exactly).
  std::vector<HeadDimPiece> head_dim_pieces() const;
  // The single piece of a kernel without SPLIT_D: all HEAD_DIM columns.
  HeadDimPiece whole_head_dim() const { return {0, head_dim, !even_d}; }

  // (rows, HEAD_DIM) tiles of Q, O: rows checked against N_Q, D only when D < HEAD_DIM.
  BoundaryCheck row_tile_check() const { return row_tile_check(whole_head_dim()); }
  BoundaryCheck row_tile_check(const HeadDimPiece& piece) const;
  // K and V tiles: keys checked against N_K only in `masked` (tail) tiles, D when D < HEAD_DIM.
  BoundaryCheck k_tile_check(bool masked) const { return k_tile_check(masked, whole_head_dim()); }
  BoundaryCheck k_tile_check(bool masked, const HeadDimPiece& piece) const;
  BoundaryCheck v_tile_check(bool masked) const { return v_tile_check(masked, whole_head_dim()); }
  BoundaryCheck v_tile_check(bool masked, const HeadDimPiece& piece) const;
};

// The head-dim columns the tiles cover: HEAD_DIM, or 3/4 of it with SPLIT_D (what EVEN_D compares D with).
int64_t head_dim_columns(int64_t head_dim, bool split_d);

// A name for piece i of n: `base` itself when there is one piece, else base_d0, base_d1.
std::string head_dim_piece_name(const char* base, size_t i, size_t n);

// Reads and checks the attention params of `config` (a kiln::Error naming `kernel` on a bad value).
AttentionTileParams attention_tile_params(const Config& config, const char* kernel);
// BLOCK_M, BLOCK_N, HEAD_DIM, EVEN_D, CAUSAL, K_TRANSPOSED, DTYPE, TF32, EXACT_MASKED_V with their defaults.
std::vector<ParamDef> attention_param_defs();
// SPLIT_D, for the kernels built over head_dim_pieces (the forward, dK/dV and dQ); the host sets it from D.
ParamDef split_d_param();

// The kernel arguments FA1 and FA2 share, declared in their documented order (see fa2_fwd.h). `packed`
// (fa2_fwd_varlen.h) names the two sequence sizes TOTAL_Q and TOTAL_K: the rows of the packed tensors.
struct AttentionArgs {
  Value q, k, v, o, lse, sm_scale;
  Value B, H, H_KV, N_Q, N_K, D;
  Value stride_qb, stride_qh, stride_qn, stride_kb, stride_kh, stride_kn;
  Value stride_vb, stride_vh, stride_vn, stride_ob, stride_oh, stride_on;
};
AttentionArgs declare_attention_args(KernelBuilder& kb, DType dtype, bool packed = false);

// Base pointers of one (batch, head): Q/O of head h, K/V of its kv head h / (H / H_KV); offsets in i64
// so that large batches cannot overflow. lse_row0 is the index of this head's first row in LSE.
struct AttentionHeadBases {
  Value q, k, v, o;
  Value lse_row0; // i64: off_hz * N_Q
};
AttentionHeadBases attention_head_bases(const AttentionArgs& a, const Value& off_hz);

// Block pointers at row (or key) `offset`: Q/O (BLOCK_M, HEAD_DIM); V (BLOCK_N, HEAD_DIM); K as Kᵀ
// (HEAD_DIM, BLOCK_N) with order (0, 1) when K_TRANSPOSED, else (BLOCK_N, HEAD_DIM) row-major. With a
// `piece`, the tile covers that piece's columns of the head dim instead of all HEAD_DIM.
Value q_block_ptr(const AttentionArgs& a, const AttentionHeadBases& b, const AttentionTileParams& tp,
                  const Operand& offset);
Value q_block_ptr(const AttentionArgs& a, const AttentionHeadBases& b, const AttentionTileParams& tp,
                  const Operand& offset, const HeadDimPiece& piece);
Value o_block_ptr(const AttentionArgs& a, const AttentionHeadBases& b, const AttentionTileParams& tp,
                  const Operand& offset, const HeadDimPiece& piece);
Value k_block_ptr(const AttentionArgs& a, const AttentionHeadBases& b, const AttentionTileParams& tp,
                  const Operand& offset);
Value k_block_ptr(const AttentionArgs& a, const AttentionHeadBases& b, const AttentionTileParams& tp,
                  const Operand& offset, const HeadDimPiece& piece);
Value v_block_ptr(const AttentionArgs& a, const AttentionHeadBases& b, const AttentionTileParams& tp,
                  const Operand& offset);
Value v_block_ptr(const AttentionArgs& a, const AttentionHeadBases& b, const AttentionTileParams& tp,
                  const Operand& offset, const HeadDimPiece& piece);
// Moves a K block pointer on by BLOCK_N keys (along dim 1 of Kᵀ, dim 0 of K).
Value advance_k(const Value& k_ptr, const AttentionTileParams& tp);

// The K and V block pointers of the forward's key tiles, a pair per head-dim piece (head_dim_pieces), named
// k_ptr and v_ptr (k_ptr_d0, ... with two pieces).
struct KeyTilePtrs {
  std::vector<Value> k, v;
};
// At key `offset`.
KeyTilePtrs key_tile_ptrs(const AttentionArgs& a, const AttentionHeadBases& b, const AttentionTileParams& tp,
                          const Operand& offset);
// Every pointer moved on by `keys` keys (advance_k and V's advance by BLOCK_N when `keys` is BLOCK_N).
void advance_keys(KeyTilePtrs& ptrs, const AttentionTileParams& tp, const Operand& keys);

// (BLOCK_M, BLOCK_N) i1: key offs_n[j] exists (< N_K) and, when causal, is visible to query offs_m[i].
Value visible_keys(const AttentionArgs& a, const AttentionTileParams& tp, const Value& offs_m, const Value& offs_n);
// The last key query row `row` sees under the causal rule: row itself (top-left) or
// row + N_K - N_Q (bottom-right). `row` is a scalar or a tile of i32 row indices.
Value last_visible_key(const AttentionArgs& a, const AttentionTileParams& tp, const Value& row);
// The end of the keys query row `row` sees under the causal rule: min(N_K, last_visible_key(row) + 1). `row` is a
// scalar or a tile of i32 row indices.
Value visible_keys_end(const AttentionArgs& a, const AttentionTileParams& tp, const Value& row);

// The keys the Q tile starting at row m0 visits: [0, unmasked_end) in whole tiles that every row
// sees entirely, then [unmasked_end, end) in tiles that need the mask. Both multiples of BLOCK_N
// from 0 (end is exclusive and need not be).
struct KeyRange {
  Value unmasked_end, end;
};
KeyRange key_range(const AttentionArgs& a, const AttentionTileParams& tp, const Value& m0);

// O[m0 : m0 + BLOCK_M] = acc / l (0 where l == 0: a row that saw no key) in the output dtype, and
// LSE = (m + log2 l) · ln 2 (−inf where l == 0). m is the running max in the log2 domain. `acc` holds one
// tile per head-dim piece (head_dim_pieces), in their order.
void store_attention_rows(const AttentionArgs& a, const AttentionHeadBases& b, const AttentionTileParams& tp,
                          const Value& m0, const Value& offs_m, std::span<const Value> acc, const Value& l,
                          const Value& m);

// The grid of `tiles` programs a head over `heads` heads: (tiles, heads, 1), or with PERSISTENT (1 or 2) in the
// config (tiles · heads, 1, 1), whose program p the kernel numbers as tile p % tiles of head p / tiles (a
// persistent grid walks x alone: query_tile_program, fa2_bwd_dkdv's key tiles).
Grid tiles_by_heads_grid(const Config& c, int64_t tiles, int64_t heads);
// The grid of kernels with one program per (BLOCK_M query rows, batch·head): tiles_by_heads_grid of
// cdiv(N_Q, BLOCK_M) tiles over B·H heads.
Grid query_tile_grid(const Config& c, const SizeArgs& s);
// Why a tuner should skip `c` for these sizes: BLOCK_M wider than the query rows it needs (N_Q padded to a
// power of two, at least min_rows) or BLOCK_N wider than the keys (at least min_keys); "" keeps it. The
// floors are a space's smallest tiles, so that a short sequence keeps a config.
std::string prune_tiles_past_sequence(const Config& c, const SizeArgs& s, int64_t min_rows, int64_t min_keys);

} // namespace kiln
