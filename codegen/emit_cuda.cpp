#include "codegen/emit_cuda.h"

#include "codegen/wgmma.h"
#include "dsl/printer.h"
#include "dsl/verifier.h"

#include <cmath>
#include <map>
#include <optional>
#include <sstream>
#include <unordered_set>

namespace kiln {

namespace {

std::string ctype(DType t) {
  switch (t) {
  case DType::i1: return "bool";
  case DType::u8: return "unsigned char";
  case DType::i32: return "int";
  case DType::i64: return "long long";
  case DType::f16: return "kiln::f16";
  case DType::bf16: return "kiln::bf16";
  case DType::f32: return "float";
  case DType::f64: return "double";
  }
  return "?";
}

std::string ctype_of(const Type& t) { return t.is_pointer() ? ctype(t.elem) + "*" : ctype(t.elem); }

std::string literal(double v, DType t) {
  if (is_float(t)) {
    auto wrap = [&](const std::string& f32) {
      return t == DType::f32 ? f32 : t == DType::f64 ? "(double)" + f32 : fmt::format("kiln::cvt<{}>({})", ctype(t), f32);
    };
    if (std::isinf(v))
      return wrap(v > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)");
    if (std::isnan(v))
      return wrap("__int_as_float(0x7fffffff)");
    std::string s = fmt::format("{:.17g}", v);
    if (s.find_first_of(".e") == std::string::npos)
      s += ".0";
    if (t == DType::f64)
      return s;
    s += "f";
    return t == DType::f32 ? s : fmt::format("kiln::cvt<{}>({})", ctype(t), s);
  }
  if (t == DType::i1)
    return v != 0 ? "true" : "false";
  if (t == DType::i64)
    return fmt::format("{}LL", static_cast<int64_t>(v));
  return fmt::format("{}", static_cast<int64_t>(v));
}

// Arithmetic on f16/bf16 happens in f32 and rounds back, which is exact rounding for + - * /.
std::string as_math(const std::string& x, DType t) { return is_half(t) ? "kiln::cvt<float>(" + x + ")" : x; }
std::string from_math(const std::string& x, DType t) {
  return is_half(t) ? fmt::format("kiln::cvt<{}>({})", ctype(t), x) : x;
}

std::string unary_expr(UnaryOp u, const std::string& x0, DType t) {
  std::string x = as_math(x0, t);
  bool f64 = t == DType::f64;
  std::string e;
  switch (u) {
  case UnaryOp::Neg: e = "(-" + x + ")"; break;
  case UnaryOp::Not: return "(!" + x0 + ")";
  case UnaryOp::Exp: e = f64 ? "exp(" + x + ")" : "kiln::exp_fast(" + x + ")"; break;
  case UnaryOp::Exp2: e = f64 ? "exp2(" + x + ")" : "kiln::ex2(" + x + ")"; break;
  case UnaryOp::Log: e = f64 ? "log(" + x + ")" : "kiln::log_fast(" + x + ")"; break;
  case UnaryOp::Log2: e = f64 ? "log2(" + x + ")" : "kiln::lg2(" + x + ")"; break;
  case UnaryOp::Sqrt: e = f64 ? "sqrt(" + x + ")" : "kiln::sqrt_rn(" + x + ")"; break;
  case UnaryOp::Rsqrt: e = f64 ? "(1.0 / sqrt(" + x + "))" : "kiln::rsqrt_fast(" + x + ")"; break;
  case UnaryOp::Abs: e = is_float(t) ? (f64 ? "fabs(" + x + ")" : "fabsf(" + x + ")") : "(" + x + " < 0 ? -" + x + " : " + x + ")"; break;
  }
  return from_math(e, t);
}

std::string binary_expr(BinaryOp b, const std::string& a0, const std::string& b0, DType t) {
  std::string a = as_math(a0, t), c = as_math(b0, t);
  auto wrap = [&](const std::string& e) { return from_math(e, t); };
  bool f = is_float(t);
  switch (b) {
  case BinaryOp::Add: return wrap("(" + a + " + " + c + ")");
  case BinaryOp::Sub: return wrap("(" + a + " - " + c + ")");
  case BinaryOp::Mul: return wrap("(" + a + " * " + c + ")");
  case BinaryOp::Div: return wrap("(" + a + " / " + c + ")");
  case BinaryOp::Rem:
    return wrap(f ? (t == DType::f64 ? "fmod(" : "fmodf(") + a + ", " + c + ")" : "(" + a + " % " + c + ")");
  case BinaryOp::Min: return wrap(f ? "kiln::min_ignore_nan(" + a + ", " + c + ")" : "(" + a + " < " + c + " ? " + a + " : " + c + ")");
  case BinaryOp::Max: return wrap(f ? "kiln::max_ignore_nan(" + a + ", " + c + ")" : "(" + a + " > " + c + " ? " + a + " : " + c + ")");
  case BinaryOp::And: return t == DType::i1 ? "(" + a + " && " + c + ")" : "(" + a + " & " + c + ")";
  case BinaryOp::Or: return t == DType::i1 ? "(" + a + " || " + c + ")" : "(" + a + " | " + c + ")";
  case BinaryOp::Eq: return "(" + a + " == " + c + ")";
  case BinaryOp::Ne: return "(" + a + " != " + c + ")";
  case BinaryOp::Lt: return "(" + a + " < " + c + ")";
  case BinaryOp::Le: return "(" + a + " <= " + c + ")";
  case BinaryOp::Gt: return "(" + a + " > " + c + ")";
  case BinaryOp::Ge: return "(" + a + " >= " + c + ")";
  }
  return "?";
}

std::string reduce_combine(ReduceOp r, const std::string& a, const std::string& b, DType t) {
  switch (r) {
  case ReduceOp::Sum: return binary_expr(BinaryOp::Add, a, b, t);
  case ReduceOp::Max: return binary_expr(BinaryOp::Max, a, b, t);
  case ReduceOp::Min: return binary_expr(BinaryOp::Min, a, b, t);
  }
  return "?";
}

std::string reduce_identity(ReduceOp r, DType t) {
  switch (r) {
  case ReduceOp::Sum: return literal(0, t);
  case ReduceOp::Max:
    return is_float(t) ? literal(-INFINITY, t) : t == DType::i64 ? "(-9223372036854775807LL - 1)" : "(-2147483647 - 1)";
  case ReduceOp::Min: return is_float(t) ? literal(INFINITY, t) : t == DType::i64 ? "9223372036854775807LL" : "2147483647";
  }
  return "?";
}

std::string identifier(const std::string& hint) {
  std::string s;
  for (char c : hint)
    s += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0])))
    s = "v" + s;
  return s;
}

std::string layout_key(const Layout& l) {
  std::string s;
  for (int64_t d : l.shape)
    s += std::to_string(d) + ",";
  for (auto* bases : {&l.reg, &l.lane, &l.warp}) {
    s += "|";
    for (const Coord& c : *bases) {
      for (int64_t x : c)
        s += std::to_string(x) + ".";
      s += ";";
    }
  }
  return s;
}

class Emitter {
public:
  Emitter(const Kernel& k, const LoweringPlan& plan, const Target& target, const CodegenOptions& options)
      : k_(k), plan_(plan), target_(target), opt_(options), threads_(32 * plan.num_warps) {}

  EmittedKernel run();

private:
  const Kernel& k_;
  const LoweringPlan& plan_;
  const Target& target_;
  const CodegenOptions& opt_;
  const int threads_;
  std::string out_;
  int indent_ = 1;
  int next_id_ = 0;
  int64_t scratch_bytes_ = 0;
  int conversions_ = 0;
  std::vector<std::string> conversion_notes_;
  const Op* current_op_ = nullptr; // the op being emitted, whose line a conversion it needs is charged to
  std::unordered_map<ValueId, std::string> name_;
  std::vector<std::map<std::string, std::string>> scopes_{1}; // cached materialisations per scope
  std::map<std::string, int> layout_ids_;
  std::vector<std::string> layout_decls_;
  std::map<const Op*, std::string> stage_var_; // pipelined load -> its loop's stage counter
  // A program may read back what its own threads stored (FA1 does): a barrier separates a global
  // store from the next global load.
  bool global_write_pending_ = false;
  std::unordered_set<ValueId> used_;              // values some op reads (an unread atomic result lowers to red)
  std::vector<std::pair<std::string, std::string>> helpers_; // device functions before the kernel: name, source

  void need_helper(const std::string& name, const std::string& source) {
    for (const auto& h : helpers_)
      if (h.first == name)
        return;
    helpers_.emplace_back(name, source);
  }

  // The barrier after this thread's copies into shared tiles have landed; wgmma reads shared memory
  // through the async proxy, so the writes are fenced for it first.
  void publish_shared_tiles() {
    if (plan_.any_wgmma())
      line("kiln::fence_proxy_async();");
    line("__syncthreads();");
  }
  void order_global_memory() {
    if (global_write_pending_) {
      line("__syncthreads(); // make this program's global stores visible to its loads");
      global_write_pending_ = false;
    }
  }
  static bool stores_globally(const Region& r) {
    bool any = false;
    walk(r, [&](const Op& o) {
      any |= o.kind == OpKind::Store || o.kind == OpKind::StoreBlock || o.kind == OpKind::AtomicAdd;
    });
    return any;
  }

