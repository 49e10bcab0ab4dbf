// Programmable attention (issue 19): score and mask functions written in the DSL, which the FA2 forward is
// generated from, as FlexAttention's score_mod and mask_mod:
//
//   score = q·k · sm_scale;  score = score_mod(score, b, h, q_idx, kv_idx);  hidden where !mask_mod(...)
//   O = softmax(score) V, LSE = logsumexp(score) over the keys the row sees.
//
// A mod is a named C++ callable that builds DSL ops on one (BLOCK_M, BLOCK_N) tile of scores:
//
//   ScoreMod softcap{"softcap(30)", {}, [](const Value& s, const ModArgs& m) { return 30.0 * tanh(s / 30.0);
//   }}; MaskMod window{"window(64)", {}, [](const ModArgs& m) { return m.kv_idx >= m.q_idx - 64; }};
//
// It sees ModArgs: the batch b and query head h (i32 scalars), the query indices q_idx (BLOCK_M, 1) and key
// indices kv_idx (1, BLOCK_N) (i32, clamped into [0, N_Q - 1] and [0, N_K - 1], so that a tile's tail rows
// and keys, which the kernel hides anyway, never index past a mod's tensors; in the backward's dK/dV kernel,
// whose score tiles are transposed, q_idx is (1, BLOCK_M) and kv_idx (BLOCK_N, 1): a mod must combine them
// elementwise, by broadcasting, as every library mod does), the sizes, and the tensors the mod declared
// (ModTensorSpec: ALiBi slopes per head, a bias, document ids), read with ModArgs::load. A score_mod returns
// a float tile broadcastable to (BLOCK_M, BLOCK_N), a mask_mod an i1 tile broadcastable to it; anything else
// is a kiln::Error naming the mod. Library mods: attention_mod_library.h.
//
// The backward (fa2_bwd_dkdv.h, fa2_bwd_dq.h) recomputes the scores with the same mods and multiplies dS by
// d score_mod / d score, which the builder derives by differentiating the ops the mod builds
// (dsl/differentiate.h, forward mode: dual values over the mod's IR) unless the mod gives its derivative; a
// mod built from ops with no elementwise derivative is a kiln::Error naming the mod and the op.
//
// The kernels' identity includes the mods: fa2_fwd_def(mods) (and the backward's defs) is named after them
// and a hash of the IR they build (identity()), so that two different mods never share a compiled kernel or a
// tuning result, even under one name. Without mods the kernels are exactly the built-in ones (same name, same
// generated code).
#pragma once

#include "dsl/builder.h"
#include "kernels/attention/attention_tiles.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln {

// A tensor a mod reads. dims name the attention size each dim runs along ("B", "H", "H_KV", "N_Q" or "N_K");
// the tensor passed for it has that extent or 1 (broadcast) in each dim, and any non-negative strides. The
// kernel receives it as a pointer argument mod_<name> followed by one i64 stride per dim.
struct ModTensorSpec {
  std::string name; // an identifier, unique among a call's mods
  DType dtype = DType::f32;
  std::vector<std::string> dims;
  // The tensor given for this one, where another: a tensor an expression reads along other dims too (doc[b,
  // q_idx] and doc[b, kv_idx]) is one spec per set of dims, each its own kernel argument, all given as `doc`.
  std::string given_as = {};
  const std::string& tensor_name() const { return given_as.empty() ? name : given_as; }
};

// What a mod sees of the tile being scored (see the file comment). Built by the kernel; a mod only reads it.
class ModArgs {
public:
  Value b, h;          // i32 scalars: batch and query head
  Value q_idx, kv_idx; // i32 (BLOCK_M, 1) query rows and (1, BLOCK_N) keys, clamped into range
  Value N_Q, N_K, H, H_KV;

  // tensor[index...] of the tensor `name` a mod of the call declared: one integer operand per dim (scalars
  // or index tiles, which broadcast together); the result has the tensor's dtype and the broadcast shape.
  // An unknown name or a wrong number of indices is a kiln::Error.
  Value load(const std::string& name, llvm::ArrayRef<Operand> index,
             CallSite where = CallSite::current()) const;

