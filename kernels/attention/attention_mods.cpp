#include "kernels/attention/attention_mods.h"

#include "dsl/differentiate.h"
#include "dsl/dsl.h"
#include "dsl/printer.h"
#include "support/hash.h"

#include <algorithm>
#include <vector>
#include <atomic>
#include <set>
#include <string_view>

namespace kiln {

namespace {

constexpr const char* kModDims[] = {"B", "H", "H_KV", "N_Q", "N_K"};

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0])))
    return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

std::string join_names(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names)
    s += (s.empty() ? "" : ",") + n;
  return s;
}

// The mods' tensors as kernel arguments: mod_<name>, then mod_<name>_stride<i> (i64) for each dim.
ModArgs declare_mod_tensors(KernelBuilder& kb, const AttentionMods& mods) {
  ModArgs m;
  for (const ModTensorSpec& spec : mods.tensors()) {
    ModArgs::Tensor t{spec, kb.arg_ptr("mod_" + spec.name, spec.dtype), {}};
    for (size_t d = 0; d < spec.dims.size(); ++d)
      t.strides.push_back(kb.arg(fmt::format("mod_{}_stride{}", spec.name, d), i64));
    m.tensors.push_back(std::move(t));
  }
  return m;
}

// A mod's result as the (BM, BN) tile the kernel needs: f32 scores or i1 visibility.
Value checked_result(const Value& r, const char* kind, const std::string& mod, const Shape& tile) {
  const bool is_mask = std::string_view(kind) == "mask_mod";
  const std::string want = fmt::format("{} tile broadcastable to the score tile {}",
                                       is_mask ? "an i1 (bool)" : "a float", shape_str(tile));
  if (!r.valid())
    fail("{} '{}' returned an empty Value; expected {}", kind, mod, want);
  const Type& t = r.type();
  const bool dtype_ok = is_mask ? t.elem == DType::i1 : is_float(t.elem);
  bool shape_ok = t.is_tensor() && t.rank() <= 2;
  for (int d = 0; shape_ok && d < t.rank(); ++d) {
    const int64_t extent = t.shape[static_cast<size_t>(d)];
    const int64_t full = tile[static_cast<size_t>(d + 2 - t.rank())];
    shape_ok = extent == 1 || extent == full;
  }
  if (!dtype_ok || !shape_ok)
    fail("{} '{}' returned {}; expected {}", kind, mod, t.str(), want);
  Value v = is_mask || t.elem == DType::f32 ? r : r.to(f32);
  return t.shape == tile ? v : broadcast_to(v, tile);
}

// The score mods in order: the tile's scores and, when `derivative` is given, d score / d the scores passed
// in (each mod's own derivative or, without one, its ops differentiated), multiplied along the chain; left
// empty where it is exactly 1 (additive mods: ALiBi, a bias).
Value apply_score_mods(const AttentionMods& mods, const ModArgs& m, Value score, const Shape& tile,
                       Value* derivative = nullptr) {
  for (const ScoreMod& mod : mods.score) {
    Value modded = checked_result(mod.fn(score, m), "score_mod", mod.name, tile);
    if (derivative) {
      // Empty: exactly 1 (`s + bias`), nothing to multiply by.
      Value d = mod.derivative
                    ? checked_result(mod.derivative(score, m), "score_mod derivative", mod.name, tile)
                    : derivative_of(modded, score, "score_mod '" + mod.name + "'");
      if (d.valid())
        *derivative = derivative->valid() ? *derivative * d : d;
    }
    score = modded;
  }
  return score;
}

Value apply_mask_mods(const AttentionMods& mods, const ModArgs& m, Value visible, const Shape& tile) {
  for (const MaskMod& mod : mods.mask)
    visible = visible && checked_result(mod.fn(m), "mask_mod", mod.name, tile);
  return visible;
}

// The mods on one tile whose queries and keys m.q_idx and m.kv_idx index (either orientation): the scaled
// scores through the score mods, and where `visible` is given (a masked tile) −inf where it or a mask mod
// hides the key.
// The scores the mods take: scaled by sm_scale where score mods read them, else as they are (mask mods only
// hide keys; scores_to_log2 then applies sm_scale).
Value mod_input_scores(const ModKernelEnv& env, const AttentionArgs& a, const Value& qk) {
  return env.has_score() ? qk * a.sm_scale : qk;
}