  // ---- text ----
  template <typename... Args> void line(fmt::format_string<Args...> f, Args&&... args) {
    out_ += std::string(2 * indent_, ' ') + fmt::format(f, std::forward<Args>(args)...) + "\n";
  }
  std::string fresh(const std::string& hint) { return identifier(hint) + std::to_string(next_id_++); }
  std::string value_hint(ValueId v) const {
    const std::string& n = k_.info(v).name;
    return n.empty() ? "t" : n;
  }
  void open() { ++indent_, scopes_.emplace_back(); }
  void close() { --indent_, scopes_.pop_back(); }
  std::string* cached(const std::string& key) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(key);
      if (f != it->end())
        return &f->second;
    }
    return nullptr;
  }
  void cache(const std::string& key, const std::string& name) { scopes_.back()[key] = name; }
  void need_scratch(int64_t bytes) { scratch_bytes_ = std::max(scratch_bytes_, bytes); }
  std::string scratch() const { return fmt::format("(kiln_smem + {})", plan_.tiles_bytes); }

  // ---- layouts and coordinates ----
  int layout_id(const Layout& l) {
    std::string key = layout_key(l);
    auto it = layout_ids_.find(key);
    if (it != layout_ids_.end())
      return it->second;
    int id = static_cast<int>(layout_ids_.size());
    layout_ids_[key] = id;
    layout_decls_.push_back(fmt::format("// L{}: {}", id, l.str()));
    for (int d = 0; d < l.rank(); ++d) {
      std::string e = "0";
      for (size_t b = 0; b < l.lane.size(); ++b)
        if (l.lane[b][d])
          e += fmt::format(" + ((kiln_lane >> {}) & 1) * {}", b, l.lane[b][d]);
      for (size_t b = 0; b < l.warp.size(); ++b)
        if (l.warp[b][d])
          e += fmt::format(" + ((kiln_warp >> {}) & 1) * {}", b, l.warp[b][d]);
      layout_decls_.push_back(fmt::format("const int L{}_t{} = {};", id, d, e));
    }
    return id;
  }
  // Coordinate of register `r` (a loop variable or constant) along dim d of layout l.
  std::string coord(const Layout& l, int d, const std::string& r) {
    std::string e = fmt::format("L{}_t{}", layout_id(l), d);
    for (size_t b = 0; b < l.reg.size(); ++b)
      if (l.reg[b][d])
        e += fmt::format(" + (({} >> {}) & 1) * {}", r, b, l.reg[b][d]);
    return "(" + e + ")";
  }
  // Row-major linear index of register r's element in a tile of `shape`.
  std::string linear(const Layout& l, const Shape& shape, const std::string& r) {
    std::string e = "0";
    int64_t stride = 1;
    for (int d = l.rank() - 1; d >= 0; --d) {
      e = fmt::format("{} + {} * {}", e, coord(l, d, r), stride);
      stride *= shape[d];
    }
    return "(" + e + ")";
  }
  void for_regs(int n, const std::string& var = "r") {
    line("#pragma unroll");
    line("for (int {0} = 0; {0} < {1}; ++{0}) {{", var, n);
  }

  // ---- values ----
  std::string scalar(ValueId v) {
    auto it = name_.find(v);
    KILN_INTERNAL_CHECK(it != name_.end(), "scalar %{} has no name", v);
    return it->second;
  }
  const Layout& layout_of(ValueId v) const { return plan_.layout.at(v); }
  // A loop-invariant scalar, usable before the loop body has been emitted (constants inline).
  std::string invariant(ValueId v) {
    const Op* def = k_.info(v).def;
    return def && def->kind == OpKind::Constant ? literal(def->f, k_.type(v).elem) : scalar(v);
  }
  std::string regs(ValueId v, const Layout& want);
  std::string materialize(ValueId v, const Layout& want);
  std::string convert(const std::string& src, const Layout& from, const Layout& to, DType t, const Shape& from_shape);
  // A register tile of v's type in layout l with every element `value` (a scalar expression).
  std::string splat(ValueId v, const Layout& l, const std::string& value) {
    std::string n = declare_regs(v, l, "splat");
    for_regs(l.num_regs());
    line("  {}[r] = {};", n, value);
    line("}}");
    return n;
  }
  std::string declare_regs(ValueId v, const Layout& l, const std::string& hint = "") {
    std::string n = fresh(hint.empty() ? value_hint(v) : hint);
    line("{} {}[{}];", ctype_of(k_.type(v)), n, l.num_regs());
    return n;
  }

  // ---- ops ----
  void emit_region(const Region& r);
  void emit_op(const Op& op);
  void emit_stage_issue(const Op& loop, const std::vector<std::string>& vars, const std::string& from, int ahead,
                        const std::string& slot);
  void emit_scalar_op(const Op& op);
  void emit_elementwise(const Op& op);
  void emit_broadcast(const Op& op);
  void emit_reduce(const Op& op);
  void emit_dot(const Op& op);
  void emit_dot_mma(const Op& op, const std::string& d);
  void emit_dot_wgmma(const Op& op, const std::string& d);
  std::string fragment_base(ValueId v, const std::string& lane_row, const std::string& lane_chunk);
  // Replicated lanes and warps (zero bases) hold copies of the same element; the one with those bits
  // clear writes it.
  static std::string owner_predicate(const Layout& L) {
    std::string owner = "true";
    for (size_t b = 0; b < L.lane.size(); ++b)
      if (std::all_of(L.lane[b].begin(), L.lane[b].end(), [](int64_t c) { return c == 0; }))
        owner += fmt::format(" && ((kiln_lane >> {}) & 1) == 0", b);
    for (size_t b = 0; b < L.warp.size(); ++b)
      if (std::all_of(L.warp[b].begin(), L.warp[b].end(), [](int64_t c) { return c == 0; }))
        owner += fmt::format(" && ((kiln_warp >> {}) & 1) == 0", b);
    return owner;
  }
  // Inside a per-register loop: declares register r's block coordinates c0, c1, ... and returns the
  // boundary-check predicate and the element offset from the block pointer's base.
  std::pair<std::string, std::string> block_element(const Op& op, const std::string& bp, const Type& bt,
                                                    const Layout& L) {
    std::string ok = "true", addr = "0";
    for (int d = 0; d < bt.rank(); ++d) {
      line("  const long long c{} = {}.off[{}] + {};", d, bp, d, coord(L, d, "r"));
      if (std::find(op.ints.begin(), op.ints.end(), d) != op.ints.end())
        ok += fmt::format(" && c{0} >= 0 && c{0} < {1}.shape[{0}]", d, bp);
      addr += fmt::format(" + c{0} * {1}.stride[{0}]", d, bp);
    }
    return {ok, addr};
  }
  std::string fragment_addr(ValueId v, const std::string& base, const std::string& chunk, const std::string& row);
  // f32 -> f16/bf16 casts whose only use is an mma A operand: packed by the dot, never materialised.
  void emit_dot_fma(const Op& op, const std::string& d);
  void emit_pointer_load(const Op& op);
  std::optional<int64_t> affine_coeff(ValueId v, int dim) const;
  int vector_width(ValueId ptrs, const Layout& L) const;
  void emit_pointer_store(const Op& op);
  void emit_block_load(const Op& op);
  void emit_block_store(const Op& op);
  bool emit_vector_block_store(const Op& op, const std::string& bp, const Type& bt, const Layout& L,
                               const std::string& x);
  void emit_tile_issue(const SharedTile& tile, const std::string& bp, const std::string& stage);
  void emit_for(const Op& op);
  void emit_if(const Op& op);

  // Shared-memory tile addressing.
  std::string tile_base(const SharedTile& t) {
    auto it = stage_var_.find(t.load);
    return it != stage_var_.end() ? fmt::format("({} + {} * {})", t.offset, it->second, t.bytes_per_stage())
                                  : std::to_string(t.offset);
  }
  // Shared tiles are stored in 16-byte chunks. A row of at most 128 bytes is one line; wider rows
  // are cut into 128-byte column panels stored one after another (all rows of panel 0, then panel
  // 1, ...). Within a line, chunk c of row r sits at c ^ phase(r), the XOR pattern of Hopper's
  // 128/64/32-byte swizzle modes (tile bases are 1024-byte aligned), so one layout serves ldmatrix
  // without bank conflicts and wgmma's shared-memory descriptors alike.
  static int64_t line_bytes(const SharedTile& t) { return std::min<int64_t>(128, t.cols * t.elem_bytes); }
  std::string swizzled(const SharedTile& t, const std::string& row, const std::string& chunk) {
    int cpl = static_cast<int>(line_bytes(t) / 16);
    if (!opt_.swizzle || cpl <= 1)
      return chunk;
    return fmt::format("kiln::swizzle_chunk<{}>({}, {})", cpl, row, chunk);
  }
  // Byte offset within one stage of a tile of 16-byte chunk `chunk` of row `row`.
  std::string stage_offset(const SharedTile& t, const std::string& row, const std::string& chunk) {
    int64_t lb = line_bytes(t);
    if (t.cols * t.elem_bytes == lb)
      return fmt::format("({}) * {} + {} * 16", row, lb, swizzled(t, row, chunk));
    return fmt::format("(({}) / 8) * {} + ({}) * 128 + {} * 16", chunk, t.rows * 128, row,
                       swizzled(t, row, "((" + chunk + ") % 8)"));
  }
  // Byte offset (from kiln_smem) of logical element (a, b) of a shared value.
  std::string tile_elem(ValueId v, const std::string& a, const std::string& b) {
    const SharedTile& t = plan_.tiles[plan_.tile_of.at(v)];
    int contig = plan_.contiguous_dim(v);
    std::string row = contig == 1 ? a : b, col = contig == 1 ? b : a;
    int per_chunk = 16 / t.elem_bytes;
    return fmt::format("({} + {} + (({}) % {}) * {})", tile_base(t),
                       stage_offset(t, row, fmt::format("(({}) / {})", col, per_chunk)), col, per_chunk, t.elem_bytes);
  }
};

// ---------------------------------------------------------------------------------------------

std::string Emitter::regs(ValueId v, const Layout& want) {
  Placement p = plan_.where(v);
  if (p == Placement::Flexible)
    return materialize(v, want);
  KILN_INTERNAL_CHECK(p == Placement::Registers, "%{} is not in registers", v);
  const Layout& have = layout_of(v);
  if (have.same_bases(want))
    return name_.at(v);
  std::string key = fmt::format("cvt:{}:{}", v, layout_key(want));
  if (std::string* c = cached(key))
    return *c;
  std::string n = convert(name_.at(v), have, want, k_.type(v).elem, k_.type(v).shape);
  std::string layouts = have.str() == want.str()
                            ? fmt::format("{} [{}] -> [{}]", have.str(), have.bases_str(), want.bases_str())
                            : fmt::format("{} -> {}", have.str(), want.str());
  conversion_notes_.push_back(
      fmt::format("%{} at {}: {}", v, current_op_ ? current_op_->loc.str() : std::string("?"), layouts));
  cache(key, n);
  return n;
}

// A layout conversion through shared memory: every thread writes what it holds at the element's
// row-major position, then reads what the new layout gives it. Counted, since each costs two barriers.
std::string Emitter::convert(const std::string& src, const Layout& from, const Layout& to, DType t,
                             const Shape& from_shape) {
  ++conversions_;
  int64_t numel = 1;
  for (int64_t d : to.shape)
    numel *= d;
  int bytes = t == DType::i1 ? 1 : dtype_bytes(t);
  need_scratch(numel * bytes);
  std::string n = fresh("cvt");
  std::string ty = ctype(t);
  line("// convert {} -> {} through shared memory", from.str(), to.str());
  line("{} {}[{}];", ty, n, to.num_regs());
  line("{{");
  open();
  line("{0}* kiln_x = reinterpret_cast<{0}*>({1});", ty, scratch());
  line("__syncthreads();");
  for_regs(from.num_regs());
  line("  kiln_x[{}] = {}[r];", linear(from, from_shape, "r"), src);
  line("}}");
  line("__syncthreads();");
  for_regs(to.num_regs());
  line("  {}[r] = kiln_x[{}];", n, linear(to, to.shape, "r"));
  line("}}");
  close(); // no barrier after the reads: every user of the scratch starts with one
  line("}}");
  return n;
}