  struct Tensor {
    ModTensorSpec spec;
    Value ptr;
    std::vector<Value> strides; // i64, in elements (0 along a broadcast dim)
  };
  std::vector<Tensor> tensors;
};

// The host-side view of one score or mask point, for the double-precision reference (attention_mods_host.h).
struct ModPoint {
  int64_t b = 0, h = 0, q_idx = 0, kv_idx = 0, N_Q = 0, N_K = 0, H = 0, H_KV = 0;
  // tensor[index...] as a double, through the tensor's strides; set by the reference.
  std::function<double(const std::string& name, std::initializer_list<int64_t> index)> at;
};

// A mod's DSL function (a std::function) with an id that its copies share and no other function value has,
// not even a later one at the same address: fa2_fwd_def(mods) keeps the kernel's identity per combination of
// ids and names, so that a repeated call does not build the mods again. A mod's function must therefore build
// the same ops whenever it is called: what it reads besides its arguments, it captures by value. Build a mod
// once and pass that value on every call: a mod built again is a new function, whose def is built (and kept)
// again. The library's mods (attention_mod_library.h) are the exception: their names spell every parameter,
// so their functions take the id kDeterminedByName, and a library mod built per call is the same key.
uint64_t next_mod_function_id(); // 1, 2, ... per process, thread-safe
struct DeterminedByName {};      // tag: the mod's name determines what the function builds
inline constexpr DeterminedByName kDeterminedByName{};

template <typename Signature> class ModFunction;
template <typename R, typename... Args> class ModFunction<R(Args...)> {
public:
  ModFunction() = default;
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, ModFunction> &&
                                                    std::is_constructible_v<std::function<R(Args...)>, F>>>
  ModFunction(F&& f) : fn_(std::forward<F>(f)), id_(fn_ ? next_mod_function_id() : 0) {}
  template <typename F>
  ModFunction(DeterminedByName, F&& f) : fn_(std::forward<F>(f)), id_(fn_ ? kNamedId : 0) {}

  R operator()(Args... args) const { return fn_(std::forward<Args>(args)...); }
  explicit operator bool() const { return static_cast<bool>(fn_); }
  uint64_t id() const { return id_; } // 0: no function

private:
  static constexpr uint64_t kNamedId = ~uint64_t{0}; // never returned by next_mod_function_id()
  std::function<R(Args...)> fn_;
  uint64_t id_ = 0;
};

using ScoreModFn = ModFunction<Value(const Value& score, const ModArgs& m)>;
// d fn(score) / d score, built as DSL ops: the backward's factor on dS (a float tile broadcastable to the
// tile).
using ScoreModDerivativeFn = ModFunction<Value(const Value& score, const ModArgs& m)>;
using MaskModFn = ModFunction<Value(const ModArgs& m)>;
using SinkModFn = ModFunction<Value(const ModArgs& m)>;
using ScoreModRef = std::function<double(double score, const ModPoint& m)>;
using MaskModRef = std::function<bool(const ModPoint& m)>;

// The keys [lo, hi) (i32 scalars) outside which no row in [q_first, q_last] of a tile sees a key: a superset
// of what the mask_mod lets through, which the kernel uses to skip key tiles (window-like masks). Optionally
// also the keys [full_lo, full_hi) that every row in [q_first, q_last] sees (a subset of what the mask_mod lets
// through; both or neither set): key tiles wholly inside it are visited without the mask, as the built-in
// causal kernel visits the tiles below its diagonal.
struct KeyBounds {
  Value lo, hi;
  Value full_lo = {}, full_hi = {};
};
using KeyBoundsFn = ModFunction<KeyBounds(const ModArgs& m, const Value& q_first, const Value& q_last)>;