ModdedScores apply_mods_to_tile(const AttentionMods& mods, const ModArgs& m, const Shape& tile,
                                const Value& scaled_qk, const Value& visible, bool with_derivative) {
  ModdedScores r;
  Value derivative;
  r.score = apply_score_mods(mods, m, scaled_qk, tile,
                             with_derivative && !mods.score.empty() ? &derivative : nullptr);
  if (visible.valid()) {
    Value seen = apply_mask_mods(mods, m, visible, tile);
    r.score = where(seen, r.score, -kInfinity);
    if (derivative.valid()) // hidden keys have P = 0: their factor must not make 0 · inf
      derivative = where(seen, derivative, 0.0);
  }
  if (derivative.valid())
    r.derivative = (derivative.shape() == tile ? derivative : broadcast_to(derivative, tile)).named("dscore");
  return r;
}

} // namespace

Value ModArgs::load(const std::string& name, llvm::ArrayRef<Operand> index, CallSite where) const {
  auto it =
      std::find_if(tensors.begin(), tensors.end(), [&](const Tensor& t) { return t.spec.name == name; });
  if (it == tensors.end()) {
    std::vector<std::string> names;
    for (const Tensor& t : tensors)
      names.push_back(t.spec.name);
    fail_at(loc_of(where), "mod tensor '{}' is not declared by any mod of this call; declared: {}", name,
            names.empty() ? "none" : join_names(names));
  }
  if (index.size() != it->spec.dims.size())
    fail_at(loc_of(where), "mod tensor '{}' has {} dims ({}); load got {} indices", name,
            it->spec.dims.size(), join_names(it->spec.dims), index.size());
  if (index.empty())
    return kiln::load(it->ptr, BoundaryCheck{}, Padding::Zero, where);
  Value offset = (index[0] * it->strides[0]).named(name + "_off");
  for (size_t d = 1; d < index.size(); ++d)
    offset = offset + index[d] * it->strides[d];
  return kiln::load(it->ptr + offset, BoundaryCheck{}, Padding::Zero, where);
}

std::string AttentionMods::name() const {
  std::vector<std::string> s, m;
  for (const ScoreMod& mod : score)
    s.push_back(mod.name);
  for (const MaskMod& mod : mask)
    m.push_back(mod.name);
  return join_names(s) + "|" + join_names(m) + (sink.empty() ? "" : "|sink:" + sink[0].name);
}

std::vector<ModTensorSpec> AttentionMods::tensors() const {
  std::vector<ModTensorSpec> all;
  std::map<std::string, std::string> declared_by; // tensor name -> the mod that declared it first
  auto add = [&](const std::string& mod, bool has_fn, const std::vector<ModTensorSpec>& specs) {
    if (mod.empty())
      fail("attention mods: a mod has no name; expected a name with its parameters, e.g. \"softcap(30)\"");
    if (!has_fn)
      fail("attention mods: mod '{}' has no function", mod);
    for (const ModTensorSpec& t : specs) {
      if (!is_identifier(t.name))
        fail("attention mods: mod '{}' declares a tensor named '{}'; expected an identifier (letters, "
             "digits, _)",
             mod, t.name);
      if (auto first = declared_by.find(t.name); first != declared_by.end()) {
        // Several mods may read one tensor (a bias both scored and masked on): one argument, if they agree.
        const ModTensorSpec& seen = *std::find_if(all.begin(), all.end(),
                                                  [&](const ModTensorSpec& s) { return s.name == t.name; });
        if (seen.dtype != t.dtype || seen.dims != t.dims || seen.given_as != t.given_as)
          fail("attention mods: tensor '{}' is declared as {} [{}] by mod '{}' and as {} [{}] by mod '{}'; "
               "expected one dtype and one set of dims for a name",
               t.name, dtype_name(seen.dtype), fmt::join(seen.dims, ", "), first->second, dtype_name(t.dtype),
               fmt::join(t.dims, ", "), mod);
        continue;
      }
      declared_by.emplace(t.name, mod);
      for (const std::string& d : t.dims)
        if (std::find(std::begin(kModDims), std::end(kModDims), d) == std::end(kModDims))
          fail("attention mods: tensor '{}' of mod '{}' has a dim '{}'; expected one of B, H, H_KV, N_Q, N_K",
               t.name, mod, d);
      all.push_back(t);
    }
  };
  for (const ScoreMod& mod : score)
    add(mod.name, static_cast<bool>(mod.fn), mod.tensors);
  for (const MaskMod& mod : mask)
    add(mod.name, static_cast<bool>(mod.fn), mod.tensors);
  if (sink.size() > 1)
    fail("attention mods: {} sinks ({}, {}, ...); expected at most one", sink.size(), sink[0].name,
         sink[1].name);
  for (const SinkMod& mod : sink)
    add(mod.name, static_cast<bool>(mod.fn), mod.tensors);
  return all;
}