// Flexible values are recomputed in whatever layout a user wants them, from element coordinates.
std::string Emitter::materialize(ValueId v, const Layout& want) {
  std::string key = fmt::format("mat:{}:{}", v, layout_key(want));
  if (std::string* c = cached(key))
    return *c;
  const Op& op = *k_.info(v).def;
  const Type& t = k_.type(v);
  int R = want.num_regs();
  std::string n;
  auto operand = [&](ValueId x, const Layout& l) -> std::string {
    return k_.type(x).shape.empty() ? scalar(x) + "" : regs(x, l) + "[r]";
  };
  switch (op.kind) {
  case OpKind::Constant:
    n = declare_regs(v, want, "c");
    for_regs(R);
    line("  {}[r] = {};", n, literal(op.f, t.elem));
    line("}}");
    break;
  case OpKind::Arange:
    n = declare_regs(v, want, "range");
    for_regs(R);
    line("  {}[r] = {} + {};", n, op.ints[0], coord(want, 0, "r"));
    line("}}");
    break;
  case OpKind::ExpandDims: {
    Layout inner = want;
    inner.shape.erase(inner.shape.begin() + op.axis);
    for (auto* bases : {&inner.reg, &inner.lane, &inner.warp})
      for (Coord& c : *bases)
        c.erase(c.begin() + op.axis);
    return regs(op.operands[0], inner); // same registers, one dim fewer
  }
  case OpKind::Broadcast: {
    ValueId x = op.operands[0];
    if (k_.type(x).shape.empty()) {
      n = splat(v, want, scalar(x));
      break;
    }
    if (plan_.where(x) == Placement::Flexible) {
      // The source seen through the same registers, with the broadcast dims' coordinates zeroed.
      Layout src = want;
      src.shape = k_.type(x).shape;
      for (auto* bases : {&src.reg, &src.lane, &src.warp})
        for (Coord& c : *bases)
          for (size_t d = 0; d < c.size(); ++d)
            if (src.shape[d] == 1)
              c[d] = 0;
      return regs(x, src);
    }
    // A value held in registers: free when `want` collapsed over the broadcast dims is its layout.
    Layout src = collapse_layout(want, k_.type(x).shape);
    std::string xs = regs(x, src);
    std::vector<int> map = broadcast_register_map(src, want);
    KILN_INTERNAL_CHECK(!map.empty(), "broadcast register map");
    n = declare_regs(v, want, "bcast");
    std::string m = fresh("bmap");
    line("constexpr int {}[{}] = {{{}}};", m, map.size(), fmt::join(map, ", "));
    for_regs(R);
    line("  {}[r] = {}[{}[r]];", n, xs, m);
    line("}}");
    break;
  }
  case OpKind::Trans: return regs(op.operands[0], trans_layout(want));
  case OpKind::Reshape: {
    ValueId x = op.operands[0];
    if (k_.type(x).shape.empty()) {
      n = splat(v, want, scalar(x));
      break;
    }
    Layout src = default_layout(k_.type(x).shape, k_.type(x).elem, plan_.num_warps);
    n = convert(regs(x, src), src, want, t.elem, k_.type(x).shape);
    break;
  }
  case OpKind::Unary:
  case OpKind::Binary:
  case OpKind::Cast:
  case OpKind::Where:
  case OpKind::AddPtr: {
    std::vector<std::string> ins;
    for (ValueId x : op.operands)
      ins.push_back(operand(x, want));
    n = declare_regs(v, want);
    for_regs(R);
    DType in_t = k_.type(op.operands[0]).elem;
    std::string e;
    if (op.kind == OpKind::Unary)
      e = unary_expr(op.unary, ins[0], in_t);
    else if (op.kind == OpKind::Binary)
      e = binary_expr(op.binary, ins[0], ins[1], in_t);
    else if (op.kind == OpKind::Cast)
      e = fmt::format("kiln::cvt<{}>({})", ctype(t.elem), ins[0]);
    else if (op.kind == OpKind::Where)
      e = fmt::format("({} ? {} : {})", ins[0], ins[1], ins[2]);
    else
      e = fmt::format("({} + {})", ins[0], ins[1]);
    line("  {}[r] = {};", n, e);
    line("}}");
    break;
  }
  default: throw InternalError(fmt::format("cannot materialize {}", op_name(op.kind)));
  }
  cache(key, n);
  return n;
}

// ---------------------------------------------------------------------------------------------

void Emitter::emit_region(const Region& r) {
  for (const auto& op : r.ops)
    if (op->kind != OpKind::Yield)
      emit_op(*op);
}

void Emitter::emit_op(const Op& op) {
  current_op_ = &op;
  if (op.kind == OpKind::For)
    return emit_for(op);
  if (op.kind == OpKind::If)
    return emit_if(op);
  ValueId r = op.result();
  if (r != kNoValue) {
    Placement p = plan_.where(r);
    if (p == Placement::Flexible)
      return; // computed at its uses
    if (p == Placement::Scalar || p == Placement::BlockPtr)
      return emit_scalar_op(op);
  }
  line("// {} {}", op_name(op.kind), op.loc.str());
  switch (op.kind) {
  case OpKind::Cast:
    if (plan_.fused_casts.count(r))
      return;
    return emit_elementwise(op);
  case OpKind::Unary:
  case OpKind::Binary:
  case OpKind::Where:
  case OpKind::AddPtr: return emit_elementwise(op);
  case OpKind::Broadcast: return emit_broadcast(op);
  case OpKind::ExpandDims:
  case OpKind::Trans:
    if (plan_.where(r) == Placement::Shared)
      return;
    name_[r] = regs(op.operands[0], op.kind == OpKind::Trans ? trans_layout(layout_of(r)) : [&] {
      Layout inner = layout_of(r);
      inner.shape.erase(inner.shape.begin() + op.axis);
      for (auto* bases : {&inner.reg, &inner.lane, &inner.warp})
        for (Coord& c : *bases)
          c.erase(c.begin() + op.axis);
      return inner;
    }());
    return;
  case OpKind::Reshape: {
    ValueId x = op.operands[0];
    const Layout& want = layout_of(r);
    std::string src = regs(x, plan_.where(x) == Placement::Flexible ? default_layout(k_.type(x).shape, k_.type(x).elem, plan_.num_warps) : layout_of(x));
    const Layout& from = plan_.where(x) == Placement::Flexible ? default_layout(k_.type(x).shape, k_.type(x).elem, plan_.num_warps) : layout_of(x);
    name_[r] = convert(src, from, want, k_.type(r).elem, k_.type(x).shape);
    return;
  }
  case OpKind::Reduce:
  case OpKind::ArgMax: return emit_reduce(op);
  case OpKind::Dot: return emit_dot(op);
  case OpKind::Load: return emit_pointer_load(op);
  case OpKind::Store:
  case OpKind::AtomicAdd: return emit_pointer_store(op);
  case OpKind::LoadBlock: return emit_block_load(op);
  case OpKind::StoreBlock: return emit_block_store(op);
  case OpKind::Constant:
  case OpKind::Arange: name_[r] = materialize(r, layout_of(r)); return;
  default: throw InternalError(fmt::format("emit_cuda: unhandled {}", op_name(op.kind)));
  }
}

void Emitter::emit_scalar_op(const Op& op) {
  ValueId r = op.result();
  const Type& t = k_.type(r);
  std::string n = fresh(value_hint(r));
  name_[r] = n;
  auto s = [&](int i) { return scalar(op.operands[i]); };
  std::string ty = t.is_block_ptr() ? "auto" : t.is_pointer() ? ctype_of(t) + " const" : "const " + ctype_of(t);
  switch (op.kind) {
  case OpKind::Constant: line("{} {} = {};", ty, n, literal(op.f, t.elem)); return;
  case OpKind::ProgramId: line("{} {} = (int)blockIdx.{};", ty, n, "xyz"[op.axis]); return;
  case OpKind::NumPrograms: line("{} {} = (int)gridDim.{};", ty, n, "xyz"[op.axis]); return;
  case OpKind::Unary: line("{} {} = {};", ty, n, unary_expr(op.unary, s(0), k_.type(op.operands[0]).elem)); return;
  case OpKind::Binary:
    line("{} {} = {};", ty, n, binary_expr(op.binary, s(0), s(1), k_.type(op.operands[0]).elem));
    return;
  case OpKind::Cast: line("{} {} = kiln::cvt<{}>({});", ty, n, ctype(t.elem), s(0)); return;
  case OpKind::Where: line("{} {} = {} ? {} : {};", ty, n, s(0), s(1), s(2)); return;
  case OpKind::AddPtr: line("{} {} = {} + {};", ty, n, s(0), s(1)); return;
  case OpKind::Reshape:
  case OpKind::Broadcast: line("{} {} = {};", ty, n, s(0)); return;
  case OpKind::Load:
    if (op.has_mask)
      line("{} {} = {} ? *{} : {};", ty, n, s(1), s(0), s(2));
    else
      line("{} {} = *{};", ty, n, s(0));
    return;
  case OpKind::MakeBlockPtr: {
    int rank = t.rank();
    auto list = [&](int from) {
      std::string l;
      for (int d = 0; d < rank; ++d)
        l += (d ? ", " : "") + fmt::format("(long long)({})", s(from + d));
      return l;
    };
    line("kiln::BlockPtr<{}, {}> {} = {{{}, {{{}}}, {{{}}}, {{{}}}}};", ctype(t.elem), rank, n, s(0), list(1),
         list(1 + rank), list(1 + 2 * rank));
    return;
  }
  case OpKind::Advance: {
    std::string d;
    for (size_t i = 1; i < op.operands.size(); ++i)
      d += (i > 1 ? ", " : "") + fmt::format("(long long)({})", s(static_cast<int>(i)));
    line("auto {} = {}.advanced({{{}}});", n, s(0), d);
    return;
  }
  case OpKind::Reduce:
  case OpKind::ArgMax: {
    name_.erase(r);
    emit_reduce(op);
    return;
  }
  case OpKind::AtomicAdd:
    line("{} {} = kiln::atomic_add({}, {});", ty, n, s(0), s(1));
    return;
  default: throw InternalError(fmt::format("emit_cuda: unhandled scalar {}", op_name(op.kind)));
  }
}

void Emitter::emit_elementwise(const Op& op) {
  ValueId r = op.result();
  const Layout& L = layout_of(r);
  std::vector<std::string> ins;
  for (ValueId x : op.operands)
    ins.push_back(k_.type(x).shape.empty() ? scalar(x) : regs(x, L) + "[r]");
  std::string n = declare_regs(r, L);
  name_[r] = n;
  DType in_t = k_.type(op.operands[0]).elem;
  std::string e;
  switch (op.kind) {
  case OpKind::Unary: e = unary_expr(op.unary, ins[0], in_t); break;
  case OpKind::Binary: e = binary_expr(op.binary, ins[0], ins[1], in_t); break;
  case OpKind::Cast: e = fmt::format("kiln::cvt<{}>({})", ctype(k_.type(r).elem), ins[0]); break;
  case OpKind::Where: e = fmt::format("({} ? {} : {})", ins[0], ins[1], ins[2]); break;
  default: e = fmt::format("({} + {})", ins[0], ins[1]); break;
  }
  for_regs(L.num_regs());
  line("  {}[r] = {};", n, e);
  line("}}");
}

void Emitter::emit_broadcast(const Op& op) {
  ValueId r = op.result(), x = op.operands[0];
  const Layout& L = layout_of(r);
  std::string n = declare_regs(r, L);
  name_[r] = n;
  if (k_.type(x).shape.empty()) {
    for_regs(L.num_regs());
    line("  {}[r] = {};", n, scalar(x));
    line("}}");
    return;
  }
  Layout src = collapse_layout(L, k_.type(x).shape);
  std::string xs = regs(x, src);
  std::vector<int> map = broadcast_register_map(src, L);
  KILN_INTERNAL_CHECK(!map.empty(), "broadcast map");
  std::string m = fresh("bmap");
  line("constexpr int {}[{}] = {{{}}};", m, map.size(), fmt::join(map, ", "));
  for_regs(L.num_regs());
  line("  {}[r] = {}[{}[r]];", n, xs, m);
  line("}}");
}

