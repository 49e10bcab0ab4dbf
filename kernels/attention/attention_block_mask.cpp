#include "kernels/attention/attention_block_mask.h"

#include "dsl/dsl.h"
#include "kernels/attention/attention_mods_host.h"
#include "kernels/attention/attention_tiles.h"
#include "kernels/attention/fa2_fwd.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

namespace kiln {

namespace {

// WARP_SPECIALIZE's producer, PINGPONG, PRODUCT_AHEAD and LAST_PRODUCT_LATE follow key ranges: the kernel of
// BLOCK_MASK_RUNS=1 walks only those (two runs), the general one also lists tile by tile.
bool block_mask_config(const Config& c) {
  return c.get_or("BLOCK_MASK_RUNS", 0) != 0 ||
         (c.get_or("WARP_SPECIALIZE", 0) == 0 && c.get_or("PINGPONG", 0) == 0 &&
          c.get_or("PRODUCT_AHEAD", 0) == 0 && c.get_or("LAST_PRODUCT_LATE", 0) == 0);
}

// The classifier's params: the tiles it classifies, the built-in causal rule and the lists' orientation.
std::vector<ParamDef> block_mask_param_defs() {
  std::vector<ParamDef> all = attention_param_defs(), params;
  for (const ParamDef& p : all)
    if (p.name == "BLOCK_M" || p.name == "BLOCK_N" || p.name == "CAUSAL")
      params.push_back(p);
  params.push_back(ParamDef::flag("BY_KEY", 0,
                                  "1 lists, per key tile, the query tiles that see it (the dK/dV kernel's "
                                  "lists); 0, per query tile, the key tiles it sees"));
  return params;
}

} // namespace

Value block_mask_row(const Value& off_hz, const Value& tiles, const Value& tile) {
  return (off_hz.to(i64) * tiles.to(i64) + tile.to(i64)).named("bm_row");
}

Value block_mask_list(const Value& row, const Value& list_len) {
  return (row * list_len.to(i64)).named("bm_list");
}

BlockMaskArgs declare_block_mask_args(KernelBuilder& kb, const std::string& prefix) {
  BlockMaskArgs bm;
  bm.full_count = kb.arg_ptr(prefix + "full_count", i32);
  bm.full_index = kb.arg_ptr(prefix + "full_index", i32);
  bm.partial_count = kb.arg_ptr(prefix + "partial_count", i32);
  bm.partial_index = kb.arg_ptr(prefix + "partial_index", i32);
  return bm;
}

AttentionMods block_mask_mods(const AttentionMods& mods) {
  AttentionMods m;
  m.mask = mods.mask;
  return m;
}

Kernel build_attention_block_mask(const Config& config) {
  return build_attention_block_mask_with_mods(config, AttentionMods{});
}

Kernel build_attention_block_mask_with_mods(const Config& config, const AttentionMods& mods) {
  check_param_values("attention_block_mask", block_mask_param_defs(), config);
  if (!mods.score.empty() || !mods.sink.empty())
    fail("attention_block_mask: a block mask depends on mask mods only; got {} (pass block_mask_mods(mods))",
         mods.name());
  AttentionTileParams tp;
  tp.block_m = config.get("BLOCK_M");
  tp.block_n = config.get("BLOCK_N");
  tp.causal = static_cast<CausalMode>(config.get("CAUSAL"));
  const bool by_key = config.get("BY_KEY") != 0;
  const int64_t BM = tp.block_m, BN = tp.block_n;

  KernelBuilder kb("attention_block_mask", config);
  const BlockMaskArgs out = declare_block_mask_args(kb, "");
  AttentionArgs a; // the sizes alone: what the mask reads
  a.B = kb.arg("B", i32), a.H = kb.arg("H", i32), a.H_KV = kb.arg("H_KV", i32);
  a.N_Q = kb.arg("N_Q", i32), a.N_K = kb.arg("N_K", i32);

  // One program per tile of the lists' orientation (a query tile, or with BY_KEY a key tile) and batch·head,
  // walking the tiles of the other.
  Value tile = program_id(0).named(by_key ? "key_tile" : "start_m");
  Value off_hz = program_id(1).named("off_hz");
  Value n_full, n_partial, list;
  // Appends tile `t` of the walked orientation to the full list (nothing hidden) or the partial list (some
  // pairs of each). The tile's first row is real (start_m * BM < N_Q), so a tile with nothing hidden is seen.
  auto classify = [&](const Value& t, const Value& seen, const Value& hidden) {
    if_(hidden == 0, [&] {
      store(out.full_index + (list + n_full.to(i64)), t);
      n_full = n_full + 1;
    });
    if_((hidden > 0) && (seen > 0), [&] {
      store(out.partial_index + (list + n_partial.to(i64)), t);
      n_partial = n_partial + 1;
    });
  };
  Value row;
  if (!by_key) {
    Value offs_m = (tile * BM + arange(0, BM)).named("offs_m"); // (BM,) i32
    ModKernelEnv env;
    if (!mods.mask.empty())
      env = declare_mod_kernel_env(kb, mods, a).at(off_hz / a.H, off_hz % a.H, offs_m);
    env.offs_m = offs_m;
    // Rows past N_Q are never stored by the forward: they neither make a tile visible nor keep it from full.
    Value real_row = (offs_m < a.N_Q).expand_dims(1); // (BM, 1) i1
    row = block_mask_row(off_hz, cdiv(a.N_Q, BM), tile);
    list = block_mask_list(row, cdiv(a.N_K, BN));
    n_full = scalar(0, i32).named("n_full");
    n_partial = scalar(0, i32).named("n_partial");
    for_range(0, cdiv(a.N_K, BN), 1, [&](Value j) {
      Value visible = mod_visible_keys(env, a, tp, j * BN); // (BM, BN) i1; keys past N_K hidden
      Value seen = sum(sum((visible && real_row).to(i32), 1), 0).named("seen");
      Value hidden = sum(sum((!visible && real_row).to(i32), 1), 0).named("hidden");
      classify(j, seen, hidden);
    });
  } else {
    const ModKernelEnv mods_env = mods.mask.empty() ? ModKernelEnv{} : declare_mod_kernel_env(kb, mods, a);
    row = block_mask_row(off_hz, cdiv(a.N_K, BN), tile);
    list = block_mask_list(row, cdiv(a.N_Q, BM));
    n_full = scalar(0, i32).named("n_full");
    n_partial = scalar(0, i32).named("n_partial");
    Value start_n = tile * BN;
    for_range(0, cdiv(a.N_Q, BM), 1, [&](Value m) {
      Value offs_m = (m * BM + arange(0, BM)).named("offs_m"); // (BM,) i32
      ModKernelEnv env = mods_env.active() ? mods_env.at(off_hz / a.H, off_hz % a.H, offs_m) : ModKernelEnv{};
      env.offs_m = offs_m;
      // dK/dV visits a full query tile without bounds checks along N_Q: rows past N_Q count as hidden here, so
      // the tail query tile is never full (as the tail key tile is never full in either orientation).
      Value seen_pair = mod_visible_keys(env, a, tp, start_n) && (offs_m < a.N_Q).expand_dims(1); // (BM, BN)
      Value seen = sum(sum(seen_pair.to(i32), 1), 0).named("seen");
      Value hidden = sum(sum((!seen_pair).to(i32), 1), 0).named("hidden");
      classify(m, seen, hidden);
    });
  }
  store(out.full_count + row, n_full);
  store(out.partial_count + row, n_partial);
  return kb.finish();
}

void check_block_mask_config(const Config& c) {
  if (!block_mask_config(c))
    fail("fa2_fwd_block_mask: WARP_SPECIALIZE, PINGPONG, PRODUCT_AHEAD and LAST_PRODUCT_LATE follow key ranges, "
         "not a block mask's lists; expected all four 0, or BLOCK_MASK_RUNS=1 for a block mask whose lists are all "
         "runs (config {})",
         c.str());
}

namespace {

KernelDef make_attention_block_mask_def() {
  KernelDef d;
  d.name = "attention_block_mask";
  d.summary = "attention block mask: per query tile, the key tiles the mask shows fully and partly";
  d.params = block_mask_param_defs();
  d.default_num_warps = 4;
  d.default_num_stages = 1;
  d.build = build_attention_block_mask;
  d.config_space = [] { return std::vector<Config>{attention_block_mask_def().default_config()}; };
  d.size_args = {"B", "H", "H_KV", "N_Q", "N_K"};
  d.tuning_key = {"B", "H", "N_Q", "N_K"};
  // One program per query tile, or with BY_KEY per key tile, and batch·head.
  d.grid = [](const Config& c, const SizeArgs& s) {
    if (c.get("BY_KEY") == 0)
      return query_tile_grid(c, s);
    const int64_t bn = c.get("BLOCK_N");
    return Grid{(s.at("N_K") + bn - 1) / bn, s.at("B") * s.at("H"), 1};
  };
  return d;
}

Kernel build_fa2_fwd_block_mask(const Config& config) {
  return build_fa2_fwd_with_block_mask(config, AttentionMods{});
}

KernelDef make_fa2_fwd_block_mask_def() {
  KernelDef d = fa2_fwd_def();
  d.name = "fa2_fwd_block_mask";
  d.summary = "FlashAttention-2 forward over a block mask's lists of full and partial key tiles";
  d.params.push_back(ParamDef::flag(
      "BLOCK_MASK_RUNS", 0,
      "1: every list of the block mask is one run of tiles (BlockMask::runs); the kernel walks two key ranges"));
  d.build = build_fa2_fwd_block_mask;
  // A block mask's lists give each query tile its own number of key tiles, which no static walk of the query tiles
  // can balance: the static persistent grid is fa2_fwd's under a causal mask, not offered. The dynamic one has not
  // been checked over block masks on a GPU: not offered either.
  d.prune = [forward = d.prune](const Config& c, const SizeArgs& s) {
    if (c.get_or("PERSISTENT", 0) == 1)
      return std::string("PERSISTENT=1 with a block mask: each query tile sees its own number of key tiles, and a "
                         "static walk of the query tiles cannot balance them (worklog §74, §97)");
    if (c.get_or("PERSISTENT", 0) == 2)
      return std::string("PERSISTENT=2 with a block mask: the dynamic grid is not checked over block masks");
    return forward(c, s);
  };
  d.config_space = [] {
    std::vector<Config> cs = fa2_fwd_def().config_space();
    cs.erase(std::remove_if(cs.begin(), cs.end(), [](const Config& c) { return !block_mask_config(c); }),
             cs.end());
    return cs;
  };
  return d;
}

} // namespace

const KernelDef& attention_block_mask_def() {
  static const KernelDef def = make_attention_block_mask_def();
  return def;
}

const KernelDef& attention_block_mask_def(const AttentionMods& mods) {
  return def_with_mods(attention_block_mask_def(), block_mask_mods(mods),
                       build_attention_block_mask_with_mods, false);
}

const KernelDef& fa2_fwd_block_mask_def() {
  static const KernelDef def = make_fa2_fwd_block_mask_def();
  return def;
}

const KernelDef& fa2_fwd_block_mask_def(const AttentionMods& mods) {
  return def_with_mods(fa2_fwd_block_mask_def(), mods, build_fa2_fwd_with_block_mask, false);
}

const KernelDef& fa2_fwd_block_mask_tuning_def(const AttentionMods& mods, int64_t block_m, int64_t block_n,
                                               bool runs) {
  const KernelDef& base = fa2_fwd_block_mask_def(mods);
  // One def per (mods, tiles, runs), kept for the process's life: the tuner tells spaces apart by name.
  static std::mutex mutex;
  static std::map<std::tuple<std::string, int64_t, int64_t, bool>, KernelDef> defs;
  const std::tuple<std::string, int64_t, int64_t, bool> key{base.name, block_m, block_n, runs};
  std::lock_guard lock(mutex);
  if (auto it = defs.find(key); it != defs.end())
    return it->second;
  KernelDef d = base;
  d.name += fmt::format("@{}x{}{}", block_m, block_n, runs ? "+runs" : "");
  d.config_space = [block_m, block_n, runs] {
    std::vector<Config> cs;
    for (Config c : fa2_fwd_def().config_space()) {
      if (c.get("BLOCK_M") != block_m || c.get("BLOCK_N") != block_n)
        continue;
      c.set("BLOCK_MASK_RUNS", runs ? 1 : 0);
      if (block_mask_config(c))
        cs.push_back(c);
    }
    return cs;
  };
  return defs.try_emplace(key, std::move(d)).first->second;
}

void walk_block_mask_lists(const BlockMaskArgs& bm, const Value& row, const Value& list, int64_t block,
                           const char* dim, bool runs_only, const std::function<void(const Value&)>& seek,
                           const std::function<void(Value, bool)>& tile) {
  auto walk = [&](const Value& count, const Value& index, bool masked) {
    const std::string what = masked ? "partial" : "full";
    Value n = load(count + row).named("n_" + what);
    // A list that is one run of consecutive tiles (causal's, a window's) is walked as a range, whose loop the
    // code generator pipelines as it does the built-in path's; any other list tile by tile. Both loops are
    // there unless every list is a run (runs_only), one of them empty. (With n = 0, `first` and `last` read
    // the list's unused first entry, which make_block_mask zeroes.)
    Value first = load(index + list).named(what + "_first");
    Value last = load(index + (list + maximum(n - 1, 0).to(i64))).named(what + "_last");
    Value run = runs_only ? (n > 0).named(what + "_is_run")
                          : ((n > 0) && (last - first == n - 1)).named(what + "_is_run");
    Value run_start = (where(run, first, 0) * block).named(what + "_run_start");
    Value run_end = ((where(run, last, -1) + 1) * block).named(what + "_run_end");
    seek(run_start);
    for_range(run_start, run_end, block, [&](Value start) { tile(start, masked); });
    if (runs_only)
      return;
    for_range(0, where(run, 0, n), 1, [&](Value i) {
      // The tile's index is read from the list; the caller's block pointers are made from it.
      Value start = (load(index + (list + i.to(i64))) * block).named(what + "_start_" + dim);
      seek(start);
      tile(start, masked);
    });
  };
  walk(bm.full_count, bm.full_index, false);
  walk(bm.partial_count, bm.partial_index, true);
}

void for_each_block_mask_tile(const BlockMaskArgs& bm, const AttentionArgs& a, const AttentionTileParams& tp,
                              const Value& off_hz, const Value& start_m, bool runs_only,
                              const std::function<void(const Value&)>& seek,
                              const std::function<void(Value, bool)>& tile) {
  Value row = block_mask_row(off_hz, cdiv(a.N_Q, tp.block_m), start_m);
  Value list = block_mask_list(row, cdiv(a.N_K, tp.block_n));
  walk_block_mask_lists(bm, row, list, tp.block_n, "n", runs_only, seek, tile);
}

} // namespace kiln