uint64_t next_mod_function_id() {
  static std::atomic<uint64_t> last{0};
  return ++last;
}

std::string AttentionMods::identity_key() const {
  // Every string with its length first, so that no two different mods give one key whatever their names hold.
  std::string key;
  auto text = [&](const std::string& s) { key += fmt::format("{}:", s.size()) + s; };
  auto add = [&](char kind, const std::string& name, const std::vector<ModTensorSpec>& tensors,
                 std::initializer_list<uint64_t> function_ids) {
    key += kind;
    text(name);
    key += fmt::format("{}t", tensors.size());
    for (const ModTensorSpec& t : tensors) {
      text(t.name);
      key += fmt::format("{}d{}", static_cast<int>(t.dtype), t.dims.size());
      for (const std::string& d : t.dims)
        text(d);
    }
    for (uint64_t id : function_ids)
      key += fmt::format("#{}", id);
  };
  for (const ScoreMod& m : score)
    add('s', m.name, m.tensors, {m.fn.id(), m.derivative.id()});
  for (const MaskMod& m : mask) {
    add('m', m.name, m.tensors, {m.fn.id(), m.key_bounds.id()});
    key += m.later_rows_see_more ? "L" : "";
  }
  for (const SinkMod& m : sink)
    add('k', m.name, m.tensors, {m.fn.id()});
  return key;
}

namespace {

// The mods' arguments on a probe tile of 16 x 16 scores, in a kernel of their own: what identity() prints and
// check_differentiable() differentiates.
constexpr int64_t kProbeTile = 16;

ModArgs probe_mod_args(KernelBuilder& kb, const AttentionMods& mods) {
  ModArgs m = declare_mod_tensors(kb, mods);
  m.b = kb.arg("b", i32), m.h = kb.arg("h", i32);
  m.N_Q = kb.arg("N_Q", i32), m.N_K = kb.arg("N_K", i32), m.H = kb.arg("H", i32),
  m.H_KV = kb.arg("H_KV", i32);
  m.q_idx = arange(0, kProbeTile).expand_dims(1);
  m.kv_idx = arange(0, kProbeTile).expand_dims(0);
  return m;
}

} // namespace

std::string AttentionMods::identity() const {
  if (empty())
    return "";
  // The printed IR (ops and constants) is what the mods compute, so two mods that differ in any of it differ
  // in the hash.
  const Shape tile = {kProbeTile, kProbeTile};
  KernelBuilder kb("attention_mods_probe");
  ModArgs m = probe_mod_args(kb, *this);
  Value s = apply_score_mods(*this, m, full(tile, 0.0, f32), tile);
  // A derivative a mod gives is code of its own (one the builder derives follows from fn's ops, and is not
  // built here, so that a mod the builder cannot differentiate still runs forward).
  for (const ScoreMod& mod : score)
    if (mod.derivative)
      s = s + checked_result(mod.derivative(full(tile, 0.0, f32), m), "score_mod derivative", mod.name, tile);
  Value v = apply_mask_mods(*this, m, full(tile, 1.0, i1), tile);
  for (const SinkMod& mod : sink)
    v = checked_result(mod.fn(m), "sink", mod.name, {tile[0], 1});
  for (const MaskMod& mod : mask)
    if (mod.key_bounds) {
      KeyBounds kbnd = mod.key_bounds(m, m.N_Q * 0, m.N_Q - 1);
      if (!kbnd.lo.valid() || !kbnd.hi.valid() || !kbnd.lo.type().is_scalar() || !kbnd.hi.type().is_scalar())
        fail("mask_mod '{}': key_bounds must return two i32 scalars (lo, hi)", mod.name);
    }
  (void)s, (void)v;
  // Without the call sites ("  // file:line"): mods that build the same ops are the same kernel wherever
  // they are written.
  const std::string printed = print_kernel(kb.finish());
  std::string ir;
  for (size_t at = 0; at < printed.size();) {
    size_t eol = printed.find('\n', at);
    eol = eol == std::string::npos ? printed.size() : eol;
    const std::string line = printed.substr(at, eol - at);
    ir += line.substr(0, line.find("  // ")) + "\n";
    at = eol + 1;
  }
  return name() + "#" + sha256_hex(ir).substr(0, 12);
}