// Reduction along one dim: registers within a thread, then lanes by xor-shuffles, then warps through
// shared memory. Every thread ends with the result for the elements its slice layout gives it.
void Emitter::emit_reduce(const Op& op) {
  ValueId r = op.result(), x = op.operands[0];
  const Type& xt = k_.type(x);
  const Layout& in = plan_.where(x) == Placement::Registers ? layout_of(x) : default_layout(xt.shape, xt.elem, plan_.num_warps);
  std::string xs = regs(x, in);
  Layout out = slice_layout(in, op.axis);
  ReductionPlan rp = reduction_plan(in, op.axis);
  bool arg = op.kind == OpKind::ArgMax;
  DType t = xt.elem;
  std::string ty = ctype(t);
  std::string n = fresh(value_hint(r));
  std::string idx = n + "_i";
  int RO = out.num_regs();
  // Map each input register to its output register: drop the register bits along the axis.
  std::vector<int> omap(in.num_regs());
  for (int ri = 0; ri < in.num_regs(); ++ri) {
    int o = 0, ob = 0;
    for (size_t b = 0; b < in.reg.size(); ++b) {
      bool along = std::find(rp.reg_bits.begin(), rp.reg_bits.end(), static_cast<int>(b)) != rp.reg_bits.end();
      bool zero_elsewhere = true;
      for (int d = 0; d < in.rank(); ++d)
        if (d != op.axis && in.reg[b][d])
          zero_elsewhere = false;
      if (along)
        continue;
      if (zero_elsewhere && in.reg[b][op.axis] == 0)
        continue; // a replica bit: same element
      if (ri >> b & 1)
        o |= 1 << ob;
      ++ob;
    }
    omap[ri] = o;
  }
  std::string m = fresh("rmap");
  line("// {} {} along axis {}", arg ? "argmax" : reduce_name(op.reduce), op.loc.str(), op.axis);
  line("constexpr int {}[{}] = {{{}}};", m, omap.size(), fmt::join(omap, ", "));
  line("{} {}[{}];", ty, n, RO);
  if (arg)
    line("int {}[{}];", idx, RO);
  for_regs(RO);
  line("  {}[r] = {};", n, reduce_identity(arg ? ReduceOp::Max : op.reduce, t));
  if (arg)
    line("  {}[r] = 0x7fffffff;", idx);
  line("}}");
  for_regs(in.num_regs());
  if (arg) {
    line("  int kiln_j = {};", coord(in, op.axis, "r"));
    line("  {0} kiln_v = {1}[r]; {0} kiln_b = {2}[{3}[r]];", ty, xs, n, m);
    line("  if (kiln::cvt<float>(kiln_v) > kiln::cvt<float>(kiln_b) || (kiln::cvt<float>(kiln_v) == kiln::cvt<float>(kiln_b) && kiln_j < {0}[{1}[r]])) {{ {2}[{1}[r]] = kiln_v; {0}[{1}[r]] = kiln_j; }}", idx, m, n);
  } else {
    line("  {0}[{1}[r]] = {2};", n, m, reduce_combine(op.reduce, n + "[" + m + "[r]]", xs + "[r]", t));
  }
  line("}}");
  for (int b : rp.lane_bits) {
    for_regs(RO);
    if (arg) {
      line("  {0} kiln_v = kiln::shfl_xor({1}[r], {2}); int kiln_j = kiln::shfl_xor({3}[r], {2});", ty, n, 1 << b, idx);
      line("  if (kiln::cvt<float>(kiln_v) > kiln::cvt<float>({0}[r]) || (kiln::cvt<float>(kiln_v) == kiln::cvt<float>({0}[r]) && kiln_j < {1}[r])) {{ {0}[r] = kiln_v; {1}[r] = kiln_j; }}", n, idx);
    } else {
      line("  {0}[r] = {1};", n, reduce_combine(op.reduce, n + "[r]", fmt::format("kiln::shfl_xor({}[r], {})", n, 1 << b), t));
    }
    line("}}");
  }
  if (!rp.warp_bits.empty()) {
    int64_t numel = 1;
    for (int64_t d : out.shape)
      numel *= d;
    int W = 1 << rp.warp_bits.size();
    int eb = std::max(4, dtype_bytes(t));
    need_scratch(W * numel * (eb + (arg ? 4 : 0)));
    std::string wd = "0";
    for (size_t i = 0; i < rp.warp_bits.size(); ++i)
      wd += fmt::format(" + ((kiln_warp >> {}) & 1) * {}", rp.warp_bits[i], 1 << i);
    line("{{");
    open();
    line("{0}* kiln_x = reinterpret_cast<{0}*>({1});", ty, scratch());
    line("int* kiln_xi = reinterpret_cast<int*>({} + {});", scratch(), W * numel * eb);
    line("const int kiln_wd = {};", wd);
    line("__syncthreads();");
    for_regs(RO);
    line("  kiln_x[kiln_wd * {} + {}] = {}[r];", numel, linear(out, out.shape, "r"), n);
    if (arg)
      line("  kiln_xi[kiln_wd * {} + {}] = {}[r];", numel, linear(out, out.shape, "r"), idx);
    line("}}");
    line("__syncthreads();");
    for_regs(RO);
    line("  {}[r] = kiln_x[{}];", n, linear(out, out.shape, "r"));
    if (arg)
      line("  {}[r] = kiln_xi[{}];", idx, linear(out, out.shape, "r"));
    line("  for (int w = 1; w < {}; ++w) {{", W);
    line("    {0} kiln_v = kiln_x[w * {1} + {2}];", ty, numel, linear(out, out.shape, "r"));
    if (arg) {
      line("    int kiln_j = kiln_xi[w * {} + {}];", numel, linear(out, out.shape, "r"));
      line("    if (kiln::cvt<float>(kiln_v) > kiln::cvt<float>({0}[r]) || (kiln::cvt<float>(kiln_v) == kiln::cvt<float>({0}[r]) && kiln_j < {1}[r])) {{ {0}[r] = kiln_v; {1}[r] = kiln_j; }}", n, idx);
    } else {
      line("    {}[r] = {};", n, reduce_combine(op.reduce, n + "[r]", "kiln_v", t));
    }
    line("  }}");
    line("}}");
    close(); // no barrier after the reads: every user of the scratch starts with one
    line("}}");
  }
  std::string result = arg ? idx : n;
  if (plan_.where(r) == Placement::Scalar) {
    std::string s = fresh(value_hint(r));
    line("const {} {} = {}[0];", ctype(k_.type(r).elem), s, result);
    name_[r] = s;
    return;
  }
  const Layout& want = layout_of(r);
  Layout have = op.keepdims ? expand_layout(out, op.axis) : out;
  KILN_INTERNAL_CHECK(have.same_bases(want), "reduce result layout");
  name_[r] = result;
}

// ---------------------------------------------------------------------------------------------

void Emitter::emit_dot(const Op& op) {
  ValueId r = op.result();
  const Layout& L = layout_of(r);
  std::string acc = regs(op.operands[2], L);
  std::string d = declare_regs(r, L, "acc");
  name_[r] = d;
  for_regs(L.num_regs());
  line("  {}[r] = {}[r];", d, acc);
  line("}}");
  switch (plan_.dots.at(&op).instruction) {
  case DotInstruction::Wgmma: emit_dot_wgmma(op, d); break;
  case DotInstruction::MmaSync: emit_dot_mma(op, d); break;
  case DotInstruction::Fma: emit_dot_fma(op, d); break;
  }
}

// Shared-memory fragment addressing. A fragment's row is lane_row + R (R a multiple of 8) and its
// 16-byte chunk lane_chunk + C (C even, lane_chunk 0 or 1), so with the XOR swizzle (whose phase
// depends on row % 8 only) its byte address is (T ^ 16C) + R * line_bytes (in a tile of 128-byte
// panels, (T ^ 16 (C % 8)) + (C / 8) * panel_bytes + R * 128), where the thread base T holds
// everything lane-dependent. T is computed once per dot; each fragment costs one XOR and one
// add, and nothing per fragment is kept live across the loop (which would cost a register each).
std::string Emitter::fragment_base(ValueId v, const std::string& lane_row, const std::string& lane_chunk) {
  const SharedTile& t = plan_.tiles[plan_.tile_of.at(v)];
  std::string n = fresh("frag_base");
  line("const kiln::u32 {} = kiln::smem_u32(kiln_smem) + {} + {};", n, tile_base(t),
       stage_offset(t, "(" + lane_row + ")", "(" + lane_chunk + ")"));
  return n;
}

std::string Emitter::fragment_addr(ValueId v, const std::string& base, const std::string& chunk,
                                   const std::string& row) {
  const SharedTile& t = plan_.tiles[plan_.tile_of.at(v)];
  int64_t lb = line_bytes(t);
  if (t.cols * t.elem_bytes == lb)
    return fmt::format("(({} ^ (({}) * 16)) + ({}) * {})", base, chunk, row, lb);
  return fmt::format("(({} ^ ((({}) % 8) * 16)) + (({}) / 8) * {} + ({}) * 128)", base, chunk, chunk, t.rows * 128, row);
}