struct ScoreMod {
  std::string name; // with its parameters, e.g. "softcap(30)": part of the kernel's name
  std::vector<ModTensorSpec> tensors;
  ScoreModFn fn;
  ScoreModRef reference; // optional: what fn computes, in double, for tests and `--check`
  // optional: d fn / d score, for the backward; without it the builder differentiates fn's ops.
  ScoreModDerivativeFn derivative = {};
};

struct MaskMod {
  std::string name;
  std::vector<ModTensorSpec> tensors;
  MaskModFn fn;
  MaskModRef reference;   // optional, as ScoreMod::reference
  KeyBoundsFn key_bounds; // optional: without it, every key tile is visited
  // Optional hint: a query row sees at least as many keys as every row before it (causal, prefix-LM, a window
  // open only to the left). The forward and dQ then launch the last query tiles first, as under the built-in
  // CAUSAL mode, so that the grid's last wave holds light tiles (query_tile_program). Part of the mods' identity.
  bool later_rows_see_more = false;
};

// An attention sink (learned per-head logits, as gpt-oss's): one more logit per query row that joins the
// softmax's denominator as a key with no value, O = Σ_j e^{s_j} v_j / (e^{sink} + Σ_j e^{s_j}) and
// LSE = log(e^{sink} + Σ_j e^{s_j}); a row that sees no key gets O = 0 and LSE = sink. fn returns the sink in
// the scores' domain (compared with q·k · sm_scale after the score mods) as an f32 scalar or a (BLOCK_M, 1)
// tile; a sink of −inf is no sink.
struct SinkMod {
  std::string name;
  std::vector<ModTensorSpec> tensors;
  SinkModFn fn;
  std::function<double(const ModPoint& m)> reference; // optional, as ScoreMod::reference (kv_idx unused)
  // true: fn returns one value per query head, the same for every batch and row, and that value is a learned
  // parameter itself (attention_sinks(): sinks[h]). The backward can then give d loss / d that parameter,
  // an [H] gradient (the rows' gradients summed over batch and rows, fa2_bwd_sink.h); any sink can give the
  // per-row gradient d loss / d sink(b, h, q_idx), [B, H, N_Q].
  bool per_head = false;
};

// The mods of one attention call: score mods applied in order, and mask mods of which every one must let a
// key through for the row to see it (on top of the CAUSAL mode, which stays the built-in fast path).
struct AttentionMods {
  std::vector<ScoreMod> score;
  std::vector<MaskMod> mask;
  std::vector<SinkMod> sink; // at most one

  bool empty() const { return score.empty() && mask.empty() && sink.empty(); }
  // "softcap(30)|document,window(64,0)": score mods, then a bar and the mask mods; then "|sink:" and the
  // sink's name when there is one.
  std::string name() const;
  // name() and a short hash of the IR the mods build on a probe tile: what the kernel's name carries.
  // Builds the mods, so a mod that breaks the rules (wrong return type, unknown tensor) fails here.
  std::string identity() const;
  // Builds the score mods' derivatives (the backward's factor on dS) on a probe tile: a kiln::Error naming
  // the mod and the op when a mod without its own derivative uses an op the builder cannot differentiate.
  void check_differentiable() const;
  // Builds the score mods on a probe tile: true when there are some and together they return the very scores
  // they were given (a no-op mod, `return score;`). The kernels then treat the scores as unmodded: unscaled
  // until exp2's multiply, no derivative factor, as with mask mods alone.
  bool score_mods_return_their_input() const;
  // What identity() is a function of, without building anything: the mods' names, their tensors and their
  // functions' ids. Equal keys give equal identities; fa2_fwd_def(mods) keeps its def by this key.
  std::string identity_key() const;
  // Every tensor the mods declare, score mods' first, then mask mods', then the sink's; a kiln::Error for a
  // name that is not an identifier, declared twice, an unknown dim name, a mod without a name or a function,
  // or more than one sink.
  std::vector<ModTensorSpec> tensors() const;
};