void AttentionMods::check_differentiable() const {
  if (score.empty())
    return;
  const Shape tile = {kProbeTile, kProbeTile};
  KernelBuilder kb("attention_mods_derivative_probe");
  ModArgs m = probe_mod_args(kb, *this);
  Value derivative;
  (void)apply_score_mods(*this, m, full(tile, 0.0, f32), tile, &derivative);
}

bool AttentionMods::score_mods_return_their_input() const {
  if (score.empty())
    return false;
  const Shape tile = {kProbeTile, kProbeTile};
  KernelBuilder kb("attention_mods_pass_through_probe");
  ModArgs m = probe_mod_args(kb, *this);
  const Value scores = full(tile, 0.0, f32);
  return apply_score_mods(*this, m, scores, tile).id() == scores.id();
}

ModKernelEnv declare_mod_kernel_env(KernelBuilder& kb, const AttentionMods& mods, const AttentionArgs& a) {
  ModKernelEnv env;
  env.mods = &mods;
  env.modifies_scores = !mods.score.empty() && !mods.score_mods_return_their_input();
  env.args = declare_mod_tensors(kb, mods);
  ModArgs& m = env.args;
  m.N_Q = a.N_Q, m.N_K = a.N_K, m.H = a.H, m.H_KV = a.H_KV;
  return env;
}

ModKernelEnv ModKernelEnv::at(const Value& b, const Value& h, const Value& rows) const {
  ModKernelEnv env = *this;
  env.args.b = b.named("mod_b");
  env.args.h = h.named("mod_h");
  env.offs_m = rows;
  // Tail rows (past N_Q) are never stored: clamped, they index what the mods' tensors hold.
  if (rows.valid())
    env.args.q_idx = minimum(rows, args.N_Q - 1).expand_dims(1).named("q_idx");
  return env;
}

ModKernelEnv mod_kernel_env(KernelBuilder& kb, const AttentionMods& mods, const AttentionArgs& a,
                            const Value& off_hz, const Value& offs_m) {
  return declare_mod_kernel_env(kb, mods, a).at(off_hz / a.H, off_hz % a.H, offs_m);
}

ModdedScores modded_scores(const ModKernelEnv& env, const AttentionArgs& a, const AttentionTileParams& tp,
                           const Value& qk, const Value& start_n, bool masked, bool with_derivative) {
  if (tp.exact_masked_v && env.has_mask())
    fail("fa2: EXACT_MASKED_V=1 selects away the keys the built-in mask hides, not those of mask mods ({}); "
         "expected EXACT_MASKED_V=0 with mask mods",
         env.mods->name());
  Value offs_n = start_n + arange(0, tp.block_n); // (BN,) i32
  ModArgs m = env.args;
  // Keys past N_K occur only in masked tiles, which hide them: clamped, they index what the tensors hold.
  m.kv_idx = (masked ? minimum(offs_n, a.N_K - 1) : offs_n).expand_dims(0).named("kv_idx");
  Value visible = masked ? visible_keys(a, tp, env.offs_m, offs_n) : Value();
  return apply_mods_to_tile(*env.mods, m, {tp.block_m, tp.block_n}, mod_input_scores(env, a, qk), visible,
                            with_derivative && env.has_score());
}

Value mod_visible_keys(const ModKernelEnv& env, const AttentionArgs& a, const AttentionTileParams& tp,
                       const Value& start_n) {
  Value offs_n = start_n + arange(0, tp.block_n); // (BN,) i32
  Value visible = visible_keys(a, tp, env.offs_m, offs_n);
  if (!env.has_mask())
    return visible;
  ModArgs m = env.args;
  m.kv_idx = minimum(offs_n, a.N_K - 1).expand_dims(0).named("kv_idx"); // keys past N_K are hidden anyway
  return apply_mask_mods(*env.mods, m, visible, {tp.block_m, tp.block_n});
}