void Emitter::emit_dot_mma(const Op& op, const std::string& d) {
  ValueId a = op.operands[0], b = op.operands[1];
  const Shape& as = k_.type(a).shape;
  const Shape& bs = k_.type(b).shape;
  int64_t M = as[0], K = as[1], N = bs[1];
  DType in = k_.type(a).elem;
  bool tf32 = in == DType::f32;
  int kinst = tf32 ? 8 : 16;
  int wm = plan_.warps.warps_m, wn = plan_.warps.warps_n;
  int64_t WM = M / wm, WN = N / wn, MT = WM / 16, NT = WN / 8, KT = K / kinst;
  line("// mma.m16n8k{}: ({}, {}) x ({}, {}) over {}x{} warps, {}x{} fragments per warp", kinst, M, K, K, N, wm, wn,
       MT, NT);
  bool a_smem = plan_.where(a) == Placement::Shared, b_smem = plan_.where(b) == Placement::Shared;
  // A register operand that is an f32 -> f16/bf16 cast of an mma result is packed straight from f32.
  const Op* a_cast = plan_.fused_casts.count(a) ? k_.info(a).def : nullptr;
  Layout a_layout = mma_a_layout(M, K, plan_.warps, kinst);
  std::string ar = a_smem ? "" : a_cast ? regs(a_cast->operands[0], a_layout) : regs(a, a_layout);
  std::string br = b_smem ? "" : regs(b, mma_b_layout(K, N, plan_.warps, kinst));
  std::string mma_fn = tf32 ? "kiln::mma_m16n8k8_tf32" : in == DType::f16 ? "kiln::mma_m16n8k16_f16" : "kiln::mma_m16n8k16_bf16";
  std::string pack2 = a_cast ? (in == DType::bf16 ? "kiln::pack_bf16x2" : "kiln::pack_f16x2") : "kiln::pack2";
  line("{{");
  open();
  // Warps interleave along M at 16-row granularity (layout.cpp): fragment mt of this warp is at
  // rows kiln_wm + mt * 16 * wm.
  line("const int kiln_wm = (kiln_warp % {}) * 16;", wm);
  line("const int kiln_wn = ((kiln_warp / {}) % {}) * {};", wm, wn, WN);
  // Thread bases of the shared operands and how each fragment's (chunk, row) follows from (mt|nt, kt).
  int kc = kinst * dtype_bytes(in) / 16; // 16-byte chunks per k step
  std::string a_base, b_base;
  bool a_ldm = a_smem && (plan_.contiguous_dim(a) == 1 || !tf32), b_ldm = b_smem && (plan_.contiguous_dim(b) == 0 || !tf32);
  if (a_smem && a_ldm)
    a_base = plan_.contiguous_dim(a) == 1 ? fragment_base(a, "kiln_wm + kiln_lane % 16", "kiln_lane / 16")
                            : fragment_base(a, "kiln_lane % 8 + (kiln_lane / 16) * 8", "(kiln_lane / 8) % 2");
  bool b_pairs = NT % 2 == 0;
  if (b_smem && b_ldm) {
    if (plan_.contiguous_dim(b) == 0)
      b_base = b_pairs ? fragment_base(b, "kiln_wn + kiln_lane % 8 + (kiln_lane / 16) * 8", "(kiln_lane / 8) % 2")
                       : fragment_base(b, "kiln_wn + kiln_lane % 8", "(kiln_lane / 8) % 2");
    else
      b_base = fragment_base(b, "kiln_lane % 8 + ((kiln_lane / 8) % 2) * 8", b_pairs ? "kiln_lane / 16" : "0");
  }
  line("#pragma unroll");
  line("for (int kt = 0; kt < {}; ++kt) {{", KT);
  open();
  line("kiln::u32 fa[{}][4];", MT);
  line("#pragma unroll");
  line("for (int mt = 0; mt < {}; ++mt) {{", MT);
  if (a_smem && a_ldm) {
    if (plan_.contiguous_dim(a) == 1)
      line("  kiln::ldmatrix_x4({}, fa[mt]);", fragment_addr(a, a_base, fmt::format("kt * {}", kc), fmt::format("mt * {}", 16 * wm)));
    else
      line("  kiln::ldmatrix_x4_trans({}, fa[mt]);", fragment_addr(a, a_base, fmt::format("(kiln_wm + mt * {}) / 8", 16 * wm), "kt * 16"));
  } else if (a_smem) { // tf32 with M contiguous: plain shared loads
    line("  const int g = kiln_lane / 4, q = kiln_lane % 4, m0 = kiln_wm + mt * {}, k0 = kt * 8;", 16 * wm);
    for (int i = 0; i < 4; ++i)
      line("  fa[mt][{}] = kiln::to_tf32(*reinterpret_cast<const float*>(kiln_smem + {}));", i,
           tile_elem(a, fmt::format("m0 + g + {}", (i % 2) * 8), fmt::format("k0 + q + {}", (i / 2) * 4)));
  } else if (tf32) {
    for (int i = 0; i < 4; ++i)
      line("  fa[mt][{0}] = kiln::to_tf32({1}[4 * (kt + {2} * mt) + {0}]);", i, ar, KT);
  } else {
    for (int i = 0; i < 4; ++i)
      line("  fa[mt][{0}] = {1}({2}[8 * (kt + {3} * mt) + {4}], {2}[8 * (kt + {3} * mt) + {5}]);", i, pack2, ar, KT,
           2 * i, 2 * i + 1);
  }
  line("}}");
  // B fragments, a pair of n-tiles at a time, each pair consumed by the mmas right away.
  int step = b_smem && b_ldm && b_pairs ? 2 : 1;
  line("#pragma unroll");
  line("for (int nt = 0; nt < {}; nt += {}) {{", NT, step);
  open();
  line("kiln::u32 fb[2][2];");
  if (b_smem && b_ldm) {
    if (plan_.contiguous_dim(b) == 0 && b_pairs) {
      line("kiln::u32 q[4];");
      line("kiln::ldmatrix_x4({}, q);", fragment_addr(b, b_base, fmt::format("kt * {}", kc), "nt * 8"));
      line("fb[0][0] = q[0]; fb[0][1] = q[1]; fb[1][0] = q[2]; fb[1][1] = q[3];");
    } else if (plan_.contiguous_dim(b) == 0) {
      line("kiln::ldmatrix_x2({}, fb[0]);", fragment_addr(b, b_base, fmt::format("kt * {}", kc), "nt * 8"));
    } else if (b_pairs) {
      line("kiln::u32 q[4];");
      line("kiln::ldmatrix_x4_trans({}, q);", fragment_addr(b, b_base, "kiln_wn / 8 + nt", "kt * 16"));
      line("fb[0][0] = q[0]; fb[0][1] = q[1]; fb[1][0] = q[2]; fb[1][1] = q[3];");
    } else {
      line("kiln::ldmatrix_x2_trans({}, fb[0]);", fragment_addr(b, b_base, "kiln_wn / 8 + nt", "kt * 16"));
    }
  } else if (b_smem) { // tf32 with N contiguous: plain shared loads
    line("const int g = kiln_lane / 4, q = kiln_lane % 4, n0 = kiln_wn + nt * 8, k0 = kt * 8;");
    for (int i = 0; i < 2; ++i)
      line("fb[0][{}] = kiln::to_tf32(*reinterpret_cast<const float*>(kiln_smem + {}));", i,
           tile_elem(b, fmt::format("k0 + q + {}", i * 4), "n0 + g"));
  } else if (tf32) {
    for (int i = 0; i < 2; ++i)
      line("fb[0][{0}] = kiln::to_tf32({1}[2 * (kt + {2} * nt) + {0}]);", i, br, KT);
  } else {
    for (int i = 0; i < 2; ++i)
      line("fb[0][{0}] = kiln::pack2({1}[4 * (kt + {2} * nt) + {3}], {1}[4 * (kt + {2} * nt) + {4}]);", i, br, KT,
           2 * i, 2 * i + 1);
  }
  line("#pragma unroll");
  line("for (int mt = 0; mt < {}; ++mt) {{", MT);
  line("  #pragma unroll");
  line("  for (int j = 0; j < {}; ++j) {{", step);
  line("    {}(*reinterpret_cast<float(*)[4]>(&{}[4 * (nt + j + {} * mt)]), fa[mt], fb[j]);", mma_fn, d, NT);
  line("  }}");
  line("}}");
  close();
  line("}}");
  close();
  line("}}");
  close();
  line("}}");
}

// Hopper warpgroup MMA. Each warpgroup (4 consecutive warps along M) issues, per 16-deep k step,
// one m64nWNk16 instruction per 64-row block it owns (rows 64 * g + 16 * wm * mt, the interleaved
// warp layout), reading B (and A unless A is in registers) from shared memory through descriptors.
// The product completes before the accumulator is used (wait 0): the softmax or epilogue that
// follows reads it straight away, and the next tile's loads are already in flight through cp.async.
// A matmul-style chain is the exception (deferred_wgmma_dot): it waits only for the previous product.
void Emitter::emit_dot_wgmma(const Op& op, const std::string& d) {
  ValueId a = op.operands[0], b = op.operands[1];
  int64_t M = k_.type(a).shape[0], K = k_.type(a).shape[1], N = k_.type(b).shape[1];
  DType in = k_.type(a).elem;
  int wm = plan_.warps.warps_m, wn = plan_.warps.warps_n;
  int64_t WN = N / wn, MT = M / (16 * wm), NT = WN / 8, KT = K / 16;
  bool a_smem = plan_.where(a) == Placement::Shared;
  const SharedTile& bt = plan_.tiles[plan_.tile_of.at(b)];
  WgmmaOperand bo = *wgmma_operand(bt, plan_.contiguous_dim(b) == 0);
  std::optional<WgmmaOperand> ao;
  if (a_smem)
    ao = wgmma_operand(plan_.tiles[plan_.tile_of.at(a)], plan_.contiguous_dim(a) == 1);
  bool trans_a = a_smem && !ao->k_major, trans_b = !bo.k_major;
  std::string fn = wgmma_function_name(static_cast<int>(WN), in, !a_smem, trans_a, trans_b);
  need_helper(fn, wgmma_function_source(static_cast<int>(WN), in, !a_smem, trans_a, trans_b));
  line("// wgmma.m64n{}k16: ({}, {}) x ({}, {}) over {}x{} warps ({} warpgroup(s) along M), {} m64 block(s) "
       "per warpgroup, A {}, B {}-major",
       WN, M, K, K, N, wm, wn, wm / 4, MT, a_smem ? (trans_a ? "M-major in shared" : "K-major in shared") : "in registers",
       trans_b ? "N" : "K");
  line("{{");
  open();
  if (a_smem)
    line("const int kiln_wg_m = ((kiln_warp % {}) / 4) * 64;", wm);
  line("const int kiln_wn = ((kiln_warp / {}) % {}) * {};", wm, wn, WN);
  auto descriptor = [&](ValueId v, const WgmmaOperand& o, const std::string& mn) {
    const SharedTile& t = plan_.tiles[plan_.tile_of.at(v)];
    std::string n = fresh("desc");
    line("const kiln::u64 {} = kiln::wgmma_desc(kiln::smem_u32(kiln_smem) + {} + ({}) * {}, {}, {}, {});", n,
         tile_base(t), mn, o.mn_stride(), o.lbo, o.sbo, o.swizzle_mode);
    return n;
  };
  std::string da = a_smem ? descriptor(a, *ao, "kiln_wg_m") : "";
  std::string db = descriptor(b, bo, "kiln_wn");
  // A in registers: the mma.sync A fragment layout is wgmma's register-A layout (16 rows per warp).
  const Op* a_cast = plan_.fused_casts.count(a) ? k_.info(a).def : nullptr;
  std::string ar;
  if (!a_smem)
    ar = a_cast ? regs(a_cast->operands[0], mma_a_layout(M, K, plan_.warps)) : regs(a, mma_a_layout(M, K, plan_.warps));
  std::string pack2 = a_cast ? (in == DType::bf16 ? "kiln::pack_bf16x2" : "kiln::pack_f16x2") : "kiln::pack2";
  line("kiln::wgmma_fence();");
  for (int64_t kt = 0; kt < KT; ++kt)
    for (int64_t mt = 0; mt < MT; ++mt) {
      std::string acc = fmt::format("*reinterpret_cast<float(*)[{}]>(&{}[{}])", WN / 2, d, 4 * NT * mt);
      std::string bk = fmt::format("{} + {}", db, bo.k_offset(16 * kt) / 16);
      if (a_smem) {
        int64_t off = ao->k_offset(16 * kt) + 16 * wm * mt * ao->mn_stride();
        line("{}({}, {} + {}, {});", fn, acc, da, off / 16, bk);
      } else {
        int64_t base = 8 * (kt + KT * mt);
        line("{{ const kiln::u32 fa[4] = {{{}({}[{}], {}[{}]), {}({}[{}], {}[{}]), {}({}[{}], {}[{}]), {}({}[{}], {}[{}])}};",
             pack2, ar, base, ar, base + 1, pack2, ar, base + 2, ar, base + 3, pack2, ar, base + 4, ar, base + 5,
             pack2, ar, base + 6, ar, base + 7);
        line("  {}({}, fa, {}); }}", fn, acc, bk);
      }
    }
  line("kiln::wgmma_commit();");
  if (plan_.is_deferred_dot(op))
    line("kiln::wgmma_wait<1>(); // the previous iteration's product is done; this one stays in flight");
  else
    line("kiln::wgmma_wait<0>();");
  close();
  line("}}");
}

