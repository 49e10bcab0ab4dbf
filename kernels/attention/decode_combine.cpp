#include "kernels/attention/decode_combine.h"

#include "dsl/dsl.h"
#include "kernels/attention/attention_tiles.h"
#include "kernels/dtype_param.h"

namespace kiln {

Kernel build_decode_combine(const Config& config) {
  const int64_t BM = config.get("BLOCK_M"), HD = config.get("HEAD_DIM");
  const bool even_d = config.get("EVEN_D") != 0;
  const DType dt = dtype_from_param(config.get("DTYPE"), "decode_combine");
  KernelBuilder kb("decode_combine", config);
  Value o_part = kb.arg_ptr("O_PART", f32), lse_part = kb.arg_ptr("LSE_PART", f32);
  Value o = kb.arg_ptr("O", dt), lse_out = kb.arg_ptr("LSE", f32);
  Value B = kb.arg("B", i32), H = kb.arg("H", i32), N_Q = kb.arg("N_Q", i32), D = kb.arg("D", i32);
  Value num_splits = kb.arg("NUM_SPLITS", i32);
  Value stride_ob = kb.arg("stride_ob", i64), stride_on = kb.arg("stride_on", i64);
  Value stride_oh = kb.arg("stride_oh", i64);

  Value total_rows = (B * H * N_Q).named("total_rows");
  Value row0 = (program_id(0) * BM).named("row0");
  Value rows = (row0 + arange(0, BM)).named("rows"); // (BM,) i32, in (b, h, i) order
  Value in_rows = rows < total_rows;
  Value rows64 = rows.to(i64), total64 = total_rows.to(i64), d64 = D.to(i64);
  const BoundaryCheck check = even_d ? BoundaryCheck{0} : BoundaryCheck{0, 1};

  Value m = full({BM}, -kInfinity, f32).named("m"); // running max of LSE_s (log2 domain)
  Value l = zeros({BM}, f32).named("l");            // Σ 2^(LSE_s − m)
  Value acc = zeros({BM, HD}, f32).named("acc");    // (BM, HD) Σ 2^(LSE_s − m) O_s
  for_range(0, num_splits, 1, [&](Value s) {
    Value s64 = s.to(i64);
    Value lse_s = load(lse_part + (s64 * total64 + rows64), in_rows, -kInfinity); // (BM,) f32
    Value o_ptr =
        make_block_ptr(o_part + s64 * total64 * d64, {total_rows, D}, {d64, 1}, {row0, 0}, {BM, HD}, {1, 0});
    Value o_s = load(o_ptr, check); // (BM, HD) f32
    Value m_new = maximum(m, lse_s);
    Value shift = where(m_new == -kInfinity, 0.0, m_new); // no split with a key yet: keep exponents finite
    Value alpha = exp2(m - shift), w = exp2(lse_s - shift);
    l = l * alpha + w;
    acc = acc * alpha.expand_dims(1) + o_s * w.expand_dims(1);
    m = m_new;
  });

  Value seen = l != 0.0;
  Value l_safe = where(seen, l, 1.0);
  Value out = acc * (1.0 / l_safe).expand_dims(1); // (BM, HD) f32
  store(lse_out + rows, where(seen, (m + log2(l_safe)) * kLn2, -kInfinity), in_rows);
  // O through the caller's strides: row (b, h, i) at b·stride_ob + i·stride_on + h·stride_oh.
  Value heads_rows = H * N_Q;
  Value b = rows / heads_rows, h = rows / N_Q % H, i = rows % N_Q;                      // (BM,) each
  Value o_rows = b.to(i64) * stride_ob + i.to(i64) * stride_on + h.to(i64) * stride_oh; // (BM,) i64
  Value offs_d = arange(0, HD);
  Value mask = in_rows.expand_dims(1) && (offs_d < D).expand_dims(0); // (BM, HD)
  Value o_offs = o_rows.expand_dims(1) + offs_d.expand_dims(0);       // (BM, HD) i64
  if (even_d) // rows of HEAD_DIM consecutive elements: vector stores (the analysis cannot see through % and
              // /)
    o_offs = max_contiguous(o_offs, HD);
  store(o + o_offs, out.to(dt), mask);
  return kb.finish();
}

namespace {

KernelDef make_decode_combine_def() {
  KernelDef d;
  d.name = "decode_combine";
  d.summary = "split-KV decoding, second kernel: O and LSE from the splits' partial results, merged by LSE";
  d.params = {
      ParamDef::power_of_two("BLOCK_M", 16, "rows (b, h, i) a program merges", 1, 256),
      ParamDef::power_of_two("HEAD_DIM", 128, "tile width along the head dim: a power of two >= D", 16, 256),
      ParamDef::flag("EVEN_D", 1, "1 when D == HEAD_DIM (no boundary check along D)"),
      ParamDef::choice("DTYPE", 0, "element type of O: 0 f16, 1 bf16, 2 f32", 0, 2)};
  d.default_num_warps = 4;
  d.default_num_stages = 1;
  d.build = build_decode_combine;
  // A stream of the partials: 16 to 64 rows a program (4 to 16 rows a warp).
  d.config_space = [] {
    std::vector<Config> cs;
    for (int64_t bm : {16, 32, 64}) {
      Config c = decode_combine_def().default_config();
      c.set("BLOCK_M", bm);
      cs.push_back(c);
    }
    return cs;
  };
  d.size_args = {"B", "H", "N_Q", "NUM_SPLITS"};
  d.tuning_key = {"B", "H", "N_Q", "NUM_SPLITS"};
  d.bucket = [](const std::string&, int64_t v) { return next_pow2(v); };
  d.grid = [](const Config& c, const SizeArgs& s) {
    const int64_t rows = s.at("B") * s.at("H") * s.at("N_Q"), bm = c.get("BLOCK_M");
    return Grid{(rows + bm - 1) / bm, 1, 1};
  };
  return d;
}

} // namespace

const KernelDef& decode_combine_def() {
  static const KernelDef def = make_decode_combine_def();
  return def;
}

} // namespace kiln