ModdedScores modded_scores_transposed(const ModKernelEnv& env, const AttentionArgs& a, const Value& qkT,
                                      const Value& offs_m, const Value& offs_n, const Value& visible,
                                      bool with_derivative) {
  const bool masked = visible.valid();
  ModArgs m = env.args;
  m.q_idx = (masked ? minimum(offs_m, a.N_Q - 1) : offs_m).expand_dims(0).named("q_idx");   // (1, BM)
  m.kv_idx = (masked ? minimum(offs_n, a.N_K - 1) : offs_n).expand_dims(1).named("kv_idx"); // (BN, 1)
  const Shape tile = qkT.shape();
  return apply_mods_to_tile(*env.mods, m, tile, mod_input_scores(env, a, qkT), visible,
                            with_derivative && env.has_score());
}

Value sink_logits(const ModKernelEnv& env, const AttentionTileParams& tp) {
  const SinkMod& mod = env.mods->sink[0];
  // (BM, 1) f32 in the scores' domain, as (BM,).
  return reshape(checked_result(mod.fn(env.args), "sink", mod.name, {tp.block_m, 1}), {tp.block_m});
}

SinkState sink_initial_state(const ModKernelEnv& env, const AttentionTileParams& tp) {
  Value s = sink_logits(env, tp) * kLog2e; // (BM,) in the kernel's log2 domain
  return SinkState{s.named("m_sink"), (s > -kInfinity).to(f32).named("l_sink")};
}

ModKeyTiles mod_key_tiles(const ModKernelEnv& env, const AttentionArgs& a, const AttentionTileParams& tp,
                          const Value& m0) {
  Value q_last = m0 + (tp.block_m - 1);
  Value lo = scalar(0, i32), hi = a.N_K;
  if (tp.causal != CausalMode::None)
    hi = minimum(hi, last_visible_key(a, tp, q_last) + 1);
  std::vector<KeyBounds> bounds;
  bool full_known = true; // every mask mod gives full bounds
  for (const MaskMod& mod : env.mods->mask) {
    if (!mod.key_bounds) {
      full_known = false;
      continue;
    }
    bounds.push_back(mod.key_bounds(env.args, m0, q_last));
    const KeyBounds& b = bounds.back();
    lo = maximum(lo, b.lo);
    hi = minimum(hi, b.hi);
    if (b.full_lo.valid() != b.full_hi.valid())
      fail("mask_mod '{}': its key bounds set one of full_lo and full_hi; expected both or neither", mod.name);
    full_known = full_known && b.full_lo.valid();
  }
  Value start = (lo / tp.block_n * tp.block_n).named("mod_keys_start");
  Value end = maximum(hi, start).named("mod_keys_end");
  if (!full_known)
    return ModKeyTiles{start, end, Value(), Value()};
  // The keys every row sees whole: within N_K (the tile's rows past N_Q see what row N_Q - 1 would, or more:
  // they are never stored), for the built-in causal rule up to the first row's last key, and every mod's.
  Value full_lo = scalar(0, i32), full_hi = a.N_K;
  if (tp.causal != CausalMode::None)
    full_hi = minimum(full_hi, last_visible_key(a, tp, m0) + 1);
  for (const KeyBounds& b : bounds) {
    full_lo = maximum(full_lo, b.full_lo);
    full_hi = minimum(full_hi, b.full_hi);
  }
  // Whole tiles inside [full_lo, full_hi): the first tile start at or after full_lo, the last tile end at or
  // before full_hi, clamped so that start <= full_start <= full_end <= end.
  Value first = ((full_lo + (tp.block_n - 1)) / tp.block_n * tp.block_n);
  Value full_start = minimum(maximum(first, start), end).named("mod_full_start");
  Value last = maximum(full_hi, scalar(0, i32)) / tp.block_n * tp.block_n;
  Value full_end = minimum(maximum(last, full_start), end).named("mod_full_end");
  return ModKeyTiles{start, end, full_start, full_end};
}

void for_each_mod_key_tile(const ModKernelEnv& env, const AttentionArgs& a, const AttentionTileParams& tp,
                           const Value& m0, const std::function<void(const Value& start)>& skip,
                           const std::function<void(Value, bool masked)>& tile) {
  ModKeyTiles keys = mod_key_tiles(env, a, tp, m0);
  skip(keys.start);
  auto masked = [&](Value start_n) { tile(start_n, true); };
  if (!keys.full_start.valid()) {
    for_range(keys.start, keys.end, tp.block_n, masked);
    return;
  }
  for_range(keys.start, keys.full_start, tp.block_n, masked);
  for_range(keys.full_start, keys.full_end, tp.block_n, [&](Value start_n) { tile(start_n, false); });
  for_range(keys.full_end, keys.end, tp.block_n, masked);
}