// Exact f32/f64 (and f16 without tensor cores): each thread accumulates its own elements from
// shared memory. Register operands are staged to shared memory first.
void Emitter::emit_dot_fma(const Op& op, const std::string& d) {
  ValueId r = op.result();
  const Layout& L = layout_of(r);
  ValueId a = op.operands[0], b = op.operands[1];
  int64_t K = k_.type(a).shape[1];
  DType in = k_.type(a).elem;
  std::string acc_t = ctype(k_.type(r).elem);
  auto reader = [&](ValueId v, int which) -> std::function<std::string(const std::string&, const std::string&)> {
    if (plan_.where(v) == Placement::Shared) {
      return [this, v, in](const std::string& i, const std::string& j) {
        return fmt::format("kiln::cvt<float>(*reinterpret_cast<const {}*>(kiln_smem + {}))", ctype(in), tile_elem(v, i, j));
      };
    }
    // Stage into scratch, row-major; `which` keeps A and B apart.
    const Type& t = k_.type(v);
    Layout have = plan_.where(v) == Placement::Registers ? layout_of(v) : default_layout(t.shape, t.elem, plan_.num_warps);
    std::string src = regs(v, have);
    int64_t offset = which == 0 ? 0 : k_.type(a).numel() * dtype_bytes(in);
    need_scratch(k_.type(a).numel() * dtype_bytes(in) + k_.type(b).numel() * dtype_bytes(in));
    line("__syncthreads();");
    for_regs(have.num_regs());
    line("  reinterpret_cast<{}*>({} + {})[{}] = {}[r];", ctype(in), scratch(), offset, linear(have, t.shape, "r"), src);
    line("}}");
    line("__syncthreads();");
    int64_t cols = t.shape[1];
    std::string base = fmt::format("reinterpret_cast<const {}*>({} + {})", ctype(in), scratch(), offset);
    return [base, cols](const std::string& i, const std::string& j) {
      return fmt::format("kiln::cvt<float>({}[({}) * {} + ({})])", base, i, cols, j);
    };
  };
  auto ra = reader(a, 0);
  auto rb = reader(b, 1);
  if (in == DType::f64) {
    ra = [ra](const std::string& i, const std::string& j) {
      std::string e = ra(i, j);
      return e.replace(0, std::string("kiln::cvt<float>(").size(), "kiln::cvt<double>(");
    };
    rb = [rb](const std::string& i, const std::string& j) {
      std::string e = rb(i, j);
      return e.replace(0, std::string("kiln::cvt<float>(").size(), "kiln::cvt<double>(");
    };
  }
  line("// dot by fused multiply-add ({} accumulation)", acc_t);
  for_regs(L.num_regs());
  line("  const int i = {}, j = {};", coord(L, 0, "r"), coord(L, 1, "r"));
  line("  {} s = {}[r];", acc_t, d);
  line("  #pragma unroll 8");
  line("  for (int kk = 0; kk < {}; ++kk) s = {}({}, {}, s);", K, in == DType::f64 ? "fma" : "fmaf", ra("i", "kk"),
       rb("kk", "j"));
  line("  {}[r] = s;", d);
  line("}}");
  if (plan_.where(a) != Placement::Shared || plan_.where(b) != Placement::Shared)
    line("__syncthreads();");
}

// ---------------------------------------------------------------------------------------------

void Emitter::emit_pointer_load(const Op& op) {
  order_global_memory();
  ValueId r = op.result();
  const Layout& L = layout_of(r);
  std::string p = regs(op.operands[0], L);
  std::string m = op.has_mask ? regs(op.operands[1], L) : "";
  std::string o = op.has_mask ? regs(op.operands[2], L) : "";
  std::string n = declare_regs(r, L);
  name_[r] = n;
  int V = vector_width(op.operands[0], L);
  if (V > 1) {
    // Groups of V registers hold V consecutive elements: one vector load when the group is wholly
    // unmasked and aligned, element by element otherwise.
    int bytes = V * dtype_bytes(k_.type(r).elem);
    std::string ty = ctype(k_.type(r).elem);
    line("#pragma unroll");
    line("for (int g = 0; g < {}; g += {}) {{", L.num_regs(), V);
    std::string full = "true";
    if (op.has_mask)
      for (int i = 0; i < V; ++i)
        full += fmt::format(" && {}[g + {}]", m, i);
    line("  if ({} && reinterpret_cast<unsigned long long>({}[g]) % {} == 0) {{", full, p, bytes);
    line("    alignas(16) {} kiln_v[{}];", ty, V);
    line("    kiln::ld_global<{}>({}[g], kiln_v);", bytes, p);
    line("    #pragma unroll");
    line("    for (int i = 0; i < {}; ++i) {}[g + i] = kiln_v[i];", V, n);
    line("  }} else {{");
    line("    #pragma unroll");
    line("    for (int i = 0; i < {}; ++i) {}[g + i] = {};", V, n,
         op.has_mask ? fmt::format("{0}[g + i] ? *{1}[g + i] : {2}[g + i]", m, p, o) : fmt::format("*{}[g + i]", p));
    line("  }}");
    line("}}");
    return;
  }
  for_regs(L.num_regs());
  if (op.has_mask)
    line("  {0}[r] = {1}[r] ? *{2}[r] : {3}[r];", n, m, p, o);
  else
    line("  {}[r] = *{}[r];", n, p);
  line("}}");
}

// The coefficient with which a flexible integer (or pointer) tile changes along dimension `dim`:
// arange gives 1, splats and constants 0, sums add and products with a constant scale. nullopt when
// the tile is not affine along dim (or is computed by anything else).
std::optional<int64_t> Emitter::affine_coeff(ValueId v, int dim) const {
  if (plan_.where(v) != Placement::Flexible)
    return k_.type(v).shape.empty() ? std::optional<int64_t>(0) : std::nullopt;
  const Op& op = *k_.info(v).def;
  const Type& t = k_.type(v);
  auto sub = [&](int i, int d) { return affine_coeff(op.operands[i], d); };
  auto constant_of = [&](ValueId x) -> std::optional<int64_t> {
    const Op* d = k_.info(x).def;
    while (d && (d->kind == OpKind::Broadcast || d->kind == OpKind::Reshape || d->kind == OpKind::ExpandDims))
      d = k_.info(d->operands[0]).def;
    if (d && d->kind == OpKind::Constant && !d->ints.empty())
      return d->ints[0];
    return std::nullopt;
  };
  switch (op.kind) {
  case OpKind::Arange: return dim == 0 ? 1 : 0;
  case OpKind::Constant: return 0;
  case OpKind::Broadcast: {
    const Type& x = k_.type(op.operands[0]);
    if (x.shape.empty() || x.shape[dim] == 1)
      return 0;
    return sub(0, dim);
  }
  case OpKind::ExpandDims:
    if (dim == op.axis)
      return 0;
    return sub(0, dim > op.axis ? dim - 1 : dim);
  case OpKind::Cast:
    return is_int(t.elem) && is_int(k_.type(op.operands[0]).elem) ? sub(0, dim) : std::nullopt;
  case OpKind::AddPtr: {
    auto a = sub(0, dim), b = sub(1, dim);
    return a && b ? std::optional<int64_t>(*a + *b) : std::nullopt;
  }
  case OpKind::Binary: {
    if (!is_int(t.elem) || t.elem == DType::i1)
      return std::nullopt;
    auto a = sub(0, dim), b = sub(1, dim);
    if (op.binary == BinaryOp::Add && a && b)
      return *a + *b;
    if (op.binary == BinaryOp::Sub && a && b)
      return *a - *b;
    if (op.binary == BinaryOp::Mul) {
      if (auto c = constant_of(op.operands[1]); c && a)
        return *a * *c;
      if (auto c = constant_of(op.operands[0]); c && b)
        return *b * *c;
    }
    return std::nullopt;
  }
  default: return std::nullopt;
  }
}

// How many registers of `L` form one contiguous run in memory through the pointer tile `ptrs`: the
// layout's lowest register bits must step 1, 2, 4, ... along the last dim, where the pointers advance
// by exactly one element; capped at 16 bytes.
int Emitter::vector_width(ValueId ptrs, const Layout& L) const {
  const Type& t = k_.type(ptrs);
  if (!opt_.vectorize || t.shape.empty())
    return 1;
  int last = t.rank() - 1;
  if (affine_coeff(ptrs, last) != std::optional<int64_t>(1))
    return 1;
  return register_run(L, last, 16 / dtype_bytes(t.elem));
}

void Emitter::emit_pointer_store(const Op& op) {
  ValueId v = op.operands[1];
  const Layout& L = plan_.where(v) == Placement::Registers ? layout_of(v)
                    : op.kind == OpKind::AtomicAdd      ? layout_of(op.result())
                                                        : default_layout(k_.type(v).shape, k_.type(v).elem, plan_.num_warps);
  std::string p = regs(op.operands[0], L);
  std::string x = regs(v, L);
  std::string m = op.has_mask ? regs(op.operands[2], L) : "";
  std::string owner = owner_predicate(L);
  global_write_pending_ = true;
  // An atomic add whose old values nobody reads is a reduction (`red`): no value comes back, so the updates
  // pipeline; on sm_90, runs of f32 that the affine analysis proves contiguous go two or four at a time.
  const bool reduce_only = op.kind == OpKind::AtomicAdd && !used_.count(op.result());
  std::string result;
  if (op.kind == OpKind::AtomicAdd && !reduce_only) {
    result = declare_regs(op.result(), L);
    name_[op.result()] = result;
  }
  line("if ({}) {{", owner);
  open();
  const bool vector_red = reduce_only && k_.type(v).elem == DType::f32 && target_.sm >= 90;
  int V = op.kind == OpKind::Store || vector_red ? vector_width(op.operands[0], L) : 1;
  if (vector_red && V > 1) {
    V = std::min(V, 4);
    int bytes = V * 4;
    std::string full = "true";
    if (op.has_mask)
      for (int i = 0; i < V; ++i)
        full += fmt::format(" && {}[g + {}]", m, i);
    std::string args;
    for (int i = 0; i < V; ++i)
      args += fmt::format(", {}[g + {}]", x, i);
    line("#pragma unroll");
    line("for (int g = 0; g < {}; g += {}) {{", L.num_regs(), V);
    line("  if ({} && reinterpret_cast<unsigned long long>({}[g]) % {} == 0) {{", full, p, bytes);
    line("    kiln::red_add_v{}({}[g]{});", V, p, args);
    line("  }} else {{");
    line("    #pragma unroll");
    line("    for (int i = 0; i < {}; ++i)", V);
    line("      if ({}) kiln::red_add({}[g + i], {}[g + i]);", op.has_mask ? m + "[g + i]" : "true", p, x);
    line("  }}");
    line("}}");
    close();
    line("}}");
    return;
  }
  if (V > 1) { // as in emit_pointer_load: whole aligned unmasked groups in one vector store
    int bytes = V * dtype_bytes(k_.type(v).elem);
    std::string full = "true";
    if (op.has_mask)
      for (int i = 0; i < V; ++i)
        full += fmt::format(" && {}[g + {}]", m, i);
    line("#pragma unroll");
    line("for (int g = 0; g < {}; g += {}) {{", L.num_regs(), V);
    line("  if ({} && reinterpret_cast<unsigned long long>({}[g]) % {} == 0) {{", full, p, bytes);
    line("    alignas(16) {} kiln_v[{}];", ctype(k_.type(v).elem), V);
    line("    #pragma unroll");
    line("    for (int i = 0; i < {}; ++i) kiln_v[i] = {}[g + i];", V, x);
    line("    kiln::st_global<{}>({}[g], kiln_v);", bytes, p);
    line("  }} else {{");
    line("    #pragma unroll");
    line("    for (int i = 0; i < {}; ++i)", V);
    line("      if ({}) *{}[g + i] = {}[g + i];", op.has_mask ? m + "[g + i]" : "true", p, x);
    line("  }}");
    line("}}");
    close();
    line("}}");
    return;
  }
  for_regs(L.num_regs());
  std::string guard = op.has_mask ? m + "[r]" : "true";
  if (reduce_only)
    line("  if ({}) kiln::red_add({}[r], {}[r]);", guard, p, x);
  else if (op.kind == OpKind::AtomicAdd)
    line("  if ({}) {}[r] = kiln::atomic_add({}[r], {}[r]);", guard, result, p, x);
  else
    line("  if ({}) *{}[r] = {}[r];", guard, p, x);
  line("}}");
  close();
  line("}}");
}