// ---- inside the kernels (fa2_fwd.cpp, fa2_bwd_dq.cpp, fa2_bwd_dkdv.cpp) ----

// The mods' view of one program: its ModArgs (b, h, q_idx set per program or head, kv_idx per tile) and the
// query rows offs_m.
struct ModKernelEnv {
  const AttentionMods* mods = nullptr;
  ModArgs args;
  Value offs_m;

  bool active() const { return mods != nullptr; }
  bool has_mask() const { return mods != nullptr && !mods->mask.empty(); }
  bool has_sink() const { return mods != nullptr && !mods->sink.empty(); }
  // Score mods that change the scores (not only no-ops: AttentionMods::score_mods_return_their_input).
  bool has_score() const { return modifies_scores; }
  bool modifies_scores = false; // set by declare_mod_kernel_env
  // This env for batch b, query head h (i32 scalars) and query rows offs_m (BLOCK_M,) (may be empty: dK/dV
  // sets the rows per tile).
  ModKernelEnv at(const Value& b, const Value& h, const Value& offs_m) const;
};

// Declares the mods' tensor arguments (after the kernel's own) and the sizes; b, h and the rows unset.
ModKernelEnv declare_mod_kernel_env(KernelBuilder& kb, const AttentionMods& mods, const AttentionArgs& a);
// The same, for the program of batch·head off_hz and query rows offs_m (the forward, dQ).
ModKernelEnv mod_kernel_env(KernelBuilder& kb, const AttentionMods& mods, const AttentionArgs& a,
                            const Value& off_hz, const Value& offs_m);

// One tile of scores with the mods applied, and (backward) d score / d (q·k · sm_scale) through the score
// mods: the factor on dS; 0 where a key is hidden, empty where it is exactly 1 (no score mods, or additive
// ones: ALiBi, a bias) or when not asked for.
struct ModdedScores {
  Value score, derivative;
};

// The (BLOCK_M, BLOCK_N) f32 scores of the key tile at start_n: qk · sm_scale through the score mods, then,
// in a `masked` tile, −inf where the built-in mask (N_K, CAUSAL) or a mask mod hides the key. Without score
// mods the scores stay unscaled (qk, or −inf): sm_scale is then folded into scores_to_log2's multiply, so that a
// tile of mask mods alone costs what the built-in kernel's does.
ModdedScores modded_scores(const ModKernelEnv& env, const AttentionArgs& a, const AttentionTileParams& tp,
                           const Value& qk, const Value& start_n, bool masked, bool with_derivative = false);

// (BLOCK_M, BLOCK_N) i1 of the key tile at start_n for the rows env.offs_m: the built-in mask (N_K, CAUSAL)
// and every mask mod, as a masked tile of modded_scores hides keys; env may be inactive (no mods: the built-in
// mask alone). What the block mask's classifier evaluates (attention_block_mask.h).
Value mod_visible_keys(const ModKernelEnv& env, const AttentionArgs& a, const AttentionTileParams& tp,
                       const Value& start_n);

// dK/dV's transposed tile: (BLOCK_N, BLOCK_M) scores qkT of keys offs_n (BLOCK_N,) against query rows offs_m
// (BLOCK_M,), as modded_scores; `visible` (BLOCK_N, BLOCK_M) i1 is the built-in mask of a masked tile, empty
// in an unmasked one.
ModdedScores modded_scores_transposed(const ModKernelEnv& env, const AttentionArgs& a, const Value& qkT,
                                      const Value& offs_m, const Value& offs_n, const Value& visible,
                                      bool with_derivative);

// Whether a later query tile sees more keys than an earlier one: under the built-in causal mask (`causal`), or a
// mask mod with later_rows_see_more. Such tiles are started heaviest first (below), and a static persistent grid,
// whose CTAs walk fixed tiles, would hand some CTAs the heavy ones again and again (fa2_fwd's prune).
bool later_query_tiles_heavier(bool causal, const AttentionMods& mods);

