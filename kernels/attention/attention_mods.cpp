#include "kernels/attention/attention_mods.h"

#include "dsl/dsl.h"
#include "dsl/printer.h"
#include "support/hash.h"

#include <algorithm>
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

// The score mods in order, then the mask mods anded: the tile's scores and (when `mask`) its visibility.
Value apply_score_mods(const AttentionMods& mods, const ModArgs& m, Value score, const Shape& tile) {
  for (const ScoreMod& mod : mods.score)
    score = checked_result(mod.fn(score, m), "score_mod", mod.name, tile);
  return score;
}

Value apply_mask_mods(const AttentionMods& mods, const ModArgs& m, Value visible, const Shape& tile) {
  for (const MaskMod& mod : mods.mask)
    visible = visible && checked_result(mod.fn(m), "mask_mod", mod.name, tile);
  return visible;
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
  std::set<std::string> seen;
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
      if (!seen.insert(t.name).second)
        fail("attention mods: tensor '{}' is declared twice (again by mod '{}'); names must be unique in a "
             "call",
             t.name, mod);
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
    add('s', m.name, m.tensors, {m.fn.id()});
  for (const MaskMod& m : mask)
    add('m', m.name, m.tensors, {m.fn.id(), m.key_bounds.id()});
  for (const SinkMod& m : sink)
    add('k', m.name, m.tensors, {m.fn.id()});
  return key;
}

std::string AttentionMods::identity() const {
  if (empty())
    return "";
  // The mods on a probe tile of 16 x 16 scores: the printed IR (ops and constants) is what the mods compute,
  // so two mods that differ in any of it differ in the hash.
  const Shape tile = {16, 16};
  KernelBuilder kb("attention_mods_probe");
  ModArgs m = declare_mod_tensors(kb, *this);
  m.b = kb.arg("b", i32), m.h = kb.arg("h", i32);
  m.N_Q = kb.arg("N_Q", i32), m.N_K = kb.arg("N_K", i32), m.H = kb.arg("H", i32),
  m.H_KV = kb.arg("H_KV", i32);
  m.q_idx = arange(0, tile[0]).expand_dims(1);
  m.kv_idx = arange(0, tile[1]).expand_dims(0);
  Value s = apply_score_mods(*this, m, full(tile, 0.0, f32), tile);
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

ModKernelEnv mod_kernel_env(KernelBuilder& kb, const AttentionMods& mods, const AttentionArgs& a,
                            const Value& off_hz, const Value& offs_m) {
  ModKernelEnv env;
  env.mods = &mods;
  env.args = declare_mod_tensors(kb, mods);
  ModArgs& m = env.args;
  m.b = (off_hz / a.H).named("mod_b");
  m.h = (off_hz % a.H).named("mod_h");
  m.N_Q = a.N_Q, m.N_K = a.N_K, m.H = a.H, m.H_KV = a.H_KV;
  // Tail rows (past N_Q) are never stored: clamped, they index what the mods' tensors hold.
  m.q_idx = minimum(offs_m, a.N_Q - 1).expand_dims(1).named("q_idx");
  env.offs_m = offs_m;
  return env;
}

Value modded_scores(const ModKernelEnv& env, const AttentionArgs& a, const AttentionTileParams& tp,
                    const Value& qk, const Value& start_n, bool masked) {
  if (tp.exact_masked_v && env.has_mask())
    fail("fa2_fwd: EXACT_MASKED_V=1 selects away the keys the built-in mask hides, not those of mask mods "
         "({}); "
         "expected EXACT_MASKED_V=0 with mask mods",
         env.mods->name());
  const Shape tile = {tp.block_m, tp.block_n};
  Value offs_n = start_n + arange(0, tp.block_n); // (BN,) i32
  ModArgs m = env.args;
  // Keys past N_K occur only in masked tiles, which hide them: clamped, they index what the tensors hold.
  m.kv_idx = (masked ? minimum(offs_n, a.N_K - 1) : offs_n).expand_dims(0).named("kv_idx");
  Value score = apply_score_mods(*env.mods, m, qk * a.sm_scale, tile);
  if (!masked)
    return score;
  Value visible = apply_mask_mods(*env.mods, m, visible_keys(a, tp, env.offs_m, offs_n), tile);
  return where(visible, score, -kInfinity);
}

SinkState sink_initial_state(const ModKernelEnv& env, const AttentionTileParams& tp) {
  const SinkMod& mod = env.mods->sink[0];
  // (BM, 1) f32 in the scores' domain, then (BM,) in the kernel's log2 domain.
  Value s =
      reshape(checked_result(mod.fn(env.args), "sink", mod.name, {tp.block_m, 1}), {tp.block_m}) * kLog2e;
  return SinkState{s.named("m_sink"), (s > -kInfinity).to(f32).named("l_sink")};
}

ModKeyTiles mod_key_tiles(const ModKernelEnv& env, const AttentionArgs& a, const AttentionTileParams& tp,
                          const Value& m0) {
  Value q_last = m0 + (tp.block_m - 1);
  Value lo = scalar(0, i32), hi = a.N_K;
  if (tp.causal != CausalMode::None)
    hi = minimum(hi, last_visible_key(a, tp, q_last) + 1);
  for (const MaskMod& mod : env.mods->mask)
    if (mod.key_bounds) {
      KeyBounds b = mod.key_bounds(env.args, m0, q_last);
      lo = maximum(lo, b.lo);
      hi = minimum(hi, b.hi);
    }
  Value start = (lo / tp.block_n * tp.block_n).named("mod_keys_start");
  return ModKeyTiles{start, maximum(hi, start).named("mod_keys_end")};
}

} // namespace kiln