// A block-pointer load: into shared memory (a dot operand: cp.async, maybe pipelined) or registers.
void Emitter::emit_block_load(const Op& op) {
  order_global_memory();
  ValueId r = op.result();
  std::string bp = scalar(op.operands[0]);
  const Type& bt = k_.type(op.operands[0]);
  if (plan_.where(r) == Placement::Shared) {
    const SharedTile& t = plan_.tiles[plan_.tile_of.at(r)];
    if (plan_.is_pipelined(t)) { // issued ahead by emit_for; the first load of the loop waits for the stage
      for (const auto& [loop, loads] : plan_.pipelined)
        if (loads.front() == &op) {
          line("kiln::cp_async_wait<{}>();", plan_.lookahead(loop, t.stages) - 1);
          publish_shared_tiles();
        }
      return;
    }
    line("__syncthreads(); // the tile's previous readers are done");
    emit_tile_issue(t, bp, "0");
    line("kiln::cp_async_commit();");
    if (plan_.unwaited_loads.count(&op)) {
      line("// waited for with the first tiles of the pipelined loop that reads it");
      return;
    }
    line("kiln::cp_async_wait_all();");
    publish_shared_tiles();
    return;
  }
  const Layout& L = layout_of(r);
  std::string n = declare_regs(r, L);
  name_[r] = n;
  std::string pad = op.padding == Padding::NaN ? literal(NAN, bt.elem) : literal(0, bt.elem);
  for_regs(L.num_regs());
  auto [ok, addr] = block_element(op, bp, bt, L);
  line("  {}[r] = ({}) ? {}.base[{}] : {};", n, ok, bp, addr, pad);
  line("}}");
}

void Emitter::emit_block_store(const Op& op) {
  global_write_pending_ = true;
  std::string bp = scalar(op.operands[0]);
  const Type& bt = k_.type(op.operands[0]);
  ValueId v = op.operands[1];
  const Layout& L = plan_.where(v) == Placement::Registers ? layout_of(v) : default_layout(k_.type(v).shape, k_.type(v).elem, plan_.num_warps);
  std::string x = regs(v, L);
  if (emit_vector_block_store(op, bp, bt, L, x))
    return;
  std::string owner = owner_predicate(L);
  line("if ({}) {{", owner);
  open();
  for_regs(L.num_regs());
  auto [ok, addr] = block_element(op, bp, bt, L);
  line("  if ({}) {}.base[{}] = {}[r];", ok, bp, addr, x);
  line("}}");
  close();
  line("}}");
}

// A register tile stored through a block pointer in 16-byte pieces along the block's contiguous dim. Where
// the layout's threads hold shorter runs there (an mma accumulator holds column pairs), lane bits that
// continue the run are first exchanged with register bits (widen_register_run: one shuffle per register
// pair and exchange), as Triton converts an accumulator to a coalesced layout before storing it, but
// without a trip through shared memory. A piece that is misaligned or crosses the boundary is stored
// element by element. Returns false (nothing emitted) when no run of 4 bytes or more can be formed.
bool Emitter::emit_vector_block_store(const Op& op, const std::string& bp, const Type& bt, const Layout& L,
                                      const std::string& x) {
  const DType elem = bt.elem;
  const int eb = dtype_bytes(elem);
  if (!opt_.vectorize || bt.order.empty() || eb == 1 || eb > 8)
    return false;
  const int cdim = bt.order[0];
  std::vector<LaneRegisterSwap> swaps;
  const Layout W = widen_register_run(L, cdim, 16 / eb, swaps);
  const int run = register_run(W, cdim, 16 / eb);
  // 16-bit values cross lanes in packed pairs, so their run must start as pairs in registers.
  if (run * eb < 4 || (eb == 2 && !swaps.empty() && register_run(L, cdim, 2) < 2))
    return false;
  const int n = W.num_regs();
  std::string w = x;
  if (!swaps.empty()) {
    w = fresh("wide");
    line("{} {}[{}];", ctype(elem), w, n);
    line("#pragma unroll");
    line("for (int r = 0; r < {}; ++r) {}[r] = {}[r];", n, w, x);
    for (const LaneRegisterSwap& sw : swaps) {
      const int other = 1 << sw.reg_bit, lane_mask = 1 << sw.lane_bit;
      line("#pragma unroll");
      line("for (int r = 0; r < {}; r += {}) {{", n, eb == 2 ? 2 : 1);
      if (eb == 2)
        line("  if (((r >> {}) & 1) == 0) kiln::exchange_lane_bit_pair({}[r], {}[r + 1], {}[r + {}], {}[r + {}], {});",
             sw.reg_bit, w, w, w, other, w, other + 1, lane_mask);
      else
        line("  if (((r >> {}) & 1) == 0) kiln::exchange_lane_bit({}[r], {}[r + {}], {});", sw.reg_bit, w, w, other,
             lane_mask);
      line("}}");
    }
  }
  const int bytes = run * eb;
  line("if ({}) {{", owner_predicate(W));
  open();
  line("#pragma unroll");
  line("for (int g = 0; g < {}; g += {}) {{", n, run);
  std::string other_ok = "true", addr = "0";
  for (int d = 0; d < bt.rank(); ++d) {
    line("  const long long c{} = {}.off[{}] + {};", d, bp, d, coord(W, d, "g"));
    if (d != cdim && std::find(op.ints.begin(), op.ints.end(), d) != op.ints.end())
      other_ok += fmt::format(" && c{0} >= 0 && c{0} < {1}.shape[{0}]", d, bp);
    addr += fmt::format(" + c{0} * {1}.stride[{0}]", d, bp);
  }
  const bool check_c = std::find(op.ints.begin(), op.ints.end(), cdim) != op.ints.end();
  std::string whole = check_c ? fmt::format(" && c{0} >= 0 && c{0} + {2} <= {1}.shape[{0}]", cdim, bp, run) : "";
  line("  {} * const kiln_p = {}.base + ({});", ctype(elem), bp, addr);
  line("  if ({}{} && {}.stride[{}] == 1 && reinterpret_cast<unsigned long long>(kiln_p) % {} == 0) {{", other_ok,
       whole, bp, cdim, bytes);
  line("    alignas(16) {} kiln_v[{}];", ctype(elem), run);
  line("    #pragma unroll");
  line("    for (int i = 0; i < {}; ++i) kiln_v[i] = {}[g + i];", run, w);
  line("    kiln::st_global<{}>(kiln_p, kiln_v);", bytes);
  line("  }} else {{");
  line("    #pragma unroll");
  line("    for (int i = 0; i < {}; ++i)", run);
  line("      if ({}{}) kiln_p[i * {}.stride[{}]] = {}[g + i];", other_ok,
       check_c ? fmt::format(" && c{0} + i >= 0 && c{0} + i < {1}.shape[{0}]", cdim, bp) : "", bp, cdim, w);
  line("  }}");
  line("}}");
  close();
  line("}}");
  return true;
}

// Copies a block into a shared tile (stage `stage` of its ring): 16-byte cp.async chunks with zero
// fill outside the boundary when the block is aligned, element by element otherwise.
void Emitter::emit_tile_issue(const SharedTile& t, const std::string& bp, const std::string& stage) {
  order_global_memory();
  const Op& op = *t.load;
  int cdim = t.contig_dim, sdim = 1 - cdim;
  int per_chunk = 16 / t.elem_bytes;
  int64_t cpr = t.cols / per_chunk, chunks = t.rows * cpr;
  bool check_c = std::find(op.ints.begin(), op.ints.end(), cdim) != op.ints.end();
  bool check_s = std::find(op.ints.begin(), op.ints.end(), sdim) != op.ints.end();
  std::string base = fmt::format("({} + ({}) * {})", t.offset, stage, t.bytes_per_stage());
  std::string ty = ctype(k_.type(op.result()).elem);
  line("{{ // {} -> shared [{} x {}] {}", op.loc.str(), t.rows, t.cols, ty);
  open();
  line("const bool kiln_fast = {0}.stride[{1}] == 1 && (reinterpret_cast<unsigned long long>({0}.base) % 16) == 0 && "
       "{0}.stride[{2}] % {3} == 0 && {0}.off[{1}] % {3} == 0{4};",
       bp, cdim, sdim, per_chunk, check_c ? fmt::format(" && {}.shape[{}] % {} == 0", bp, cdim, per_chunk) : "");
  if (opt_.async_copy && threads_ % cpr == 0 && (threads_ / cpr) % 8 == 0) {
    // Thread x copies chunk x % cpr of rows x / cpr + i * R (R = threads / cpr rows apart). R is a multiple
    // of the swizzle's 8-row period, so every chunk a thread copies has the same swizzled column: the
    // addresses are worked out once, and each further chunk is one step along global and shared memory.
    const int64_t R = threads_ / cpr;
    line("if (kiln_fast) {{");
    open();
    line("const int row0 = threadIdx.x / {}, chunk = threadIdx.x % {};", cpr, cpr);
    line("const long long gs0 = {}.off[{}] + row0, gc = {}.off[{}] + chunk * {};", bp, sdim, bp, cdim, per_chunk);
    line("const {0}* const src0 = {1}.base + gs0 * {1}.stride[{2}] + gc;", ty, bp, sdim);
    line("const long long src_step = {}LL * {}.stride[{}];", R, bp, sdim);
    line("const unsigned dst0 = kiln::smem_u32(kiln_smem + {} + {});", base, stage_offset(t, "row0", "chunk"));
    std::string ok_c = check_c ? fmt::format("gc >= 0 && gc < {}.shape[{}]", bp, cdim) : "true";
    line("const bool ok_c = {};", ok_c);
    auto copy_rows = [&](const std::string& ok) {
      line("#pragma unroll");
      line("for (int i = 0; i < {}; ++i) {{", (t.rows + R - 1) / R);
      if (t.rows % R)
        line("  if (row0 + i * {} >= {}) break;", R, t.rows);
      line("  const bool ok = {};", ok);
      line("  kiln::cp_async_16(dst0 + i * {}, ok ? src0 + i * src_step : {}.base, ok);", R * line_bytes(t), bp);
      line("}}");
    };
    auto copy_checked_rows = [&] {
      if (!check_s)
        return copy_rows("ok_c");
      // The rows inside, as a 32-bit window [rows_lo, rows_hi) of steps from row0 (clamped to the tile), so
      // that each chunk's check is two compares with constants, not 64-bit arithmetic.
      line("const long long kiln_hi = {}.shape[{}] - gs0;", bp, sdim);
      line("const int rows_lo = gs0 >= 0 ? 0 : (gs0 < -{0} ? {0} : (int)-gs0);", t.rows);
      line("const int rows_hi = kiln_hi <= 0 ? 0 : (kiln_hi > {0} ? {0} : (int)kiln_hi);", t.rows);
      copy_rows(fmt::format("ok_c && i * {0} >= rows_lo && i * {0} < rows_hi", R));
    };
    if ((check_s || check_c) && t.loop && plan_.deferred_dots.count(t.loop)) {
      // A matmul-style loop does nothing but copy and multiply, so its speed is the rate at which it issues
      // copies: a tile wholly inside the tensor (every one but the edges) gets copies with no checks at all.
      // Elsewhere (FA2's masked keys) the second copy of the code costs more registers than it saves.
      std::string inside = "true";
      for (int d : {sdim, cdim})
        if (d == sdim ? check_s : check_c)
          inside += fmt::format(" && {0}.off[{1}] >= 0 && {0}.off[{1}] + {2} <= {0}.shape[{1}]", bp, d,
                                d == sdim ? t.rows : t.cols);
      line("if ({}) {{", inside);
      open();
      copy_rows("true");
      close();
      line("}} else {{");
      open();
      copy_checked_rows();
      close();
      line("}}");
    } else {
      copy_checked_rows();
    }
    close();
    line("}} else {{");
  } else if (opt_.async_copy) {
    line("if (kiln_fast) {{");
    open();
    line("#pragma unroll");
    line("for (int i = 0; i < {}; ++i) {{", (chunks + threads_ - 1) / threads_);
    line("  const int c = threadIdx.x + i * {};", threads_);
    if (chunks % threads_)
      line("  if (c >= {}) break;", chunks);
    line("  const int row = c / {}, chunk = c % {};", cpr, cpr);
    line("  const long long gs = {}.off[{}] + row, gc = {}.off[{}] + chunk * {};", bp, sdim, bp, cdim, per_chunk);
    std::string ok = "true";
    if (check_s)
      ok += fmt::format(" && gs >= 0 && gs < {}.shape[{}]", bp, sdim);
    if (check_c)
      ok += fmt::format(" && gc >= 0 && gc < {}.shape[{}]", bp, cdim);
    line("  const bool ok = {};", ok);
    line("  const {}* src = ok ? {}.base + gs * {}.stride[{}] + gc : {}.base;", ty, bp, bp, sdim, bp);
    line("  kiln::cp_async_16(kiln::smem_u32(kiln_smem + {} + {}), src, ok);", base, stage_offset(t, "row", "chunk"));
    line("}}");
    close();
    line("}} else {{");
  } else {
    line("{{");
  }
  open();
  line("for (int e = threadIdx.x; e < {}; e += {}) {{", t.rows * t.cols, threads_);
  line("  const int row = e / {}, col = e % {};", t.cols, t.cols);
  line("  const long long gs = {}.off[{}] + row, gc = {}.off[{}] + col;", bp, sdim, bp, cdim);
  std::string ok = "true";
  if (check_s)
    ok += fmt::format(" && gs >= 0 && gs < {}.shape[{}]", bp, sdim);
  if (check_c)
    ok += fmt::format(" && gc >= 0 && gc < {}.shape[{}]", bp, cdim);
  std::string pad = op.padding == Padding::NaN ? literal(NAN, k_.type(op.result()).elem) : literal(0, k_.type(op.result()).elem);
  line("  const {} v = ({}) ? {}.base[gs * {}.stride[{}] + gc * {}.stride[{}]] : {};", ty, ok, bp, bp, sdim, bp, cdim, pad);
  line("  *reinterpret_cast<{}*>(kiln_smem + {} + {} + (col % {}) * {}) = v;", ty, base,
       stage_offset(t, "row", fmt::format("(col / {})", per_chunk)), per_chunk, t.elem_bytes);
  line("}}");
  close();
  line("}}");
  close();
  line("}}");
}