// A program's query tile and batch·head. On query_tile_grid's two-dimensional grid: the tile from program_id(0),
// the last first where later tiles do more work (later_query_tiles_heavier), else in order, and program_id(1);
// except where later tiles do more work and the caller asks for groups of heads (`grouped_n_k`, the key count of
// dense sequences): then the programs, in the order the hardware starts them (x fastest),
// take the heaviest tiles of a group of heads first, all of the group's heads at one tile before the next
// lighter tile, the group's heads as many as keep their K and V within 24 MiB (L2 holds them while the group
// runs). So the grid's last wave holds the lightest tiles of the last group, not one head's heavy tiles started
// late: a longest-processing-time-first order, as FlashAttention-3's scheduler takes it. (Head by head, the
// last heads' heavy tiles start when most of the grid is done: 3-15 % of a causal forward at the bench's shapes
// in a model of equal SMs, +0.5-3.5 % measured on the H200 at two CTAs an SM, worklog §63.)
// On its one-dimensional grid (persistent: PERSISTENT=1 or 2, which a persistent grid needs), program id p holds
// tile p % tiles of batch·head p / tiles, tiles = cdiv(n_q, BLOCK_M): the programs that run at once share a
// head's K and V in L2, and within a head the tiles come in that order; or, with `grouped_n_k`
// where later tiles do more work, the grouped order above over (p % tiles, p / tiles), which a dynamic
// persistent grid (PERSISTENT=2) starts in id order as the hardware starts a grid's programs.
struct QueryTileProgram {
  Value start_m; // the query tile's index: its rows start at start_m · BLOCK_M
  Value off_hz;  // batch · H + head
};
QueryTileProgram query_tile_program(const AttentionTileParams& tp, const AttentionMods& mods, bool persistent,
                                    const Value& n_q, const std::optional<Value>& grouped_n_k);

// What the kernels multiply the scores by before exp2: sm_scale · log2 e, or log2 e alone with score mods
// (which see scores already scaled by sm_scale, modded_scores). Named qk_scale.
Value scores_to_log2(const ModKernelEnv& env, const Value& sm_scale);

// The sink's logits of the env's rows: (BLOCK_M,) f32 in the scores' domain (the forward's starting state,
// the backward's d loss / d sink).
Value sink_logits(const ModKernelEnv& env, const AttentionTileParams& tp);

// The online softmax's starting state with the sink as a key already seen: the running max m (BLOCK_M,) in
// the log2 domain, the sink itself, and the row sum l, 1 (0 where the sink is −inf).
struct SinkState {
  Value m, l;
};
SinkState sink_initial_state(const ModKernelEnv& env, const AttentionTileParams& tp);

// The key tiles a Q tile at m0 visits when there are mask mods: from `start` (a multiple of BLOCK_N) to
// `end`; the intersection of the mods' key bounds and the causal rule, else every key. When every mask mod
// gives full bounds, the tiles in [full_start, full_end) (start <= full_start <= full_end <= end, multiples of
// BLOCK_N) are seen whole by every row of the tile and within N_K: they need no mask. Else full_* are empty.
struct ModKeyTiles {
  Value start, end;
  Value full_start, full_end;
};
ModKeyTiles mod_key_tiles(const ModKernelEnv& env, const AttentionArgs& a, const AttentionTileParams& tp,
                          const Value& m0);
// The loop over those tiles (the forward's and dQ's): skip(start) moves the caller's K and V block pointers on
// by `start` keys, to the first tile, then tile(start_n, masked) for each, which advances them: masked before
// full_start, unmasked up to full_end, masked after it (three loops, each pipelined as the built-in kernel's
// two are); one masked loop when the mods give no full bounds.
void for_each_mod_key_tile(const ModKernelEnv& env, const AttentionArgs& a, const AttentionTileParams& tp,
                           const Value& m0, const std::function<void(const Value& start)>& skip,
                           const std::function<void(Value, bool masked)>& tile);

} // namespace kiln
