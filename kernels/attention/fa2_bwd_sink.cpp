#include "kernels/attention/fa2_bwd_sink.h"

#include "dsl/dsl.h"
#include "kernels/attention/attention_bwd_args.h"
#include "kernels/attention/attention_mods.h"
#include "kernels/attention/attention_mods_host.h"
#include "kernels/attention/attention_problem.h"

namespace kiln {

namespace {

// d loss / d sink of the rows m0 + [0, BM) of the head at row0 (i64, its first row in LSE and Delta), for the
// env's b and h: (BM,) f32, 0 past N_Q and where the sink is −inf (no sink: LSE may be −inf there too).
Value sink_gradient_rows(const AttentionBwdArgs& a, const ModKernelEnv& env, const AttentionTileParams& tp,
                         const Value& row0, const Value& m0, const Value& offs_m) {
  const int64_t BM = tp.block_m;
  Value sink = sink_logits(env, tp).named("sink");                      // (BM,) f32
  Value lse = load(bwd_row_block_ptr(a, a.fwd.lse, row0, BM, m0), {0}); // (BM,) f32, 0 past N_Q
  Value delta = load(bwd_row_block_ptr(a, a.delta, row0, BM, m0), {0}); // (BM,) f32
  Value live = (offs_m < a.fwd.N_Q) & (sink > -kInfinity);
  return where(live, -exp(sink - lse) * delta, 0.0).named("dsink");
}

} // namespace

Kernel build_fa2_bwd_sink(const Config& config, const AttentionMods& mods) {
  if (mods.sink.empty())
    fail("fa2_bwd_sink: the mods '{}' have no sink; expected a SinkMod in AttentionMods::sink", mods.name());
  const AttentionTileParams tp = attention_tile_params(config, "fa2_bwd_sink");
  const int64_t BM = tp.block_m;
  const bool per_head = config.get("PER_HEAD") != 0;
  KernelBuilder kb("fa2_bwd_sink", config);
  AttentionBwdArgs a = declare_attention_bwd_args(kb, tp.dtype);
  const ModKernelEnv env = declare_mod_kernel_env(kb, mods, a.fwd);
  Value dsink = kb.arg_ptr("DSINK", f32);
  const AttentionArgs& f = a.fwd;

  if (!per_head) { // one tile of rows, stored where LSE has them
    Value off_hz = program_id(1);
    Value b = off_hz / f.H, h = off_hz % f.H;
    Value m0 = (program_id(0) * BM).named("m0");
    Value offs_m = (m0 + arange(0, BM)).named("offs_m"); // (BM,) i32
    Value row0 = ((b.to(i64) * f.H.to(i64) + h.to(i64)) * f.N_Q.to(i64)).named("row0");
    Value d = sink_gradient_rows(a, env.at(b, h, offs_m), tp, row0, m0, offs_m);
    store(bwd_row_block_ptr(a, dsink, row0, BM, m0), d, {0});
    return kb.finish();
  }
  // PER_HEAD: head h's rows of every batch, tile by tile in a fixed order, summed per lane, then across.
  Value h = program_id(1);
  Value tiles = cdiv(f.N_Q, BM).named("row_tiles");
  Value acc = zeros({BM}, f32).named("acc"); // (BM,) f32
  for_range(0, f.B * tiles, 1, [&](Value t) {
    Value b = t / tiles;
    Value m0 = ((t % tiles) * BM).named("m0");
    Value offs_m = (m0 + arange(0, BM)).named("offs_m"); // (BM,) i32
    Value row0 = ((b.to(i64) * f.H.to(i64) + h.to(i64)) * f.N_Q.to(i64)).named("row0");
    acc = acc + sink_gradient_rows(a, env.at(b, h, offs_m), tp, row0, m0, offs_m);
  });
  Value total = sum(acc.expand_dims(0), 1); // (1,) f32
  store(make_block_ptr(dsink, {f.H}, {1}, {h}, {1}, {0}), total, {0});
  return kb.finish();
}

namespace {

KernelDef make_base_def() {
  KernelDef d;
  d.name = "fa2_bwd_sink";
  d.summary = "attention backward: d loss / d sink logits, per row or summed per head (PER_HEAD=1)";
  d.params = attention_bwd_param_defs();
  d.params.push_back(ParamDef::flag("PER_HEAD", 0,
                                    "1 sums the rows' gradients per head (a per-head sink's [H] gradient); 0 "
                                    "writes one per row, [B, H, N_Q]"));
  d.default_num_warps = 4;
  d.default_num_stages = 1;
  d.build = [](const Config&) -> Kernel {
    fail("fa2_bwd_sink: built without mods; expected fa2_bwd_sink_def(mods) with a sink");
  };
  d.size_args = {"B", "H", "H_KV", "N_Q", "N_K", "D"};
  d.tuning_key = {"B", "H", "N_Q"};
  d.grid = [](const Config& c, const SizeArgs& s) {
    return c.get("PER_HEAD") != 0 ? Grid{1, s.at("H"), 1} : query_tile_grid(c, s);
  };
  return d;
}

const KernelDef& base_def() {
  static const KernelDef def = make_base_def();
  return def;
}

} // namespace

const KernelDef& fa2_bwd_sink_def(const AttentionMods& mods) {
  if (mods.sink.empty())
    fail("fa2_bwd_sink: the mods '{}' have no sink; expected a SinkMod in AttentionMods::sink", mods.name());
  return def_with_mods(base_def(), mods, build_fa2_bwd_sink, /*differentiated=*/false);
}

Config fa2_bwd_sink_config(const AttentionProblem& p, bool per_head) {
  Config c = with_attention_problem(base_def().default_config(), p);
  c.set("BLOCK_M", 64).set("PER_HEAD", per_head ? 1 : 0);
  return c;
}

} // namespace kiln