// ---------------------------------------------------------------------------------------------

// Issues the tiles of pipelined loop `op` for iteration `from` + `ahead` (if it exists) into ring slot `slot`,
// each block pointer advanced `ahead` steps from its carried value: the prologue calls it with from = lo and
// ahead = 0, 1, ..., the steady state with the induction variable and the lookahead.
void Emitter::emit_stage_issue(const Op& op, const std::vector<std::string>& vars, const std::string& from, int ahead,
                               const std::string& slot) {
  const Region& body = op.regions[0];
  const Op& yield = *body.ops.back();
  line("if ({} + {} * {} < {}) {{", from, ahead, scalar(op.operands[2]), scalar(op.operands[1]));
  open();
  for (const Op* l : plan_.pipelined.at(&op)) {
    ValueId bp = l->operands[0];
    size_t idx = std::find(body.args.begin(), body.args.end(), bp) - body.args.begin();
    const Op* adv = k_.info(yield.operands[idx - 1]).def;
    std::string deltas;
    for (size_t j = 1; j < adv->operands.size(); ++j)
      deltas += (j > 1 ? ", " : "") + fmt::format("(long long)({}) * {}", invariant(adv->operands[j]), ahead);
    std::string b = fresh("bp");
    line("const auto {} = {}.advanced({{{}}});", b, vars[idx - 1], deltas);
    emit_tile_issue(plan_.tiles[plan_.tile_of.at(l->result())], b, slot);
  }
  close();
  line("}}");
  line("kiln::cp_async_commit();");
}

void Emitter::emit_for(const Op& op) {
  const Region& body = op.regions[0];
  const Op& yield = *body.ops.back();
  line("// for {}", op.loc.str());
  std::string lo = scalar(op.operands[0]), hi = scalar(op.operands[1]), step = scalar(op.operands[2]);
  // Carried values live in variables declared before the loop; the results are those variables.
  std::vector<std::string> vars;
  for (size_t i = 0; i < op.results.size(); ++i) {
    ValueId arg = body.args[i + 1], init = op.operands[3 + i];
    const Type& t = k_.type(arg);
    std::string n = fresh(value_hint(arg));
    Placement p = plan_.where(arg);
    if (p == Placement::Registers) {
      const Layout& L = layout_of(arg);
      std::string src = regs(init, L);
      line("{} {}[{}];", ctype_of(t), n, L.num_regs());
      for_regs(L.num_regs());
      line("  {}[r] = {}[r];", n, src);
      line("}}");
    } else {
      line("{} {} = {};", t.is_block_ptr() ? "auto" : ctype_of(t), n, scalar(init));
    }
    vars.push_back(n);
    name_[arg] = n;
    name_[op.results[i]] = n;
  }
  // Pipelining: issue the first num_stages - 1 iterations' tiles before the loop.
  auto pit = plan_.pipelined.find(&op);
  std::string stage;
  int stages = 0;
  if (pit != plan_.pipelined.end()) {
    const std::vector<const Op*>& loads = pit->second;
    stages = plan_.tiles[plan_.tile_of.at(loads.front()->result())].stages;
    stage = fresh("stage");
    line("__syncthreads(); // shared tiles of earlier code are free");
    for (int s = 0; s < plan_.lookahead(&op, stages); ++s)
      emit_stage_issue(op, vars, lo, s, std::to_string(s));
    line("int {} = 0;", stage);
    for (const Op* l : loads)
      stage_var_[l] = stage;
  }
  std::string iv = fresh("i");
  name_[body.args[0]] = iv;
  bool loop_stores = stores_globally(body);
  line("for ({} {} = {}; {} < {}; {} += {}) {{", ctype(k_.type(body.args[0]).elem), iv, lo, iv, hi, iv, step);
  open();
  global_write_pending_ |= loop_stores; // the previous iteration's stores
  if (pit != plan_.pipelined.end()) {
    // Emit the body, issuing iteration i + stages - 1 right after this iteration's wait.
    bool issued = false;
    for (const auto& inner : body.ops) {
      if (inner->kind == OpKind::Yield)
        continue;
      emit_op(*inner);
      if (!issued && inner.get() == pit->second.front()) {
        issued = true;
        const int ahead = plan_.lookahead(&op, stages);
        emit_stage_issue(op, vars, iv, ahead, fmt::format("(({} + {}) % {})", stage, ahead, stages));
      }
    }
  } else {
    emit_region(body);
  }
  // Yield: compute every next value before assigning any (a yield may read another carried value).
  std::vector<std::string> next;
  for (size_t i = 0; i < op.results.size(); ++i) {
    ValueId arg = body.args[i + 1], y = yield.operands[i];
    Placement p = plan_.where(arg);
    if (p == Placement::Registers) {
      const Layout& L = layout_of(arg);
      std::string src = regs(y, L);
      if (src == vars[i]) {
        next.push_back("");
        continue;
      }
      std::string n = fresh("next");
      line("{} {}[{}];", ctype_of(k_.type(arg)), n, L.num_regs());
      for_regs(L.num_regs());
      line("  {}[r] = {}[r];", n, src);
      line("}}");
      next.push_back(n);
    } else {
      std::string n = fresh("next");
      line("const {} {} = {};", k_.type(arg).is_block_ptr() ? "auto" : ctype_of(k_.type(arg)), n, scalar(y));  // NOLINT
      next.push_back(n);
    }
  }
  for (size_t i = 0; i < op.results.size(); ++i) {
    if (next[i].empty())
      continue;
    ValueId arg = body.args[i + 1];
    if (plan_.where(arg) == Placement::Registers) {
      for_regs(layout_of(arg).num_regs());
      line("  {}[r] = {}[r];", vars[i], next[i]);
      line("}}");
    } else {
      line("{} = {};", vars[i], next[i]);
    }
  }
  if (!stage.empty())
    line("{0} = {0} + 1 == {1} ? 0 : {0} + 1;", stage, stages);
  close();
  line("}}");
  if (plan_.deferred_dots.count(&op))
    line("kiln::wgmma_wait<0>(); // the last product");
  if (!stage.empty()) {
    line("kiln::cp_async_wait_all();");
    publish_shared_tiles(); // also tiles loaded before the loop, should it have run no iteration
    for (const Op* l : pit->second)
      stage_var_.erase(l);
  }
}

void Emitter::emit_if(const Op& op) {
  line("// if {}", op.loc.str());
  std::vector<std::string> vars;
  for (ValueId res : op.results) {
    const Type& t = k_.type(res);
    std::string n = fresh(value_hint(res));
    if (plan_.where(res) == Placement::Registers)
      line("{} {}[{}];", ctype_of(t), n, layout_of(res).num_regs());
    else
      line("{} {};", t.is_block_ptr() ? "decltype(" + scalar(op.regions[0].ops.back()->operands[&res - &op.results[0]]) + ")" : ctype_of(t), n);
    vars.push_back(n);
  }
  for (int branch = 0; branch < 2; ++branch) {
    if (branch == 0)
      line("if ({}) {{", scalar(op.operands[0]));
    else
      line("}} else {{");
    open();
    emit_region(op.regions[branch]);
    const Op& y = *op.regions[branch].ops.back();
    for (size_t i = 0; i < op.results.size(); ++i) {
      ValueId res = op.results[i];
      if (plan_.where(res) == Placement::Registers) {
        std::string src = regs(y.operands[i], layout_of(res));
        for_regs(layout_of(res).num_regs());
        line("  {}[r] = {}[r];", vars[i], src);
        line("}}");
      } else {
        line("{} = {};", vars[i], scalar(y.operands[i]));
      }
    }
    close();
  }
  line("}}");
  for (size_t i = 0; i < op.results.size(); ++i)
    name_[op.results[i]] = vars[i];
}

EmittedKernel Emitter::run() {
  walk(k_.body, [&](const Op& o) { used_.insert(o.operands.begin(), o.operands.end()); });
  if (plan_.any_wgmma())
    need_helper("kiln::wgmma_support", wgmma_support_source());
  std::string params;
  for (size_t i = 0; i < k_.params.size(); ++i) {
    const Param& p = k_.params[i];
    std::string n = identifier(p.name);
    name_[p.value] = n;
    params += fmt::format("{}{} {}", i ? ", " : "", ctype_of(k_.type(p.value)), n);
  }
  emit_region(k_.body);
  std::string body = std::move(out_);
  EmittedKernel e;
  e.scratch_bytes = scratch_bytes_;
  e.conversions = conversions_;
  e.conversion_notes = conversion_notes_;
  // MIN_BLOCKS_PER_SM (an optional config parameter) caps registers so that many CTAs fit on an SM.
  std::string head = fmt::format("extern \"C\" __global__ void __launch_bounds__({}, {}) {}({}) {{\n", threads_,
                                 k_.config.get_or("MIN_BLOCKS_PER_SM", 1),
                                 identifier(k_.name), params);
  head += "  extern __shared__ __align__(1024) unsigned char kiln_smem[];\n";
  head += "  const int kiln_lane = threadIdx.x % 32;\n  const int kiln_warp = threadIdx.x / 32;\n";
  for (const std::string& d : layout_decls_)
    head += "  " + d + "\n";
  std::string helpers;
  for (const auto& [name, source] : helpers_)
    helpers += source + "\n";
  e.body = helpers + head + body + "}\n";
  return e;
}

} // namespace

EmittedKernel emit_cuda(const Kernel& k, const LoweringPlan& plan, const Target& target,
                        const CodegenOptions& options) {
  return Emitter(k, plan, target, options).run();
}

} // namespace kiln