bool later_query_tiles_heavier(bool causal, const AttentionMods& mods) {
  return causal ||
         std::any_of(mods.mask.begin(), mods.mask.end(), [](const MaskMod& m) { return m.later_rows_see_more; });
}

namespace {
bool later_tiles_heavier(const AttentionTileParams& tp, const AttentionMods& mods) {
  return later_query_tiles_heavier(tp.causal != CausalMode::None, mods);
}

// The query tile of program_id(0) on the two-dimensional grid: the last first where later tiles do more work.
Value query_tile_index(const AttentionTileParams& tp, const AttentionMods& mods) {
  return later_tiles_heavier(tp, mods) ? num_programs(0) - 1 - program_id(0) : program_id(0);
}

// The grouped heaviest-first order (QueryTileProgram in attention_mods.h) for the program (x, y) of a grid of
// `tiles` x `heads`, started in the order y · tiles + x. `head_cap` is a value the head never exceeds whose bound
// the code generator knows (below).
QueryTileProgram heaviest_first_in_head_groups(const AttentionTileParams& tp, const Value& n_k, const Value& x,
                                               const Value& y, const Value& tiles, const Value& heads,
                                               const Value& head_cap) {
  // Keys whose K and V rows fit the budget, and so the heads a group holds (at least 1, at most all).
  constexpr int64_t kKeyValueBytesPerGroup = int64_t{24} << 20;
  const int64_t key_budget = kKeyValueBytesPerGroup / (2 * tp.head_dim * dtype_bytes(tp.dtype));
  Value group_heads = minimum(maximum(scalar(key_budget, i32) / maximum(n_k, 1), 1), heads).named("group_heads");
  // Program (x, y) is the (y · tiles + x)-th to start; its group's first head is y rounded down to a multiple of
  // group_heads.
  Value first_head = y / group_heads * group_heads;
  Value heads_here = minimum(group_heads, heads - first_head); // the last group may hold fewer
  Value in_group = (y % group_heads) * tiles + x; // program - first_head * tiles
  // min(.., head_cap) changes nothing (the head is below it) but bounds it for the code generator, which copies K
  // and V by TMA only with coordinates it can prove fit 32 bits and are >= 0 (codegen/block_base.h).
  Value head = minimum(first_head + in_group % heads_here, head_cap);
  return {tiles - 1 - in_group / heads_here, head};
}
} // namespace

QueryTileProgram query_tile_program(const AttentionTileParams& tp, const AttentionMods& mods, bool persistent,
                                    const Value& n_q, const std::optional<Value>& grouped_n_k) {
  const bool grouped = grouped_n_k && later_tiles_heavier(tp, mods);
  if (!persistent) {
    if (grouped)
      return heaviest_first_in_head_groups(tp, *grouped_n_k, program_id(0), program_id(1), num_programs(0),
                                           num_programs(1), num_programs(1));
    return {query_tile_index(tp, mods), program_id(1)};
  }
  // (n_q + BLOCK_M - 1) / BLOCK_M without a subtraction, so that the code generator sees the program's head
  // coordinate (program / tiles) is not negative and may copy K and V by TMA (codegen/block_base.h).
  Value tiles = ((n_q + (tp.block_m - 1)) / tp.block_m).named("query_tiles");
  Value program = program_id(0);
  Value in_head = program % tiles;
  if (grouped) { // the same order over the one-dimensional ids: program p is (p % tiles, p / tiles)
    // max(tiles, 1) changes nothing (the grid holds a tile) but lets the code generator see, without a condition
    // on N_Q, that the head is >= 0; the program id caps it (a head's tiles start at head · tiles >= head), with
    // the bound a TMA coordinate needs (the head count, num_programs(0) / tiles, would be one too many).
    Value some_tiles = maximum(tiles, 1);
    return heaviest_first_in_head_groups(tp, *grouped_n_k, program % some_tiles, program / some_tiles, some_tiles,
                                         num_programs(0) / some_tiles, program);
  }
  return {later_tiles_heavier(tp, mods) ? tiles - 1 - in_head : in_head, program / tiles};
}

Value scores_to_log2(const ModKernelEnv& env, const Value& sm_scale) {
  return (env.has_score() ? scalar(kLog2e, f32) : sm_scale * kLog2e).named("qk_scale");
}

} // namespace kiln
